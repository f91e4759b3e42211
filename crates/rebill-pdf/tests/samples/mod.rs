//! Sample invoice documents shared by the rendering tests and the screenshots: a paid charge
//! invoice of any length, a settled charge invoice (discount, tax, card, credit, write-off), a
//! credit invoice, a legacy refund invoice, and a crowded one (long names and texts, wide
//! amounts).

use chrono::{DateTime, TimeZone, Utc};
use rebill_pdf::{
    DocumentKind, DocumentState, InvoiceDocument, Line, Notes, Payment, PaymentMethod, PaymentSource, Totals,
};

pub fn at(day: u32) -> DateTime<Utc> {
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

fn visa(date: DateTime<Utc>, amount_in_cents: i64) -> Payment {
    Payment {
        date,
        source: PaymentSource::Transaction(PaymentMethod::Card {
            brand: Some("Visa".into()),
            last_four: Some("1111".into()),
        }),
        amount_in_cents,
    }
}

/// A paid charge invoice of `lines` lines.
pub fn document(lines: usize, test: bool) -> InvoiceDocument {
    let total = 2000 * lines as i64;
    InvoiceDocument {
        site_name: "Northwind Coffee Club".into(),
        invoice_number: "INV1001".into(),
        kind: DocumentKind::Charge,
        state: DocumentState::Paid,
        created_at: at(1),
        due_on: Some(at(31)),
        net_terms: Some(30),
        po_number: Some("PO-77".into()),
        currency: "USD".into(),
        bill_to: vec!["Verena Example".into(), "123 Main St.".into(), "San Francisco, CA 94105".into()],
        lines: (0..lines).map(line).collect(),
        totals: Totals { subtotal_in_cents: total, total_in_cents: total, paid_in_cents: total, ..Totals::default() },
        payments: vec![visa(at(1), total)],
        notes: Notes {
            customer_notes: Some("Thank you for your order.".into()),
            terms_and_conditions: Some(" ".into()),
            vat_reverse_charge_notes: None,
        },
        test,
    }
}

/// A charge invoice with a discount and tax, paid partly by card and partly by credit from a
/// credit invoice, the rest written off.
pub fn settled_charge() -> InvoiceDocument {
    InvoiceDocument {
        invoice_number: "1003".into(),
        state: DocumentState::Failed,
        lines: vec![Line {
            date: at(2),
            description: "Espresso machine".into(),
            quantity: 1,
            unit_amount_in_cents: 150_000,
            total_in_cents: 150_000,
        }],
        totals: Totals {
            subtotal_in_cents: 150_000,
            discount_in_cents: 15_000,
            tax_in_cents: 12_150,
            total_in_cents: 147_150,
            paid_in_cents: 100_000,
            credit_applied_in_cents: 20_000,
            write_off_in_cents: 27_150,
            ..Totals::default()
        },
        payments: vec![
            visa(at(2), 100_000),
            Payment {
                date: at(3),
                source: PaymentSource::Credit { invoice_number: "1005".into() },
                amount_in_cents: 20_000,
            },
            Payment {
                date: at(4),
                source: PaymentSource::Transaction(PaymentMethod::BankAccount { last_four: Some("6789".into()) }),
                amount_in_cents: 0,
            },
        ],
        ..document(0, false)
    }
}

/// A credit invoice crediting two charge invoices: part used on another invoice, part refunded
/// to the card, part voided, the rest open.
pub fn credit() -> InvoiceDocument {
    InvoiceDocument {
        invoice_number: "1002".into(),
        kind: DocumentKind::Credit { credited_invoices: vec!["1001".into(), "1000".into()] },
        state: DocumentState::Open,
        due_on: None,
        net_terms: None,
        po_number: None,
        lines: vec![Line {
            date: at(5),
            description: "Unused time on Gold plan".into(),
            quantity: 1,
            unit_amount_in_cents: -3333,
            total_in_cents: -3333,
        }],
        totals: Totals {
            subtotal_in_cents: -3333,
            total_in_cents: -3333,
            credit_applied_in_cents: 1000,
            payment_refund_in_cents: 500,
            credit_voided_in_cents: 333,
            balance_in_cents: -1500,
            ..Totals::default()
        },
        payments: vec![
            Payment {
                date: at(6),
                source: PaymentSource::CreditUsed { invoice_number: "1003".into() },
                amount_in_cents: 1000,
            },
            visa(at(6), -500),
        ],
        ..document(0, false)
    }
}

/// A refund invoice of the API before credit invoices: a negative line refunding a setup fee.
pub fn legacy_refund() -> InvoiceDocument {
    InvoiceDocument {
        invoice_number: "1005".into(),
        kind: DocumentKind::LegacyRefund { refunded_invoice: Some("1000".into()) },
        state: DocumentState::Paid,
        due_on: None,
        net_terms: None,
        lines: vec![Line {
            date: at(7),
            description: "Refund for Setup fee: IP Addresses".into(),
            quantity: -1,
            unit_amount_in_cents: 900,
            total_in_cents: -900,
        }],
        totals: Totals { subtotal_in_cents: -900, total_in_cents: -900, paid_in_cents: 900, ..Totals::default() },
        payments: vec![visa(at(7), -900)],
        ..document(0, false)
    }
}

/// A charge invoice whose every text is too long for its place and whose amounts are wide.
pub fn crowded() -> InvoiceDocument {
    let long =
        "Quarterly enterprise roasting subscription with on-site barista training, grinder maintenance and delivery";
    InvoiceDocument {
        site_name: "The Extraordinarily Long-Named Northwind Coffee Roasting Company of Greater San Francisco".into(),
        invoice_number: "INV-2027-000001003".into(),
        po_number: Some("PO-ACME-PROCUREMENT-2027-Q1-0000012345-WITH-A-VERY-LONG-SUFFIX".into()),
        bill_to: vec![
            "Maximiliane Alexandra Wolfeschlegelsteinhausenbergerdorff-Überlänge".into(),
            "Aktiengesellschaft für außerordentlich lange Firmennamen und Adresszeilen mbH & Co. KG".into(),
            "Hauptstraße 1234, Hinterhaus, Aufgang C, 5. Obergeschoss links".into(),
            "accounts-payable-department@example-corporation-with-a-long-domain.example".into(),
        ],
        lines: (1..=4)
            .map(|i| Line {
                date: at(i),
                description: format!("{long} ({i} of 4)"),
                quantity: 1_234_567,
                unit_amount_in_cents: 123_456_789,
                total_in_cents: 123_456_789 * 1_234_567,
            })
            .collect(),
        totals: Totals {
            subtotal_in_cents: 4 * 123_456_789 * 1_234_567,
            discount_in_cents: 123_456_789_012,
            tax_in_cents: 98_765_432_109,
            total_in_cents: 4 * 123_456_789 * 1_234_567 - 123_456_789_012 + 98_765_432_109,
            paid_in_cents: 1_000,
            credit_applied_in_cents: 2_000,
            payment_refund_in_cents: 3_000,
            credit_voided_in_cents: 4_000,
            write_off_in_cents: 5_000,
            balance_in_cents: 4 * 123_456_789 * 1_234_567 - 123_456_789_012 + 98_765_432_109 - 15_000,
        },
        payments: vec![Payment {
            date: at(9),
            source: PaymentSource::Credit { invoice_number: "CREDIT-NOTE-2027-000000000000000001005".into() },
            amount_in_cents: 2_000,
        }],
        notes: Notes {
            customer_notes: Some(long.repeat(3)),
            terms_and_conditions: Some(format!("{}\n{}", long, "Unbreakable:".to_owned() + &"x".repeat(300))),
            vat_reverse_charge_notes: Some("Steuerschuldnerschaft des Leistungsempfängers (§ 13b UStG).".into()),
        },
        ..document(0, true)
    }
}
