//! Stored references (`<customer id>/<payment method id>`) and the Stripe ids that go into
//! request paths.

use std::fmt;

/// A payment method stored with Stripe: the customer it is attached to and its id. Written
/// `cus_…/pm_…` ([`StoredMethod::reference`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredMethod {
    pub customer: String,
    pub payment_method: String,
}

impl StoredMethod {
    /// Parses a stored reference; `None` when it is not `cus_<id>/<payment method id>` with a
    /// `pm_`, `card_` or `src_` payment method.
    pub fn parse(reference: &str) -> Option<StoredMethod> {
        let (customer, payment_method) = reference.split_once('/')?;
        let method_prefixed = ["pm_", "card_", "src_"].iter().any(|p| payment_method.starts_with(p));
        (customer.starts_with("cus_") && is_id(customer) && method_prefixed && is_id(payment_method))
            .then(|| StoredMethod { customer: customer.to_owned(), payment_method: payment_method.to_owned() })
    }

    /// The reference rebill keeps: `cus_…/pm_…`.
    pub fn reference(&self) -> String {
        self.to_string()
    }
}

impl fmt::Display for StoredMethod {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.customer, self.payment_method)
    }
}

/// Whether `id` has the shape of a Stripe object id (`<prefix>_<letters and digits>`), so that
/// it can be put into a request path as it is.
pub fn is_id(id: &str) -> bool {
    match id.split_once('_') {
        Some((prefix, rest)) => {
            !prefix.is_empty()
                && !rest.is_empty()
                && id.len() <= 255
                && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        }
        None => false,
    }
}

/// `id` when it has the shape of an id of the given prefix (`pi_`, `re_`, …).
pub fn id_with_prefix<'a>(id: &'a str, prefix: &str) -> Option<&'a str> {
    (id.starts_with(prefix) && is_id(id)).then_some(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_round_trip() {
        let stored = StoredMethod::parse("cus_NffrFeUfNV2Hib/pm_1MqLiJLkdIwHu7ixUEgbFdYF").expect("a reference");
        assert_eq!(stored.customer, "cus_NffrFeUfNV2Hib");
        assert_eq!(stored.payment_method, "pm_1MqLiJLkdIwHu7ixUEgbFdYF");
        assert_eq!(stored.reference(), "cus_NffrFeUfNV2Hib/pm_1MqLiJLkdIwHu7ixUEgbFdYF");
        assert!(StoredMethod::parse("cus_1/card_2").is_some());
    }

    #[test]
    fn other_references_are_refused() {
        for bad in [
            "",
            "/",
            "cus_1",
            "pm_1",
            "cus_1/",
            "/pm_1",
            "cus_1/pm_1/pm_2",
            "cus_/pm_1",
            "acct_1/pm_1",
            "cus_1/tok_1",
            "cus_1/pm_1?x=1",
            "cus_1/pm_../../v1/charges",
            "sbx_0123456789abcdef01234567_approved",
        ] {
            assert!(StoredMethod::parse(bad).is_none(), "{bad}");
        }
        assert!(id_with_prefix("pi_123", "pi_").is_some());
        assert!(id_with_prefix("pi_12/3", "pi_").is_none());
        assert!(id_with_prefix("re_123", "pi_").is_none());
    }
}
