//! Writes a sample invoice PDF to the path given, in the language of an `Accept-Language` value
//! (for looking at the layout):
//! `cargo run -p rebill-pdf --example sample -- target/sample.pdf de-DE`.

use chrono::{TimeZone, Utc};
use rebill_pdf::{
    DocumentKind, DocumentState, InvoiceDocument, Line, Locale, Notes, Payment, PaymentMethod, PaymentSource, Totals,
    render,
};

fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let path = args.next().unwrap_or_else(|| "sample.pdf".to_owned());
    let locale = Locale::from_accept_language(&args.next().unwrap_or_default());
    let at = |d| Utc.with_ymd_and_hms(2027, 1, d, 12, 0, 0).single().unwrap_or_default();
    let lines: Vec<Line> = (1..=3)
        .map(|i| Line {
            date: at(i),
            description: format!("Monthly beans, bag {i}"),
            quantity: i64::from(i),
            unit_amount_in_cents: 1800,
            total_in_cents: 1800 * i64::from(i),
        })
        .collect();
    let doc = InvoiceDocument {
        site_name: "Northwind Coffee Club".into(),
        invoice_number: "1001".into(),
        kind: DocumentKind::Charge,
        state: DocumentState::Paid,
        created_at: at(1),
        due_on: Some(at(1)),
        net_terms: Some(0),
        po_number: None,
        currency: "USD".into(),
        bill_to: vec!["Verena Example".into(), "123 Main St.".into(), "San Francisco CA 94105 US".into()],
        lines,
        totals: Totals {
            subtotal_in_cents: 10800,
            tax_in_cents: 945,
            total_in_cents: 11745,
            paid_in_cents: 10745,
            credit_applied_in_cents: 1000,
            ..Totals::default()
        },
        payments: vec![
            Payment {
                date: at(1),
                source: PaymentSource::Transaction(PaymentMethod::Card {
                    brand: Some("Visa".into()),
                    last_four: Some("1111".into()),
                }),
                amount_in_cents: 10745,
            },
            Payment {
                date: at(1),
                source: PaymentSource::Credit { invoice_number: "1000".into() },
                amount_in_cents: 1000,
            },
        ],
        notes: Notes { customer_notes: Some("Thank you for subscribing.".into()), ..Notes::default() },
        test: true,
    };
    std::fs::write(path, render(&doc, locale))
}
