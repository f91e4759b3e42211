//! `rebill webhooks …`: a site's webhook endpoints, and the deliveries of its notifications.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;
use clap::{Subcommand, ValueEnum};
use rebill_app::operations::webhooks::{self, EndpointRequest};
use rebill_store::Store;
use rebill_store::webhooks::{Attempt, Delivery, DeliveryState, Endpoint};
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
    /// Lists a site's deliveries (one per notification per endpoint), oldest first, each with
    /// its attempts: when (UTC), the status code or the error, how long it took.
    Deliveries {
        /// The site's name or id (`rebill site list`).
        #[arg(long)]
        site: String,
        /// Only the deliveries to this endpoint (its id, as `webhooks list` shows it).
        #[arg(long, value_name = "ID")]
        endpoint: Option<i64>,
        /// Only the deliveries in this state.
        #[arg(long, value_enum)]
        state: Option<StateArg>,
        #[arg(long)]
        json: bool,
    },
    /// Sends a failed delivery again now (or, with `--failed`, every failed delivery): it gets
    /// one more attempt, with the same `webhook-id`, and is failed again if that fails.
    Redeliver {
        /// The delivery's id, as `webhooks deliveries` shows it.
        #[arg(required_unless_present = "failed", conflicts_with = "failed")]
        id: Option<i64>,
        /// Every failed delivery (of one site with `--site`) instead of one.
        #[arg(long)]
        failed: bool,
        /// With `--failed`: only this site's (its name or id).
        #[arg(long, conflicts_with = "id")]
        site: Option<String>,
        #[arg(long)]
        json: bool,
    },
}

/// A delivery's state, as `--state` names it.
#[derive(Clone, Copy, ValueEnum)]
pub enum StateArg {
    Pending,
    Retrying,
    Delivered,
    Failed,
}

impl From<StateArg> for DeliveryState {
    fn from(state: StateArg) -> Self {
        match state {
            StateArg::Pending => DeliveryState::Pending,
            StateArg::Retrying => DeliveryState::Retrying,
            StateArg::Delivered => DeliveryState::Delivered,
            StateArg::Failed => DeliveryState::Failed,
        }
    }
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

/// A service time in milliseconds as ISO 8601 UTC with milliseconds
/// (`2026-11-24T00:00:00.250Z`).
fn iso8601_ms(ms: i64) -> String {
    let seconds = rebill_store::iso8601(ms.div_euclid(1000));
    format!("{}.{:03}Z", seconds.trim_end_matches('Z'), ms.rem_euclid(1000))
}

/// When a delivery waiting to be sent is tried next.
fn next_attempt(d: &Delivery) -> Option<i64> {
    matches!(d.state, DeliveryState::Pending | DeliveryState::Retrying).then_some(d.next_attempt_at)
}

fn attempt_json(a: &Attempt) -> Value {
    json!({
        "at": iso8601_ms(a.at), "status_code": a.status_code, "error": a.error, "duration_ms": a.duration_ms,
    })
}

fn delivery_json(d: &Delivery, attempts: &[Attempt]) -> Value {
    json!({
        "id": d.id, "endpoint_id": d.new.endpoint_id, "kind": d.new.kind, "webhook_id": d.new.message_id,
        "state": d.state.as_str(), "attempt_count": d.attempts,
        "created_at": iso8601_ms(d.created_at),
        "delivered_at": d.delivered_at.map(iso8601_ms),
        "next_attempt_at": next_attempt(d).map(iso8601_ms),
        "attempts": attempts.iter().map(attempt_json).collect::<Vec<_>>(),
    })
}

/// A delivery's line and its attempts' indented lines.
fn delivery_lines(d: &Delivery, attempts: &[Attempt]) -> Vec<String> {
    let mut line = format!(
        "{}  endpoint {}  {}  {}  {}  {} attempt{}  created {}",
        d.id,
        d.new.endpoint_id,
        d.new.kind,
        d.new.message_id,
        d.state.as_str(),
        d.attempts,
        if d.attempts == 1 { "" } else { "s" },
        iso8601_ms(d.created_at)
    );
    if let Some(at) = d.delivered_at {
        line.push_str(&format!("  delivered {}", iso8601_ms(at)));
    }
    if let Some(at) = next_attempt(d) {
        line.push_str(&format!("  next attempt {}", iso8601_ms(at)));
    }
    let mut lines = vec![line];
    for a in attempts {
        let outcome = match (a.status_code, &a.error) {
            (Some(code), _) => format!("HTTP {code}"),
            (None, Some(error)) => format!("error: {error}"),
            (None, None) => "no answer".to_owned(),
        };
        lines.push(format!("    {}  {outcome}  {} ms", iso8601_ms(a.at), a.duration_ms));
    }
    lines
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
            let vault = rebill_app::platform::tokens::open_vault(vault_key_file.as_deref(), database)?;
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
        WebhooksCommand::Deliveries { site, endpoint, state, json } => {
            let site = store.site(&site).await?;
            let services = rebill_app::Services::new(store.clone(), clock);
            let listed = webhooks::deliveries(&services, &site, endpoint, state.map(Into::into)).await?;
            let values: Vec<Value> = listed.iter().map(|(d, a)| delivery_json(d, a)).collect();
            let lines: Vec<String> = listed.iter().flat_map(|(d, a)| delivery_lines(d, a)).collect();
            let text = if lines.is_empty() { "no webhook deliveries".to_owned() } else { lines.join("\n") };
            emit(json, json!({ "site": site.name, "deliveries": values }), text);
        }
        WebhooksCommand::Redeliver { id, failed, site, json } => {
            let services = rebill_app::Services::new(store.clone(), clock);
            // Webhooks run on real time, never on a clock file or a sandbox site's clock.
            let now_ms = webhooks::real_now_ms();
            let (ids, text) = match id {
                Some(id) if !failed => {
                    let delivery = webhooks::redeliver(&services, id, now_ms).await?;
                    let text = format!(
                        "webhook delivery {id} ({} to endpoint {}, {}) is sent again now",
                        delivery.new.kind, delivery.new.endpoint_id, delivery.new.message_id
                    );
                    (vec![id], text)
                }
                _ => {
                    let site = match site {
                        Some(name) => Some(store.site(&name).await?),
                        None => None,
                    };
                    let ids = webhooks::redeliver_failed(&services, site.as_ref(), now_ms).await?;
                    let text = match ids.len() {
                        1 => "1 failed webhook delivery is sent again now".to_owned(),
                        n => format!("{n} failed webhook deliveries are sent again now"),
                    };
                    (ids, text)
                }
            };
            emit(json, json!({ "redelivered": ids.len(), "ids": ids }), text);
        }
    }
    Ok(())
}
