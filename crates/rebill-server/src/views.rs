//! Views shared by several endpoint modules: a transaction and a credit payment as the API
//! shows them, the 422 transaction error document of a declined transaction (wire-format §4.3)
//! and the answers to a refused billing info.

use axum::http::StatusCode;
use axum::response::Response;
use rebill_app::platform::model::billing_info::PaymentKind;
use rebill_app::platform::model::credits::{CreditPayment, CreditPaymentAction};
use rebill_app::platform::model::invoicing::{Check, Transaction, TransactionFailure, TransactionStatus};
use rebill_models::api::EndpointId;
use rebill_models::validate::{Rejection, Violation, errors_document};
use rebill_models::{
    AvsResult, BillingInfoType, CreditPayment as CreditPaymentView, CreditPaymentAction as ViewCreditPaymentAction,
    CvvResult, Errors, FieldError as XmlFieldError, FraudInfo, Transaction as View, TransactionAccount,
    TransactionAction, TransactionBillingInfo, TransactionDetails, TransactionError, TransactionOrigin,
    TransactionSource, TransactionStatus as ViewStatus,
};
use rebill_xml::{Href, WireContext};

use crate::respond::{self, time};
use rebill_app::customers::payment_methods::{PaymentMethodError, Refusal};
use rebill_app::customers::shipping_addresses::ShippingChoice;

fn account_href(code: &str) -> Href {
    Href::path(EndpointId::GetAccount.endpoint().render(&[code]))
}

fn check_view(check: &Option<Check>) -> (Option<String>, Option<String>) {
    match check {
        Some(c) => (Some(c.code.clone()), Some(c.message.clone())),
        None => (Some(String::new()), None),
    }
}

/// The card type shown for a stored brand code.
fn card_type(code: Option<&str>) -> Option<String> {
    use rebill_billing::card::Brand;
    code.map(|code| Brand::from_code(code).unwrap_or(Brand::Unknown).display_name().to_owned())
}

fn transaction_error(failure: &TransactionFailure) -> TransactionError {
    TransactionError {
        error_code: Some(failure.error_code.clone()),
        error_category: Some(failure.error_category.clone()),
        merchant_message: Some(failure.merchant_message.clone()),
        customer_message: Some(failure.customer_message.clone()),
        gateway_error_code: failure.gateway_error_code.clone(),
    }
}

fn invoice_href(number: i64) -> Href {
    Href::path(EndpointId::GetInvoice.endpoint().render(&[&number.to_string()]))
}

/// A stored transaction as the API shows it at `now` (site clock): `voidable` and `refundable`
/// (with the `refund` anchor) as giving it back would decide ([`rebill_app::money_back::refunds::give_back_flags`]:
/// an unsettled purchase is voidable, a purchase with money left refundable).
pub(crate) fn transaction_view(t: &Transaction, now: i64) -> View {
    let n = &t.new;
    let r = &t.result;
    let f = &n.billing;
    let card = n.kind == PaymentKind::CreditCard;
    let (voidable, refundable) = rebill_app::money_back::refunds::give_back_flags(t, now);
    // An offline payment's type is its payment method (check, wire_transfer, …); no gateway.
    let offline = rebill_app::collection::offline_payments::is_offline(t);
    let (cvv_code, cvv_message) = check_view(&r.cvv);
    let (avs_code, avs_message) = check_view(&r.avs);
    let href = Href::path(EndpointId::GetTransaction.endpoint().render(&[&t.uuid]));
    View {
        kind: Some(if offline { n.payment_method.clone() } else { n.kind.as_str().to_owned() }),
        account_href: Some(account_href(&n.account.account_code)),
        invoice: t.invoice_number.map(invoice_href),
        original_transaction: t
            .original_transaction_uuid
            .as_ref()
            .map(|u| Href::path(EndpointId::GetTransaction.endpoint().render(&[u]))),
        subscription: n
            .subscription_uuid
            .as_ref()
            .map(|u| Href::path(EndpointId::GetSubscription.endpoint().render(&[u]))),
        uuid: Some(t.uuid.clone()),
        action: Some(
            TransactionAction::from_name(&n.action).unwrap_or_else(|| TransactionAction::Unknown(n.action.clone())),
        ),
        amount_in_cents: Some(n.amount),
        tax_in_cents: Some(n.tax),
        currency: Some(n.currency.clone()),
        status: Some(match r.status {
            TransactionStatus::Processing => ViewStatus::Processing,
            TransactionStatus::Success => ViewStatus::Success,
            TransactionStatus::Declined => ViewStatus::Declined,
            TransactionStatus::Void => ViewStatus::Void,
        }),
        payment_method: Some(n.payment_method.clone()),
        reference: r.reference.clone(),
        source: Some(
            TransactionSource::from_name(&n.source).unwrap_or_else(|| TransactionSource::Unknown(n.source.clone())),
        ),
        recurring: Some(n.recurring),
        test: Some(n.test),
        voidable: Some(voidable),
        refundable: Some(refundable),
        ip_address: f.ip_address.clone(),
        gateway_type: (!offline).then(|| n.gateway_type.clone()),
        origin: Some(
            TransactionOrigin::from_name(&n.origin).unwrap_or_else(|| TransactionOrigin::Unknown(n.origin.clone())),
        ),
        description: n.description.clone(),
        message: r.message.clone(),
        approval_code: r.approval_code.clone(),
        failure_type: r.failure.as_ref().map(|_| "declined".to_owned()),
        gateway_error_codes: r.failure.as_ref().and_then(|f| f.gateway_error_code.clone()),
        cvv_result: Some(Box::new(CvvResult { code: cvv_code, message: cvv_message })),
        avs_result: Some(Box::new(AvsResult { code: avs_code, message: avs_message })),
        created_at: time(t.created_at),
        collected_at: r.collected_at.and_then(time),
        updated_at: time(t.updated_at),
        details: Some(Box::new(TransactionDetails {
            account: Some(Box::new(TransactionAccount {
                account_code: Some(n.account.account_code.clone()),
                first_name: n.account.first_name.clone(),
                last_name: n.account.last_name.clone(),
                company: n.account.company.clone(),
                email: n.account.email.clone(),
                billing_info: Some(Box::new(TransactionBillingInfo {
                    kind: Some(if card { BillingInfoType::CreditCard } else { BillingInfoType::BankAccount }),
                    first_name: f.first_name.clone(),
                    last_name: f.last_name.clone(),
                    address1: f.address1.clone(),
                    address2: f.address2.clone(),
                    city: f.city.clone(),
                    state: f.state.clone(),
                    zip: f.zip.clone(),
                    country: f.country.clone(),
                    phone: f.phone.clone(),
                    vat_number: f.vat_number.clone(),
                    card_type: if card { card_type(f.card_type.as_deref()) } else { None },
                    year: f.year.filter(|_| card),
                    month: f.month.filter(|_| card),
                    first_six: f.first_six.clone().filter(|_| card),
                    last_four: f.last_four.clone(),
                })),
            })),
        })),
        transaction_error: r.failure.as_ref().map(|f| Box::new(transaction_error(f))),
        fraud_info: r.fraud_review.then(|| {
            Box::new(FraudInfo { score: None, decision: Some("review".to_owned()), reference: r.reference.clone() })
        }),
        refund_action: refundable.then_some(href),
        ..View::default()
    }
}

/// A credit payment as the API shows it. It has no root `type` attribute (as the captured
/// responses of the original show it; `action` says what it did).
pub(crate) fn credit_payment_view(p: &CreditPayment) -> CreditPaymentView {
    CreditPaymentView {
        kind: None,
        account: Some(account_href(&p.account_code)),
        original_invoice: Some(invoice_href(p.original_invoice_number)),
        applied_to_invoice: p.applied_to_invoice_number.map(invoice_href),
        original_credit_payment: p
            .original_credit_payment_uuid
            .as_ref()
            .map(|u| Href::path(EndpointId::GetCreditPayment.endpoint().render(&[u]))),
        refund_transaction: p
            .refund_transaction_uuid
            .as_ref()
            .map(|u| Href::path(EndpointId::GetTransaction.endpoint().render(&[u]))),
        uuid: Some(p.uuid.clone()),
        action: Some(match p.action {
            CreditPaymentAction::Payment => ViewCreditPaymentAction::Payment,
            CreditPaymentAction::Reduction => ViewCreditPaymentAction::Reduction,
            CreditPaymentAction::Refund => ViewCreditPaymentAction::Refund,
            CreditPaymentAction::WriteOff => ViewCreditPaymentAction::WriteOff,
        }),
        currency: Some(p.currency.clone()),
        amount_in_cents: Some(p.amount),
        created_at: time(p.created_at),
        updated_at: time(p.updated_at),
        voided_at: p.voided_at.and_then(time),
    }
}

/// Where a decline's field error points: the security code's element and the request's base.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DeclineFields<'a> {
    /// e.g. `transaction.account.billing_info.verification_value`.
    pub verification_value: &'a str,
    /// e.g. `transaction.base`.
    pub base: &'a str,
}

/// The 422 transaction error document of a declined transaction (wire-format §4.3): the
/// `<transaction_error>`, one field error (`declined_bad` "did not match" on the security code
/// for CVV declines, `declined` with the customer message on `fields.base` otherwise) and the
/// declined transaction.
pub(crate) fn decline_document(transaction: &Transaction, fields: DeclineFields<'_>) -> Errors {
    let failure = transaction.result.failure.clone().unwrap_or_default();
    let field_error = if matches!(failure.error_code.as_str(), "fraud_security_code" | "declined_security_code") {
        XmlFieldError {
            field: Some(fields.verification_value.to_owned()),
            symbol: Some("declined_bad".into()),
            lang: Some("en-US".into()),
            message: Some("did not match".into()),
        }
    } else {
        XmlFieldError {
            field: Some(fields.base.to_owned()),
            symbol: Some("declined".into()),
            lang: Some("en-US".into()),
            message: Some(failure.customer_message.clone()),
        }
    };
    Errors {
        transaction_error: Some(Box::new(transaction_error(&failure))),
        errors: Some(vec![field_error]),
        transaction: Some(Box::new(transaction_view(transaction, transaction.updated_at))),
    }
}

/// [`decline_document`] as a 422 response.
pub(crate) fn decline_response(ctx: &WireContext, transaction: &Transaction, fields: DeclineFields<'_>) -> Response {
    respond::resource(StatusCode::UNPROCESSABLE_ENTITY, &decline_document(transaction, fields), ctx)
}

/// The answer to a refused `<billing_info>`: 422 field errors (below `billing_info.`),
/// `token_invalid`, or a 500 that tells nothing of the cause.
pub(crate) fn payment_method_error(ctx: &WireContext, error: &PaymentMethodError) -> Response {
    let one = |field: String, message: &str| {
        let violation = Violation { field, symbol: "invalid", message: message.to_owned() };
        respond::rejection(&Rejection::Invalid(errors_document(&[violation])), ctx)
    };
    match error {
        PaymentMethodError::InvalidCurrency => {
            one("billing_info.currency".into(), "is not a 3-letter ISO 4217 currency code")
        }
        PaymentMethodError::Unsupported(element) => {
            one(format!("billing_info.{element}"), "is not supported: billing info holds a card or a bank account")
        }
        PaymentMethodError::Fields(errors) => {
            let violations: Vec<Violation> = errors
                .iter()
                .map(|e| Violation {
                    field: format!("billing_info.{}", e.field.billing_info_element()),
                    symbol: e.problem.symbol(),
                    message: e.problem.message(),
                })
                .collect();
            respond::rejection(&Rejection::Invalid(errors_document(&violations)), ctx)
        }
        PaymentMethodError::TokenInvalid => respond::error(
            StatusCode::UNPROCESSABLE_ENTITY,
            "token_invalid",
            "The token is invalid, has expired or has already been used (tokens live 20 minutes and work once).",
        ),
        PaymentMethodError::NotStored(_) | PaymentMethodError::Store(_) => respond::internal(error),
    }
}

/// The answer to a billing info that was not saved: the declined verification's 422
/// transaction error document, or [`payment_method_error`].
pub(crate) fn refusal_response(ctx: &WireContext, refusal: &Refusal) -> Response {
    match refusal {
        Refusal::Declined { transaction, .. } => {
            let fields =
                DeclineFields { verification_value: "billing_info.verification_value", base: "billing_info.base" };
            decline_response(ctx, transaction, fields)
        }
        Refusal::Failed(error) => payment_method_error(ctx, error),
    }
}

/// A shipping address of the account `account_code` as the API shows it.
pub(crate) fn shipping_address_view(
    account_code: &str,
    address: &rebill_app::platform::model::shipping_addresses::ShippingAddress,
) -> rebill_models::ShippingAddress {
    let f = &address.fields;
    let path = EndpointId::GetShippingAddress.endpoint().render(&[account_code, &address.id.to_string()]);
    rebill_models::ShippingAddress {
        account_code: Some(account_code.to_owned()),
        account: Some(account_href(account_code)),
        subscriptions: Some(Href::path(format!("{path}/subscriptions"))),
        id: Some(address.id),
        nickname: f.nickname.clone(),
        first_name: f.first_name.clone(),
        last_name: f.last_name.clone(),
        company: f.company.clone(),
        phone: f.phone.clone(),
        email: f.email.clone(),
        vat_number: f.vat_number.clone(),
        address1: f.address1.clone(),
        address2: f.address2.clone(),
        city: f.city.clone(),
        state: f.state.clone(),
        zip: f.zip.clone(),
        country: f.country.clone(),
        geo_code: f.geo_code.clone(),
        created_at: time(address.created_at),
        updated_at: time(address.updated_at),
    }
}

/// The shipping address a request body names: an existing one (`shipping_address_id`) or a new
/// one (a nested `shipping_address`); both at once are refused on
/// `{field}shipping_address_id` (`field`: the prefix of the body's fields, e.g. `adjustment.`).
/// The refusal is the answer itself, as with the other request readers.
#[allow(clippy::result_large_err)]
pub(crate) fn shipping_choice(
    ctx: &WireContext,
    field: &str,
    id: Option<i64>,
    new: Option<&rebill_models::ShippingAddress>,
) -> Result<Option<ShippingChoice>, Response> {
    match (id, new) {
        (Some(_), Some(_)) => Err(respond::field_error(
            ctx,
            &format!("{field}shipping_address_id"),
            "invalid",
            "can't be sent together with shipping_address",
        )),
        (Some(id), None) => Ok(Some(ShippingChoice::Existing(id))),
        (None, Some(address)) => Ok(Some(ShippingChoice::New(Box::new(shipping_fields(address))))),
        (None, None) => Ok(None),
    }
}

/// The values a `<shipping_address>` request sets.
pub(crate) fn shipping_fields(
    doc: &rebill_models::ShippingAddress,
) -> rebill_app::platform::model::shipping_addresses::ShippingFields {
    rebill_app::platform::model::shipping_addresses::ShippingFields {
        nickname: doc.nickname.clone(),
        first_name: doc.first_name.clone(),
        last_name: doc.last_name.clone(),
        company: doc.company.clone(),
        email: doc.email.clone(),
        phone: doc.phone.clone(),
        vat_number: doc.vat_number.clone(),
        address1: doc.address1.clone(),
        address2: doc.address2.clone(),
        city: doc.city.clone(),
        state: doc.state.clone(),
        zip: doc.zip.clone(),
        country: doc.country.clone(),
        geo_code: doc.geo_code.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rebill_app::platform::model::billing_info::BillingFields;
    use rebill_app::platform::model::invoicing::{AccountSnapshot, NewTransaction, TransactionResult};

    fn transaction(action: &str, status: TransactionStatus) -> Transaction {
        Transaction {
            id: 1,
            uuid: "u1".into(),
            site_id: 1,
            invoice_number: None,
            new: NewTransaction {
                idempotency_key: "k".into(),
                payment_reference: None,
                account_id: 7,
                invoice_id: None,
                subscription_uuid: None,
                action: action.into(),
                amount: 100,
                tax: 0,
                currency: "USD".into(),
                kind: PaymentKind::CreditCard,
                payment_method: "credit_card".into(),
                source: "transaction".into(),
                origin: "api".into(),
                recurring: false,
                test: true,
                gateway_type: "test".into(),
                description: None,
                original_transaction_id: None,
                account: AccountSnapshot { account_code: "a1".into(), ..AccountSnapshot::default() },
                billing: BillingFields::default(),
            },
            result: TransactionResult {
                status,
                reference: None,
                approval_code: None,
                message: None,
                fraud_review: false,
                failure: None,
                cvv: None,
                avs: None,
                collected_at: None,
            },
            original_transaction_uuid: None,
            refunded: 0,
            created_at: 0,
            updated_at: 0,
        }
    }

    /// A day after the transactions of these tests (made at 0): they have settled.
    const SETTLED: i64 = 86_400;

    #[test]
    fn an_approved_purchase_is_voidable_until_it_settles_and_never_once_refunded() {
        let t = transaction("purchase", TransactionStatus::Success);
        let view = transaction_view(&t, SETTLED - 1);
        assert_eq!((view.voidable, view.refundable, view.refund_action.is_some()), (Some(true), Some(true), true));
        let view = transaction_view(&t, SETTLED);
        assert_eq!((view.voidable, view.refundable), (Some(false), Some(true)), "settled at midnight UTC");
        let mut part = t.clone();
        part.refunded = 1;
        assert_eq!(transaction_view(&part, 0).voidable, Some(false), "a partial refund: refunds only");
        let mut voided = t;
        voided.result.status = TransactionStatus::Void;
        let view = transaction_view(&voided, 0);
        assert_eq!((view.voidable, view.refundable, view.refund_action.is_some()), (Some(false), Some(false), false));
    }

    #[test]
    fn only_an_approved_purchase_is_refundable() {
        use TransactionStatus::{Declined, Processing, Success, Void};
        for (action, status, expected) in [
            ("purchase", Success, true),
            ("purchase", Declined, false),
            ("purchase", Void, false),
            ("purchase", Processing, false),
            ("verify", Success, false),
            ("verify", Declined, false),
            ("authorization", Success, false),
            ("refund", Success, false),
        ] {
            let view = transaction_view(&transaction(action, status), SETTLED);
            assert_eq!(view.refundable, Some(expected), "{action} {status:?}");
            assert_eq!(view.refund_action.is_some(), expected, "{action} {status:?}: refund anchor");
            assert_eq!(view.voidable, Some(false), "{action} {status:?}");
        }
    }

    #[test]
    fn a_purchase_given_back_in_full_is_not_refundable_and_a_refund_links_its_purchase() {
        let mut t = transaction("purchase", TransactionStatus::Success);
        t.refunded = 40;
        assert_eq!(transaction_view(&t, SETTLED).refundable, Some(true), "60 of 100 left");
        t.refunded = 100;
        let view = transaction_view(&t, SETTLED);
        assert_eq!((view.refundable, view.refund_action.is_some()), (Some(false), false));
        assert_eq!(view.original_transaction, None);
        let mut refund = transaction("refund", TransactionStatus::Success);
        refund.original_transaction_uuid = Some("p1".into());
        let ctx = WireContext::new(rebill_xml::ApiVersion::V2_11, rebill_xml::Features::none(), "http://h");
        let body = rebill_xml::to_xml(&transaction_view(&refund, SETTLED), &ctx, rebill_xml::Mode::Response);
        assert!(body.contains("<original_transaction href=\"http://h/v2/transactions/p1\"/>"), "{body}");
    }

    #[test]
    fn a_credit_payment_links_its_invoices_and_has_no_type_attribute() {
        let payment = CreditPayment {
            id: 1,
            uuid: "cp1".into(),
            site_id: 1,
            account_id: 3,
            account_code: "a1".into(),
            action: CreditPaymentAction::Payment,
            currency: "USD".into(),
            amount: 1200,
            original_invoice_id: 5,
            original_invoice_number: 1001,
            applied_to_invoice_id: Some(6),
            applied_to_invoice_number: Some(1002),
            original_credit_payment_uuid: None,
            refund_transaction_uuid: None,
            created_at: 1_800_000_000,
            updated_at: 1_800_000_000,
            voided_at: None,
        };
        let ctx = WireContext::new(rebill_xml::ApiVersion::V2_10, rebill_xml::Features::none(), "http://h");
        let body = rebill_xml::to_xml(&credit_payment_view(&payment), &ctx, rebill_xml::Mode::Response);
        for expected in [
            "<credit_payment href=\"http://h/v2/credit_payments/cp1\">",
            "<account href=\"http://h/v2/accounts/a1\"/>",
            "<original_invoice href=\"http://h/v2/invoices/1001\"/>",
            "<applied_to_invoice href=\"http://h/v2/invoices/1002\"/>",
            "<uuid>cp1</uuid>",
            "<action>payment</action>",
            "<currency>USD</currency>",
            "<amount_in_cents type=\"integer\">1200</amount_in_cents>",
            "<created_at type=\"datetime\">2027-01-15T08:00:00Z</created_at>",
            "<voided_at type=\"datetime\" nil=\"nil\"></voided_at>",
        ] {
            assert!(body.contains(expected), "{expected} in {body}");
        }
        assert!(!body.contains("<original_credit_payment") && !body.contains("<refund_transaction"), "{body}");
    }
}
