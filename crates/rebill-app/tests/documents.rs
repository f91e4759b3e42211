//! An invoice's PDF from the use case, in process on both backends: the subscriber's first
//! invoice with its line, its card payment and the sandbox watermark; an unknown invoice is not
//! found.

use lopdf::Document;
use rebill_app::documents::invoice_pdf;
use rebill_app::queries::ReadError;
use rebill_app::testing::{Scripted, T0, TestClock, subscribers};
use rebill_store::testing::both_backends;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invoice_renders_with_its_lines_payments_and_watermark() {
    for store in both_backends("app_invoice_pdf").await {
        let backend = store.backend();
        let (services, ctx) = subscribers(store, Scripted::declining(&[]), TestClock::starting(T0), 1).await;
        let pdf = invoice_pdf(&services, &ctx, "1001").await.expect("the first invoice renders");
        let doc = Document::load_mem(&pdf).expect("the PDF parses");
        let pages: Vec<u32> = doc.get_pages().keys().copied().collect();
        let text = doc.extract_text(&pages).expect("text");
        for expected in
            ["harness", "Invoice 1001", "Paid", "Verena Example", "10.00 USD", "Visa ending in 1111", "TEST INVOICE"]
        {
            assert!(text.contains(expected), "{backend:?}: {expected:?} missing from:\n{text}");
        }
        assert!(matches!(invoice_pdf(&services, &ctx, "999").await, Err(ReadError::NotFound(_))), "{backend:?}");
        assert!(matches!(invoice_pdf(&services, &ctx, "abc").await, Err(ReadError::NotFound(_))), "{backend:?}");
    }
}
