//! Request rules that are not declarative, called from the generated `Validate` impls of the
//! resources marked `rules = true` in `schema/`.

use rebill_xml::ApiVersion;

use crate::validate::{Validate, Validation};
use crate::{BillingInfo, InvoiceRefund, Purchase};

const V2_8: ApiVersion = ApiVersion::new(2, 8);

/// With `token_id`, no other billing-info element may be sent.
pub fn billing_info(b: &BillingInfo, v: &mut Validation<'_>, path: &str) {
    if b.token_id.is_none() {
        return;
    }
    for element in b.given().into_iter().filter(|e| *e != "token_id") {
        v.add(path, element, "invalid", "is not allowed together with token_id");
    }
}

/// payment_method, description and refunded_at only with `external_refund` true.
pub fn refund(r: &InvoiceRefund, v: &mut Validation<'_>, path: &str) {
    if r.external_refund == Some(true) {
        return;
    }
    let external_only = [
        ("payment_method", r.payment_method.is_some()),
        ("description", r.description.is_some()),
        ("refunded_at", r.refunded_at.is_some()),
    ];
    for (element, given) in external_only {
        if given {
            v.add(path, element, "invalid", "is only allowed when external_refund is true");
        }
    }
}

/// From 2.8 the purchase's currency applies to its adjustments; before 2.8 a purchase holds one
/// subscription.
pub fn purchase(p: &Purchase, v: &mut Validation<'_>, path: &str) {
    if v.version() >= V2_8 {
        for (i, adjustment) in p.adjustments.iter().flatten().enumerate() {
            if adjustment.currency.is_some() {
                v.add(
                    &format!("{path}.adjustments[{i}]"),
                    "currency",
                    "invalid",
                    "is not allowed in a purchase adjustment from API version 2.8; set the purchase currency",
                );
            }
        }
    } else if p.subscriptions.as_ref().is_some_and(|s| s.len() > 1) {
        v.add(path, "subscriptions", "invalid", "holds at most one subscription before API version 2.8");
    }
}
