//! Rendered invoices read back with a PDF parser: each kind of document (charge, credit, legacy
//! refund) shows its references, every totals row that is not zero with its sign, and its
//! payments; each language its labels, dates and numbers; long invoices run over pages with
//! their table head and footers; the watermark is on sandbox invoices only; and any text
//! renders to a document that parses.

mod samples;

use lopdf::Document;
use proptest::prelude::*;
use rebill_pdf::{DocumentKind, InvoiceDocument, Locale, MAX_LINES, Payment, PaymentSource, render};
use samples::{at, credit, crowded, document, legacy_refund, settled_charge};

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
fn texts_too_long_for_their_place_are_cut_and_amounts_stay_whole() {
    let doc = crowded();
    let text = text(&doc, Locale::DeDe);
    let de = |cents: i64| Locale::DeDe.format_money(cents);
    let t = doc.totals;
    assert_shows(
        &text,
        &[
            "The Extraordinarily Long-Named",
            "Rechnung INV-2027-000001003",
            "Quarterly enterprise roasting",
            "…",
            &Locale::DeDe.format_integer(1_234_567),
            &de(123_456_789),
            &de(doc.lines[0].total_in_cents),
            &format!("{} USD", de(t.subtotal_in_cents)),
            &format!("{} USD", de(-t.discount_in_cents)),
            &format!("{} USD", de(t.total_in_cents)),
            &format!("{} USD", de(t.balance_in_cents)),
            "-50,00 USD",
            "Guthaben aus Rechnung #CREDIT-NOTE",
            "Hinweise zur Umkehr der Steuerschuld",
            "§ 13b UStG",
        ],
    );
    assert!(!text.contains(&doc.lines[0].description), "a description too long for its column is cut");
    assert!(!text.contains(&"x".repeat(300)), "a word longer than the page is cut");
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
