//! Reconciliation: a site's transactions through its gateway compared with the gateway's own
//! records ([`reconcile`]), on demand (`rebill reconcile`) and every hour by a job
//! ([`run_job`]) that logs each difference and counts them in the metrics. The comparison is
//! `rebill_billing::reconcile`'s; this module reads both sides.
//!
//! The gateway is read first, then rebill: a payment made between the two reads is then either
//! missing from the gateway's list and made after the window's end (left out on rebill's side
//! too), or still `processing` in rebill (pending, not compared).

use std::collections::HashSet;

use rebill_billing::gateway::{RecordKind, RecordsError};
use rebill_billing::reconcile::{Comparison, Entry, EntryAction, EntryStatus, compare, voided_purchase};
use rebill_billing::states::TransactionStatus;
use rebill_store::invoices::{Transaction, TransactionFilter};
use rebill_store::{Order, PageRequest, Site, Sort, StoreError};

use crate::Services;
use crate::platform::gateways::{RECONCILE_JOB, next_reconcile};
use crate::platform::jobs::JobError;
use crate::platform::metrics;

/// How far back the periodic job compares: a day, and an hour more for the payments of the
/// previous run's last moments.
pub const RECONCILE_WINDOW: i64 = 25 * 3600;

/// Transactions read per page.
const PAGE: u32 = 500;

/// What a reconciliation found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reconciliation {
    /// The gateway compared (`stripe`).
    pub gateway: &'static str,
    /// Start of the window (epoch seconds, the service's clock).
    pub since: i64,
    /// End of the window: when the gateway was read.
    pub until: i64,
    pub comparison: Comparison,
    /// Gateway records read.
    pub records: usize,
    /// rebill transactions compared (those of the window and those the records name).
    pub transactions: usize,
    /// False when the gateway's listing stopped at its bound: older records of the window
    /// were not read, and rebill's transactions of the window are not reported missing.
    pub complete: bool,
}

/// Why a reconciliation could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Records(#[from] RecordsError),
}

/// Compares the site's transactions through its gateway made since `since` (epoch seconds,
/// the service's clock) with the gateway's records of the same time (see the module
/// documentation and `rebill_billing::reconcile`).
pub async fn reconcile(services: &Services, site: &Site, since: i64) -> Result<Reconciliation, ReconcileError> {
    let gateway = services.gateway(site.id).await?;
    let until = services.clock.now();
    let listed = gateway.records(since).await?;
    // The window on the site's clock (a sandbox site's clock may run ahead of the service's).
    let offset = site.now(until) - until;
    let in_window = read_window(services, site, gateway.kind(), since + offset, site.now(until)).await?;
    // The transactions the records name that the window does not hold (made before it).
    let read: HashSet<&str> = in_window.iter().map(|t| t.uuid.as_str()).collect();
    let mut keys: Vec<&str> = listed
        .records
        .iter()
        .filter_map(|record| {
            let attempt = record.attempt.as_deref()?;
            Some(match record.kind {
                RecordKind::Refund => voided_purchase(attempt).unwrap_or(attempt),
                RecordKind::Payment => attempt,
            })
        })
        .filter(|key| !read.contains(key))
        .collect();
    keys.sort_unstable();
    keys.dedup();
    let named = services.store.transactions_by_uuids(site.id, &keys).await?;
    let mut entries: Vec<Entry> = Vec::new();
    for (transactions, window) in [(&in_window, listed.complete), (&named, false)] {
        entries.extend(transactions.iter().filter_map(|t| entry(t, gateway.kind(), window)));
    }
    let comparison = compare(&entries, &listed.records);
    Ok(Reconciliation {
        gateway: gateway.kind(),
        since,
        until,
        comparison,
        records: listed.records.len(),
        transactions: entries.len(),
        complete: listed.complete,
    })
}

/// The site's purchases and refunds through the gateway `kind` made in `[from, to]` (the
/// site's clock).
async fn read_window(
    services: &Services,
    site: &Site,
    kind: &str,
    from: i64,
    to: i64,
) -> Result<Vec<Transaction>, StoreError> {
    let filter =
        TransactionFilter { actions: vec!["purchase".to_owned(), "refund".to_owned()], ..TransactionFilter::default() };
    let mut page = PageRequest {
        sort: Sort::CreatedAt,
        order: Order::Asc,
        after: None,
        begin: Some(from),
        end: Some(to),
        limit: PAGE,
    };
    let mut out = Vec::new();
    loop {
        let read = services.store.list_transactions(site.id, &filter, &page).await?;
        out.extend(read.items.into_iter().filter(|t| t.new.gateway_type == kind));
        match read.next {
            Some(next) => page.after = Some(next),
            None => return Ok(out),
        }
    }
}

/// A transaction as reconciliation sees it; `None` for one that is no gateway purchase or
/// refund.
fn entry(t: &Transaction, kind: &str, in_window: bool) -> Option<Entry> {
    if t.new.gateway_type != kind {
        return None;
    }
    let action = match t.new.action.as_str() {
        "purchase" => EntryAction::Purchase,
        "refund" => EntryAction::Refund,
        _ => return None,
    };
    let status = match t.status() {
        TransactionStatus::Success => EntryStatus::Success,
        TransactionStatus::Void if action == EntryAction::Purchase => EntryStatus::Void,
        TransactionStatus::Processing => EntryStatus::Processing,
        _ => EntryStatus::NoMoney,
    };
    Some(Entry {
        uuid: t.uuid.clone(),
        action,
        status,
        amount: t.new.amount,
        invoice_number: t.invoice_number,
        in_window,
    })
}

/// Schedules the periodic job of every site whose gateway keeps records (at the start of
/// `rebill serve`; `rebill gateway set` schedules its site's).
pub async fn watch(services: &Services) -> Result<usize, StoreError> {
    let now = services.clock.now();
    let mut watched = 0;
    for site in services.store.sites().await? {
        if services.store.site_gateway(site.id).await?.is_some() {
            services
                .store
                .schedule_job(site.id, RECONCILE_JOB, &site.id.to_string(), next_reconcile(site.now(now)))
                .await?;
            watched += 1;
        }
    }
    Ok(watched)
}

/// The periodic job: reconciles the last [`RECONCILE_WINDOW`], logs every difference as a
/// warning, sets [`metrics::RECONCILE_DIFFERENCES`] and counts the run; then schedules the
/// next run, while the site's gateway keeps records.
pub async fn run_job(state: &Services, site: &Site) -> Result<(), JobError> {
    let since = state.clock.now() - RECONCILE_WINDOW;
    let label = site.name.clone();
    match reconcile(state, site, since).await {
        Ok(found) => {
            let differences = &found.comparison.differences;
            for d in differences {
                tracing::warn!(
                    site = %site.name,
                    difference = d.kind.name(),
                    attempt = %d.attempt,
                    transaction = d.transaction.as_deref().unwrap_or(""),
                    invoice = d.invoice_number.unwrap_or(0),
                    gateway_references = %d.references.join(","),
                    rebill_cents = d.rebill_amount,
                    gateway_cents = d.gateway_amount,
                    "reconciliation: {}",
                    d.kind.meaning()
                );
            }
            let outcome = if differences.is_empty() { "clean" } else { "differences" };
            ::metrics::gauge!(metrics::RECONCILE_DIFFERENCES, "site" => label.clone()).set(differences.len() as f64);
            ::metrics::counter!(metrics::RECONCILE_RUNS, "site" => label, "outcome" => outcome).increment(1);
        }
        // The gateway no longer keeps records (removed, or the sandbox): the job ends.
        Err(ReconcileError::Records(RecordsError::Unsupported(_))) => {
            ::metrics::gauge!(metrics::RECONCILE_DIFFERENCES, "site" => label).set(0.0);
            return Ok(());
        }
        Err(ReconcileError::Records(e @ RecordsError::Unavailable(_))) => {
            tracing::warn!(site = %site.name, error = %e, "reconciliation: the gateway's records could not be read");
            ::metrics::counter!(metrics::RECONCILE_RUNS, "site" => label, "outcome" => "failed").increment(1);
        }
        Err(ReconcileError::Store(e)) => return Err(e.into()),
    }
    let site_now = site.now(state.clock.now());
    state.store.schedule_job(site.id, RECONCILE_JOB, &site.id.to_string(), next_reconcile(site_now)).await?;
    Ok(())
}
