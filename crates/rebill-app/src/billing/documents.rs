//! Invoice documents: the PDF of an invoice ([`invoice_pdf`]) in a [`Locale`], laid out by
//! `rebill-pdf` from what the invoice, its lines, its payments, its account and its site hold.
//!
//! - **Kind**: a charge invoice (payment terms, due date), a credit invoice (the charge
//!   invoice it credits) or a legacy refund invoice (the invoice it refunds); a legacy invoice
//!   that refunds nothing is shown as a charge invoice.
//! - **Bill to**: the billing info's name, company, address and VAT number when the invoice is
//!   collected automatically (the payment method's owner), the account's otherwise (manual
//!   invoices, or no billing info), with the account's e-mail.
//! - **Payments**: the successful transactions of the invoice, each named by its payment method
//!   ("Visa ending in 1111", "Bank account ending in 6789"; refunds negative), and its credit
//!   payments not voided: "Credit from invoice #1005" on the invoice the credit paid, "Credit
//!   applied to invoice #1003" on the credit invoice it came from; in time order.
//! - **Totals**: subtotal, discount, tax, total; then what settled it, each when not zero — on a
//!   charge invoice the credit applied and written off (its credit payments) and the rest of what
//!   was paid (transactions); on a credit or refund invoice the credit applied elsewhere, voided
//!   and written off (its credit payments) and the rest of what left it (refunds to the payment
//!   method); the balance.
//! - **Notes**: customer notes, terms and conditions and VAT reverse-charge notes, those set.
//! - Sandbox sites' invoices carry the "TEST INVOICE" watermark.

use rebill_billing::states::{InvoiceState, TransactionStatus};
pub use rebill_pdf::{DocumentKind, Locale};
use rebill_pdf::{
    DocumentState, InvoiceDocument, Line, Notes, OfflineMethod, Payment, PaymentMethod, PaymentSource, Totals,
};
use rebill_store::Mode;
use rebill_store::accounts::Account;
use rebill_store::billing_info::{BillingInfo, PaymentKind};
use rebill_store::credits::{CreditPayment, CreditPaymentAction};
use rebill_store::invoices::{CollectionMethod, Invoice, InvoiceKind};

use crate::billing::queries::{self, InvoiceDetails, ReadError};
use crate::platform::error::Missing;
use crate::{Context, Services, time};

/// The PDF of the site's invoice `number`, written in `locale`.
pub async fn invoice_pdf(
    services: &Services,
    ctx: &Context,
    number: &str,
    locale: Locale,
) -> Result<Vec<u8>, ReadError> {
    let invoice = queries::invoice(services, ctx, number).await?;
    let details = queries::invoice_details(services, &invoice).await?;
    let account = services
        .store
        .account(ctx.site.id, &invoice.account_code)
        .await?
        .ok_or_else(|| Missing::account(&invoice.account_code))?;
    let billing = services.store.billing_info(account.id).await?;
    let credit_payments = services.store.invoice_credit_payments(invoice.id).await?;
    let sources = Sources {
        site_name: &ctx.site.name,
        test: ctx.site.mode == Mode::Sandbox,
        invoice: &invoice,
        details: &details,
        account: &account,
        billing: billing.as_ref(),
        credit_payments: &credit_payments,
    };
    Ok(rebill_pdf::render(&document(&sources), locale))
}

/// Everything an invoice's PDF is made from.
#[derive(Debug, Clone)]
pub struct Sources<'a> {
    pub site_name: &'a str,
    /// A sandbox site's invoice.
    pub test: bool,
    pub invoice: &'a Invoice,
    pub details: &'a InvoiceDetails,
    pub account: &'a Account,
    pub billing: Option<&'a BillingInfo>,
    /// The credit payments applied to the invoice or made from its credit (voided ones are
    /// left out here).
    pub credit_payments: &'a [CreditPayment],
}

/// The kind of document `invoice` is, with the invoice it refers to.
fn kind(invoice: &Invoice) -> DocumentKind {
    let original = invoice.original_invoice_number.map(|n| n.to_string());
    match invoice.kind {
        InvoiceKind::Charge => DocumentKind::Charge,
        InvoiceKind::Credit => DocumentKind::Credit { credited_invoices: original.into_iter().collect() },
        InvoiceKind::Legacy if original.is_some() || invoice.amounts.total < 0 => {
            DocumentKind::LegacyRefund { refunded_invoice: original }
        }
        InvoiceKind::Legacy => DocumentKind::Charge,
    }
}

/// What the PDF shows of the invoice of `sources`.
pub fn document(sources: &Sources<'_>) -> InvoiceDocument {
    let Sources { site_name, test, invoice, details, account, billing, credit_payments } = sources;
    let at = |secs: i64| time(secs).unwrap_or_default();
    let a = &invoice.amounts;
    let terms = &invoice.terms;
    let set = |text: &Option<String>| text.as_ref().filter(|t| !t.trim().is_empty()).cloned();
    let kind = kind(invoice);
    let charge = kind == DocumentKind::Charge;

    let mut payments: Vec<(i64, Payment)> = details
        .transactions
        .iter()
        .filter(|t| t.status() == TransactionStatus::Success)
        .filter_map(|t| {
            let sign = match t.new.action.as_str() {
                "purchase" => 1,
                "refund" => -1,
                _ => return None,
            };
            let when = t.result.collected_at.unwrap_or(t.created_at);
            let method = payment_method(
                &t.new.payment_method,
                t.new.kind,
                t.new.billing.card_type.as_deref(),
                t.new.billing.last_four.as_deref(),
            );
            Some((
                when,
                Payment {
                    date: at(when),
                    source: PaymentSource::Transaction(method),
                    amount_in_cents: sign * t.new.amount,
                },
            ))
        })
        .collect();

    // What the credit payments settled, by action (a refund of credit went through a transaction
    // and is part of the rest, below). Each is listed when it links this invoice to another.
    let (mut applied, mut voided, mut written_off) = (0_i64, 0_i64, 0_i64);
    let this = invoice.invoice_number;
    for cp in credit_payments.iter().filter(|cp| cp.voided_at.is_none()) {
        let row = match cp.action {
            CreditPaymentAction::Payment => Some(&mut applied),
            CreditPaymentAction::Reduction => Some(&mut voided),
            CreditPaymentAction::WriteOff => Some(&mut written_off),
            CreditPaymentAction::Refund => None,
        };
        if let Some(row) = row {
            *row = row.saturating_add(cp.amount);
        }
        let (from, to) = (cp.original_invoice_number, cp.applied_to_invoice_number);
        let source = match to {
            Some(to) if to == this && from != this => PaymentSource::Credit { invoice_number: from.to_string() },
            Some(to) if from == this && to != this => PaymentSource::CreditUsed { invoice_number: to.to_string() },
            _ => continue,
        };
        payments.push((cp.created_at, Payment { date: at(cp.created_at), source, amount_in_cents: cp.amount }));
    }
    // The rest of what the invoice records as paid (negative on a credit or refund invoice)
    // went through transactions: collected, or refunded to the payment method.
    let by_credit = applied.saturating_add(voided).saturating_add(written_off);
    let (paid, refunded) = if charge {
        (a.paid.saturating_sub(by_credit).max(0), 0)
    } else {
        (0, a.paid.saturating_neg().saturating_sub(by_credit).max(0))
    };
    let totals = Totals {
        subtotal_in_cents: a.subtotal_before_discount,
        discount_in_cents: a.discount,
        tax_in_cents: a.tax,
        total_in_cents: a.total,
        paid_in_cents: paid,
        credit_applied_in_cents: applied,
        payment_refund_in_cents: refunded,
        credit_voided_in_cents: voided,
        write_off_in_cents: written_off,
        balance_in_cents: a.balance,
    };
    payments.sort_by_key(|(when, _)| *when);

    InvoiceDocument {
        site_name: site_name.to_string(),
        invoice_number: invoice.invoice_number.to_string(),
        kind,
        state: document_state(invoice.state),
        created_at: at(invoice.created_at),
        due_on: invoice.due_on.filter(|_| charge).map(at),
        net_terms: charge.then_some(terms.net_terms),
        po_number: terms.po_number.clone(),
        currency: invoice.currency.clone(),
        bill_to: bill_to(invoice, account, *billing),
        lines: details
            .lines
            .iter()
            .map(|adjustment| {
                let line = &adjustment.line;
                Line {
                    date: at(line.start_date.unwrap_or(adjustment.created_at)),
                    description: line.description.clone().unwrap_or_default(),
                    quantity: line.quantity,
                    unit_amount_in_cents: line.unit_amount,
                    total_in_cents: line.total,
                }
            })
            .collect(),
        totals,
        payments: payments.into_iter().map(|(_, p)| p).collect(),
        notes: Notes {
            customer_notes: set(&terms.customer_notes),
            terms_and_conditions: set(&terms.terms_and_conditions),
            vat_reverse_charge_notes: set(&terms.vat_reverse_charge_notes),
        },
        test: *test,
    }
}

fn document_state(state: InvoiceState) -> DocumentState {
    match state {
        InvoiceState::Pending => DocumentState::Pending,
        InvoiceState::Processing => DocumentState::Processing,
        InvoiceState::PastDue => DocumentState::PastDue,
        InvoiceState::Paid => DocumentState::Paid,
        InvoiceState::Failed => DocumentState::Failed,
        InvoiceState::Open => DocumentState::Open,
        InvoiceState::Closed => DocumentState::Closed,
        InvoiceState::Voided => DocumentState::Voided,
    }
}

/// A transaction's payment method: a payment entered as made outside the service by its method
/// (its transaction's `payment_method`: check, wire transfer, …), else by its brand ("Visa",
/// "Mastercard") or kind, and last four digits.
fn payment_method(method: &str, kind: PaymentKind, card_type: Option<&str>, last_four: Option<&str>) -> PaymentMethod {
    let offline = match method {
        "check" => Some(OfflineMethod::Check),
        "wire_transfer" => Some(OfflineMethod::WireTransfer),
        "money_order" => Some(OfflineMethod::MoneyOrder),
        "eft" => Some(OfflineMethod::Eft),
        "paypal" => Some(OfflineMethod::PayPal),
        "other" => Some(OfflineMethod::Other),
        _ => None,
    };
    if let Some(offline) = offline {
        return PaymentMethod::Offline(offline);
    }
    let last_four = last_four.filter(|f| !f.is_empty()).map(str::to_owned);
    match kind {
        PaymentKind::BankAccount => PaymentMethod::BankAccount { last_four },
        PaymentKind::CreditCard => {
            let brand = match card_type {
                Some("visa") => Some("Visa".to_owned()),
                Some("master") => Some("Mastercard".to_owned()),
                Some("american_express") => Some("American Express".to_owned()),
                Some("discover") => Some("Discover".to_owned()),
                Some(other) if !other.is_empty() => {
                    let mut name = other.replace('_', " ");
                    if let Some(first) = name.get_mut(..1) {
                        first.make_ascii_uppercase();
                    }
                    Some(name)
                }
                _ => None,
            };
            PaymentMethod::Card { brand, last_four }
        }
    }
}

/// The bill-to block (see the module documentation).
fn bill_to(invoice: &Invoice, account: &Account, billing: Option<&BillingInfo>) -> Vec<String> {
    let f = &account.fields;
    let joined = |parts: &[&Option<String>]| {
        let words: Vec<&str> = parts.iter().filter_map(|p| p.as_deref()).filter(|p| !p.trim().is_empty()).collect();
        (!words.is_empty()).then(|| words.join(" "))
    };
    let automatic = invoice.terms.collection_method == CollectionMethod::Automatic;
    let lines = match billing.filter(|_| automatic) {
        Some(b) => {
            let b = &b.fields;
            vec![
                joined(&[&b.first_name, &b.last_name]),
                joined(&[&b.company]),
                joined(&[&b.address1]),
                joined(&[&b.address2]),
                joined(&[&b.city, &b.state, &b.zip]),
                joined(&[&b.country]),
                joined(&[&f.email]),
                b.vat_number.as_ref().filter(|v| !v.is_empty()).map(|v| format!("VAT {v}")),
            ]
        }
        None => {
            let ad = &f.address;
            vec![
                joined(&[&f.first_name, &f.last_name]),
                joined(&[&f.company_name]),
                joined(&[&ad.address1]),
                joined(&[&ad.address2]),
                joined(&[&ad.city, &ad.state, &ad.zip]),
                joined(&[&ad.country]),
                joined(&[&f.email]),
                f.vat_number.as_ref().filter(|v| !v.is_empty()).map(|v| format!("VAT {v}")),
            ]
        }
    };
    let mut lines: Vec<String> = lines.into_iter().flatten().collect();
    if lines.is_empty() {
        lines.push(account.account_code.clone());
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payment_methods_are_named_by_brand_and_last_four_or_by_offline_method() {
        let card = |brand: Option<&str>, four: Option<&str>| PaymentMethod::Card {
            brand: brand.map(str::to_owned),
            last_four: four.map(str::to_owned),
        };
        let cc = "credit_card";
        let cases = [
            (payment_method(cc, PaymentKind::CreditCard, Some("visa"), Some("1111")), card(Some("Visa"), Some("1111"))),
            (
                payment_method(cc, PaymentKind::CreditCard, Some("master"), Some("4444")),
                card(Some("Mastercard"), Some("4444")),
            ),
            (payment_method(cc, PaymentKind::CreditCard, Some("diners_club"), None), card(Some("Diners club"), None)),
            (payment_method(cc, PaymentKind::CreditCard, None, Some("1")), card(None, Some("1"))),
            (payment_method(cc, PaymentKind::CreditCard, Some(""), Some("")), card(None, None)),
            (
                payment_method("ach", PaymentKind::BankAccount, None, Some("6789")),
                PaymentMethod::BankAccount { last_four: Some("6789".into()) },
            ),
            (
                payment_method("check", PaymentKind::BankAccount, None, None),
                PaymentMethod::Offline(OfflineMethod::Check),
            ),
            (
                payment_method("wire_transfer", PaymentKind::BankAccount, None, Some("1234")),
                PaymentMethod::Offline(OfflineMethod::WireTransfer),
            ),
            (
                payment_method("paypal", PaymentKind::BankAccount, None, None),
                PaymentMethod::Offline(OfflineMethod::PayPal),
            ),
            (
                payment_method("other", PaymentKind::BankAccount, None, None),
                PaymentMethod::Offline(OfflineMethod::Other),
            ),
            (payment_method("credit_card", PaymentKind::CreditCard, None, None), card(None, None)),
        ];
        for (named, expected) in cases {
            assert_eq!(named, expected);
        }
    }
}
