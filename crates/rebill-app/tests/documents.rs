//! An invoice's PDF from the use case, in process on both backends: the subscriber's first
//! invoice with its line, its card payment and the sandbox watermark, in English and in German;
//! the same invoice mapped with a credit side (credit payments from other invoices, a write-off;
//! as a credit invoice, its credit used, refunded and voided) shows every settlement and
//! payment; an unknown invoice is not found.

use lopdf::Document;
use rebill_app::documents::{
    CreditAction, CreditPayment, CreditSide, DocumentKind, Locale, Sources, document, invoice_pdf,
};
use rebill_app::queries::{self, ReadError};
use rebill_app::testing::{DAY, Scripted, T0, TestClock, subscribers};
use rebill_pdf::{PaymentSource, render};
use rebill_store::testing::both_backends;

fn text(pdf: &[u8]) -> String {
    let doc = Document::load_mem(pdf).expect("the PDF parses");
    let pages: Vec<u32> = doc.get_pages().keys().copied().collect();
    doc.extract_text(&pages).expect("text")
}

#[track_caller]
fn assert_shows(text: &str, expected: &[&str], what: &str) {
    for e in expected {
        assert!(text.contains(e), "{what}: {e:?} missing from:\n{text}");
    }
}

fn credit_payment(
    action: CreditAction,
    original_invoice: i64,
    applied_to_invoice: i64,
    amount: i64,
    at: i64,
) -> CreditPayment {
    CreditPayment { action, original_invoice, applied_to_invoice, amount, created_at: at }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invoice_renders_with_its_lines_payments_and_watermark_in_its_language() {
    for store in both_backends("app_invoice_pdf").await {
        let backend = store.backend();
        let (services, ctx) = subscribers(store, Scripted::declining(&[]), TestClock::starting(T0), 1).await;
        let what = format!("{backend:?}");
        let pdf = invoice_pdf(&services, &ctx, "1001", Locale::EnUs).await.expect("the first invoice renders");
        assert_shows(
            &text(&pdf),
            &[
                "harness",
                "Invoice 1001",
                "Paid",
                "Verena Example",
                "10.00 USD",
                "-10.00 USD",
                "Visa ending in 1111",
                "TEST INVOICE",
            ],
            &what,
        );
        let german = text(&invoice_pdf(&services, &ctx, "1001", Locale::DeDe).await.expect("German"));
        assert_shows(
            &german,
            &[
                "Rechnung 1001",
                "Bezahlt",
                "Rechnungsempfänger",
                "10,00 USD",
                "Saldo",
                "Visa mit Endziffern 1111",
                "Seite 1 von 1",
            ],
            &what,
        );
        assert!(!german.contains("Invoice date"), "{what}: no English label left:\n{german}");
        assert!(
            matches!(invoice_pdf(&services, &ctx, "999", Locale::EnUs).await, Err(ReadError::NotFound(_))),
            "{what}"
        );
        assert!(
            matches!(invoice_pdf(&services, &ctx, "abc", Locale::DeDe).await, Err(ReadError::NotFound(_))),
            "{what}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credit_payments_and_kinds_map_to_every_settlement_and_payment() {
    for store in both_backends("app_invoice_pdf_credit").await {
        let what = format!("{:?}", store.backend());
        let (services, ctx) = subscribers(store, Scripted::declining(&[]), TestClock::starting(T0), 1).await;
        let invoice = queries::invoice(&services, &ctx, "1001").await.expect("invoice");
        let details = queries::invoice_details(&services, &invoice).await.expect("details");
        let account = services.store.account(ctx.site.id, "a0").await.expect("read").expect("account");
        let billing = services.store.billing_info(account.id).await.expect("billing info");
        let sources = |credit: CreditSide| Sources {
            site_name: &ctx.site.name,
            test: false,
            invoice: &invoice,
            details: &details,
            account: &account,
            billing: billing.as_ref(),
            credit,
        };

        // Today's invoices: a charge invoice without credit.
        let plain = document(&sources(CreditSide::default()));
        assert_eq!(plain.kind, DocumentKind::Charge, "{what}");
        assert_eq!(plain.payments.len(), 1, "{what}: the card payment");
        assert_eq!(
            (plain.totals.total_in_cents, plain.totals.paid_in_cents, plain.totals.balance_in_cents),
            (1000, 1000, 0)
        );
        assert!(plain.net_terms.is_some(), "{what}: a charge invoice has its terms");

        // A charge invoice paid partly by credit from invoice 1005 and written off by 1006
        // (later than the card payment, listed after it).
        let charge = document(&sources(CreditSide {
            kind: DocumentKind::Charge,
            credit_payments: vec![
                credit_payment(CreditAction::WriteOff, 1006, 1001, 200, T0 + 2 * DAY),
                credit_payment(CreditAction::Payment, 1005, 1001, 300, T0 + DAY),
            ],
        }));
        assert_eq!((charge.totals.credit_applied_in_cents, charge.totals.write_off_in_cents), (300, 200), "{what}");
        let sources_shown: Vec<&PaymentSource> = charge.payments.iter().map(|p| &p.source).collect();
        assert!(matches!(sources_shown[0], PaymentSource::Transaction(_)), "{what}: {sources_shown:?}");
        assert_eq!(sources_shown[1], &PaymentSource::Credit { invoice_number: "1005".into() }, "{what}");
        assert_eq!(sources_shown[2], &PaymentSource::Credit { invoice_number: "1006".into() }, "{what}");
        assert_shows(
            &text(&render(&charge, Locale::EnUs)),
            &[
                "Invoice 1001",
                "Credit Applied",
                "-3.00 USD",
                "Write-Off",
                "-2.00 USD",
                "Credit from invoice #1005",
                "Credit from invoice #1006",
            ],
            &what,
        );

        // The same invoice read as a credit invoice crediting 1000: its credit used on 1003,
        // refunded and voided; a reduction and a refund are in the totals only.
        let credit = document(&sources(CreditSide {
            kind: DocumentKind::Credit { credited_invoices: vec!["1000".into()] },
            credit_payments: vec![
                credit_payment(CreditAction::Payment, 1001, 1003, 400, T0 + DAY),
                credit_payment(CreditAction::Refund, 1001, 1001, 100, T0 + DAY),
                credit_payment(CreditAction::Reduction, 1001, 1001, 50, T0 + DAY),
            ],
        }));
        assert_eq!(
            (
                credit.totals.credit_applied_in_cents,
                credit.totals.payment_refund_in_cents,
                credit.totals.credit_voided_in_cents
            ),
            (400, 100, 50),
            "{what}"
        );
        assert_eq!((credit.due_on, credit.net_terms), (None, None), "{what}: a credit invoice has no terms");
        assert_eq!(credit.payments.len(), 2, "{what}: the card payment and the credit used");
        assert_shows(
            &text(&render(&credit, Locale::FrFr)),
            &[
                "Avoir 1001",
                "Avoir sur la facture #1000",
                "Crédit appliqué à la facture #1003",
                "Crédit appliqué",
                "4,00 USD",
                "Remboursement",
                "1,00 USD",
                "Crédit annulé",
                "0,50 USD",
            ],
            &what,
        );
    }
}
