//! Request rules that are not declarative, called from the generated `Validate` impls of the
//! resources marked `rules = true` in `schema/`.

use rebill_xml::ApiVersion;

use crate::validate::{Validate, Validation};
use crate::{BillingInfo, InvoiceRefund, Purchase};

const V2_8: ApiVersion = ApiVersion::new(2, 8);

/// Elements a `<billing_info>` may carry beside `token_id`. `currency` is not payment data (it
/// names the verification's currency, with or without a token), and released clients send it on
/// every billing info (the Python client from 2.2.20, default `USD`).
const BESIDE_TOKEN: [&str; 2] = ["token_id", "currency"];

/// With `token_id`, no payment data (card, bank account, names, address) may be sent: the token
/// holds it.
pub fn billing_info(b: &BillingInfo, v: &mut Validation<'_>, path: &str) {
    if b.token_id.is_none() {
        return;
    }
    for element in b.given().into_iter().filter(|e| !BESIDE_TOKEN.contains(e)) {
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

/// From 2.8 the purchase's currency applies to its adjustments, which name none; before 2.8 an
/// adjustment may repeat the purchase's currency (any case) but name no other, and a purchase
/// holds one subscription.
pub fn purchase(p: &Purchase, v: &mut Validation<'_>, path: &str) {
    let since_2_8 = v.version() >= V2_8;
    let purchase_currency = p.currency.as_deref().unwrap_or_default();
    for (i, adjustment) in p.adjustments.iter().flatten().enumerate() {
        let Some(own) = adjustment.currency.as_deref() else { continue };
        let message = if since_2_8 {
            "is not allowed in a purchase adjustment from API version 2.8; set the purchase currency"
        } else if !own.eq_ignore_ascii_case(purchase_currency) {
            "must be the purchase's currency"
        } else {
            continue;
        };
        v.add(&format!("{path}.adjustments[{i}]"), "currency", "invalid", message);
    }
    if !since_2_8 && p.subscriptions.as_ref().is_some_and(|s| s.len() > 1) {
        v.add(path, "subscriptions", "invalid", "holds at most one subscription before API version 2.8");
    }
}

#[cfg(test)]
mod tests {
    use rebill_xml::{ApiVersion, Features, Mode, WireContext, from_xml};

    use crate::BillingInfo;
    use crate::validate::{Operation, validate};

    /// The field paths refused when `doc` is validated as a billing-info update at 2.11.
    fn refused(doc: &str) -> Vec<String> {
        let ctx = WireContext::new(ApiVersion::new(2, 11), Features::default(), "http://localhost");
        let info: BillingInfo = from_xml(doc.as_bytes(), &ctx, Mode::Request).expect("decodes");
        match validate(&info, &ctx, Operation::Update) {
            Ok(()) => Vec::new(),
            Err(errors) => errors.errors.iter().flatten().filter_map(|e| e.field.clone()).collect(),
        }
    }

    #[test]
    fn currency_may_accompany_a_token() {
        assert!(refused("<billing_info><token_id>t</token_id></billing_info>").is_empty());
        assert!(refused("<billing_info><token_id>t</token_id><currency>USD</currency></billing_info>").is_empty());
    }

    #[test]
    fn payment_data_may_not_accompany_a_token() {
        let doc = "<billing_info><token_id>t</token_id><currency>USD</currency><number>4111111111111111</number>\
                   <account_number>111111111</account_number><address1>1 Main St</address1></billing_info>";
        assert_eq!(
            refused(doc),
            ["billing_info.address1", "billing_info.number", "billing_info.account_number"].map(String::from)
        );
    }

    /// The refusals of `doc` validated as a purchase at `version`, as `field symbol` pairs.
    fn purchase_refusals(doc: &str, version: ApiVersion) -> Vec<String> {
        let ctx = WireContext::new(version, Features::default(), "http://localhost");
        let purchase: crate::Purchase = from_xml(doc.as_bytes(), &ctx, Mode::Request).expect("decodes");
        match validate(&purchase, &ctx, Operation::Create) {
            Ok(()) => Vec::new(),
            Err(errors) => errors
                .errors
                .iter()
                .flatten()
                .filter(|e| e.field.as_deref().is_some_and(|f| f.contains("adjustments")))
                .map(|e| format!("{} {}", e.field.clone().unwrap_or_default(), e.symbol.clone().unwrap_or_default()))
                .collect(),
        }
    }

    #[test]
    fn a_purchase_adjustment_names_no_other_currency() {
        let doc = |own: &str| {
            format!(
                "<purchase><currency>USD</currency><adjustments><adjustment><unit_amount_in_cents>100\
                 </unit_amount_in_cents><currency>{own}</currency></adjustment></adjustments></purchase>"
            )
        };
        let refused = vec!["purchase.adjustments[0].currency invalid".to_owned()];
        // Before 2.8 it may repeat the purchase's currency, in any case, and name no other.
        assert!(purchase_refusals(&doc("usd"), ApiVersion::new(2, 7)).is_empty());
        assert_eq!(purchase_refusals(&doc("EUR"), ApiVersion::new(2, 7)), refused);
        // From 2.8 it names none.
        assert_eq!(purchase_refusals(&doc("USD"), ApiVersion::new(2, 8)), refused);
    }

    #[test]
    fn without_a_token_anything_goes_together() {
        let doc = "<billing_info><currency>EUR</currency><number>4111111111111111</number></billing_info>";
        assert!(refused(doc).is_empty());
    }
}
