//! `rebill reconcile`: a site's transactions compared with its gateway's own records, every
//! difference printed (the use case is `rebill_app::collection::reconciliation`).

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;
use clap::Args;
use rebill_app::collection::reconciliation::{self, Reconciliation};
use rebill_billing::gateway::RecordKind;
use rebill_billing::reconcile::Difference;
use rebill_store::Store;
use serde_json::{Value, json};

use crate::{emit, gateway};

/// The exit status of a reconciliation that found differences.
pub const DIFFERENCES_EXIT: u8 = 3;

#[derive(Args)]
pub struct ReconcileArgs {
    /// The site's name or id (`rebill site list`).
    #[arg(long)]
    site: String,
    /// Start of the compared window, an ISO 8601 date or date-time (default: 24 hours ago).
    #[arg(long, value_name = "TIME")]
    since: Option<String>,
    /// The vault key file `rebill serve` uses (same default as `serve`): it opens the gateway's key.
    #[arg(long, env = "REBILL_VAULT_KEY_FILE", value_name = "PATH")]
    vault_key_file: Option<PathBuf>,
    #[arg(long)]
    json: bool,
}

/// A reconciliation that found differences: printed already, the process exits with
/// [`DIFFERENCES_EXIT`].
#[derive(Debug, thiserror::Error)]
#[error("{0} differences between rebill and the gateway")]
pub struct Differences(pub usize);

fn time(at: i64) -> String {
    chrono::DateTime::<chrono::Utc>::from_timestamp(at, 0)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
        .unwrap_or_default()
}

fn record_name(kind: RecordKind) -> &'static str {
    match kind {
        RecordKind::Payment => "payment",
        RecordKind::Refund => "refund",
    }
}

fn difference_json(d: &Difference) -> Value {
    json!({
        "kind": d.kind.name(),
        "meaning": d.kind.meaning(),
        "record": record_name(d.record),
        "attempt": d.attempt,
        "transaction": d.transaction,
        "invoice_number": d.invoice_number,
        "gateway_references": d.references,
        "rebill_cents": d.rebill_amount,
        "gateway_cents": d.gateway_amount,
    })
}

fn difference_line(d: &Difference) -> String {
    let references = if d.references.is_empty() { "none".to_owned() } else { d.references.join(",") };
    format!(
        "{}  {} attempt {}  transaction {}  invoice {}  gateway {}  rebill {} cents, gateway {} cents: {}",
        d.kind.name(),
        record_name(d.record),
        d.attempt,
        d.transaction.as_deref().unwrap_or("none"),
        d.invoice_number.map_or_else(|| "none".to_owned(), |n| n.to_string()),
        references,
        d.rebill_amount,
        d.gateway_amount,
        d.kind.meaning()
    )
}

fn report_json(site: &str, r: &Reconciliation) -> Value {
    let c = &r.comparison;
    json!({
        "site": site,
        "gateway": r.gateway,
        "since": time(r.since),
        "until": time(r.until),
        "complete": r.complete,
        "gateway_records": r.records,
        "transactions": r.transactions,
        "matched": c.matched,
        "pending": c.pending,
        "foreign": c.foreign,
        "differences": c.differences.iter().map(difference_json).collect::<Vec<_>>(),
    })
}

fn report_text(site: &str, r: &Reconciliation) -> String {
    let c = &r.comparison;
    let mut lines = vec![format!(
        "site {site}, gateway {}, {} to {}: {} gateway records, {} transactions; {} agree, {} pending, {} not made by rebill",
        r.gateway,
        time(r.since),
        time(r.until),
        r.records,
        r.transactions,
        c.matched,
        c.pending,
        c.foreign
    )];
    if !r.complete {
        lines
            .push("warning: the gateway's list was cut at its bound; older records of the window were not read".into());
    }
    if c.differences.is_empty() {
        lines.push("no differences".to_owned());
    } else {
        lines.push(format!("{} differences:", c.differences.len()));
        lines.extend(c.differences.iter().map(difference_line));
    }
    lines.join("\n")
}

/// Runs `rebill reconcile`.
pub async fn run(
    store: Store,
    database: &str,
    clock: Arc<dyn rebill_app::Clock>,
    now: i64,
    args: ReconcileArgs,
) -> anyhow::Result<()> {
    let site = store.site(&args.site).await?;
    let since = match &args.since {
        Some(text) => rebill_app::platform::instant::parse_instant(text)
            .with_context(|| format!("`{text}` is not an ISO 8601 date or date-time"))?,
        None => now - 24 * 3600,
    };
    let vault = rebill_app::platform::tokens::open_vault(args.vault_key_file.as_deref(), database)?;
    let services =
        rebill_app::Services::new(store, clock).with_vault(vault).with_gateway_builder(Arc::new(gateway::Builder));
    let found = reconciliation::reconcile(&services, &site, since).await?;
    emit(args.json, report_json(&site.name, &found), report_text(&site.name, &found));
    match found.comparison.differences.len() {
        0 => Ok(()),
        n => Err(Differences(n).into()),
    }
}
