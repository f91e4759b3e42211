//! The invoice PDF: `rebill_pdf::render` of any `InvoiceDocument` (every kind, state, amount,
//! date, text, line, payment and note an adapter could fill in) in the language any
//! `Accept-Language` value picks (`Locale::from_accept_language`).
//!
//! Besides "never panics": the output is one PDF document.
//!
//! Input: an `Accept-Language` value up to the first newline, then the bytes `arbitrary` builds
//! the document from. Documents are kept small (at most 12 lines, 6 payments, 6 bill-to lines):
//! the time of a render grows with them, and the row of lines past `MAX_LINES` is covered by
//! rebill-pdf's own tests.

#![no_main]

use chrono::{DateTime, Utc};
use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use rebill_pdf::{
    DocumentKind, DocumentState, InvoiceDocument, Line, Locale, Notes, OfflineMethod, Payment, PaymentMethod,
    PaymentSource, Totals,
};

fn time(u: &mut Unstructured<'_>) -> Result<DateTime<Utc>> {
    // Mostly this era; sometimes anywhere chrono can represent.
    let seconds = if u.arbitrary()? { i64::from(u.arbitrary::<u32>()?) } else { u.arbitrary()? };
    Ok(DateTime::from_timestamp(seconds, 0).unwrap_or_default())
}

/// A text of at most 120 characters (a render's time grows with its texts; every text is laid
/// out by the same code, so longer ones find nothing new).
fn text(u: &mut Unstructured<'_>) -> Result<String> {
    text_up_to(u, 120)
}

fn text_up_to(u: &mut Unstructured<'_>, max: usize) -> Result<String> {
    let text: String = u.arbitrary()?;
    Ok(text.chars().take(max).collect())
}

/// A note: up to 600 characters, so that notes wrap over many lines (and pages).
fn note(u: &mut Unstructured<'_>) -> Result<Option<String>> {
    Ok(if u.arbitrary()? { Some(text_up_to(u, 600)?) } else { None })
}

fn optional_text(u: &mut Unstructured<'_>) -> Result<Option<String>> {
    Ok(if u.arbitrary()? { Some(text(u)?) } else { None })
}

/// At most `max` texts (the lists of a document are short; rendering time grows with them).
fn texts(u: &mut Unstructured<'_>, max: usize) -> Result<Vec<String>> {
    (0..u.int_in_range(0..=max)?).map(|_| text(u)).collect()
}

fn amount(u: &mut Unstructured<'_>) -> Result<i64> {
    // Mostly everyday amounts; sometimes any i64 (i64::MIN included).
    Ok(if u.arbitrary()? { i64::from(u.arbitrary::<i32>()?) } else { u.arbitrary()? })
}

fn state(u: &mut Unstructured<'_>) -> Result<DocumentState> {
    Ok(*u.choose(&[
        DocumentState::Pending,
        DocumentState::Processing,
        DocumentState::PastDue,
        DocumentState::Paid,
        DocumentState::Failed,
        DocumentState::Open,
        DocumentState::Closed,
        DocumentState::Voided,
    ])?)
}

fn kind(u: &mut Unstructured<'_>) -> Result<DocumentKind> {
    Ok(match u.int_in_range(0..=2)? {
        0 => DocumentKind::Charge,
        1 => DocumentKind::Credit { credited_invoices: texts(u, 4)? },
        _ => DocumentKind::LegacyRefund { refunded_invoice: optional_text(u)? },
    })
}

fn line(u: &mut Unstructured<'_>) -> Result<Line> {
    Ok(Line {
        date: time(u)?,
        description: text(u)?,
        quantity: amount(u)?,
        unit_amount_in_cents: amount(u)?,
        total_in_cents: amount(u)?,
    })
}

fn payment(u: &mut Unstructured<'_>) -> Result<Payment> {
    let source = match u.int_in_range(0..=4)? {
        0 => PaymentSource::Transaction(PaymentMethod::Card { brand: optional_text(u)?, last_four: optional_text(u)? }),
        1 => PaymentSource::Transaction(PaymentMethod::BankAccount { last_four: optional_text(u)? }),
        2 => PaymentSource::Transaction(PaymentMethod::Offline(*u.choose(&[
            OfflineMethod::Check,
            OfflineMethod::WireTransfer,
            OfflineMethod::MoneyOrder,
            OfflineMethod::Eft,
            OfflineMethod::PayPal,
            OfflineMethod::Other,
        ])?)),
        3 => PaymentSource::Credit { invoice_number: text(u)? },
        _ => PaymentSource::CreditUsed { invoice_number: text(u)? },
    };
    Ok(Payment { date: time(u)?, source, amount_in_cents: amount(u)? })
}

fn totals(u: &mut Unstructured<'_>) -> Result<Totals> {
    Ok(Totals {
        subtotal_in_cents: amount(u)?,
        discount_in_cents: amount(u)?,
        tax_in_cents: amount(u)?,
        total_in_cents: amount(u)?,
        paid_in_cents: amount(u)?,
        credit_applied_in_cents: amount(u)?,
        payment_refund_in_cents: amount(u)?,
        credit_voided_in_cents: amount(u)?,
        write_off_in_cents: amount(u)?,
        balance_in_cents: amount(u)?,
    })
}

fn document(u: &mut Unstructured<'_>) -> Result<InvoiceDocument> {
    let mut doc = InvoiceDocument {
        site_name: text(u)?,
        invoice_number: text(u)?,
        kind: kind(u)?,
        state: state(u)?,
        created_at: time(u)?,
        due_on: if u.arbitrary()? { Some(time(u)?) } else { None },
        net_terms: u.arbitrary()?,
        po_number: optional_text(u)?,
        currency: text(u)?,
        bill_to: texts(u, 6)?,
        lines: Vec::new(),
        totals: totals(u)?,
        payments: Vec::new(),
        notes: Notes { customer_notes: note(u)?, terms_and_conditions: note(u)?, vat_reverse_charge_notes: note(u)? },
        test: u.arbitrary()?,
    };
    for _ in 0..u.int_in_range(0..=12)? {
        doc.lines.push(line(u)?);
    }
    for _ in 0..u.int_in_range(0..=6)? {
        doc.payments.push(payment(u)?);
    }
    Ok(doc)
}

fuzz_target!(|data: &[u8]| {
    let (language, rest) = match data.iter().position(|b| *b == b'\n') {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (&data[..0], data),
    };
    let locale = Locale::from_accept_language(&String::from_utf8_lossy(language));
    let mut u = Unstructured::new(rest);
    let Ok(doc) = document(&mut u) else { return };
    let pdf = rebill_pdf::render(&doc, locale);
    assert!(pdf.starts_with(b"%PDF-"), "a PDF document");
});
