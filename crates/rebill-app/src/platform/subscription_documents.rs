//! A subscription's stored documents: the engine's value and the service's [`Details`] beside
//! it, read together as a [`Loaded`] subscription, and what the store indexes of them. Every
//! module that reads a subscription's documents reads them here; this module names no use case.

use chrono::{DateTime, Utc};
use rebill_billing::lifecycle::Subscription as Engine;
use rebill_store::subscriptions::{Indexed, SubscriptionRecord};
use serde::{Deserialize, Serialize};

use crate::platform::error::SubscriptionError;

/// What the service keeps beside the engine's value.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Details {
    pub account_code: String,
    #[serde(default)]
    pub po_number: Option<String>,
    #[serde(default)]
    pub net_terms: Option<i64>,
    #[serde(default)]
    pub collection_method: Option<String>,
    #[serde(default)]
    pub terms_and_conditions: Option<String>,
    #[serde(default)]
    pub customer_notes: Option<String>,
    #[serde(default)]
    pub vat_reverse_charge_notes: Option<String>,
    /// The account's shipping address the subscription ships to (2.11), kept for its renewals.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shipping_address_id: Option<i64>,
}

pub fn to_json<T: Serialize>(value: &T) -> Result<String, SubscriptionError> {
    Ok(serde_json::to_string(value)?)
}

pub fn from_json<T: for<'de> Deserialize<'de>>(text: &str) -> Result<T, SubscriptionError> {
    Ok(serde_json::from_str(text)?)
}

/// A loaded subscription: its record and the documents in it.
pub struct Loaded {
    pub record: SubscriptionRecord,
    pub sub: Engine,
    pub details: Details,
}

impl Loaded {
    pub fn of(record: SubscriptionRecord) -> Result<Self, SubscriptionError> {
        let sub = from_json(&record.value)?;
        let details = from_json(&record.details)?;
        Ok(Self { record, sub, details })
    }
}

pub fn epoch(t: DateTime<Utc>) -> i64 {
    t.timestamp()
}

pub fn indexed(sub: &Engine) -> Indexed {
    Indexed {
        state: sub.state.name().to_owned(),
        past_due: sub.past_due,
        trial_started_at: sub.trial_started_at.map(epoch),
        trial_ends_at: sub.trial_ends_at.map(epoch),
    }
}

/// A new subscription uuid: 32 hexadecimal characters (128 random bits).
pub fn new_uuid() -> String {
    let mut bytes = [0u8; 16];
    // Without the operating system's random source no identifier can be made.
    getrandom::fill(&mut bytes).expect("the operating system's random source");
    hex::encode(bytes)
}
