//! Invoices as PDF documents: [`render`] lays an [`InvoiceDocument`] (plain values an adapter
//! fills from an invoice, its lines, its payments and its site) out on A4 pages, with the
//! sections a billing system's invoice shows — number, dates and terms; the site; bill-to; the
//! line items (at most [`MAX_LINES`]); the totals down to the balance; the payments; the notes —
//! and, on sandbox sites, a "TEST INVOICE" watermark on every page.
//!
//! The text is set in the PDF base fonts (Helvetica, Helvetica-Bold) with the WinAnsi encoding,
//! so nothing is embedded and every reader shows it; a character that encoding cannot hold is
//! written `?`. Labels, dates (`Jan 5, 2027`) and amounts (`1,234.56`) are in US English
//! whatever the requested language: the one layout rebill has.
//!
//! No I/O: the caller gets the bytes.

mod metrics;
mod text;

use chrono::{DateTime, Utc};
use pdf_writer::{Content, Name, Pdf, Rect, Ref, Str, TextStr};

pub use text::{format_date, format_money};

/// At most this many line items are drawn; a line says how many more the invoice has.
pub const MAX_LINES: usize = 500;

/// What an invoice PDF shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvoiceDocument {
    /// The site's name (the "From" of the invoice).
    pub site_name: String,
    /// The invoice number as shown, with its prefix.
    pub invoice_number: String,
    /// "Invoice" or "Credit invoice".
    pub kind: String,
    /// The state as a word ("Paid", "Past due", …).
    pub state: String,
    /// Posting date.
    pub created_at: DateTime<Utc>,
    pub due_on: Option<DateTime<Utc>>,
    pub net_terms: Option<i64>,
    pub po_number: Option<String>,
    /// The currency of every amount.
    pub currency: String,
    /// The bill-to block, one line each (name, company, address, e-mail, VAT number).
    pub bill_to: Vec<String>,
    pub lines: Vec<Line>,
    pub totals: Totals,
    /// The payments that reduced the balance, in order.
    pub payments: Vec<Payment>,
    /// Notes with their headings, only those that are not empty.
    pub notes: Vec<(String, String)>,
    /// A sandbox site's invoice: watermarked "TEST INVOICE".
    pub test: bool,
}

/// A line item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    pub date: DateTime<Utc>,
    pub description: String,
    pub quantity: i64,
    pub unit_amount_in_cents: i64,
    pub total_in_cents: i64,
}

/// The money of an invoice, in cents.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    pub subtotal_in_cents: i64,
    pub discount_in_cents: i64,
    pub tax_in_cents: i64,
    pub total_in_cents: i64,
    pub paid_in_cents: i64,
    pub balance_in_cents: i64,
}

/// A payment of the invoice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Payment {
    pub date: DateTime<Utc>,
    /// What paid ("Visa ending in 1111", "Bank account ending in 6789", "Credit").
    pub description: String,
    pub amount_in_cents: i64,
    /// "Successful", "Declined", …
    pub status: String,
}

const WIDTH: f32 = 595.0;
const HEIGHT: f32 = 842.0;
const LEFT: f32 = 50.0;
const RIGHT: f32 = WIDTH - 50.0;
const TOP: f32 = HEIGHT - 56.0;
const BOTTOM: f32 = 64.0;
const REGULAR: Name<'static> = Name(b"F1");
const BOLD: Name<'static> = Name(b"F2");

/// Columns of the line-item table: left edges of date and description, right edges of the
/// numbers.
const COL_DATE: f32 = LEFT;
const COL_DESCRIPTION: f32 = LEFT + 78.0;
const COL_QUANTITY: f32 = RIGHT - 170.0;
const COL_UNIT: f32 = RIGHT - 85.0;
const COL_TOTAL: f32 = RIGHT;

/// The PDF of `doc`.
pub fn render(doc: &InvoiceDocument) -> Vec<u8> {
    let mut layout = Layout::new(doc.test);
    header(&mut layout, doc);
    line_items(&mut layout, doc);
    totals(&mut layout, doc);
    payments(&mut layout, doc);
    notes(&mut layout, doc);
    layout.finish(&format!("{} {}", doc.kind, doc.invoice_number))
}

fn header(l: &mut Layout, doc: &InvoiceDocument) {
    l.text(LEFT, l.y, BOLD, 18.0, &doc.site_name);
    l.text_right(RIGHT, l.y, BOLD, 18.0, &format!("{} {}", doc.kind, doc.invoice_number));
    l.y -= 30.0;
    let mut facts = vec![("Invoice date", format_date(doc.created_at)), ("State", doc.state.clone())];
    if let Some(due) = doc.due_on {
        facts.push(("Due date", format_date(due)));
    }
    if let Some(terms) = doc.net_terms {
        facts.push(("Payment terms", format!("Net {terms}")));
    }
    if let Some(po) = doc.po_number.as_deref().filter(|p| !p.is_empty()) {
        facts.push(("PO number", po.to_owned()));
    }
    facts.push(("Currency", doc.currency.clone()));
    let top = l.y;
    l.text(LEFT, l.y, BOLD, 10.0, "Bill to");
    l.y -= 14.0;
    for line in &doc.bill_to {
        l.text(LEFT, l.y, REGULAR, 10.0, &text::truncate(line, REGULAR_SIZE_WIDTH, 10.0));
        l.y -= 13.0;
    }
    let mut y = top;
    for (label, value) in &facts {
        l.text(RIGHT - 200.0, y, BOLD, 10.0, label);
        l.text_right(RIGHT, y, REGULAR, 10.0, value);
        y -= 13.0;
    }
    l.y = l.y.min(y) - 18.0;
}

/// Widest text of the bill-to block and the descriptions (points at 10 pt).
const REGULAR_SIZE_WIDTH: f32 = 230.0;

fn table_head(l: &mut Layout) {
    l.text(COL_DATE, l.y, BOLD, 9.0, "Date");
    l.text(COL_DESCRIPTION, l.y, BOLD, 9.0, "Description");
    l.text_right(COL_QUANTITY, l.y, BOLD, 9.0, "Quantity");
    l.text_right(COL_UNIT, l.y, BOLD, 9.0, "Price");
    l.text_right(COL_TOTAL, l.y, BOLD, 9.0, "Total");
    l.y -= 5.0;
    l.rule();
    l.y -= 13.0;
}

fn line_items(l: &mut Layout, doc: &InvoiceDocument) {
    table_head(l);
    for line in doc.lines.iter().take(MAX_LINES) {
        if l.needs_page(14.0) {
            l.new_page();
            table_head(l);
        }
        l.text(COL_DATE, l.y, REGULAR, 9.0, &format_date(line.date));
        l.text(
            COL_DESCRIPTION,
            l.y,
            REGULAR,
            9.0,
            &text::truncate(&line.description, COL_QUANTITY - COL_DESCRIPTION - 60.0, 9.0),
        );
        l.text_right(COL_QUANTITY, l.y, REGULAR, 9.0, &line.quantity.to_string());
        l.text_right(COL_UNIT, l.y, REGULAR, 9.0, &format_money(line.unit_amount_in_cents));
        l.text_right(COL_TOTAL, l.y, REGULAR, 9.0, &format_money(line.total_in_cents));
        l.y -= 14.0;
    }
    if doc.lines.len() > MAX_LINES {
        let more = doc.lines.len() - MAX_LINES;
        l.text(COL_DESCRIPTION, l.y, REGULAR, 9.0, &format!("… and {more} more line items (see the invoice online)"));
        l.y -= 14.0;
    }
    l.rule();
    l.y -= 16.0;
}

fn totals(l: &mut Layout, doc: &InvoiceDocument) {
    let t = &doc.totals;
    let mut rows = vec![("Subtotal", t.subtotal_in_cents, false)];
    if t.discount_in_cents != 0 {
        rows.push(("Discount", -t.discount_in_cents, false));
    }
    if t.tax_in_cents != 0 {
        rows.push(("Tax", t.tax_in_cents, false));
    }
    rows.push(("Total", t.total_in_cents, true));
    rows.push(("Paid", -t.paid_in_cents, false));
    rows.push(("Balance", t.balance_in_cents, true));
    if l.needs_page(rows.len() as f32 * 14.0) {
        l.new_page();
    }
    for (label, amount, bold) in rows {
        let font = if bold { BOLD } else { REGULAR };
        l.text(COL_UNIT - 90.0, l.y, font, 10.0, label);
        l.text_right(COL_TOTAL, l.y, font, 10.0, &format!("{} {}", format_money(amount), doc.currency));
        l.y -= 14.0;
    }
    l.y -= 12.0;
}

fn payments(l: &mut Layout, doc: &InvoiceDocument) {
    if doc.payments.is_empty() {
        return;
    }
    if l.needs_page(40.0) {
        l.new_page();
    }
    l.text(LEFT, l.y, BOLD, 11.0, "Payments");
    l.y -= 16.0;
    for p in &doc.payments {
        if l.needs_page(14.0) {
            l.new_page();
        }
        l.text(COL_DATE, l.y, REGULAR, 9.0, &format_date(p.date));
        l.text(COL_DESCRIPTION, l.y, REGULAR, 9.0, &text::truncate(&p.description, 200.0, 9.0));
        l.text_right(COL_UNIT, l.y, REGULAR, 9.0, &p.status);
        l.text_right(COL_TOTAL, l.y, REGULAR, 9.0, &format!("{} {}", format_money(p.amount_in_cents), doc.currency));
        l.y -= 14.0;
    }
    l.y -= 12.0;
}

fn notes(l: &mut Layout, doc: &InvoiceDocument) {
    for (heading, body) in doc.notes.iter().filter(|(_, b)| !b.trim().is_empty()) {
        if l.needs_page(40.0) {
            l.new_page();
        }
        l.text(LEFT, l.y, BOLD, 11.0, heading);
        l.y -= 15.0;
        for line in text::wrap(body, RIGHT - LEFT, 9.0) {
            if l.needs_page(13.0) {
                l.new_page();
            }
            l.text(LEFT, l.y, REGULAR, 9.0, &line);
            l.y -= 12.0;
        }
        l.y -= 10.0;
    }
}

/// Pages being laid out, top to bottom, with the cursor `y`.
struct Layout {
    pages: Vec<Content>,
    y: f32,
    test: bool,
}

impl Layout {
    fn new(test: bool) -> Self {
        let mut layout = Self { pages: Vec::new(), y: TOP, test };
        layout.new_page();
        layout
    }

    fn new_page(&mut self) {
        let mut content = Content::new();
        if self.test {
            // Behind everything else: a light diagonal watermark.
            content.save_state();
            content.set_fill_gray(0.86);
            content.begin_text();
            content.set_font(BOLD, 72.0);
            let (s, c) = std::f32::consts::FRAC_PI_4.sin_cos();
            content.set_text_matrix([c, s, -s, c, 120.0, 230.0]);
            content.show(Str(&text::encode("TEST INVOICE")));
            content.end_text();
            content.restore_state();
        }
        self.pages.push(content);
        self.y = TOP;
    }

    fn needs_page(&self, height: f32) -> bool {
        self.y - height < BOTTOM
    }

    fn current(&mut self) -> &mut Content {
        if self.pages.is_empty() {
            self.new_page();
        }
        let last = self.pages.len() - 1;
        &mut self.pages[last]
    }

    fn text(&mut self, x: f32, y: f32, font: Name<'static>, size: f32, s: &str) {
        let bytes = text::encode(s);
        let content = self.current();
        content.begin_text();
        content.set_font(font, size);
        content.next_line(x, y);
        content.show(Str(&bytes));
        content.end_text();
    }

    fn text_right(&mut self, right: f32, y: f32, font: Name<'static>, size: f32, s: &str) {
        let width = metrics::width(s, size);
        self.text(right - width, y, font, size, s);
    }

    fn rule(&mut self) {
        let y = self.y;
        let content = self.current();
        content.set_line_width(0.5);
        content.set_stroke_gray(0.6);
        content.move_to(LEFT, y);
        content.line_to(RIGHT, y);
        content.stroke();
    }

    /// The document: every page with its footer.
    fn finish(mut self, title: &str) -> Vec<u8> {
        let count = self.pages.len();
        for (i, content) in self.pages.iter_mut().enumerate() {
            let footer = text::encode(&format!("Page {} of {count}", i + 1));
            content.begin_text();
            content.set_font(REGULAR, 8.0);
            content.next_line(RIGHT - metrics::width(&format!("Page {} of {count}", i + 1), 8.0), 36.0);
            content.show(Str(&footer));
            content.end_text();
        }
        let catalog = Ref::new(1);
        let tree = Ref::new(2);
        let regular = Ref::new(3);
        let bold = Ref::new(4);
        let info = Ref::new(5);
        let page_refs: Vec<(Ref, Ref)> =
            (0..count).map(|i| (Ref::new(6 + 2 * i as i32), Ref::new(7 + 2 * i as i32))).collect();
        let mut pdf = Pdf::new();
        pdf.catalog(catalog).pages(tree);
        pdf.pages(tree).kids(page_refs.iter().map(|(page, _)| *page)).count(count as i32);
        pdf.document_info(info).title(TextStr(title)).producer(TextStr("rebill"));
        for (font, name) in [(regular, b"Helvetica".as_slice()), (bold, b"Helvetica-Bold".as_slice())] {
            pdf.type1_font(font).base_font(Name(name)).encoding_predefined(Name(b"WinAnsiEncoding"));
        }
        for ((page_ref, content_ref), content) in page_refs.iter().zip(self.pages) {
            let mut page = pdf.page(*page_ref);
            page.media_box(Rect::new(0.0, 0.0, WIDTH, HEIGHT));
            page.parent(tree);
            page.contents(*content_ref);
            let mut resources = page.resources();
            resources.fonts().pair(REGULAR, regular).pair(BOLD, bold);
            drop(resources);
            drop(page);
            pdf.stream(*content_ref, &content.finish());
        }
        pdf.finish()
    }
}
