//! A dated history of a subscription folded through the transitions the service runs
//! (`lifecycle::create`, `advance_to`, `apply`) and billed with `invoice::diff`, as the service
//! does: the property and story tests check what those functions produce over whole histories.

use chrono::{DateTime, Utc};
use rebill_billing::invoice::{self, InvoiceError, LineItem};
use rebill_billing::lifecycle::{self, Action, LifecycleError, NewSubscription, Subscription};
use serde::{Deserialize, Serialize};

/// One dated action.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryEntry {
    pub at: DateTime<Utc>,
    pub action: Action,
}

/// A creation and the actions since, in time order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubscriptionHistory {
    pub created_at: DateTime<Utc>,
    pub creation: NewSubscription,
    pub entries: Vec<HistoryEntry>,
}

impl SubscriptionHistory {
    pub fn new(created_at: DateTime<Utc>, creation: NewSubscription) -> Self {
        Self { created_at, creation, entries: Vec::new() }
    }
}

/// Entry `position` (0: the creation) was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplayError {
    pub position: usize,
    pub source: LifecycleError,
}

/// The subscription as of `up_to` (`None` if created later) and every line produced up to it.
#[derive(Debug)]
pub struct Replay {
    pub subscription: Option<Subscription>,
    pub lines: Vec<LineItem>,
}

/// Creation, then for each entry at or before `up_to` the transitions due before it and the
/// action itself, then the transitions due up to `up_to`.
pub fn replay(history: &SubscriptionHistory, up_to: DateTime<Utc>) -> Result<Replay, ReplayError> {
    if history.created_at > up_to {
        return Ok(Replay { subscription: None, lines: Vec::new() });
    }
    let fail = |position| move |source| ReplayError { position, source };
    let created = lifecycle::create(history.creation.clone(), history.created_at).map_err(fail(0))?;
    let mut sub = created.subscription;
    let mut lines = created.lines;
    let mut last = history.created_at;
    for (i, entry) in history.entries.iter().enumerate() {
        if entry.at > up_to {
            break;
        }
        if entry.at < last {
            return Err(ReplayError { position: i + 1, source: LifecycleError::OutOfOrder { at: entry.at } });
        }
        last = entry.at;
        let caught_up = lifecycle::advance_to(&sub, entry.at).map_err(fail(i + 1))?;
        lines.extend(caught_up.lines);
        let applied = lifecycle::apply(&caught_up.subscription, &entry.action, entry.at).map_err(fail(i + 1))?;
        sub = applied.subscription;
        lines.extend(applied.lines);
    }
    let caught_up = lifecycle::advance_to(&sub, up_to).map_err(fail(history.entries.len() + 1))?;
    lines.extend(caught_up.lines);
    Ok(Replay { subscription: Some(caught_up.subscription), lines })
}

/// Every line `history` produced up to `up_to`; panics on a history the lifecycle refuses
/// (the tests build valid ones).
pub fn expected(history: &SubscriptionHistory, up_to: DateTime<Utc>) -> Vec<LineItem> {
    match replay(history, up_to) {
        Ok(replay) => replay.lines,
        Err(e) => panic!("history entry {}: {}", e.position, e.source),
    }
}

/// What to bill for `history` up to `up_to` given the lines already `billed`.
pub fn bill(
    history: &SubscriptionHistory,
    up_to: DateTime<Utc>,
    billed: &[LineItem],
) -> Result<Vec<LineItem>, InvoiceError> {
    invoice::diff(&expected(history, up_to), billed)
}
