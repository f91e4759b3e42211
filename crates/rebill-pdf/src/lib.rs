//! Invoices as PDF documents: [`render`] lays an [`InvoiceDocument`] (plain values an adapter
//! fills from an invoice, its lines, its payments and its site) out on A4 pages in a
//! [`Locale`], with the sections a billing system's invoice shows — the kind of document and
//! its number, dates and terms (a credit invoice: the invoices it credits; a legacy refund
//! invoice: the invoice it refunds); the site; bill-to; the line items (at most [`MAX_LINES`]);
//! the totals down to the balance; the payments, by transaction or by credit from another
//! invoice; the notes — and, on sandbox sites, a "TEST INVOICE" watermark on every page.
//!
//! The language sets every label, the state, the dates (`Jan 5, 2027`, `5. Jan. 2027`) and the
//! numbers (`1,234.56`, `1.234,56`); [`Locale::from_accept_language`] picks it from a request.
//! The text is set in the PDF base fonts (Helvetica, Helvetica-Bold) with the WinAnsi encoding,
//! so nothing is embedded and every reader shows it: the Latin letters of Western European
//! languages (é, ü, ñ, ß, …) as they are, a character that encoding cannot hold as `?`.
//!
//! No I/O: the caller gets the bytes.

mod labels;
mod locale;
mod metrics;
mod text;

use chrono::{DateTime, Utc};
use pdf_writer::{Content, Name, Pdf, Rect, Ref, Str, TextStr};

use labels::{Labels, fill};
pub use locale::Locale;
use metrics::Font;

/// At most this many line items are drawn; a line says how many more the invoice has.
pub const MAX_LINES: usize = 500;

/// What an invoice PDF shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvoiceDocument {
    /// The site's name (the "From" of the invoice).
    pub site_name: String,
    /// The invoice number as shown, with its prefix.
    pub invoice_number: String,
    /// Charge, credit or legacy refund invoice, with the invoices it refers to.
    pub kind: DocumentKind,
    pub state: DocumentState,
    /// Posting date.
    pub created_at: DateTime<Utc>,
    /// A charge invoice's due date and payment terms (net days).
    pub due_on: Option<DateTime<Utc>>,
    pub net_terms: Option<i64>,
    pub po_number: Option<String>,
    /// The currency of every amount.
    pub currency: String,
    /// The bill-to block, one line each (name, company, address, e-mail, VAT number).
    pub bill_to: Vec<String>,
    pub lines: Vec<Line>,
    pub totals: Totals,
    /// The transactions and credit payments that moved the balance, in order.
    pub payments: Vec<Payment>,
    pub notes: Notes,
    /// A sandbox site's invoice: watermarked "TEST INVOICE".
    pub test: bool,
}

/// The kind of invoice a document is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum DocumentKind {
    /// An invoice of charges: payment terms and a due date.
    #[default]
    Charge,
    /// A credit invoice, with the numbers (as shown) of the charge invoices it credits
    /// ("Credit for invoice #1001"); none for a credit that credits no invoice.
    Credit { credited_invoices: Vec<String> },
    /// A refund invoice of the API before credit invoices (negative lines), with the number of
    /// the invoice it refunds ("Refund for invoice #1000") when known.
    LegacyRefund { refunded_invoice: Option<String> },
}

impl DocumentKind {
    /// The sign by which the settlements of [`Totals`] move this kind's balance toward zero: a
    /// charge invoice's total is owed (payments lower it), a credit's or refund's is negative
    /// (what is used, refunded, voided or written off raises it).
    fn settlement_sign(&self) -> i64 {
        match self {
            DocumentKind::Charge => -1,
            DocumentKind::Credit { .. } | DocumentKind::LegacyRefund { .. } => 1,
        }
    }
}

/// The state of an invoice, as the page names it in its language.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DocumentState {
    Pending,
    Processing,
    PastDue,
    Paid,
    Failed,
    /// A credit invoice with credit left.
    Open,
    /// A credit invoice used up.
    Closed,
    Voided,
}

impl DocumentState {
    fn label(self, labels: &Labels) -> &'static str {
        let index = match self {
            DocumentState::Pending => 0,
            DocumentState::Processing => 1,
            DocumentState::PastDue => 2,
            DocumentState::Paid => 3,
            DocumentState::Failed => 4,
            DocumentState::Open => 5,
            DocumentState::Closed => 6,
            DocumentState::Voided => 7,
        };
        labels.states[index]
    }
}

/// A line item. A credit's lines have negative totals.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    pub date: DateTime<Utc>,
    pub description: String,
    pub quantity: i64,
    pub unit_amount_in_cents: i64,
    pub total_in_cents: i64,
}

/// The money of an invoice, in cents. Subtotal (before discount), discount (shown as a
/// deduction), tax and total are signed as the invoice has them (a credit's are negative). The
/// settlements after the total — paid, credit applied, payment refund, credit voided, write-off
/// — are the sums the invoice records (not negative), each shown only when not zero and with
/// the sign by which it moves the balance toward zero (negative on a charge invoice, positive
/// on a credit or refund invoice).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    pub subtotal_in_cents: i64,
    pub discount_in_cents: i64,
    pub tax_in_cents: i64,
    pub total_in_cents: i64,
    /// Collected by transactions (a credit or refund invoice: refunded to the payment method).
    pub paid_in_cents: i64,
    /// Credit used: from credit invoices on a charge invoice, of a credit invoice elsewhere.
    pub credit_applied_in_cents: i64,
    /// A credit invoice's credit refunded to a payment method.
    pub payment_refund_in_cents: i64,
    /// A credit invoice's credit voided.
    pub credit_voided_in_cents: i64,
    /// A failed charge invoice's balance written off.
    pub write_off_in_cents: i64,
    pub balance_in_cents: i64,
}

/// A payment that moved the invoice's balance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Payment {
    pub date: DateTime<Utc>,
    pub source: PaymentSource,
    /// Shown as given (a refund to the payment method: negative).
    pub amount_in_cents: i64,
}

/// Where a payment came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PaymentSource {
    /// A transaction on a payment method ("Visa ending in 1111").
    Transaction(PaymentMethod),
    /// Credit from another invoice, by its number as shown ("Credit from invoice #1005"): on
    /// the invoice it paid.
    Credit { invoice_number: String },
    /// This invoice's credit used on another invoice, by its number as shown ("Credit applied
    /// to invoice #1003"): on the credit invoice it came from.
    CreditUsed { invoice_number: String },
}

/// A payment method as a payment names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PaymentMethod {
    /// A card, by its brand's name ("Visa", "Mastercard"; none: "Card") and last four digits.
    Card { brand: Option<String>, last_four: Option<String> },
    /// A bank account, by its last four digits.
    BankAccount { last_four: Option<String> },
    /// A payment made outside the service and entered as paid.
    Offline(OfflineMethod),
}

/// How a payment entered as made outside the service was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OfflineMethod {
    Check,
    WireTransfer,
    MoneyOrder,
    Eft,
    PayPal,
    Other,
}

/// The notes of an invoice; each is shown only when it has text.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Notes {
    pub customer_notes: Option<String>,
    pub terms_and_conditions: Option<String>,
    pub vat_reverse_charge_notes: Option<String>,
}

const WIDTH: f32 = 595.0;
const HEIGHT: f32 = 842.0;
const LEFT: f32 = 50.0;
const RIGHT: f32 = WIDTH - 50.0;
const TOP: f32 = HEIGHT - 56.0;
const BOTTOM: f32 = 64.0;

/// Columns of the line-item table: left edges of date and description, and the right edges of
/// the numbers (quantity and price move left of these when the amounts are wider, see
/// [`Columns`]).
const COL_DATE: f32 = LEFT;
const COL_DESCRIPTION: f32 = LEFT + 78.0;
const COL_QUANTITY: f32 = RIGHT - 170.0;
const COL_UNIT: f32 = RIGHT - 85.0;
const COL_TOTAL: f32 = RIGHT;
/// Room kept for a description however wide the numbers are.
const MIN_DESCRIPTION: f32 = 110.0;
/// Left edge of the totals' labels.
const COL_TOTALS: f32 = RIGHT - 230.0;
/// Widest text of the bill-to block (points).
const BILL_TO_WIDTH: f32 = 240.0;

/// The PDF of `doc` in `locale`.
pub fn render(doc: &InvoiceDocument, locale: Locale) -> Vec<u8> {
    let page = Page { doc, locale, labels: Labels::of(locale) };
    let mut layout = Layout::new(doc.test);
    page.header(&mut layout);
    page.line_items(&mut layout);
    page.totals(&mut layout);
    page.payments(&mut layout);
    page.notes(&mut layout);
    layout.finish(&page.title(), |n, count| fill(page.labels.page, &[&n.to_string(), &count.to_string()]))
}

/// A document being written in a language.
struct Page<'d> {
    doc: &'d InvoiceDocument,
    locale: Locale,
    labels: &'static Labels,
}

impl Page<'_> {
    /// "Invoice 1001", "Credit Invoice 1002", "Rechnung 1001".
    fn title(&self) -> String {
        let kind = match self.doc.kind {
            DocumentKind::Charge => self.labels.invoice,
            DocumentKind::Credit { .. } => self.labels.credit_invoice,
            DocumentKind::LegacyRefund { .. } => self.labels.refund_invoice,
        };
        format!("{kind} {}", self.doc.invoice_number)
    }

    fn date(&self, at: DateTime<Utc>) -> String {
        self.locale.format_date(at)
    }

    fn money(&self, cents: i64) -> String {
        self.locale.format_money(cents)
    }

    fn money_with_currency(&self, cents: i64) -> String {
        format!("{} {}", self.money(cents), self.doc.currency)
    }

    fn header(&self, l: &mut Layout) {
        let (doc, labels) = (self.doc, self.labels);
        // The site's name and the title on one line, or one below the other when both do not
        // fit (the name cut to the width of the page).
        let title = self.title();
        let title_width = metrics::width(&title, Font::Bold, 18.0);
        let name_width = metrics::width(&doc.site_name, Font::Bold, 18.0);
        l.text(LEFT, l.y, Font::Bold, 18.0, &text::truncate(&doc.site_name, RIGHT - LEFT, Font::Bold, 18.0));
        if name_width + 24.0 + title_width > RIGHT - LEFT {
            l.y -= 24.0;
        }
        l.text_right(RIGHT, l.y, Font::Bold, 18.0, &text::truncate(&title, RIGHT - LEFT, Font::Bold, 18.0));
        l.y -= 20.0;
        let references: Vec<String> = match &doc.kind {
            DocumentKind::Charge => Vec::new(),
            DocumentKind::Credit { credited_invoices } => {
                credited_invoices.iter().map(|n| fill(labels.credit_for, &[&format!("#{n}")])).collect()
            }
            DocumentKind::LegacyRefund { refunded_invoice } => {
                refunded_invoice.iter().map(|n| fill(labels.refund_for, &[&format!("#{n}")])).collect()
            }
        };
        for reference in &references {
            l.text_right(
                RIGHT,
                l.y,
                Font::Regular,
                10.0,
                &text::truncate(reference, RIGHT - LEFT, Font::Regular, 10.0),
            );
            l.y -= 13.0;
        }
        l.y -= 12.0;

        let mut facts = vec![(labels.invoice_date, self.date(doc.created_at))];
        facts.push((labels.state, doc.state.label(labels).to_owned()));
        if doc.kind == DocumentKind::Charge {
            if let Some(due) = doc.due_on {
                facts.push((labels.due_date, self.date(due)));
            }
            if let Some(days) = doc.net_terms {
                facts.push((labels.payment_terms, fill(labels.net_terms, &[&days.to_string()])));
            }
        }
        if let Some(po) = doc.po_number.as_deref().filter(|p| !p.trim().is_empty()) {
            facts.push((labels.po_number, po.to_owned()));
        }
        facts.push((labels.currency, doc.currency.clone()));

        // The facts on the right: labels in one column, values right-aligned, as wide as the
        // widest of each (values cut past 150 points, the column starting right of bill-to).
        let label_width = facts.iter().map(|(label, _)| metrics::width(label, Font::Bold, 10.0)).fold(0.0, f32::max);
        let value_width =
            facts.iter().map(|(_, value)| metrics::width(value, Font::Regular, 10.0)).fold(0.0, f32::max).min(150.0);
        let label_x = (RIGHT - value_width - 14.0 - label_width).max(LEFT + BILL_TO_WIDTH + 14.0);
        let value_room = RIGHT - (label_x + label_width + 14.0);
        let top = l.y;
        let mut y = top;
        for (label, value) in &facts {
            l.text(label_x, y, Font::Bold, 10.0, label);
            l.text_right(RIGHT, y, Font::Regular, 10.0, &text::truncate(value, value_room, Font::Regular, 10.0));
            y -= 13.0;
        }

        l.text(LEFT, l.y, Font::Bold, 10.0, labels.bill_to);
        l.y -= 14.0;
        for line in &doc.bill_to {
            l.text(LEFT, l.y, Font::Regular, 10.0, &text::truncate(line, BILL_TO_WIDTH, Font::Regular, 10.0));
            l.y -= 13.0;
        }
        l.y = l.y.min(y) - 18.0;
    }

    /// The right edges of the quantity and price columns: where they are, or further left as
    /// the widest total and price (and the heads) need, keeping a gap of 16 points.
    fn columns(&self) -> Columns {
        let lines = &self.doc.lines[..self.doc.lines.len().min(MAX_LINES)];
        let widest = |head: &str, cell: &dyn Fn(&Line) -> String| {
            lines
                .iter()
                .map(|line| metrics::width(&cell(line), Font::Regular, 9.0))
                .fold(metrics::width(head, Font::Bold, 9.0), f32::max)
        };
        let labels = self.labels;
        let total = widest(labels.total, &|line| self.money(line.total_in_cents));
        let unit = (COL_TOTAL - total - 16.0).min(COL_UNIT);
        let price = widest(labels.price, &|line| self.money(line.unit_amount_in_cents));
        let quantity = (unit - price - 16.0).clamp(COL_DESCRIPTION + MIN_DESCRIPTION, COL_QUANTITY);
        Columns { quantity, unit }
    }

    fn table_head(&self, l: &mut Layout, columns: &Columns) {
        let labels = self.labels;
        l.text(COL_DATE, l.y, Font::Bold, 9.0, labels.date);
        l.text(COL_DESCRIPTION, l.y, Font::Bold, 9.0, labels.description);
        l.text_right(columns.quantity, l.y, Font::Bold, 9.0, labels.quantity);
        l.text_right(columns.unit, l.y, Font::Bold, 9.0, labels.price);
        l.text_right(COL_TOTAL, l.y, Font::Bold, 9.0, labels.total);
        l.y -= 5.0;
        l.rule(LEFT);
        l.y -= 13.0;
    }

    fn line_items(&self, l: &mut Layout) {
        let doc = self.doc;
        let columns = self.columns();
        self.table_head(l, &columns);
        for line in doc.lines.iter().take(MAX_LINES) {
            if l.needs_page(14.0) {
                l.new_page();
                self.table_head(l, &columns);
            }
            let quantity = self.locale.format_integer(line.quantity);
            let description_width =
                columns.quantity - COL_DESCRIPTION - 12.0 - metrics::width(&quantity, Font::Regular, 9.0);
            l.text(COL_DATE, l.y, Font::Regular, 9.0, &self.date(line.date));
            l.text(
                COL_DESCRIPTION,
                l.y,
                Font::Regular,
                9.0,
                &text::truncate(&line.description, description_width, Font::Regular, 9.0),
            );
            l.text_right(columns.quantity, l.y, Font::Regular, 9.0, &quantity);
            l.text_right(columns.unit, l.y, Font::Regular, 9.0, &self.money(line.unit_amount_in_cents));
            l.text_right(COL_TOTAL, l.y, Font::Regular, 9.0, &self.money(line.total_in_cents));
            l.y -= 14.0;
        }
        if doc.lines.len() > MAX_LINES {
            let more = (doc.lines.len() - MAX_LINES).to_string();
            l.text(COL_DESCRIPTION, l.y, Font::Regular, 9.0, &fill(self.labels.more_lines, &[&more]));
            l.y -= 14.0;
        }
        l.y += 4.0;
        l.rule(LEFT);
        l.y -= 20.0;
    }

    /// Subtotal, discount and tax (when not zero), total; the settlements that are not zero;
    /// the balance.
    fn totals(&self, l: &mut Layout) {
        let (t, labels) = (&self.doc.totals, self.labels);
        let sign = self.doc.kind.settlement_sign();
        let mut rows = vec![(labels.subtotal, t.subtotal_in_cents, Font::Regular)];
        if t.discount_in_cents != 0 {
            rows.push((labels.discount, t.discount_in_cents.saturating_neg(), Font::Regular));
        }
        if t.tax_in_cents != 0 {
            rows.push((labels.tax, t.tax_in_cents, Font::Regular));
        }
        rows.push((labels.total, t.total_in_cents, Font::Bold));
        for (label, amount) in [
            (labels.paid, t.paid_in_cents),
            (labels.credit_applied, t.credit_applied_in_cents),
            (labels.payment_refund, t.payment_refund_in_cents),
            (labels.credit_voided, t.credit_voided_in_cents),
            (labels.write_off, t.write_off_in_cents),
        ] {
            if amount != 0 {
                rows.push((label, amount.saturating_mul(sign), Font::Regular));
            }
        }
        if l.needs_page((rows.len() + 1) as f32 * 14.0 + 6.0) {
            l.new_page();
        }
        for (label, amount, font) in rows {
            self.total_row(l, label, amount, font);
        }
        l.y += 4.0;
        l.rule(COL_TOTALS);
        l.y -= 14.0;
        self.total_row(l, labels.balance, t.balance_in_cents, Font::Bold);
        l.y -= 12.0;
    }

    fn total_row(&self, l: &mut Layout, label: &str, amount: i64, font: Font) {
        let shown = self.money_with_currency(amount);
        let room = COL_TOTAL - COL_TOTALS - metrics::width(&shown, font, 10.0) - 10.0;
        l.text(COL_TOTALS, l.y, font, 10.0, &text::truncate(label, room, font, 10.0));
        l.text_right(COL_TOTAL, l.y, font, 10.0, &shown);
        l.y -= 14.0;
    }

    fn payment_source(&self, source: &PaymentSource) -> String {
        let labels = self.labels;
        match source {
            PaymentSource::Credit { invoice_number } => fill(labels.credit_from, &[&format!("#{invoice_number}")]),
            PaymentSource::CreditUsed { invoice_number } => fill(labels.credit_used, &[&format!("#{invoice_number}")]),
            PaymentSource::Transaction(method) => {
                let (what, last_four) = match method {
                    PaymentMethod::Card { brand, last_four } => {
                        (brand.as_deref().filter(|b| !b.trim().is_empty()).unwrap_or(labels.card), last_four)
                    }
                    PaymentMethod::BankAccount { last_four } => (labels.bank_account, last_four),
                    PaymentMethod::Offline(method) => {
                        let [check, wire, money_order, eft, paypal, other] = labels.offline;
                        return match method {
                            OfflineMethod::Check => check,
                            OfflineMethod::WireTransfer => wire,
                            OfflineMethod::MoneyOrder => money_order,
                            OfflineMethod::Eft => eft,
                            OfflineMethod::PayPal => paypal,
                            OfflineMethod::Other => other,
                        }
                        .to_owned();
                    }
                };
                match last_four.as_deref().filter(|f| !f.trim().is_empty()) {
                    Some(four) => fill(labels.ending_in, &[what, four]),
                    None => what.to_owned(),
                }
            }
        }
    }

    fn payments(&self, l: &mut Layout) {
        let (doc, labels) = (self.doc, self.labels);
        if doc.payments.is_empty() {
            return;
        }
        if l.needs_page(44.0) {
            l.new_page();
        }
        l.text(LEFT, l.y, Font::Bold, 11.0, labels.payments);
        l.y -= 16.0;
        l.text(COL_DATE, l.y, Font::Bold, 9.0, labels.date);
        l.text(COL_DESCRIPTION, l.y, Font::Bold, 9.0, labels.description);
        l.text_right(COL_TOTAL, l.y, Font::Bold, 9.0, labels.amount);
        l.y -= 5.0;
        l.rule(LEFT);
        l.y -= 13.0;
        for p in &doc.payments {
            if l.needs_page(14.0) {
                l.new_page();
            }
            let amount = self.money_with_currency(p.amount_in_cents);
            let room = COL_TOTAL - COL_DESCRIPTION - metrics::width(&amount, Font::Regular, 9.0) - 12.0;
            l.text(COL_DATE, l.y, Font::Regular, 9.0, &self.date(p.date));
            l.text(
                COL_DESCRIPTION,
                l.y,
                Font::Regular,
                9.0,
                &text::truncate(&self.payment_source(&p.source), room, Font::Regular, 9.0),
            );
            l.text_right(COL_TOTAL, l.y, Font::Regular, 9.0, &amount);
            l.y -= 14.0;
        }
        l.y -= 12.0;
    }

    fn notes(&self, l: &mut Layout) {
        let (notes, labels) = (&self.doc.notes, self.labels);
        let all = [
            (labels.customer_notes, &notes.customer_notes),
            (labels.terms_and_conditions, &notes.terms_and_conditions),
            (labels.vat_reverse_charge_notes, &notes.vat_reverse_charge_notes),
        ];
        for (heading, body) in all {
            let Some(body) = body.as_deref().filter(|b| !b.trim().is_empty()) else { continue };
            if l.needs_page(40.0) {
                l.new_page();
            }
            l.text(LEFT, l.y, Font::Bold, 11.0, heading);
            l.y -= 15.0;
            for line in text::wrap(body, RIGHT - LEFT, 9.0) {
                if l.needs_page(13.0) {
                    l.new_page();
                }
                l.text(LEFT, l.y, Font::Regular, 9.0, &line);
                l.y -= 12.0;
            }
            l.y -= 10.0;
        }
    }
}

/// The right edges of the line-item table's quantity and price columns.
struct Columns {
    quantity: f32,
    unit: f32,
}

/// The resource names of the two fonts.
fn font_name(font: Font) -> Name<'static> {
    match font {
        Font::Regular => Name(b"F1"),
        Font::Bold => Name(b"F2"),
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
            content.set_font(font_name(Font::Bold), 72.0);
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

    fn text(&mut self, x: f32, y: f32, font: Font, size: f32, s: &str) {
        write_text(self.current(), x, y, font, size, s);
    }

    fn text_right(&mut self, right: f32, y: f32, font: Font, size: f32, s: &str) {
        let width = metrics::width(s, font, size);
        self.text(right - width, y, font, size, s);
    }

    /// A thin rule from `left` to the right margin at the cursor.
    fn rule(&mut self, left: f32) {
        let y = self.y;
        let content = self.current();
        content.save_state();
        content.set_line_width(0.5);
        content.set_stroke_gray(0.6);
        content.move_to(left, y);
        content.line_to(RIGHT, y);
        content.stroke();
        content.restore_state();
    }

    /// The document: every page with its footer (the title, and `page_label(n, count)`).
    fn finish(mut self, title: &str, page_label: impl Fn(usize, usize) -> String) -> Vec<u8> {
        let count = self.pages.len();
        for (i, content) in self.pages.iter_mut().enumerate() {
            let label = page_label(i + 1, count);
            write_text(content, LEFT, 36.0, Font::Regular, 8.0, &text::truncate(title, 300.0, Font::Regular, 8.0));
            write_text(content, RIGHT - metrics::width(&label, Font::Regular, 8.0), 36.0, Font::Regular, 8.0, &label);
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
            resources.fonts().pair(font_name(Font::Regular), regular).pair(font_name(Font::Bold), bold);
            drop(resources);
            drop(page);
            pdf.stream(*content_ref, &content.finish());
        }
        pdf.finish()
    }
}

fn write_text(content: &mut Content, x: f32, y: f32, font: Font, size: f32, s: &str) {
    let bytes = text::encode(s);
    content.begin_text();
    content.set_font(font_name(font), size);
    content.next_line(x, y);
    content.show(Str(&bytes));
    content.end_text();
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A document whose every amount is `cents`.
    fn with_amounts(kind: DocumentKind, cents: i64) -> InvoiceDocument {
        let at = DateTime::<Utc>::from_timestamp(1_800_000_000, 0).unwrap_or_default();
        InvoiceDocument {
            site_name: "Example".to_owned(),
            invoice_number: "1001".to_owned(),
            kind,
            state: DocumentState::Pending,
            created_at: at,
            due_on: Some(at),
            net_terms: Some(cents),
            po_number: None,
            currency: "USD".to_owned(),
            bill_to: Vec::new(),
            lines: vec![Line {
                date: at,
                description: "Line".to_owned(),
                quantity: cents,
                unit_amount_in_cents: cents,
                total_in_cents: cents,
            }],
            totals: Totals {
                subtotal_in_cents: cents,
                discount_in_cents: cents,
                tax_in_cents: cents,
                total_in_cents: cents,
                paid_in_cents: cents,
                credit_applied_in_cents: cents,
                payment_refund_in_cents: cents,
                credit_voided_in_cents: cents,
                write_off_in_cents: cents,
                balance_in_cents: cents,
            },
            payments: vec![Payment {
                date: at,
                source: PaymentSource::Credit { invoice_number: "1000".to_owned() },
                amount_in_cents: cents,
            }],
            notes: Notes::default(),
            test: false,
        }
    }

    /// The extreme amounts render (the discount, shown as a deduction, once overflowed on
    /// negating `i64::MIN`).
    #[test]
    fn extreme_amounts_render() {
        for cents in [i64::MIN, i64::MIN + 1, -1, i64::MAX] {
            for kind in [DocumentKind::Charge, DocumentKind::Credit { credited_invoices: Vec::new() }] {
                for locale in Locale::ALL {
                    let pdf = render(&with_amounts(kind.clone(), cents), locale);
                    assert!(pdf.starts_with(b"%PDF-"), "{cents} {locale:?}");
                }
            }
        }
    }
}
