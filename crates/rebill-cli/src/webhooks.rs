//! `rebill webhooks …`: a site's webhook endpoints.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;
use clap::Subcommand;
use rebill_app::webhooks::{self, EndpointRequest};
use rebill_store::Store;
use rebill_store::webhooks::Endpoint;
use serde_json::{Value, json};

use crate::emit;

#[derive(Subcommand)]
pub enum WebhooksCommand {
    /// Adds an endpoint (at most 10 per site); prints its id and its signing secret (`whsec_…`),
    /// shown only now.
    Add {
        /// The site's name or id (`rebill site list`).
        #[arg(long)]
        site: String,
        /// Where notifications are posted: an http:// or https:// URL.
        #[arg(long)]
        url: String,
        /// HTTP Basic user sent with every notification.
        #[arg(long)]
        http_user: Option<String>,
        /// File holding the HTTP Basic password (never given on the command line).
        #[arg(long, value_name = "PATH", requires = "http_user")]
        http_password_file: Option<PathBuf>,
        /// The notification kinds it takes, comma-separated (e.g. `new_account,paid_charge_invoice`);
        /// every kind when left out.
        #[arg(long, value_delimiter = ',')]
        kinds: Vec<String>,
        /// The vault key file `rebill serve` uses (same default as `serve`).
        #[arg(long, env = "REBILL_VAULT_KEY_FILE", value_name = "PATH")]
        vault_key_file: Option<PathBuf>,
        #[arg(long)]
        json: bool,
    },
    /// Lists the live endpoints (of one site with `--site`).
    List {
        #[arg(long)]
        site: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Removes an endpoint: notifications stop going to it.
    Remove {
        /// The endpoint's id, as `webhooks list` shows it.
        id: i64,
        #[arg(long)]
        json: bool,
    },
}

fn endpoint_json(e: &Endpoint, site: &str) -> Value {
    json!({
        "id": e.id, "site": site, "url": e.url, "http_user": e.http_user, "kinds": e.kinds,
        "created_at": rebill_store::iso8601(e.created_at),
    })
}

fn endpoint_line(e: &Endpoint, site: &str) -> String {
    let kinds = e.kinds.as_ref().map_or_else(|| "every kind".to_owned(), |k| k.join(","));
    let user = e.http_user.as_deref().map(|u| format!(" (HTTP user {u})")).unwrap_or_default();
    format!("{}  site {site}  {}{user}  {kinds}", e.id, e.url)
}

/// `rebill webhooks …`.
pub async fn run(
    store: Store,
    database: &str,
    clock: Arc<dyn rebill_app::Clock>,
    now: i64,
    command: WebhooksCommand,
) -> anyhow::Result<()> {
    let sites = store.sites().await?;
    let name_of = |site_id: i64| sites.iter().find(|s| s.id == site_id).map(|s| s.name.clone()).unwrap_or_default();
    match command {
        WebhooksCommand::Add { site, url, http_user, http_password_file, kinds, vault_key_file, json } => {
            let site = store.site(&site).await?;
            let password = http_password_file
                .map(|f| {
                    std::fs::read_to_string(&f).with_context(|| format!("reading the password file {}", f.display()))
                })
                .transpose()?;
            let vault = rebill_app::tokens::open_vault(vault_key_file.as_deref(), database)?;
            let services = rebill_app::Services::new(store, clock).with_vault(vault);
            let request = EndpointRequest {
                url: &url,
                http_user: http_user.as_deref(),
                http_password: password.as_deref(),
                kinds: &kinds,
            };
            let (endpoint, secret) = webhooks::add_endpoint(&services, &site, &request, now).await?;
            let mut value = endpoint_json(&endpoint, &site.name);
            value["secret"] = json!(secret);
            emit(
                json,
                value,
                format!(
                    "added webhook endpoint {}\nsigning secret: {secret}\n(the secret is shown only now)",
                    endpoint_line(&endpoint, &site.name)
                ),
            );
        }
        WebhooksCommand::List { site, json } => {
            let site = match site {
                Some(name) => Some(store.site(&name).await?),
                None => None,
            };
            let services = rebill_app::Services::new(store.clone(), clock);
            let listed = webhooks::endpoints(&services, site.as_ref()).await?;
            let lines: Vec<String> = listed.iter().map(|e| endpoint_line(e, &name_of(e.site_id))).collect();
            let values: Vec<Value> = listed.iter().map(|e| endpoint_json(e, &name_of(e.site_id))).collect();
            emit(json, json!({ "endpoints": values }), lines.join("\n"));
        }
        WebhooksCommand::Remove { id, json } => {
            let services = rebill_app::Services::new(store.clone(), clock);
            let removed = webhooks::remove_endpoint(&services, id, now).await?;
            let site = name_of(removed.site_id);
            let mut value = endpoint_json(&removed, &site);
            value["removed"] = json!(true);
            emit(json, value, format!("removed webhook endpoint {}", endpoint_line(&removed, &site)));
        }
    }
    Ok(())
}

/// Posts notifications over HTTP(S): no redirect is followed (one counts as a failure), the
/// attempt's timeout bounds the whole exchange.
pub struct HttpPoster {
    client: reqwest::Client,
}

impl HttpPoster {
    pub fn new() -> anyhow::Result<Self> {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .user_agent("rebill-webhooks")
            .build()
            .context("the webhook HTTP client")?;
        Ok(Self { client })
    }
}

impl webhooks::Poster for HttpPoster {
    fn post(
        &self,
        post: webhooks::Post,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = webhooks::Posted> + Send + '_>> {
        Box::pin(async move {
            let mut request = self
                .client
                .post(&post.url)
                .timeout(post.timeout)
                .header("Content-Type", "application/xml; charset=utf-8")
                .body(post.body);
            for (name, value) in post.headers {
                request = request.header(name, value);
            }
            if let Some((user, password)) = post.basic {
                request = request.basic_auth(user, Some(password));
            }
            match request.send().await {
                Ok(response) => webhooks::Posted::Status(response.status().as_u16()),
                // The error names the URL and what failed, never a credential (they travel in a
                // header, not the URL: URLs with credentials are refused when added).
                Err(e) if e.is_timeout() => webhooks::Posted::Failed("timed out".to_owned()),
                Err(e) if e.is_connect() => webhooks::Posted::Failed("connection failed".to_owned()),
                Err(e) => webhooks::Posted::Failed(e.without_url().to_string()),
            }
        })
    }
}
