//! Writes a sample invoice PDF to the path given (for looking at the layout):
//! `cargo run -p rebill-pdf --example sample -- target/sample.pdf`.

use chrono::{TimeZone, Utc};
use rebill_pdf::{InvoiceDocument, Line, Payment, Totals, render};

fn main() -> std::io::Result<()> {
    let path = std::env::args().nth(1).unwrap_or_else(|| "sample.pdf".to_owned());
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
        kind: "Invoice".into(),
        state: "Paid".into(),
        created_at: at(1),
        due_on: Some(at(1)),
        net_terms: Some(0),
        po_number: None,
        currency: "USD".into(),
        bill_to: vec!["Verena Example".into(), "123 Main St.".into(), "San Francisco CA 94105 US".into()],
        lines,
        totals: Totals {
            subtotal_in_cents: 10800,
            discount_in_cents: 0,
            tax_in_cents: 945,
            total_in_cents: 11745,
            paid_in_cents: 11745,
            balance_in_cents: 0,
        },
        payments: vec![Payment {
            date: at(1),
            description: "Visa ending in 1111".into(),
            amount_in_cents: 11745,
            status: "Successful".into(),
        }],
        notes: vec![("Customer notes".into(), "Thank you for subscribing.".into())],
        test: true,
    };
    std::fs::write(path, render(&doc))
}
