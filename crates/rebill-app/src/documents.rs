//! Invoice documents: the PDF of an invoice ([`invoice_pdf`]), laid out by `rebill-pdf` from
//! what the invoice, its lines, its payments, its account and its site hold.
//!
//! - **Bill to**: the billing info's name, company, address and VAT number when the invoice is
//!   collected automatically (the payment method's owner), the account's otherwise (manual
//!   invoices, or no billing info), with the account's e-mail.
//! - **Payments**: the successful transactions of the invoice, each named by its payment method
//!   ("Visa ending in 1111", "Bank account ending in 6789").
//! - **Notes**: customer notes, terms and conditions and VAT reverse-charge notes, those set.
//! - Sandbox sites' invoices carry the "TEST INVOICE" watermark.

use rebill_billing::states::{InvoiceState, TransactionStatus};
use rebill_pdf::{InvoiceDocument, Line, Payment, Totals};
use rebill_store::Mode;
use rebill_store::accounts::Account;
use rebill_store::billing_info::{BillingInfo, PaymentKind};
use rebill_store::invoicing::{CollectionMethod, Invoice};

use crate::queries::{self, InvoiceDetails, ReadError};
use crate::{Context, Services, error::Missing, time};

/// The PDF of the site's invoice `number`.
pub async fn invoice_pdf(services: &Services, ctx: &Context, number: &str) -> Result<Vec<u8>, ReadError> {
    let invoice = queries::invoice(services, ctx, number).await?;
    let details = queries::invoice_details(services, &invoice).await?;
    let account = services
        .store
        .account(ctx.site.id, &invoice.account_code)
        .await?
        .ok_or_else(|| Missing::account(&invoice.account_code))?;
    let billing = services.store.billing_info(account.id).await?;
    let test = ctx.site.mode == Mode::Sandbox;
    Ok(rebill_pdf::render(&document(&ctx.site.name, test, &invoice, &details, &account, billing.as_ref())))
}

/// What the PDF of `invoice` shows.
pub fn document(
    site_name: &str,
    test: bool,
    invoice: &Invoice,
    details: &InvoiceDetails,
    account: &Account,
    billing: Option<&BillingInfo>,
) -> InvoiceDocument {
    let at = |secs: i64| time(secs).unwrap_or_default();
    let a = &invoice.amounts;
    let terms = &invoice.terms;
    let notes = [
        ("Customer notes", &terms.customer_notes),
        ("Terms and conditions", &terms.terms_and_conditions),
        ("VAT reverse charge notes", &terms.vat_reverse_charge_notes),
    ]
    .into_iter()
    .filter_map(|(heading, text)| {
        text.as_ref().filter(|t| !t.trim().is_empty()).map(|t| (heading.to_owned(), t.clone()))
    })
    .collect();
    InvoiceDocument {
        site_name: site_name.to_owned(),
        invoice_number: invoice.invoice_number.to_string(),
        kind: "Invoice".to_owned(),
        state: state_word(invoice.state).to_owned(),
        created_at: at(invoice.created_at),
        due_on: invoice.due_on.map(at),
        net_terms: Some(terms.net_terms),
        po_number: terms.po_number.clone(),
        currency: invoice.currency.clone(),
        bill_to: bill_to(invoice, account, billing),
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
        totals: Totals {
            subtotal_in_cents: a.subtotal_before_discount,
            discount_in_cents: a.discount,
            tax_in_cents: a.tax,
            total_in_cents: a.total,
            paid_in_cents: a.paid,
            balance_in_cents: a.balance,
        },
        payments: details
            .transactions
            .iter()
            .filter(|t| t.status() == TransactionStatus::Success && t.new.action == "purchase")
            .map(|t| Payment {
                date: at(t.result.collected_at.unwrap_or(t.created_at)),
                description: payment_method(
                    t.new.kind,
                    t.new.billing.card_type.as_deref(),
                    t.new.billing.last_four.as_deref(),
                ),
                amount_in_cents: t.new.amount,
                status: "Successful".to_owned(),
            })
            .collect(),
        notes,
        test,
    }
}

fn state_word(state: InvoiceState) -> &'static str {
    match state {
        InvoiceState::Pending => "Pending",
        InvoiceState::Processing => "Processing",
        InvoiceState::PastDue => "Past due",
        InvoiceState::Paid => "Paid",
        InvoiceState::Failed => "Failed",
        InvoiceState::Open => "Open",
        InvoiceState::Closed => "Closed",
        InvoiceState::Voided => "Voided",
    }
}

/// "Visa ending in 1111", "Bank account ending in 6789".
fn payment_method(kind: PaymentKind, card_type: Option<&str>, last_four: Option<&str>) -> String {
    let what = match kind {
        PaymentKind::BankAccount => "Bank account".to_owned(),
        PaymentKind::CreditCard => match card_type {
            Some("visa") => "Visa".to_owned(),
            Some("master") => "Mastercard".to_owned(),
            Some("american_express") => "American Express".to_owned(),
            Some("discover") => "Discover".to_owned(),
            Some(other) if !other.is_empty() => {
                let mut name = other.replace('_', " ");
                if let Some(first) = name.get_mut(..1) {
                    first.make_ascii_uppercase();
                }
                name
            }
            _ => "Card".to_owned(),
        },
    };
    match last_four {
        Some(four) if !four.is_empty() => format!("{what} ending in {four}"),
        _ => what,
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
    fn payment_methods_are_named_by_brand_and_last_four() {
        assert_eq!(payment_method(PaymentKind::CreditCard, Some("visa"), Some("1111")), "Visa ending in 1111");
        assert_eq!(payment_method(PaymentKind::CreditCard, Some("master"), Some("4444")), "Mastercard ending in 4444");
        assert_eq!(payment_method(PaymentKind::CreditCard, Some("diners_club"), None), "Diners club");
        assert_eq!(payment_method(PaymentKind::CreditCard, None, Some("1")), "Card ending in 1");
        assert_eq!(payment_method(PaymentKind::BankAccount, None, Some("6789")), "Bank account ending in 6789");
    }
}
