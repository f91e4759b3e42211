//! Benchmark input and the quick-xml serde mirror used by `benches/invoices.rs`.
//!
//! - [`invoice_page`] builds the benchmark input: a list page of [`PAGE_INVOICES`] invoices, each a
//!   copy of `schema/examples/invoice.xml` with its own `invoice_number` and `uuid`, written by
//!   rebill's own encoder (`<invoices type="array">`).
//! - [`Invoices`] and the structs below it mirror every element and attribute of that document for
//!   quick-xml's serde path (`quick_xml::de::from_str` / `quick_xml::se::to_string`). Leaves stay
//!   strings ([`Leaf`]): the serde path neither parses integers, floats, booleans, datetimes or
//!   enums, nor turns hrefs into paths, which favours it in the comparison. Every optional field
//!   is `skip_serializing_if = "Option::is_none"`: quick-xml would otherwise write `None` as an
//!   empty element.

use rebill_models::Invoice;
use rebill_xml::version::LATEST_VERSION;
use rebill_xml::{Features, Mode, WireContext, from_xml, list_to_xml};
use serde::{Deserialize, Serialize};

/// The example invoice (API 2.11, feature `credit_memos`, base URL `https://api.rebill.test`).
pub const EXAMPLE_INVOICE: &str = include_str!("../../../schema/examples/invoice.xml");

/// Invoices on the benchmark page.
pub const PAGE_INVOICES: usize = 200;

/// Base URL the example is written on.
pub const BASE_URL: &str = "https://api.rebill.test";

/// The context the page is written and read in: latest version, every feature.
pub fn context() -> WireContext {
    WireContext::new(LATEST_VERSION, Features::all(), BASE_URL)
}

/// The [`PAGE_INVOICES`] invoices of the page, as models: copies of the example with distinct
/// `invoice_number` (and so distinct `href`) and `uuid`.
pub fn page_invoices() -> Vec<Invoice> {
    let ctx = context();
    let example: Invoice =
        from_xml(EXAMPLE_INVOICE.as_bytes(), &ctx, Mode::Response).expect("schema/examples/invoice.xml decodes");
    (0..PAGE_INVOICES)
        .map(|i| {
            let n = i64::try_from(i).expect("page index fits i64");
            let mut invoice = example.clone();
            invoice.invoice_number = Some(1108 + n);
            invoice.uuid = Some(format!("4a1e2a8d5a9a3c2f7b0e{n:012x}"));
            invoice
        })
        .collect()
}

/// The benchmark input: [`page_invoices`] written as one `<invoices type="array">` response.
pub fn invoice_page() -> String {
    list_to_xml(&page_invoices(), &context(), Mode::Response)
}

// ---- serde mirror of the page ----

/// A value element: optional `type` and `nil` attributes and the text, kept as a string.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Leaf {
    #[serde(rename = "@type", default, skip_serializing_if = "Option::is_none")]
    pub ty: Option<String>,
    #[serde(rename = "@nil", default, skip_serializing_if = "Option::is_none")]
    pub nil: Option<String>,
    #[serde(rename = "$text", default)]
    pub text: Option<String>,
}

/// `<name href="…"/>`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Link {
    #[serde(rename = "@href")]
    pub href: String,
}

/// `<a name="…" href="…" method="…"/>`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Anchor {
    #[serde(rename = "@name")]
    pub name: String,
    #[serde(rename = "@href")]
    pub href: String,
    #[serde(rename = "@method")]
    pub method: String,
}

/// The page root: `<invoices type="array">`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename = "invoices")]
pub struct Invoices {
    #[serde(rename = "@type", default, skip_serializing_if = "Option::is_none")]
    pub ty: Option<String>,
    #[serde(rename = "invoice", default)]
    pub invoice: Vec<SerdeInvoice>,
}

/// `<invoice>`, every child of the example.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct SerdeInvoice {
    #[serde(rename = "@href", default, skip_serializing_if = "Option::is_none")]
    pub href: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub account: Option<Link>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subscription: Option<Link>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subscriptions: Option<Link>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub original_invoice: Option<Link>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub credit_invoices: Option<Link>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub original_invoices: Option<Link>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub redemptions: Option<Link>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub all_line_items: Option<Link>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub all_transactions: Option<Link>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub address: Option<SerdeAddress>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shipping_address: Option<SerdeShippingAddress>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uuid: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub invoice_number_prefix: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub invoice_number: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub po_number: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vat_number: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subtotal_before_discount_in_cents: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub discount_in_cents: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subtotal_in_cents: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tax_in_cents: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total_in_cents: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub balance_in_cents: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refundable_total_in_cents: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub currency: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub due_on: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created_at: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attempt_next_collection_at: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub closed_at: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recovery_reason: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub terms_and_conditions: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub customer_notes: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vat_reverse_charge_notes: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub credit_customer_notes: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tax_type: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tax_region: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tax_rate: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub net_terms: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub collection_method: Option<Leaf>,
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub origin: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refund_method: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refund_tax_date: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refund_geo_code: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line_items: Option<LineItems>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub credit_payments: Option<CreditPayments>,
    #[serde(default)]
    pub a: Vec<Anchor>,
}

/// `<address>` (billing address).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct SerdeAddress {
    #[serde(rename = "@nil", default, skip_serializing_if = "Option::is_none")]
    pub nil: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub address1: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub address2: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub city: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zip: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub country: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phone: Option<Leaf>,
}

/// `<shipping_address>` (of the invoice and of each line item; may be `nil`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct SerdeShippingAddress {
    #[serde(rename = "@href", default, skip_serializing_if = "Option::is_none")]
    pub href: Option<String>,
    #[serde(rename = "@nil", default, skip_serializing_if = "Option::is_none")]
    pub nil: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub account: Option<Link>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subscriptions: Option<Link>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nickname: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_name: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_name: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub company: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phone: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub email: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vat_number: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub address1: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub address2: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub city: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zip: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub country: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub geo_code: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created_at: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<Leaf>,
}

/// `<line_items type="array">`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct LineItems {
    #[serde(rename = "@type", default, skip_serializing_if = "Option::is_none")]
    pub ty: Option<String>,
    #[serde(default)]
    pub adjustment: Vec<SerdeAdjustment>,
}

/// `<adjustment>`, every child of the example's line items.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct SerdeAdjustment {
    #[serde(rename = "@href", default, skip_serializing_if = "Option::is_none")]
    pub href: Option<String>,
    #[serde(rename = "@type", default, skip_serializing_if = "Option::is_none")]
    pub ty: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub account: Option<Link>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub invoice: Option<Link>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subscription: Option<Link>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub original_adjustment: Option<Link>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub credit_adjustments: Option<Link>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uuid: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub accounting_code: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub product_code: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub origin: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unit_amount_in_cents: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quantity: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub original_adjustment_uuid: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub discount_in_cents: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tax_in_cents: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total_in_cents: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub currency: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proration_rate: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub taxable: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tax_type: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tax_region: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tax_rate: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tax_exempt: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tax_code: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tax_details: Option<TaxDetails>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start_date: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub end_date: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created_at: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revenue_schedule_type: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub credit_reason_code: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quantity_remaining: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refundable_total_in_cents: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shipping_address: Option<SerdeShippingAddress>,
}

/// `<tax_details type="array">`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct TaxDetails {
    #[serde(rename = "@type", default, skip_serializing_if = "Option::is_none")]
    pub ty: Option<String>,
    #[serde(default)]
    pub tax_detail: Vec<SerdeTaxDetail>,
}

/// `<tax_detail>`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct SerdeTaxDetail {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<Leaf>,
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tax_rate: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tax_in_cents: Option<Leaf>,
}

/// `<credit_payments type="array">`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct CreditPayments {
    #[serde(rename = "@type", default, skip_serializing_if = "Option::is_none")]
    pub ty: Option<String>,
    #[serde(default)]
    pub credit_payment: Vec<SerdeCreditPayment>,
}

/// `<credit_payment>`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct SerdeCreditPayment {
    #[serde(rename = "@href", default, skip_serializing_if = "Option::is_none")]
    pub href: Option<String>,
    #[serde(rename = "@type", default, skip_serializing_if = "Option::is_none")]
    pub ty: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub account: Option<Link>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub original_invoice: Option<Link>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub applied_to_invoice: Option<Link>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub original_credit_payment: Option<Link>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refund_transaction: Option<Link>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uuid: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub action: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub currency: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub amount_in_cents: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created_at: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<Leaf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub voided_at: Option<Leaf>,
}

/// Reads the page with quick-xml's serde path.
pub fn serde_decode(page: &str) -> Result<Invoices, quick_xml::DeError> {
    quick_xml::de::from_str(page)
}

/// Writes the page with quick-xml's serde path.
pub fn serde_encode(invoices: &Invoices) -> Result<String, quick_xml::SeError> {
    quick_xml::se::to_string(invoices)
}

#[cfg(test)]
mod tests {
    use rebill_xml::list_from_xml;

    use super::*;

    fn text(leaf: &Option<Leaf>) -> Option<&str> {
        leaf.as_ref().and_then(|l| l.text.as_deref())
    }

    #[test]
    fn page_size_and_our_decoder_round_trip() {
        let page = invoice_page();
        // 200 copies of the ~10 KB example: about 2.1 MB.
        assert!((1_800_000..=2_400_000).contains(&page.len()), "page is {} bytes", page.len());
        let written = page_invoices();
        let read: Vec<Invoice> = list_from_xml(page.as_bytes(), &context(), Mode::Response).expect("page decodes");
        assert_eq!(read.len(), PAGE_INVOICES);
        assert_eq!(read, written);
    }

    #[test]
    fn serde_path_reads_the_same_page() {
        let page = invoice_page();
        let serde = serde_decode(&page).expect("serde path reads the page");
        assert_eq!(serde.invoice.len(), PAGE_INVOICES);
        let ours = page_invoices();
        let numbers: Vec<Option<i64>> =
            serde.invoice.iter().map(|i| text(&i.invoice_number).map(|t| t.parse().expect("integer"))).collect();
        let expected: Vec<Option<i64>> = ours.iter().map(|i| i.invoice_number).collect();
        assert_eq!(numbers, expected);

        // Spot-check that every part of the document reached the mirror.
        let first = &serde.invoice[0];
        assert_eq!(first.href.as_deref(), Some("https://api.rebill.test/v2/invoices/1108"));
        assert_eq!(text(&first.uuid), ours[0].uuid.as_deref());
        assert_eq!(first.a.len(), 4);
        assert_eq!(first.a[3].name, "void");
        assert_eq!(first.vat_number.as_ref().and_then(|l| l.nil.as_deref()), Some("nil"));
        assert_eq!(text(&first.kind), Some("charge"));
        let address = first.address.as_ref().expect("address");
        assert_eq!(text(&address.zip), Some("94105"));
        let shipping = first.shipping_address.as_ref().expect("shipping address");
        assert_eq!(text(&shipping.id), Some("2438622711411416831"));
        let items = &first.line_items.as_ref().expect("line items").adjustment;
        assert_eq!(items.len(), 2);
        assert_eq!(items[0].ty.as_deref(), Some("charge"));
        let details = &items[0].tax_details.as_ref().expect("tax details").tax_detail;
        assert_eq!(details.len(), 2);
        assert_eq!(text(&details[1].kind), Some("county"));
        assert_eq!(text(&details[1].tax_in_cents), Some("45"));
        assert!(items[1].tax_details.as_ref().expect("empty tax details").tax_detail.is_empty());
        let nested = items[0].shipping_address.as_ref().expect("nested shipping address");
        assert_eq!(text(&nested.email), Some("verena@example.com"));
        assert_eq!(items[1].shipping_address.as_ref().and_then(|s| s.nil.as_deref()), Some("nil"));
        let payments = &first.credit_payments.as_ref().expect("credit payments").credit_payment;
        assert_eq!(payments.len(), 1);
        assert_eq!(text(&payments[0].amount_in_cents), Some("458"));
        assert_eq!(
            payments[0].applied_to_invoice.as_ref().map(|l| l.href.as_str()),
            Some("https://api.rebill.test/v2/invoices/1108")
        );
    }

    #[test]
    fn serde_output_reparses() {
        let serde = serde_decode(&invoice_page()).expect("serde path reads the page");
        let out = serde_encode(&serde).expect("serde path writes the page");
        assert!(out.starts_with("<invoices type=\"array\">"), "{}", &out[..100]);
        let again = serde_decode(&out).expect("serde output re-parses");
        assert_eq!(again, serde);
    }

    /// A document as a flat list of tags and texts: `<x/>` reads as `<x></x>`, blank text and the
    /// declaration are dropped.
    fn events(doc: &str) -> Vec<String> {
        use quick_xml::events::Event;
        let mut reader = quick_xml::Reader::from_str(doc);
        reader.config_mut().expand_empty_elements = true;
        let mut out = Vec::new();
        loop {
            match reader.read_event().expect("well-formed") {
                Event::Start(s) => out.push(format!("<{}>", &*s)),
                Event::End(e) => out.push(format!("</{}>", e.name().0)),
                Event::Text(t) if !t.trim().is_empty() => out.push(t.to_string()),
                Event::Eof => return out,
                _ => {}
            }
        }
    }

    /// The mirror drops nothing: writing back what it read gives the page's elements, attributes
    /// and texts, in the same order (only whitespace and `<x></x>` versus `<x/>` differ).
    #[test]
    fn serde_mirror_covers_every_element() {
        let page = invoice_page();
        let out = serde_encode(&serde_decode(&page).expect("serde path reads the page")).expect("serde writes");
        let (ours, theirs) = (events(&page), events(&out));
        assert!(ours.len() > 90_000, "{} events", ours.len());
        assert_eq!(theirs, ours);
    }
}
