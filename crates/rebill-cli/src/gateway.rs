//! `rebill gateway …`: a site's real payment gateway, and the builder that makes the gateways
//! sites are configured with (the composition root of the gateway crates).

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;
use clap::{Subcommand, ValueEnum};
use rebill_app::platform::gateways::{self, GatewayBuilder, GatewayView};
use rebill_billing::gateway::Gateway;
use rebill_store::{Mode, Site, Store};
use serde_json::{Value, json};

use crate::emit;

#[derive(Subcommand)]
pub enum GatewayCommand {
    /// Puts the site on a real gateway. The secret key is read from a file (never from the
    /// command line), stored sealed with the vault key and never printed whole.
    Set {
        /// The site's name or id (`rebill site list`).
        #[arg(long)]
        site: String,
        #[arg(value_enum)]
        kind: GatewayKind,
        /// File holding the gateway's secret key (e.g. Stripe's `sk_live_…`).
        #[arg(long, value_name = "PATH")]
        secret_key_file: PathBuf,
        /// The gateway's API root (default: Stripe's, https://api.stripe.com).
        #[arg(long, value_name = "URL")]
        api_base: Option<String>,
        /// The vault key file `rebill serve` uses (same default as `serve`).
        #[arg(long, env = "REBILL_VAULT_KEY_FILE", value_name = "PATH")]
        vault_key_file: Option<PathBuf>,
        #[arg(long)]
        json: bool,
    },
    /// The site's gateway: its type, the key's last four characters and the API root.
    Show {
        #[arg(long)]
        site: String,
        /// The vault key file `rebill serve` uses (same default as `serve`).
        #[arg(long, env = "REBILL_VAULT_KEY_FILE", value_name = "PATH")]
        vault_key_file: Option<PathBuf>,
        #[arg(long)]
        json: bool,
    },
    /// Removes the site's gateway: a sandbox site goes back to the sandbox gateway, a production
    /// site has none (every charge is declined `no_gateway`).
    Remove {
        #[arg(long)]
        site: String,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Clone, Copy, ValueEnum)]
pub enum GatewayKind {
    Stripe,
}

impl GatewayKind {
    fn name(self) -> &'static str {
        match self {
            GatewayKind::Stripe => "stripe",
        }
    }
}

/// Builds the gateways sites are configured with.
pub struct Builder;

impl GatewayBuilder for Builder {
    fn build(&self, kind: &str, secret_key: &str, api_base: &str) -> Result<Arc<dyn Gateway>, String> {
        match kind {
            "stripe" => {
                let config = rebill_gateway_stripe::StripeConfig::new(secret_key, api_base);
                Ok(Arc::new(rebill_gateway_stripe::StripeGateway::new(config).map_err(|e| e.to_string())?))
            }
            other => Err(format!("unknown gateway {other:?}")),
        }
    }
}

/// What a site without a configured gateway uses, for people.
fn without(site: &Site) -> &'static str {
    match site.mode {
        Mode::Sandbox => "sandbox",
        Mode::Production => "none",
    }
}

fn view_json(site: &Site, view: Option<&GatewayView>) -> Value {
    match view {
        Some(v) => json!({
            "site": site.name, "gateway": v.kind, "key_last4": v.key_last4, "api_base": v.api_base,
            "test": v.test, "updated_at": rebill_store::iso8601(v.updated_at),
        }),
        None => json!({ "site": site.name, "gateway": without(site) }),
    }
}

fn view_line(site: &Site, view: Option<&GatewayView>) -> String {
    match view {
        Some(v) => format!(
            "site {}: {} gateway, key …{} ({}), API {}",
            site.name,
            v.kind,
            v.key_last4,
            if v.test { "test key" } else { "live key" },
            v.api_base
        ),
        None if site.mode == Mode::Sandbox => format!("site {}: sandbox gateway (no real gateway set)", site.name),
        None => {
            format!("site {}: no gateway; every charge, verification and refund is declined (no_gateway)", site.name)
        }
    }
}

/// The warning of a production site without a gateway (`None` otherwise).
pub async fn production_warning(store: &Store, site: &Site) -> anyhow::Result<Option<String>> {
    if site.mode != Mode::Production || store.site_gateway(site.id).await?.is_some() {
        return Ok(None);
    }
    Ok(Some(format!(
        "site {} is in production without a payment gateway: every charge, verification and refund is declined \
         (no_gateway) until `rebill gateway set --site {} stripe --secret-key-file FILE`",
        site.name, site.name
    )))
}

/// `rebill gateway …`.
pub async fn run(
    store: Store,
    database: &str,
    clock: Arc<dyn rebill_app::Clock>,
    now: i64,
    command: GatewayCommand,
) -> anyhow::Result<()> {
    match command {
        GatewayCommand::Set { site, kind, secret_key_file, api_base, vault_key_file, json } => {
            let site = store.site(&site).await?;
            let key = std::fs::read_to_string(&secret_key_file)
                .with_context(|| format!("reading the secret key file {}", secret_key_file.display()))?;
            let vault = rebill_app::platform::tokens::open_vault(vault_key_file.as_deref(), database)?;
            let services = rebill_app::Services::new(store, clock).with_vault(vault);
            let view = gateways::set(&services, &site, kind.name(), &key, api_base.as_deref(), now).await?;
            emit(json, view_json(&site, Some(&view)), view_line(&site, Some(&view)));
        }
        GatewayCommand::Show { site, vault_key_file, json } => {
            let site = store.site(&site).await?;
            let vault = rebill_app::platform::tokens::open_vault(vault_key_file.as_deref(), database)?;
            let services = rebill_app::Services::new(store, clock).with_vault(vault);
            let view = gateways::show(&services, &site).await?;
            emit(json, view_json(&site, view.as_ref()), view_line(&site, view.as_ref()));
        }
        GatewayCommand::Remove { site, json } => {
            let site = store.site(&site).await?;
            let services = rebill_app::Services::new(store.clone(), clock);
            let removed = gateways::remove(&services, &site).await?;
            let mut value = view_json(&site, None);
            value["removed"] = json!(removed);
            let mut line =
                if removed { view_line(&site, None) } else { format!("site {}: no gateway was set", site.name) };
            if let Some(warning) = production_warning(&store, &site).await? {
                eprintln!("warning: {warning}");
                value["warning"] = json!(warning);
                line = format!("{line}\nwarning: {warning}");
            }
            emit(json, value, line);
        }
    }
    Ok(())
}
