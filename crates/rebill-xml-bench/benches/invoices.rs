//! Decoding and encoding a 200-invoice list page: rebill's codec next to quick-xml's raw event
//! loop (a lower bound for any decoder built on quick-xml) and quick-xml's serde path.
//!
//! Run with `cargo bench -p rebill-xml-bench` (system allocator) or with `--features mimalloc`;
//! results are described in `docs/benchmarks.md`.

#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use quick_xml::Reader;
use quick_xml::events::Event;
use rebill_models::Invoice;
use rebill_xml::{Mode, list_from_xml, list_to_xml};
use rebill_xml_bench::{Invoices, PAGE_INVOICES, context, invoice_page, serde_decode, serde_encode};

/// Reads every event of `page` and counts the start and empty tags.
fn raw_events(page: &str) -> usize {
    let mut reader = Reader::from_str(page);
    let mut elements = 0;
    loop {
        match reader.read_event().expect("well-formed page") {
            Event::Start(_) | Event::Empty(_) => elements += 1,
            Event::Eof => return elements,
            _ => {}
        }
    }
}

fn decode(c: &mut Criterion) {
    let page = invoice_page();
    let ctx = context();
    let mut group = c.benchmark_group("decode");
    group.throughput(Throughput::Bytes(page.len() as u64));

    group.bench_function("raw_events", |b| b.iter(|| raw_events(black_box(&page))));
    group.bench_function("rebill", |b| {
        b.iter(|| {
            let invoices: Vec<Invoice> =
                list_from_xml(black_box(page.as_bytes()), &ctx, Mode::Response).expect("rebill decodes the page");
            debug_assert_eq!(invoices.len(), PAGE_INVOICES);
            invoices
        })
    });
    group.bench_function("quick_xml_serde", |b| {
        b.iter(|| {
            let invoices: Invoices = serde_decode(black_box(&page)).expect("serde decodes the page");
            debug_assert_eq!(invoices.invoice.len(), PAGE_INVOICES);
            invoices
        })
    });
    group.finish();
}

fn encode(c: &mut Criterion) {
    let page = invoice_page();
    let ctx = context();
    let models: Vec<Invoice> = list_from_xml(page.as_bytes(), &ctx, Mode::Response).expect("rebill decodes the page");
    let mirror: Invoices = serde_decode(&page).expect("serde decodes the page");
    assert_eq!(models.len(), PAGE_INVOICES);
    assert_eq!(mirror.invoice.len(), PAGE_INVOICES);

    let mut group = c.benchmark_group("encode");
    // Both variants are measured against the input page size, so the figures compare time per
    // page (quick-xml's serde output is smaller: it has no indentation and writes `<x/>`).
    group.throughput(Throughput::Bytes(page.len() as u64));
    group.bench_function("rebill", |b| b.iter(|| list_to_xml(black_box(&models), &ctx, Mode::Response)));
    group.bench_function("quick_xml_serde", |b| {
        b.iter(|| serde_encode(black_box(&mirror)).expect("serde encodes the page"))
    });
    group.finish();
}

fn config() -> Criterion {
    Criterion::default().sample_size(30).warm_up_time(Duration::from_secs(2)).measurement_time(Duration::from_secs(5))
}

criterion_group! {
    name = benches;
    config = config();
    targets = decode, encode
}
criterion_main!(benches);
