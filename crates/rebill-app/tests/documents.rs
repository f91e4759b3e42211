//! An invoice's PDF from the use case, in process on both backends: the subscriber's first
//! invoice with its line, its card payment and the sandbox watermark, in English and in German;
//! refunds of it on a site with Credit Memos as credit invoices (one keeping the credit, then
//! voided; one refunded to the card) and without them as a legacy refund invoice; the credit payments of
//! every kind on either side of an invoice mapped to its totals and payments; an unknown invoice
//! is not found.

use lopdf::Document;
use rebill_app::billing::documents::{DocumentKind, Locale, Sources, document, invoice_pdf};
use rebill_app::billing::queries::{self, ReadError};
use rebill_app::money_back::refunds::{RefundRequest, refund_invoice};
use rebill_app::operations::testing::{DAY, Scripted, T0, TestClock, subscribers};
use rebill_app::{Context, Services};
use rebill_billing::refund::RefundMethod;
use rebill_pdf::{PaymentSource, render};
use rebill_store::SiteUpdate;
use rebill_store::credits::{CreditPayment, CreditPaymentAction};
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

async fn pdf_text(services: &Services, ctx: &Context, number: &str, locale: Locale) -> String {
    text(&invoice_pdf(services, ctx, number, locale).await.expect("the invoice renders"))
}

fn refund(amount: i64, method: RefundMethod) -> RefundRequest {
    RefundRequest::of_amount(Some(amount), method)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invoice_renders_with_its_lines_payments_and_watermark_in_its_language() {
    for store in both_backends("app_invoice_pdf").await {
        let backend = store.backend();
        let (services, ctx) = subscribers(store, Scripted::declining(&[]), TestClock::starting(T0), 1).await;
        let what = format!("{backend:?}");
        let english = pdf_text(&services, &ctx, "1001", Locale::EnUs).await;
        assert_shows(
            &english,
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
        let german = pdf_text(&services, &ctx, "1001", Locale::DeDe).await;
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
async fn refunds_render_as_credit_and_legacy_refund_invoices() {
    for store in both_backends("app_invoice_pdf_refunds").await {
        let what = format!("{:?}", store.backend());
        let (services, mut ctx) = subscribers(store, Scripted::declining(&[]), TestClock::starting(T0), 1).await;

        // Without Credit Memos: a legacy refund invoice, paid back to the card.
        let legacy = refund_invoice(&services, &ctx, "1001", &refund(100, RefundMethod::TransactionFirst))
            .await
            .expect("a legacy refund");
        let text = pdf_text(&services, &ctx, &legacy.invoice_number.to_string(), Locale::EnUs).await;
        assert_shows(
            &text,
            &[
                "Refund Invoice 1002",
                "Refund for invoice #1001",
                "-1.00 USD",
                "Payment Refund",
                "1.00 USD",
                "Balance",
                "0.00 USD",
            ],
            &what,
        );
        assert!(!text.contains("Due date"), "{what}: a refund invoice has no terms:\n{text}");

        // With Credit Memos: the credit kept on an open credit invoice, then credit refunded to
        // the card on a closed one.
        ctx.site = services
            .store
            .update_site(&ctx.site.name, &SiteUpdate { credit_memos: Some(true), ..SiteUpdate::default() })
            .await
            .expect("Credit Memos on");
        let kept =
            refund_invoice(&services, &ctx, "1001", &refund(300, RefundMethod::AllCredit)).await.expect("credit");
        let text = pdf_text(&services, &ctx, &kept.invoice_number.to_string(), Locale::EnUs).await;
        assert_shows(
            &text,
            &["Credit Invoice 1003", "Credit for invoice #1001", "Open", "Total", "-3.00 USD", "Balance"],
            &what,
        );
        assert!(!text.contains("Payment Refund") && !text.contains("Paid"), "{what}: nothing left it yet:\n{text}");
        // Its credit voided: a reduction, in the totals only.
        let number = kept.invoice_number.to_string();
        rebill_app::money_back::credit_invoices::void(&services, &ctx, &number).await.expect("voided");
        let text = pdf_text(&services, &ctx, &number, Locale::EnUs).await;
        assert_shows(
            &text,
            &["Credit Invoice 1003", "Voided", "Credit Voided", "3.00 USD", "Balance", "0.00 USD"],
            &what,
        );
        assert!(!text.contains("Payment Refund"), "{what}: a void is no refund:\n{text}");
        let back = refund_invoice(&services, &ctx, "1001", &refund(200, RefundMethod::AllTransaction))
            .await
            .expect("refund to the card");
        let text = pdf_text(&services, &ctx, &back.invoice_number.to_string(), Locale::DeDe).await;
        assert_shows(
            &text,
            &[
                "Gutschrift 1004",
                "Gutschrift für Rechnung #1001",
                "Geschlossen",
                "-2,00 USD",
                "Zahlungserstattung",
                "2,00 USD",
                "Saldo",
                "0,00 USD",
                "Visa mit Endziffern 1111",
            ],
            &what,
        );
    }
}

/// A stored credit payment of `amount` from credit invoice `from` to invoice `to`.
fn credit_payment(action: CreditPaymentAction, from: i64, to: Option<i64>, amount: i64, at: i64) -> CreditPayment {
    CreditPayment {
        id: at,
        uuid: format!("{at:032x}"),
        site_id: 1,
        account_id: 1,
        account_code: "a0".into(),
        action,
        currency: "USD".into(),
        amount,
        original_invoice_id: from,
        original_invoice_number: from,
        applied_to_invoice_id: to,
        applied_to_invoice_number: to,
        original_credit_payment_uuid: None,
        refund_transaction_uuid: None,
        created_at: at,
        updated_at: at,
        voided_at: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credit_payments_on_either_side_map_to_the_totals_and_payments() {
    for store in both_backends("app_invoice_pdf_credit").await {
        let what = format!("{:?}", store.backend());
        let (services, ctx) = subscribers(store, Scripted::declining(&[]), TestClock::starting(T0), 1).await;
        let mut invoice = queries::invoice(&services, &ctx, "1001").await.expect("invoice");
        let details = queries::invoice_details(&services, &invoice).await.expect("details");
        let account = services.store.account(ctx.site.id, "a0").await.expect("read").expect("account");
        let billing = services.store.billing_info(account.id).await.expect("billing info");

        // A charge invoice of 10.00 paid 3.00 by credit from 1005, written off 2.00 by 1006 and
        // the rest by card; a voided credit payment and one between other invoices count for
        // nothing.
        invoice.amounts.paid = 1000;
        let mut voided = credit_payment(CreditPaymentAction::Payment, 1007, Some(1001), 400, T0);
        voided.voided_at = Some(T0 + DAY);
        let payments = [
            credit_payment(CreditPaymentAction::WriteOff, 1006, Some(1001), 200, T0 + 2 * DAY),
            credit_payment(CreditPaymentAction::Payment, 1005, Some(1001), 300, T0 + DAY),
            voided,
        ];
        let charge = document(&Sources {
            site_name: &ctx.site.name,
            test: false,
            invoice: &invoice,
            details: &details,
            account: &account,
            billing: billing.as_ref(),
            credit_payments: &payments,
        });
        assert_eq!(charge.kind, DocumentKind::Charge, "{what}");
        let t = charge.totals;
        assert_eq!((t.paid_in_cents, t.credit_applied_in_cents, t.write_off_in_cents), (500, 300, 200), "{what}");
        let shown: Vec<&PaymentSource> = charge.payments.iter().map(|p| &p.source).collect();
        assert_eq!(shown.len(), 3, "{what}: {shown:?}");
        assert!(matches!(shown[0], PaymentSource::Transaction(_)), "{what}: the card first: {shown:?}");
        assert_eq!(shown[1], &PaymentSource::Credit { invoice_number: "1005".into() }, "{what}");
        assert_eq!(shown[2], &PaymentSource::Credit { invoice_number: "1006".into() }, "{what}");
        assert_shows(
            &text(&render(&charge, Locale::EnUs)),
            &[
                "Paid",
                "-5.00 USD",
                "Credit Applied",
                "-3.00 USD",
                "Write-Off",
                "-2.00 USD",
                "Credit from invoice #1005",
                "Credit from invoice #1006",
            ],
            &what,
        );

        // The same invoice as a credit invoice of -10.00 crediting 1000: 4.00 used on 1003,
        // 0.50 voided, 1.00 refunded to the card (the rest of what it paid out), 4.50 left.
        invoice.kind = rebill_store::invoices::InvoiceKind::Credit;
        invoice.original_invoice_number = Some(1000);
        invoice.amounts.total = -1000;
        invoice.amounts.subtotal_before_discount = -1000;
        invoice.amounts.paid = -550;
        invoice.amounts.balance = -450;
        let payments = [
            credit_payment(CreditPaymentAction::Payment, 1001, Some(1003), 400, T0 + DAY),
            credit_payment(CreditPaymentAction::Reduction, 1001, Some(1001), 50, T0 + DAY),
        ];
        let credit = document(&Sources {
            site_name: &ctx.site.name,
            test: false,
            invoice: &invoice,
            details: &details,
            account: &account,
            billing: billing.as_ref(),
            credit_payments: &payments,
        });
        assert_eq!(credit.kind, DocumentKind::Credit { credited_invoices: vec!["1000".into()] }, "{what}");
        let t = credit.totals;
        assert_eq!(
            (t.paid_in_cents, t.credit_applied_in_cents, t.credit_voided_in_cents, t.payment_refund_in_cents),
            (0, 400, 50, 100),
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
                "-4,50 USD",
            ],
            &what,
        );
    }
}
