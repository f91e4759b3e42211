//! Rendered invoices read back with a PDF parser: each kind of document (charge, credit, legacy
//! refund) shows its references, every totals row that is not zero with its sign, and its
//! payments; each language its labels, dates and numbers; long invoices run over pages with
//! their table head and footers; the watermark is on sandbox invoices only; and any text
//! renders to a document that parses.

use chrono::{DateTime, TimeZone, Utc};
use lopdf::Document;
use proptest::prelude::*;
use rebill_pdf::{
    DocumentKind, DocumentState, InvoiceDocument, Line, Locale, MAX_LINES, Notes, Payment, PaymentMethod,
    PaymentSource, Totals, render,
};

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
fn document(lines: usize, test: bool) -> InvoiceDocument {
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
fn settled_charge() -> InvoiceDocument {
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
fn credit() -> InvoiceDocument {
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
fn legacy_refund() -> InvoiceDocument {
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

/// The text of every page, in page order.
fn pages(pdf: &[u8]) -> Vec<String> {
    let doc = Document::load_mem(pdf).expect("the PDF parses");
    let numbers: Vec<u32> = doc.get_pages().keys().copied().collect();
    numbers.iter().map(|n| doc.extract_text(&[*n]).expect("text")).collect()
}

fn text(doc: &InvoiceDocument, locale: Locale) -> String {
    pages(&render(doc, locale)).concat()
}

#[track_caller]
fn assert_shows(text: &str, expected: &[&str]) {
    for e in expected {
        assert!(text.contains(e), "{e:?} missing from:\n{text}");
    }
}

#[test]
fn a_one_page_invoice_shows_every_section() {
    let pdf = render(&document(2, false), Locale::EnUs);
    assert!(pdf.starts_with(b"%PDF-"));
    let pages = pages(&pdf);
    assert_eq!(pages.len(), 1);
    let text = &pages[0];
    assert_shows(
        text,
        &[
            "Northwind Coffee Club",
            "Invoice INV1001",
            "Invoice date",
            "Jan 1, 2027",
            "Due date",
            "Jan 31, 2027",
            "Payment terms",
            "Net 30",
            "PO-77",
            "Bill to",
            "Verena Example",
            "Gold plan, seat 1",
            "20.00",
            "Subtotal",
            "40.00 USD",
            "Paid",
            "-40.00 USD",
            "Balance",
            "0.00 USD",
            "Payments",
            "Visa ending in 1111",
            "Customer notes",
            "Thank you for your order.",
            "Page 1 of 1",
        ],
    );
    assert!(!text.contains("TEST INVOICE"), "a production invoice has no watermark");
    assert!(!text.contains("Terms"), "an empty note is left out");
    for absent in ["Discount", "Tax", "Credit Applied", "Payment Refund", "Credit Voided", "Write-Off", "Credit for"] {
        assert!(!text.contains(absent), "{absent:?}: zero rows and other kinds' references are left out");
    }
}

#[test]
fn a_charge_invoice_shows_every_settlement_as_a_deduction() {
    let text = text(&settled_charge(), Locale::EnUs);
    assert_shows(
        &text,
        &[
            "Invoice 1003",
            "Failed",
            "Espresso machine",
            "1,500.00",
            "Subtotal",
            "1,500.00 USD",
            "Discount",
            "-150.00 USD",
            "Tax",
            "121.50 USD",
            "Total",
            "1,471.50 USD",
            "Paid",
            "-1,000.00 USD",
            "Credit Applied",
            "-200.00 USD",
            "Write-Off",
            "-271.50 USD",
            "Balance",
            "Visa ending in 1111",
            "Credit from invoice #1005",
            "200.00 USD",
            "Bank account ending in 6789",
            "Net 30",
        ],
    );
    for absent in ["Payment Refund", "Credit Voided"] {
        assert!(!text.contains(absent), "{absent:?} is zero");
    }
}

#[test]
fn a_credit_invoice_names_the_invoices_it_credits_and_its_settlements_raise_the_balance() {
    let text = text(&credit(), Locale::EnUs);
    assert_shows(
        &text,
        &[
            "Credit Invoice 1002",
            "Credit for invoice #1001",
            "Credit for invoice #1000",
            "Open",
            "Unused time on Gold plan",
            "-33.33",
            "Total",
            "-33.33 USD",
            "Credit Applied",
            "10.00 USD",
            "Payment Refund",
            "5.00 USD",
            "Credit Voided",
            "3.33 USD",
            "Balance",
            "-15.00 USD",
            "Credit applied to invoice #1003",
            "Visa ending in 1111",
            "-5.00 USD",
        ],
    );
    for absent in ["Due date", "Payment terms", "Paid", "Write-Off", "PO number"] {
        assert!(!text.contains(absent), "{absent:?} is not on this credit invoice");
    }
}

#[test]
fn a_legacy_refund_invoice_names_the_refunded_invoice() {
    let text = text(&legacy_refund(), Locale::EnUs);
    assert_shows(
        &text,
        &[
            "Refund Invoice 1005",
            "Refund for invoice #1000",
            "Refund for Setup fee: IP Addresses",
            "-1",
            "9.00",
            "-9.00",
            "Total",
            "-9.00 USD",
            "Paid",
            "9.00 USD",
            "Balance",
            "0.00 USD",
            "Visa ending in 1111",
        ],
    );
    assert!(!text.contains("Due date") && !text.contains("Credit for"));
}

#[test]
fn german_french_and_spanish_invoices_have_their_labels_dates_and_numbers() {
    let cases: [(Locale, &[&str]); 3] = [
        (
            Locale::DeDe,
            &[
                "Rechnung 1003",
                "Rechnungsdatum",
                "1. Jan. 2027",
                "Fälligkeitsdatum",
                "31. Jan. 2027",
                "Zahlungsziel",
                "30 Tage netto",
                "Fehlgeschlagen",
                "Währung",
                "Rechnungsempfänger",
                "Datum",
                "Beschreibung",
                "Menge",
                "Preis",
                "Gesamt",
                "1.500,00",
                "Zwischensumme",
                "Rabatt",
                "-150,00 USD",
                "Steuer",
                "121,50 USD",
                "1.471,50 USD",
                "Bezahlt",
                "-1.000,00 USD",
                "Angerechnetes Guthaben",
                "Abschreibung",
                "-271,50 USD",
                "Saldo",
                "Zahlungen",
                "Betrag",
                "Visa mit Endziffern 1111",
                "Guthaben aus Rechnung #1005",
                "Bankkonto mit Endziffern 6789",
                "Hinweise für den Kunden",
                "Seite 1 von 1",
            ],
        ),
        (
            Locale::FrFr,
            &[
                "Facture 1003",
                "Date de facture",
                "1 janv. 2027",
                "Date d'échéance",
                "Net à 30 jours",
                "Échouée",
                "Facturer à",
                "Quantité",
                "1 500,00", // the no-break space of French groups reads back as a space (WinAnsi 0xA0)
                "Sous-total",
                "Remise",
                "Payé",
                "-1 000,00 USD",
                "Crédit appliqué",
                "Passage en perte",
                "Solde",
                "Paiements",
                "Visa se terminant par 1111",
                "Crédit de la facture #1005",
                "Compte bancaire se terminant par 6789",
                "Page 1 sur 1",
            ],
        ),
        (
            Locale::EsEs,
            &[
                "Factura 1003",
                "Fecha de factura",
                "1 ene 2027",
                "Fecha de vencimiento",
                "Neto a 30 días",
                "Fallida",
                "Facturar a",
                "Descripción",
                "1500,00",
                "Impuesto",
                "Pagado",
                "-1000,00 USD",
                "Crédito aplicado",
                "Cancelación de deuda",
                "Saldo",
                "Pagos",
                "Visa terminada en 1111",
                "Crédito de la factura #1005",
                "Cuenta bancaria terminada en 6789",
                "Página 1 de 1",
            ],
        ),
    ];
    for (locale, expected) in cases {
        let text = text(&settled_charge(), locale);
        assert_shows(&text, expected);
        for english in ["Invoice date", "Due date", "Balance", "Payments", "ending in", "Page 1 of 1"] {
            assert!(!text.contains(english), "{locale:?}: {english:?} left in English");
        }
    }

    let credit = text(&credit(), Locale::DeDe);
    assert_shows(
        &credit,
        &[
            "Gutschrift 1002",
            "Gutschrift für Rechnung #1001",
            "Offen",
            "Zahlungserstattung",
            "Storniertes Guthaben",
            "-15,00 USD",
        ],
    );
    let refund = text(&legacy_refund(), Locale::FrFr);
    assert_shows(&refund, &["Facture de remboursement 1005", "Remboursement de la facture #1000", "-9,00 USD"]);
}

#[test]
fn western_european_letters_render_as_themselves() {
    let mut doc = document(1, false);
    doc.site_name = "Café Müller & Söhne".into();
    doc.bill_to = vec!["José Núñez".into(), "Straße 5, 1010 Wien".into(), "Œuvres Françaises".into()];
    doc.lines[0].description = "Crème brûlée – 2× ½ kg".into();
    doc.notes.customer_notes = Some("¡Gracias! Größe: €12 “special” 日本".into());
    let text = text(&doc, Locale::DeDe);
    assert_shows(
        &text,
        &[
            "Café Müller & Söhne",
            "José Núñez",
            "Straße 5, 1010 Wien",
            "Œuvres Françaises",
            "Crème brûlée – 2× ½ kg",
            "¡Gracias! Größe: €12 “special” ??",
        ],
    );
}

#[test]
fn long_invoices_run_over_pages_and_stop_at_the_line_limit() {
    let pages = pages(&render(&document(120, true), Locale::EnUs));
    assert!(pages.len() >= 3, "{} pages", pages.len());
    let count = pages.len();
    for (i, page) in pages.iter().enumerate() {
        assert!(page.contains("TEST INVOICE"), "page {i}: the sandbox watermark");
        assert!(page.contains(&format!("Page {} of {count}", i + 1)), "page {i}");
        assert!(page.contains("Invoice INV1001"), "page {i}: the footer names the invoice");
    }
    assert!(pages[1].contains("Description"), "the table head is repeated");
    let all = pages.concat();
    assert!(all.contains("Gold plan, seat 0") && all.contains("Gold plan, seat 119"));
    assert!(all.contains("2,400.00 USD"), "the total of 120 lines");

    let capped = text(&document(MAX_LINES + 7, false), Locale::EnUs);
    assert!(capped.contains(&format!("Gold plan, seat {}", MAX_LINES - 1)));
    assert!(!capped.contains(&format!("Gold plan, seat {}", MAX_LINES)));
    assert!(capped.contains("and 7 more line items"));
    let capped = text(&document(MAX_LINES + 7, false), Locale::DeDe);
    assert!(capped.contains("und 7 weitere Positionen"), "in the page's language");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn any_text_renders_to_a_document_that_parses(
        name in any::<String>(),
        description in any::<String>(),
        note in any::<String>(),
        credited in any::<String>(),
        amount in any::<i64>(),
        quantity in any::<i64>(),
        locale in prop::sample::select(Locale::ALL.to_vec()),
    ) {
        let mut doc = credit();
        doc.site_name = name;
        doc.bill_to = vec![description.clone()];
        doc.kind = DocumentKind::Credit { credited_invoices: vec![credited.clone()] };
        doc.lines[0].description = description;
        doc.lines[0].total_in_cents = amount;
        doc.lines[0].quantity = quantity;
        doc.totals.balance_in_cents = amount;
        doc.totals.credit_voided_in_cents = amount;
        doc.payments.push(Payment { date: at(1), source: PaymentSource::Credit { invoice_number: credited }, amount_in_cents: amount });
        doc.notes.terms_and_conditions = Some(note);
        let pdf = render(&doc, locale);
        prop_assert!(Document::load_mem(&pdf).is_ok());
    }
}
