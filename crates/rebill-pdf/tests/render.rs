//! Rendered invoices read back with a PDF parser: the sections hold what the document says, long
//! invoices run over pages with their table head and footers, the watermark is on sandbox
//! invoices only, and any text renders to a document that parses.

use chrono::{DateTime, TimeZone, Utc};
use lopdf::Document;
use proptest::prelude::*;
use rebill_pdf::{InvoiceDocument, Line, MAX_LINES, Payment, Totals, render};

fn at(day: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2027, 1, day, 12, 0, 0).single().expect("date")
}

fn line(i: usize) -> Line {
    Line {
        date: at(1),
        description: format!("Gold plan, seat {i}"),
        quantity: 2,
        unit_amount_in_cents: 1000,
        total_in_cents: 2000,
    }
}

fn document(lines: usize, test: bool) -> InvoiceDocument {
    let total = 2000 * lines as i64;
    InvoiceDocument {
        site_name: "Northwind Coffee Club".into(),
        invoice_number: "INV1001".into(),
        kind: "Invoice".into(),
        state: "Paid".into(),
        created_at: at(1),
        due_on: Some(at(31)),
        net_terms: Some(30),
        po_number: Some("PO-77".into()),
        currency: "USD".into(),
        bill_to: vec!["Verena Example".into(), "123 Main St.".into(), "San Francisco, CA 94105".into()],
        lines: (0..lines).map(line).collect(),
        totals: Totals {
            subtotal_in_cents: total,
            discount_in_cents: 0,
            tax_in_cents: 0,
            total_in_cents: total,
            paid_in_cents: total,
            balance_in_cents: 0,
        },
        payments: vec![Payment {
            date: at(1),
            description: "Visa ending in 1111".into(),
            amount_in_cents: total,
            status: "Successful".into(),
        }],
        notes: vec![("Customer notes".into(), "Thank you for your order.".into()), ("Terms".into(), " ".into())],
        test,
    }
}

/// The text of every page, in page order.
fn pages(pdf: &[u8]) -> Vec<String> {
    let doc = Document::load_mem(pdf).expect("the PDF parses");
    let numbers: Vec<u32> = doc.get_pages().keys().copied().collect();
    numbers.iter().map(|n| doc.extract_text(&[*n]).expect("text")).collect()
}

#[test]
fn a_one_page_invoice_shows_every_section() {
    let pdf = render(&document(2, false));
    assert!(pdf.starts_with(b"%PDF-"));
    let pages = pages(&pdf);
    assert_eq!(pages.len(), 1);
    let text = &pages[0];
    for expected in [
        "Northwind Coffee Club",
        "Invoice INV1001",
        "Jan 1, 2027",
        "Jan 31, 2027",
        "Net 30",
        "PO-77",
        "Verena Example",
        "Gold plan, seat 1",
        "20.00",
        "40.00 USD",
        "Balance",
        "0.00 USD",
        "Visa ending in 1111",
        "Successful",
        "Customer notes",
        "Thank you for your order.",
        "Page 1 of 1",
    ] {
        assert!(text.contains(expected), "{expected:?} missing from:\n{text}");
    }
    assert!(!text.contains("TEST INVOICE"), "a production invoice has no watermark");
    assert!(!text.contains("Terms"), "an empty note is left out");
    assert!(!text.contains("Discount") && !text.contains("Tax"), "zero discount and tax are left out");
}

#[test]
fn long_invoices_run_over_pages_and_stop_at_the_line_limit() {
    let pages = pages(&render(&document(120, true)));
    assert!(pages.len() >= 3, "{} pages", pages.len());
    let count = pages.len();
    for (i, page) in pages.iter().enumerate() {
        assert!(page.contains("TEST INVOICE"), "page {i}: the sandbox watermark");
        assert!(page.contains(&format!("Page {} of {count}", i + 1)), "page {i}");
    }
    assert!(pages[1].contains("Description"), "the table head is repeated");
    let all = pages.concat();
    assert!(all.contains("Gold plan, seat 0") && all.contains("Gold plan, seat 119"));
    assert!(all.contains("2,400.00 USD"), "the total of 120 lines");

    let capped = pages_text(&render(&document(MAX_LINES + 7, false)));
    assert!(capped.contains(&format!("Gold plan, seat {}", MAX_LINES - 1)));
    assert!(!capped.contains(&format!("Gold plan, seat {}", MAX_LINES)));
    assert!(capped.contains("and 7 more line items"));
}

fn pages_text(pdf: &[u8]) -> String {
    pages(pdf).concat()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn any_text_renders_to_a_document_that_parses(
        name in any::<String>(),
        description in any::<String>(),
        note in any::<String>(),
        amount in any::<i64>(),
    ) {
        let mut doc = document(1, false);
        doc.site_name = name;
        doc.bill_to = vec![description.clone()];
        doc.lines[0].description = description;
        doc.lines[0].total_in_cents = amount;
        doc.totals.balance_in_cents = amount;
        doc.notes = vec![("Notes".into(), note)];
        let pdf = render(&doc);
        prop_assert!(Document::load_mem(&pdf).is_ok());
    }
}
