//! `rebill`: the service binary and its administration commands, on the embedded SQLite
//! database (default `sqlite://./rebill.db`) or PostgreSQL (`--database`, `REBILL_DATABASE`).
//!
//! This is the composition root. `serve` builds the use cases' `rebill_app::Services` (the store,
//! the vault key file, the gateways with the builder of `gateway.rs`, which alone knows
//! `rebill-gateway-stripe`) and starts the HTTP service (`rebill_server::serve`, which runs the
//! scheduler), the mailer of alert e-mails, the purge of expired tokens and the webhook worker
//! with the server's HTTP poster. On an empty database it first creates a sandbox site and prints
//! its keys once.
//!
//! The other commands: `site create/list/update`, `keys list/create/regenerate` (private keys,
//! numbered per site), `public-key show/regenerate`, `alerts list`, `clock` (moving a sandbox
//! site's clock on, through `rebill_app::operations::clock`), `gift-cards products`, `gateway
//! set/show/remove` (a site's real gateway, its key read from a file and sealed with the vault
//! key) and `webhooks add/list/remove/deliveries/redeliver`. Business rules live in `rebill-app`,
//! `rebill-billing` and the store, never here. Every command that creates a secret prints it
//! once; `--json` prints one JSON object for scripts. `REBILL_CLOCK_FILE` makes every command read
//! "now" from a file, so that end-to-end tests can move time.
//!
//! The end-to-end suites in `tests/` drive this binary over raw HTTP on both backends (through
//! `rebill-testkit`), including the official Python v2 client (`tests/python_client.rs`, pinned in
//! `tests/python/requirements.txt`), the Rust client, concurrent money operations
//! (`tests/races.rs`) and a Stripe stand-in losing answers (`tests/stripe.rs`).

mod gateway;
mod reconcile;
mod webhooks;

use anyhow::Context;
use clap::{Parser, Subcommand, ValueEnum};
use rebill_store::{Alert, ApiKey, Mode, NewSite, OldKey, Plan, Site, SiteUpdate, Store};
use serde_json::{Value, json};
use std::sync::Arc;

#[derive(Parser)]
#[command(name = "rebill", about = "rebill subscription billing: administration commands")]
struct Cli {
    /// Database URL: sqlite://PATH (embedded, created if missing) or postgres://…
    #[arg(long, global = true, env = "REBILL_DATABASE", default_value = "sqlite://./rebill.db")]
    database: String,
    /// How log lines are written to stderr: `text` (one readable line each) or `json` (one JSON
    /// object per line, with the same fields, for log shippers).
    #[arg(long, global = true, env = "REBILL_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Runs the HTTP service. On an empty database it first creates a sandbox site and prints
    /// its private and public key once; on a database with sites it lists them and says how to
    /// make a new key (`keys create`), since existing keys are stored as hashes only.
    Serve {
        #[arg(long, default_value = "127.0.0.1:8080")]
        listen: String,
        /// Marks an API version deprecated until its sunset, e.g. `2.2=2027-06-30T00:00:00Z`
        /// (repeatable). Responses carry `Service-Deprecated` and `Service-Sunset-Date`; after the
        /// sunset the version is refused.
        #[arg(long = "deprecate", value_name = "VERSION=SUNSET", value_parser = parse_deprecation)]
        deprecations: Vec<rebill_server::Deprecation>,
        /// SMTP server for alert e-mails, e.g. `smtp://127.0.0.1:25` or
        /// `smtps://user:password@mail.example.com`. Without one, alerts stay in the outbox
        /// (`rebill alerts list`) and are logged.
        #[arg(long, env = "REBILL_SMTP_URL", hide_env_values = true)]
        smtp_url: Option<String>,
        /// Sender of alert e-mails.
        #[arg(long, env = "REBILL_MAIL_FROM", default_value = rebill_mail::DEFAULT_FROM)]
        mail_from: String,
        /// File holding the key that encrypts the card and bank details of tokens (64
        /// hexadecimal characters); created with a new random key, readable by its owner only,
        /// when missing. Default: `rebill-vault.key` beside the SQLite database file. On
        /// PostgreSQL every process must be given the same file (`./rebill-vault.key` is used if it
        /// exists; without a file, tokens work only on the process that made them).
        #[arg(long, env = "REBILL_VAULT_KEY_FILE", value_name = "PATH")]
        vault_key_file: Option<std::path::PathBuf>,
        /// The service's public base URL, e.g. `https://billing.example.com`: every href and
        /// `Location` uses it whatever the request's Host header says. Set it in production;
        /// without it links are built from the Host header (fine for local development only).
        #[arg(long, env = "REBILL_PUBLIC_URL", value_name = "URL", value_parser = parse_public_url)]
        public_url: Option<rebill_server::PublicUrl>,
        /// Seconds a client may take to send a whole request body (after its head); a slower
        /// body gets 408 and its connection is closed.
        #[arg(long, value_name = "SECS", default_value_t = rebill_server::BODY_TIMEOUT.as_secs(),
              value_parser = clap::value_parser!(u64).range(1..))]
        body_timeout: u64,
        /// Open client connections at most; at the bound new connections wait (in the listen
        /// backlog) until one closes.
        #[arg(long, value_name = "N", default_value_t = rebill_server::MAX_CONNECTIONS as u64,
              value_parser = clap::value_parser!(u64).range(1..))]
        max_connections: u64,
        /// Seconds that requests in flight and the scheduler's run may take to finish after
        /// SIGTERM or SIGINT (a second signal exits at once).
        #[arg(long, value_name = "SECS", default_value_t = rebill_server::SHUTDOWN_GRACE.as_secs())]
        shutdown_grace: u64,
        /// Serve `GET /metrics` (Prometheus text format) on this address, e.g. `127.0.0.1:9090`:
        /// a listener of its own, never the API's. Off by default.
        #[arg(long, env = "REBILL_METRICS_LISTEN", value_name = "ADDR")]
        metrics_listen: Option<String>,
        /// Serve a demo checkout page at `/demo` for the first sandbox site (its plans, the
        /// hosted card fields, a subscription made inside rebill). Off by default.
        #[arg(long)]
        demo: bool,
        /// Multiplies the webhook retry schedule (10 s, 74 s, … about 73 hours in all), e.g. 0.01
        /// in tests and staging.
        #[arg(long, value_name = "F", default_value_t = 1.0)]
        webhook_retry_scale: f64,
        /// Seconds between two deletions of expired tokens.
        #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..), hide = true)]
        token_purge_interval: u64,
    },
    /// Merchant sites.
    #[command(subcommand)]
    Site(SiteCommand),
    /// A site's private API keys.
    #[command(subcommand)]
    Keys(KeysCommand),
    /// A site's public key (used by the token library).
    #[command(subcommand, name = "public-key")]
    PublicKey(PublicKeyCommand),
    /// The alert e-mail outbox.
    #[command(subcommand)]
    Alerts(AlertsCommand),
    /// A sandbox site's clock: moving it on runs every job that became due (renewals, trial
    /// ends, pauses, dunning retries) before the command returns.
    #[command(subcommand)]
    Clock(ClockCommand),
    /// Gift cards: the face values a site sells (a gift card can be bought only for one of them).
    #[command(subcommand, name = "gift-cards")]
    GiftCards(GiftCardsCommand),
    /// A site's real payment gateway (Stripe). Without one a sandbox site uses the sandbox
    /// gateway and a production site declines every charge (`no_gateway`).
    #[command(subcommand)]
    Gateway(gateway::GatewayCommand),
    /// A site's webhook endpoints: where its push notifications go.
    #[command(subcommand)]
    Webhooks(webhooks::WebhooksCommand),
    /// Compares the site's transactions with its gateway's own records (Stripe's PaymentIntents
    /// and Refunds, by the attempt key in their metadata) and prints every difference: money at
    /// the gateway that rebill does not show, and the reverse. Exits 0 when they agree, 3 when
    /// differences were found.
    Reconcile(reconcile::ReconcileArgs),
}

#[derive(Subcommand)]
enum GiftCardsCommand {
    /// The site's gift card products: face values per product code and currency.
    #[command(subcommand)]
    Products(GiftCardProductsCommand),
}

#[derive(Subcommand)]
enum GiftCardProductsCommand {
    /// Sells the product at these face values (in cents) in the currency; values sold already stay.
    Add {
        /// The site's name or id (`rebill site list`).
        #[arg(long)]
        site: String,
        #[arg(long)]
        product_code: String,
        /// ISO 4217 code, e.g. USD.
        #[arg(long)]
        currency: String,
        /// Face values in cents, e.g. `2000 5000`.
        #[arg(required = true, value_parser = clap::value_parser!(i64).range(1..))]
        amounts: Vec<i64>,
        #[arg(long)]
        json: bool,
    },
    /// Stops selling the product at these face values (cards bought keep theirs).
    Remove {
        #[arg(long)]
        site: String,
        #[arg(long)]
        product_code: String,
        #[arg(long)]
        currency: String,
        #[arg(required = true)]
        amounts: Vec<i64>,
        #[arg(long)]
        json: bool,
    },
    /// The face values the site sells.
    List {
        #[arg(long)]
        site: String,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
enum ClockCommand {
    /// Moves the site's clock on by an amount such as `1month`, `15days` or `12 hours`.
    Advance {
        /// The site's name or id (`rebill site list`).
        #[arg(long)]
        site: String,
        amount: String,
        /// The key file of the token vault (as for `serve`).
        #[arg(long, env = "REBILL_VAULT_KEY_FILE", value_name = "PATH")]
        vault_key_file: Option<std::path::PathBuf>,
        #[arg(long)]
        json: bool,
    },
    /// Sets the site's clock to an ISO 8601 date or date-time (never back).
    Set {
        /// The site's name or id (`rebill site list`).
        #[arg(long)]
        site: String,
        time: String,
        /// The key file of the token vault (as for `serve`).
        #[arg(long, env = "REBILL_VAULT_KEY_FILE", value_name = "PATH")]
        vault_key_file: Option<std::path::PathBuf>,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum ModeArg {
    Sandbox,
    Production,
}

#[derive(Clone, Copy, ValueEnum)]
enum PlanArg {
    Core,
    Professional,
    Grandfathered,
}

#[derive(Clone, Copy, ValueEnum)]
enum OldKeyArg {
    /// Refuse the old key from now on.
    Block,
    /// Keep the old key valid for 12 hours.
    #[value(name = "keep-12h")]
    Keep12h,
}

impl From<ModeArg> for Mode {
    fn from(m: ModeArg) -> Self {
        match m {
            ModeArg::Sandbox => Mode::Sandbox,
            ModeArg::Production => Mode::Production,
        }
    }
}

impl From<PlanArg> for Plan {
    fn from(p: PlanArg) -> Self {
        match p {
            PlanArg::Core => Plan::Core,
            PlanArg::Professional => Plan::Professional,
            PlanArg::Grandfathered => Plan::Grandfathered,
        }
    }
}

#[derive(Subcommand)]
enum SiteCommand {
    /// Creates a site; prints its private key and public key once.
    Create {
        #[arg(long)]
        name: String,
        #[arg(long, value_enum, default_value = "sandbox")]
        mode: ModeArg,
        #[arg(long, value_enum, default_value = "core")]
        plan: PlanArg,
        #[arg(long)]
        credit_memos: bool,
        /// Technical contact for alert e-mails.
        #[arg(long)]
        contact: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Lists the sites.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Changes a site's mode, plan, features, standing or contact.
    Update {
        #[arg(long)]
        name: String,
        #[arg(long, value_enum)]
        mode: Option<ModeArg>,
        #[arg(long, value_enum)]
        plan: Option<PlanArg>,
        #[arg(long)]
        credit_memos: Option<bool>,
        #[arg(long)]
        good_standing: Option<bool>,
        #[arg(long)]
        contact: Option<String>,
        /// Requests per minute instead of the mode's default (sandbox 400, production 1,000);
        /// `default` goes back to the mode's value.
        #[arg(long, value_name = "N|default", value_parser = parse_rate_limit)]
        rate_limit: Option<RateLimitArg>,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Clone, Copy)]
struct RateLimitArg(Option<i64>);

fn parse_rate_limit(text: &str) -> Result<RateLimitArg, String> {
    if text == "default" {
        return Ok(RateLimitArg(None));
    }
    match text.parse::<i64>() {
        Ok(n) if n >= 1 => Ok(RateLimitArg(Some(n))),
        _ => Err(format!("`{text}`: a number of requests per minute (at least 1) or `default`")),
    }
}

#[derive(Subcommand)]
enum KeysCommand {
    /// Lists a site's private keys (hints only; keys are stored as hashes).
    List {
        #[arg(long)]
        site: String,
        #[arg(long)]
        json: bool,
    },
    /// Creates a private key (read-only keys may only GET and HEAD); prints it once.
    Create {
        #[arg(long)]
        site: String,
        #[arg(long)]
        read_only: bool,
        #[arg(long)]
        json: bool,
    },
    /// Replaces a private key; the old one is blocked now or kept for 12 hours.
    Regenerate {
        /// The key's number within the site, as `rebill keys list --site NAME` shows it.
        key_number: i64,
        #[arg(long, value_enum)]
        old_key: OldKeyArg,
        #[arg(long)]
        site: String,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
enum PublicKeyCommand {
    Show {
        #[arg(long)]
        site: String,
        #[arg(long)]
        json: bool,
    },
    Regenerate {
        #[arg(long)]
        site: String,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
enum AlertsCommand {
    /// Lists queued and sent alerts.
    List {
        #[arg(long)]
        json: bool,
    },
}

/// The service clock: [`rebill_app::FileClock`] when `REBILL_CLOCK_FILE` is set (end-to-end
/// tests move time with it), else the system clock.
fn clock_from_env() -> std::sync::Arc<dyn rebill_app::Clock> {
    match std::env::var_os("REBILL_CLOCK_FILE") {
        Some(path) => std::sync::Arc::new(rebill_app::FileClock(path.into())),
        None => std::sync::Arc::new(rebill_app::SystemClock),
    }
}

fn parse_public_url(text: &str) -> Result<rebill_server::PublicUrl, String> {
    rebill_server::PublicUrl::parse(text).map_err(|e| e.to_string())
}

fn parse_deprecation(text: &str) -> Result<rebill_server::Deprecation, String> {
    rebill_server::Deprecation::parse(text).map_err(|e| e.to_string())
}

fn site_json(s: &Site) -> Value {
    json!({
        "id": s.id, "name": s.name, "mode": s.mode.as_str(), "plan": s.plan.as_str(), "credit_memos": s.credit_memos,
        "good_standing": s.good_standing, "contact": s.contact, "public_key": s.public_key, "key_limit": s.key_limit(),
        "rate_limit_per_minute": rebill_store::rate::per_minute(s),
        "rate_limit_is_default": s.rate_limit_per_minute.is_none(),
    })
}

/// A key as listed: `id` is its number within the site (what `keys regenerate` takes); times
/// are ISO 8601 UTC.
fn key_json(k: &ApiKey, now: i64) -> Value {
    json!({
        "id": k.number, "hint": k.hint, "read_only": k.read_only, "active": k.active_at(now),
        "created_at": rebill_store::iso8601(k.created_at), "expires_at": k.expires_at.map(rebill_store::iso8601),
    })
}

fn alert_json(a: &Alert) -> Value {
    json!({ "id": a.id, "kind": a.kind, "recipient": a.recipient, "subject": a.subject, "body": a.body, "sent": a.sent_at.is_some() })
}

/// Prints `value` as JSON, or `text` for people.
/// Warns (on stderr, in the text and in the JSON as `warning`) when `site` is in production
/// without a payment gateway.
async fn warn_without_gateway(store: &Store, site: &Site, value: &mut Value, text: &mut String) -> anyhow::Result<()> {
    if let Some(warning) = gateway::production_warning(store, site).await? {
        eprintln!("warning: {warning}");
        value["warning"] = json!(warning);
        text.push_str(&format!("\nwarning: {warning}"));
    }
    Ok(())
}

fn emit(json: bool, value: Value, text: String) {
    if json {
        println!("{value}");
    } else {
        println!("{text}");
    }
}

fn site_line(s: &Site) -> String {
    format!(
        "{} (id {})  mode={} plan={} credit_memos={} good_standing={} contact={} rate_limit={}/min{} public_key={}",
        s.name,
        s.id,
        s.mode.as_str(),
        s.plan.as_str(),
        s.credit_memos,
        s.good_standing,
        s.contact.as_deref().unwrap_or("-"),
        rebill_store::rate::per_minute(s),
        if s.rate_limit_per_minute.is_none() { " (mode default)" } else { "" },
        s.public_key
    )
}

fn key_line(k: &ApiKey, now: i64) -> String {
    let state = match k.expires_at {
        None => "active".to_owned(),
        Some(t) if t > now => format!("expires at {}", rebill_store::iso8601(t)),
        Some(t) => format!("blocked since {}", rebill_store::iso8601(t)),
    };
    format!(
        "{}  …{}  {}  {}  created {}",
        k.number,
        k.hint,
        if k.read_only { "read-only" } else { "read-write" },
        state,
        rebill_store::iso8601(k.created_at)
    )
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    let store = Store::connect(&cli.database).await.with_context(|| format!("opening {}", cli.database))?;
    let clock = clock_from_env();
    let now = clock.now();
    match cli.command {
        Command::Serve {
            listen,
            deprecations,
            smtp_url,
            mail_from,
            vault_key_file,
            public_url,
            body_timeout,
            max_connections,
            shutdown_grace,
            metrics_listen,
            demo,
            webhook_retry_scale,
            token_purge_interval,
        } => {
            let mail = smtp_url
                .map(|url| rebill_mail::MailConfig::new(&url, Some(&mail_from)))
                .transpose()
                .context("--smtp-url / --mail-from")?;
            let vault = rebill_app::platform::tokens::open_vault(vault_key_file.as_deref(), &cli.database)?;
            let sites = store.sites().await?;
            if sites.is_empty() {
                let new = NewSite {
                    name: "sandbox".into(),
                    mode: Mode::Sandbox,
                    plan: Plan::Core,
                    credit_memos: false,
                    contact: None,
                };
                let (site, key) = store.create_site(&new, now).await?;
                println!("created sandbox site `{}` (shown only now)", site.name);
                println!("private key: {key}");
                println!("public key:  {}", site.public_key);
            } else {
                // Keys are stored as hashes only: an existing key can never be shown again.
                println!("sites on this database:");
                for site in &sites {
                    println!("  {} (id {}, {})", site.name, site.id, site.mode.as_str());
                }
                let example = sites.first().map(|s| s.name.as_str()).unwrap_or("NAME");
                println!(
                    "private keys are shown only when created; make a new one with \
                     `rebill keys create --site {example}` (`rebill keys list --site {example}` lists them)"
                );
            }
            let listener =
                tokio::net::TcpListener::bind(&listen).await.with_context(|| format!("listening on {listen}"))?;
            match &public_url {
                Some(url) => println!("links use the public URL {url}"),
                None => println!("links use the request's Host header (set --public-url in production)"),
            }
            if demo {
                println!("demo checkout page at http://{}/demo", listener.local_addr()?);
            }
            // Before the API's line, which a supervisor may wait for.
            let metrics = match metrics_listen {
                Some(addr) => {
                    let handle = rebill_server::metrics::install()?;
                    let listener = tokio::net::TcpListener::bind(&addr)
                        .await
                        .with_context(|| format!("listening for metrics on {addr}"))?;
                    println!("metrics on http://{}/metrics", listener.local_addr()?);
                    Some((listener, handle))
                }
                None => None,
            };
            let config = rebill_server::Config {
                deprecations,
                public_url,
                body_timeout: std::time::Duration::from_secs(body_timeout),
                max_connections: usize::try_from(max_connections).unwrap_or(usize::MAX),
                shutdown_grace: std::time::Duration::from_secs(shutdown_grace),
                demo,
                ..rebill_server::Config::default()
            };
            let mail_clock = clock.clone();
            let mailer = tokio::spawn(rebill_mail::run(
                store.clone(),
                mail,
                move || mail_clock.now(),
                rebill_mail::DEFAULT_INTERVAL,
            ));
            let purger = tokio::spawn(rebill_app::platform::tokens::purge_expired(
                store.clone(),
                clock.clone(),
                std::time::Duration::from_secs(token_purge_interval),
            ));
            let database = store.clone();
            let state = rebill_server::AppState::new(store, clock, config)
                .with_vault(vault)
                .with_gateway_builder(Arc::new(gateway::Builder));
            // Sites on a real gateway are reconciled with it every hour.
            if let Err(e) = rebill_app::collection::reconciliation::watch(&state.services).await {
                tracing::warn!(error = %e, "scheduling the reconciliations with the gateways");
            }
            // Once the process is ready: a supervisor (and the tests) wait for this line.
            println!("listening on http://{}", listener.local_addr()?);
            let notifier = tokio::spawn(rebill_app::operations::webhooks::run(
                state.services.clone(),
                Arc::new(rebill_server::webhook_poster::HttpPoster::new().context("the webhook HTTP client")?),
                webhook_retry_scale,
                std::time::Duration::from_millis(200),
            ));
            let exposition = metrics
                .map(|(listener, handle)| tokio::spawn(rebill_server::metrics::serve(listener, state.clone(), handle)));
            let served = rebill_server::serve(listener, state, stop_signal(shutdown_grace)).await;
            if let Some(exposition) = exposition {
                exposition.abort();
            }
            mailer.abort();
            purger.abort();
            notifier.abort();
            // The aborted tasks give their connections back as they end.
            if tokio::time::timeout(DATABASE_CLOSE_WAIT, database.close()).await.is_err() {
                tracing::warn!("the database connections did not close within {DATABASE_CLOSE_WAIT:?}");
            }
            served?;
            tracing::info!("stopped");
        }
        Command::Site(SiteCommand::Create { name, mode, plan, credit_memos, contact, json }) => {
            let new = NewSite { name, mode: mode.into(), plan: plan.into(), credit_memos, contact };
            let (site, key) = store.create_site(&new, now).await?;
            let mut value = site_json(&site);
            value["private_key"] = json!(key);
            let mut text = format!(
                "created site {}\nprivate key: {key}\npublic key:  {}\n(the private key is shown only now)",
                site.name, site.public_key
            );
            warn_without_gateway(&store, &site, &mut value, &mut text).await?;
            emit(json, value, text);
        }
        Command::Site(SiteCommand::List { json }) => {
            let sites = store.sites().await?;
            let lines: Vec<String> = sites.iter().map(site_line).collect();
            emit(json, json!({ "sites": sites.iter().map(site_json).collect::<Vec<_>>() }), lines.join("\n"));
        }
        Command::Site(SiteCommand::Update {
            name,
            mode,
            plan,
            credit_memos,
            good_standing,
            contact,
            rate_limit,
            json,
        }) => {
            let update = SiteUpdate {
                mode: mode.map(Into::into),
                plan: plan.map(Into::into),
                credit_memos,
                good_standing,
                contact,
                rate_limit_per_minute: rate_limit.map(|r| r.0),
            };
            let site = store.update_site(&name, &update).await?;
            let (mut value, mut text) = (site_json(&site), site_line(&site));
            if mode.is_some() {
                warn_without_gateway(&store, &site, &mut value, &mut text).await?;
            }
            emit(json, value, text);
        }
        Command::Keys(KeysCommand::List { site, json }) => {
            let site = store.site(&site).await?;
            let keys = store.keys(&site).await?;
            let lines: Vec<String> = keys.iter().map(|k| key_line(k, now)).collect();
            emit(
                json,
                json!({ "site": site.name, "keys": keys.iter().map(|k| key_json(k, now)).collect::<Vec<_>>() }),
                lines.join("\n"),
            );
        }
        Command::Keys(KeysCommand::Create { site, read_only, json }) => {
            let site = store.site(&site).await?;
            let (key, secret) = store.create_key(&site, read_only, now).await?;
            let mut value = key_json(&key, now);
            value["private_key"] = json!(secret);
            emit(json, value, format!("created key {}\nprivate key: {secret}\n(shown only now)", key.number));
        }
        Command::Keys(KeysCommand::Regenerate { key_number, old_key, site, json }) => {
            let site = store.site(&site).await?;
            let old = match old_key {
                OldKeyArg::Block => OldKey::Block,
                OldKeyArg::Keep12h => OldKey::Keep12h,
            };
            let (key, secret) = store.regenerate_key(&site, key_number, old, now).await?;
            let mut value = key_json(&key, now);
            value["private_key"] = json!(secret);
            value["replaced"] = json!(key_number);
            emit(
                json,
                value,
                format!("key {key_number} replaced by key {}\nprivate key: {secret}\n(shown only now)", key.number),
            );
        }
        Command::PublicKey(PublicKeyCommand::Show { site, json }) => {
            let site = store.site(&site).await?;
            emit(json, json!({ "site": site.name, "public_key": site.public_key }), site.public_key.clone());
        }
        Command::PublicKey(PublicKeyCommand::Regenerate { site, json }) => {
            let site = store.site(&site).await?;
            let site = store.regenerate_public_key(&site, now).await?;
            emit(json, json!({ "site": site.name, "public_key": site.public_key }), site.public_key.clone());
        }
        Command::Clock(command) => {
            let (site, target, vault_key_file, json) = match command {
                ClockCommand::Advance { site, amount, vault_key_file, json } => {
                    let site = store.site(&site).await?;
                    let current = chrono::DateTime::<chrono::Utc>::from_timestamp(site.now(now), 0)
                        .context("the site's clock is out of range")?;
                    let target = rebill_app::operations::clock::advance(current, &amount)?;
                    (site, target.timestamp(), vault_key_file, json)
                }
                ClockCommand::Set { site, time, vault_key_file, json } => {
                    let site = store.site(&site).await?;
                    let target = rebill_app::platform::instant::parse_instant(&time)
                        .with_context(|| format!("`{time}` is not an ISO 8601 date or date-time"))?;
                    (site, target, vault_key_file, json)
                }
            };
            let vault = rebill_app::platform::tokens::open_vault(vault_key_file.as_deref(), &cli.database)?;
            let services = rebill_app::Services::new(store, clock.clone())
                .with_vault(vault)
                .with_gateway_builder(Arc::new(gateway::Builder));
            let moved = rebill_app::operations::clock::move_clock(&services, &site, target).await?;
            let (site, ran) = (moved.site, moved.jobs_run);
            let site_now = chrono::DateTime::<chrono::Utc>::from_timestamp(site.now(clock.now()), 0)
                .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
                .unwrap_or_default();
            emit(
                json,
                json!({ "site": site.name, "now": site_now, "jobs_run": ran }),
                format!("site {} is at {site_now}; {ran} due jobs ran", site.name),
            );
        }
        Command::GiftCards(GiftCardsCommand::Products(command)) => {
            gift_card_products(store, clock, now, command).await?;
        }
        Command::Gateway(command) => gateway::run(store, &cli.database, clock, now, command).await?,
        Command::Webhooks(command) => webhooks::run(store, &cli.database, clock, now, command).await?,
        Command::Reconcile(args) => reconcile::run(store, &cli.database, clock, now, args).await?,
        Command::Alerts(AlertsCommand::List { json }) => {
            let alerts = store.alerts().await?;
            let mut values = Vec::new();
            let mut lines = Vec::new();
            for a in &alerts {
                let delivery = store.alert_delivery(a.id).await?;
                let mut value = alert_json(a);
                let (attempts, last_error) = delivery.map(|d| (d.attempts, d.last_error)).unwrap_or((0, None));
                value["attempts"] = json!(attempts);
                value["last_error"] = json!(last_error);
                values.push(value);
                let state = if a.sent_at.is_some() {
                    "sent".to_owned()
                } else if let Some(e) = &last_error {
                    format!("queued, {attempts} attempts, last error: {e}")
                } else {
                    "queued".to_owned()
                };
                lines.push(format!(
                    "{}  {}  to {}  [{state}]  {}",
                    a.id,
                    a.kind,
                    a.recipient.as_deref().unwrap_or("-"),
                    a.body
                ));
            }
            emit(json, json!({ "alerts": values }), lines.join("\n"));
        }
    }
    Ok(())
}

/// `rebill gift-cards products …`.
async fn gift_card_products(
    store: Store,
    clock: std::sync::Arc<dyn rebill_app::Clock>,
    now: i64,
    command: GiftCardProductsCommand,
) -> anyhow::Result<()> {
    use rebill_app::selling::gift_cards;
    let site_name = match &command {
        GiftCardProductsCommand::Add { site, .. }
        | GiftCardProductsCommand::Remove { site, .. }
        | GiftCardProductsCommand::List { site, .. } => site.clone(),
    };
    let site = store.site(&site_name).await?;
    let ctx = rebill_app::Context { now: site.now(now), site };
    let services = rebill_app::Services::new(store, clock);
    let product_json = |p: &gift_cards::GiftCardProduct| json!({ "product_code": p.product_code, "currency": p.currency, "unit_amount_in_cents": p.unit_amount });
    match command {
        GiftCardProductsCommand::Add { product_code, currency, amounts, json, .. } => {
            let added = gift_cards::add_product(&services, &ctx, &product_code, &currency, &amounts).await?;
            let amounts: Vec<String> = added.iter().map(|p| p.unit_amount.to_string()).collect();
            emit(
                json,
                json!({ "site": ctx.site.name, "added": added.iter().map(product_json).collect::<Vec<_>>() }),
                format!(
                    "{product_code} {}: {} new face values ({})",
                    currency.to_ascii_uppercase(),
                    added.len(),
                    amounts.join(", ")
                ),
            );
        }
        GiftCardProductsCommand::Remove { product_code, currency, amounts, json, .. } => {
            let removed = gift_cards::remove_product(&services, &ctx, &product_code, &currency, &amounts).await?;
            emit(
                json,
                json!({ "site": ctx.site.name, "removed": removed }),
                format!("{product_code} {}: {removed} face values removed", currency.to_ascii_uppercase()),
            );
        }
        GiftCardProductsCommand::List { json, .. } => {
            let products = gift_cards::products(&services, &ctx).await?;
            let lines: Vec<String> =
                products.iter().map(|p| format!("{}  {}  {}", p.product_code, p.currency, p.unit_amount)).collect();
            emit(
                json,
                json!({ "site": ctx.site.name, "products": products.iter().map(product_json).collect::<Vec<_>>() }),
                lines.join("\n"),
            );
        }
    }
    Ok(())
}

/// Stack of each runtime thread. A request's future (a subscription created with its account,
/// billing info, addresses, coupons and gift card, all in one call) is deep; unoptimised builds
/// need more than the 2 MiB default.
const THREAD_STACK_BYTES: usize = 16 * 1024 * 1024;

fn main() -> std::process::ExitCode {
    let runtime =
        tokio::runtime::Builder::new_multi_thread().enable_all().thread_stack_size(THREAD_STACK_BYTES).build();
    match runtime {
        Ok(runtime) => runtime.block_on(async_main()),
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// Completes at the first SIGTERM or SIGINT; a second one ends the process at once.
/// How long a stopping service waits for its database connections to come back and close.
const DATABASE_CLOSE_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

async fn stop_signal(grace_seconds: u64) {
    if let Err(e) = wait_for_signal().await {
        // Without signal handling the service runs until it is killed.
        tracing::warn!(error = %e, "cannot listen for SIGTERM and SIGINT");
        std::future::pending::<()>().await;
    }
    tracing::info!(grace_seconds, "stopping: no new connections; requests in flight and the scheduler's run finish");
    // A detached task: it stays armed until the process ends.
    tokio::spawn(async {
        let _ = wait_for_signal().await;
        tracing::warn!("a second signal: exiting at once");
        std::process::exit(1);
    });
}

/// Waits for SIGTERM or SIGINT.
async fn wait_for_signal() -> std::io::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut terminate = signal(SignalKind::terminate())?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    tokio::select! {
        _ = terminate.recv() => {}
        _ = interrupt.recv() => {}
    }
    Ok(())
}

/// The format of the log lines (`--log-format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

async fn async_main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let filter =
        || tracing_subscriber::EnvFilter::try_from_env("REBILL_LOG").unwrap_or_else(|_| "info,sqlx=warn".into());
    match cli.log_format {
        LogFormat::Text => tracing_subscriber::fmt()
            .with_writer(std::io::stderr)
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .with_env_filter(filter())
            .init(),
        LogFormat::Json => tracing_subscriber::fmt()
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .with_writer(std::io::stderr)
            .with_env_filter(filter())
            .init(),
    }
    match run(cli).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) if e.downcast_ref::<reconcile::Differences>().is_some() => {
            std::process::ExitCode::from(reconcile::DIFFERENCES_EXIT)
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
