//! Endpoint handlers, thin over the use cases: each reads its request, calls the domain, writes
//! the response. `handle` answers `None` for an endpoint not built yet (the caller makes that a
//! 501).
//!
//! The table below binds each built endpoint's id to its handler through the marker type of the
//! same name (`EndpointId::CreateAccount` → `Routed<api::CreateAccount>`), so a handler receives
//! a call typed by its table entry: it can decode only the request body the table names and
//! answer only its response body (see [`Routed`]). A handler written for other body types does
//! not compile.

use axum::extract::Request;
use axum::response::Response;
use rebill_app::collection::settlement::Settlement;
use rebill_models::api::{self, EndpointId};

use crate::request::{Call, Routed};
use crate::state::AppState;
use crate::{
    accounts, billing_info, coupons, gift_cards, invoices, payments, plans, purchases, respond, shipping_addresses,
    subscriptions,
};
use rebill_billing::lifecycle::Action;

/// The built endpoints and their handlers: `Id(call) => handler`, where `call` is the request's
/// `&Routed<api::Id>`; also gives [`BUILT`].
macro_rules! handlers {
    ($state:ident, $call:ident, $request:ident, $query:ident; $($id:ident($c:ident) => $handler:expr,)*) => {
        /// The endpoints built (any other answers 501).
        #[cfg(test)]
        pub(crate) const BUILT: &[EndpointId] = &[$(EndpointId::$id,)*];

        pub(crate) async fn handle($state: &AppState, $call: Call, $request: Request) -> Option<Response> {
            // Only the owned request may be held across an await (a body is not `Sync`).
            let query = $request.uri().query().map(str::to_owned);
            let $query = query.as_deref();
            Some(match $call.id {
                $(EndpointId::$id => match Routed::<api::$id>::bind(&$call) {
                    Some(routed) => {
                        let $c = &routed;
                        // Each handler's future on the heap at its own size: held inline,
                        // every request's future would be as large as the largest handler's
                        // (tens of kilobytes, allocated and copied on every request).
                        Box::pin($handler).await
                    }
                    None => respond::invariant(&format!("{} routed as {}", $call.endpoint.name, stringify!($id))),
                },)*
                // Every endpoint of the table is built today; one added to the table before its
                // handler is written answers 501 through this arm.
                #[allow(unreachable_patterns)]
                _ => return None,
            })
        }
    };
}

handlers! { state, call, request, query;
    ListAccounts(c) => accounts::list(state, c, query),
    CreateAccount(c) => accounts::create(state, c, request),
    GetAccount(c) => accounts::get(state, c),
    UpdateAccount(c) => accounts::update(state, c, request),
    CloseAccount(c) => accounts::close(state, c),
    ReopenAccount(c) => accounts::reopen(state, c),
    GetAccountBalance(c) => accounts::balance(state, c),

    GetBillingInfo(c) => billing_info::get(state, c),
    UpdateBillingInfo(c) => billing_info::update(state, c, request),
    DeleteBillingInfo(c) => billing_info::delete(state, c),
    VerifyCvv(c) => billing_info::verify_cvv(state, c, request),

    ListPlans(c) => plans::list(state, c, query),
    CreatePlan(c) => plans::create(state, c, request),
    GetPlan(c) => plans::get(state, c),
    UpdatePlan(c) => plans::update(state, c, request),
    DeletePlan(c) => plans::delete(state, c),
    ListAddOns(c) => plans::list_add_ons(state, c, query),
    CreateAddOn(c) => plans::create_add_on(state, c, request),
    GetAddOn(c) => plans::get_add_on(state, c),
    UpdateAddOn(c) => plans::update_add_on(state, c, request),
    DeleteAddOn(c) => plans::delete_add_on(state, c),

    ListInvoices(c) => invoices::list_invoices(state, c, query, None),
    ListAccountInvoices(c) => invoices::list_account_invoices(state, c, query),
    GetInvoice(c) => invoices::get_invoice(state, c, invoices::pdf_locale(&request)),
    CreateInvoice(c) => invoices::create_invoice(state, c, request, false),
    PreviewInvoice(c) => invoices::create_invoice(state, c, request, true),
    MarkInvoiceSuccessful(c) => invoices::mark_successful(state, c),
    MarkInvoiceFailed(c) => invoices::settle_invoice(state, c, Settlement::Failed),
    CollectInvoice(c) => invoices::settle_invoice(state, c, Settlement::Collect),
    RefundInvoice(c) => invoices::refund_invoice(state, c, request),
    VoidInvoice(c) => invoices::void_invoice(state, c),
    ListOriginalInvoices(c) => invoices::list_original_invoices(state, c, query),
    ListCreditInvoices(c) => invoices::list_credit_invoices(state, c, query),
    ListCreditAdjustments(c) => invoices::list_credit_adjustments(state, c, query),
    ListCreditPayments(c) => invoices::list_credit_payments(state, c, query, None),
    ListAccountCreditPayments(c) => invoices::list_account_credit_payments(state, c, query),
    GetCreditPayment(c) => invoices::get_credit_payment(state, c),
    ListAccountAdjustments(c) => invoices::list_adjustments(state, c, query),
    CreateAdjustment(c) => invoices::create_adjustment(state, c, request),
    GetAdjustment(c) => invoices::get_adjustment(state, c),
    DeleteAdjustment(c) => invoices::delete_adjustment(state, c),
    ListTransactions(c) => invoices::list_transactions(state, c, query, None),
    ListAccountTransactions(c) => invoices::list_account_transactions(state, c, query),
    GetTransaction(c) => invoices::get_transaction(state, c),
    RefundTransaction(c) => invoices::refund_transaction(state, c, query),
    CreateTransaction(c) => invoices::create_transaction(state, c, request),
    CreateOfflinePayment(c) => payments::create_offline_payment(state, c, request),

    ListSubscriptions(c) => subscriptions::list(state, c, query, None),
    ListAccountSubscriptions(c) => subscriptions::list_account_subscriptions(state, c, query),
    CreateSubscription(c) => subscriptions::create(state, c, request, false),
    CreateAccountSubscription(c) => subscriptions::create(state, c, request, false),
    PreviewSubscription(c) => subscriptions::create(state, c, request, true),
    GetSubscription(c) => subscriptions::get(state, c),
    UpdateSubscription(c) => subscriptions::update(state, c, request, false),
    PreviewSubscriptionChange(c) => subscriptions::update(state, c, request, true),
    CancelSubscription(c) => subscriptions::simple_action(state, c, Action::Cancel),
    ReactivateSubscription(c) => subscriptions::simple_action(state, c, Action::Reactivate),
    ResumeSubscription(c) => subscriptions::simple_action(state, c, Action::Resume),
    TerminateSubscription(c) => subscriptions::terminate(state, c, query),
    PostponeSubscription(c) => subscriptions::postpone(state, c, query),
    UpdateSubscriptionNotes(c) => subscriptions::notes(state, c, request),
    PauseSubscription(c) => subscriptions::pause(state, c, request),

    ListShippingAddresses(c) => shipping_addresses::list(state, c, query),
    CreateShippingAddress(c) => shipping_addresses::create(state, c, request),
    GetShippingAddress(c) => shipping_addresses::get(state, c),
    UpdateShippingAddress(c) => shipping_addresses::update(state, c, request),
    DeleteShippingAddress(c) => shipping_addresses::delete(state, c),
    ListGiftCards(c) => gift_cards::list(state, c, query),
    CreateGiftCard(c) => gift_cards::create(state, c, request),
    PreviewGiftCard(c) => gift_cards::preview(state, c, request),
    GetGiftCard(c) => gift_cards::get(state, c),
    RedeemGiftCard(c) => gift_cards::redeem(state, c, request),
    ListCoupons(c) => coupons::list(state, c, query),
    CreateCoupon(c) => coupons::create(state, c, request),
    GetCoupon(c) => coupons::get(state, c),
    UpdateCoupon(c) => coupons::update(state, c, request),
    DeleteCoupon(c) => coupons::delete(state, c),
    RestoreCoupon(c) => coupons::restore(state, c, request),
    GenerateCouponCodes(c) => coupons::generate(state, c, request),
    ListUniqueCouponCodes(c) => coupons::list_unique_codes(state, c, query),
    RedeemCoupon(c) => coupons::redeem(state, c, request),
    ListCouponRedemptions(c) => coupons::list_coupon_redemptions(state, c, query),
    ListAccountRedemptions(c) => coupons::list_account_redemptions(state, c, query),
    GetAccountRedemption(c) => coupons::get_account_redemption(state, c),
    DeleteAccountRedemption(c) => coupons::delete_account_redemption(state, c),
    ListInvoiceRedemptions(c) => coupons::list_invoice_redemptions(state, c, query),
    ListSubscriptionRedemptions(c) => coupons::list_subscription_redemptions(state, c, query),
    CreatePurchase(c) => purchases::create(state, c, request, purchases::Kind::Purchase),
    PreviewPurchase(c) => purchases::create(state, c, request, purchases::Kind::Preview),
    AuthorizePurchase(c) => purchases::create(state, c, request, purchases::Kind::Authorize),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_endpoint_of_the_table_is_built() {
        let missing: Vec<&EndpointId> = EndpointId::ALL.iter().filter(|id| !BUILT.contains(id)).collect();
        assert!(missing.is_empty(), "not built: {missing:?}");
        let mut seen = BUILT.to_vec();
        seen.sort_by_key(|id| id.endpoint().name);
        seen.dedup();
        assert_eq!(seen.len(), BUILT.len(), "an endpoint has two handlers");
    }

    /// The endpoint modules write and read bodies only through [`Routed`], whose types are the
    /// table's: none calls the untyped writers or the XML reader itself.
    #[test]
    fn endpoint_modules_use_only_typed_bodies() {
        let modules = [
            ("accounts.rs", include_str!("accounts.rs")),
            ("billing_info.rs", include_str!("billing_info.rs")),
            ("gift_cards.rs", include_str!("gift_cards.rs")),
            ("coupons.rs", include_str!("coupons.rs")),
            ("invoices.rs", include_str!("invoices.rs")),
            ("payments.rs", include_str!("payments.rs")),
            ("plans.rs", include_str!("plans.rs")),
            ("purchases.rs", include_str!("purchases.rs")),
            ("subscriptions.rs", include_str!("subscriptions.rs")),
            ("shipping_addresses.rs", include_str!("shipping_addresses.rs")),
        ];
        for (name, source) in modules {
            for untyped in ["respond::resource(", "resource(StatusCode", "page_response(", "from_xml", "to_xml("] {
                assert!(!source.contains(untyped), "{name} calls {untyped}");
            }
        }
    }
}
