//! Invoices, their line items (adjustments) and transactions.
//!
//! - **Invoices** are numbered per site: [`Store::create_invoice`] takes the next number from the
//!   site's counter row (`INSERT … ON CONFLICT DO UPDATE … RETURNING`) in the same database
//!   transaction that inserts the invoice and its lines, so numbers are sequential, start at
//!   [`FIRST_INVOICE_NUMBER`] and never repeat, also under concurrent invoicing. States are stored
//!   by their schema names ([`InvoiceState`]) and change only through compare-and-set updates
//!   ([`Store::set_invoice_state`]), so a retried job cannot pay or fail an invoice twice.
//! - **Adjustments** (charges and credits) are pending (no invoice) until an invoice takes them;
//!   taking a pending adjustment is conditional on it still being pending, so two concurrent
//!   invoice runs cannot both bill it ([`StoreError::Conflict`]). Adjustments made by the billing
//!   engine keep its origin key ([`EngineKey`]) so billed items can be fed back to the diff.
//! - **Transactions** are recorded *before* the gateway is called ([`Store::begin_transaction`],
//!   status `processing`) and completed after ([`Store::complete_transaction`]). The
//!   idempotency key is unique: beginning a transaction again with the same key answers the
//!   recorded one, so a repeated charge can see whether it already happened. A transaction keeps
//!   a snapshot of the account and of the billing info's non-secret fields (never a card number).
//!
//! Money is integer cents, times UTC epoch seconds, booleans 0/1 (the `Any` driver sends one
//! integer type to both backends). Lists use the keyset paging of [`crate::list`].

use sqlx::Row;

use crate::billing_info::{BillingFields, FIELD_COLUMNS, PaymentKind, bind_fields, fields_from_row, kind_from_row};
use crate::coupons::Discounted;
use crate::credits::CreditUse;
use crate::db::{Db, DbQuery, DbRow, Pool};
use crate::events::NewEvent;
use crate::list::{Arg, Conditions, Page, PageRequest, Position, Sort, into_page, order_and_limit};
use crate::subscriptions::{Work, placeholders};
use crate::{Store, StoreError, flag, get_flag};

use rebill_billing::states::{InvoiceState, TransactionStatus};

/// The number of a site's first invoice.
pub const FIRST_INVOICE_NUMBER: i64 = 1001;

/// A new identifier: 32 hexadecimal characters (128 random bits).
pub fn new_uuid() -> String {
    let mut bytes = [0u8; 16];
    // Without the operating system's random source no identifier can be made.
    getrandom::fill(&mut bytes).expect("the operating system's random source");
    hex::encode(bytes)
}

macro_rules! named_enum {
    ($(#[$meta:meta])* $name:ident { $($variant:ident = $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name { $($variant),+ }

        impl $name {
            /// The schema name.
            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }

            pub fn parse(text: &str) -> Option<Self> {
                match text { $($text => Some($name::$variant),)+ _ => None }
            }
        }
    };
}

named_enum! {
    /// How an invoice is collected.
    CollectionMethod { Automatic = "automatic", Manual = "manual" }
}

named_enum! {
    /// Charge or credit.
    AdjustmentKind { Charge = "charge", Credit = "credit" }
}

named_enum! {
    /// What an invoice is: money owed by the account (`charge`), money owed to it (`credit`, on
    /// sites with Credit Memos), or a refund invoice of a site without Credit Memos (`legacy`).
    /// Credit and legacy invoices have negative totals; their negative balance is credit the
    /// account's later charge invoices use.
    InvoiceKind { Charge = "charge", Credit = "credit", Legacy = "legacy" }
}

named_enum! {
    /// Whether an adjustment is on an invoice yet.
    AdjustmentState { Pending = "pending", Invoiced = "invoiced" }
}

fn parse<T>(row: &DbRow, column: &str, f: impl Fn(&str) -> Option<T>) -> Result<T, StoreError> {
    let text: String = row.try_get(column)?;
    f(&text).ok_or_else(|| StoreError::Invalid(format!("stored {column} `{text}`")))
}

/// The money of an invoice.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InvoiceAmounts {
    pub subtotal_before_discount: i64,
    pub discount: i64,
    pub subtotal_after_discount: i64,
    pub tax: i64,
    pub total: i64,
    /// Collected so far.
    pub paid: i64,
    /// Still due (`total - paid`).
    pub balance: i64,
}

/// An account's invoices in one currency ([`Store::account_invoice_balances`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CurrencyBalance {
    pub currency: String,
    /// What the open invoices (pending, processing, past due) still owe.
    pub open: i64,
    /// Whether one of them is past due.
    pub past_due: bool,
}

/// Terms and notes of an invoice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvoiceTerms {
    pub collection_method: CollectionMethod,
    /// Days after creation the invoice is due.
    pub net_terms: i64,
    pub po_number: Option<String>,
    pub customer_notes: Option<String>,
    pub terms_and_conditions: Option<String>,
    pub vat_reverse_charge_notes: Option<String>,
}

impl Default for InvoiceTerms {
    fn default() -> Self {
        Self {
            collection_method: CollectionMethod::Automatic,
            net_terms: 0,
            po_number: None,
            customer_notes: None,
            terms_and_conditions: None,
            vat_reverse_charge_notes: None,
        }
    }
}

/// What [`Store::create_invoice`] needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewInvoice {
    pub account_id: i64,
    pub kind: InvoiceKind,
    /// The charge invoice a refund (or termination) credit reverses.
    pub original_invoice_id: Option<i64>,
    pub state: InvoiceState,
    /// Schema `invoice_origin` name (`purchase`, `renewal`, …).
    pub origin: String,
    pub currency: String,
    pub amounts: InvoiceAmounts,
    pub terms: InvoiceTerms,
    pub due_on: Option<i64>,
    pub attempt_next_collection_at: Option<i64>,
    pub closed_at: Option<i64>,
}

/// A stored invoice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invoice {
    pub id: i64,
    pub uuid: String,
    pub site_id: i64,
    pub account_id: i64,
    pub account_code: String,
    pub invoice_number: i64,
    pub kind: InvoiceKind,
    pub original_invoice_id: Option<i64>,
    pub original_invoice_number: Option<i64>,
    /// What the credit and refund invoices reversing this one took back (positive cents; a
    /// declined refund, whose invoice failed, takes nothing).
    pub credited: i64,
    pub state: InvoiceState,
    pub origin: String,
    pub currency: String,
    pub amounts: InvoiceAmounts,
    pub terms: InvoiceTerms,
    pub due_on: Option<i64>,
    /// Automatic collection attempts made after the first (dunning retries).
    pub collection_attempts: i64,
    pub attempt_next_collection_at: Option<i64>,
    pub closed_at: Option<i64>,
    pub created_at: i64,
    pub updated_at: i64,
}

impl Invoice {
    /// The invoice's place in a list sorted by `sort`.
    pub fn position(&self, sort: Sort) -> Position {
        Position { value: if sort == Sort::CreatedAt { self.created_at } else { self.updated_at }, id: self.id }
    }
}

/// A state change of an invoice ([`Store::set_invoice_state`], [`Work::set_invoice_states`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InvoiceChange {
    pub state: InvoiceState,
    /// Next automatic collection attempt (cleared when `None`).
    pub attempt_next_collection_at: Option<i64>,
    /// New count of dunning retries made (unchanged when `None`).
    pub collection_attempts: Option<i64>,
}

/// One invoice's state change for [`Work::set_invoice_states`]: the invoice, the change, its
/// time and the events to record with it.
#[derive(Debug, Clone, Copy)]
pub struct InvoiceStateChange<'a> {
    pub id: i64,
    pub change: InvoiceChange,
    pub now: i64,
    pub events: &'a [NewEvent],
}

/// Narrows an invoice list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InvoiceFilter {
    pub account_id: Option<i64>,
    /// Any of these states (all when empty).
    pub states: Vec<InvoiceState>,
}

/// The billing engine's identity of a subscription line item (see
/// `rebill_billing::invoice::OriginKey`), kept so billed items can be fed back to the diff.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineKey {
    /// `plan`, `add_on` or `setup_fee`.
    pub item_kind: String,
    /// The plan's or add-on's code.
    pub item_code: String,
    pub period_start: i64,
    /// The period's end as scheduled when it opened (names the period).
    pub period_end: i64,
    /// The period's end in force when the line was made.
    pub line_period_end: i64,
    /// Seconds paid for and seconds in the period, when prorated.
    pub proration: Option<(i64, i64)>,
}

/// What [`Store::create_adjustment`] and [`Store::create_invoice`] need for one line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewAdjustment {
    pub account_id: i64,
    pub subscription_uuid: Option<String>,
    pub kind: AdjustmentKind,
    /// Schema `adjustment_origin` name (`plan`, `setup_fee`, `add_on`, `debit`, `credit`, …).
    pub origin: String,
    pub description: Option<String>,
    pub accounting_code: Option<String>,
    pub product_code: Option<String>,
    pub currency: String,
    /// Per unit; negative on credits.
    pub unit_amount: i64,
    pub quantity: i64,
    pub discount: i64,
    pub tax: i64,
    /// Negative on credits.
    pub total: i64,
    pub tax_exempt: Option<bool>,
    pub tax_code: Option<String>,
    pub credit_reason_code: Option<String>,
    pub start_date: Option<i64>,
    pub end_date: Option<i64>,
    pub engine: Option<EngineKey>,
    /// The charge line a credit line reverses.
    pub original_adjustment_id: Option<i64>,
    /// Units of that charge line it takes back (0 for a refund of an amount).
    pub reversed_quantity: i64,
}

/// A stored adjustment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Adjustment {
    pub id: i64,
    pub uuid: String,
    pub site_id: i64,
    pub account_code: String,
    pub state: AdjustmentState,
    /// The invoice holding it (`None` while pending).
    pub invoice_id: Option<i64>,
    pub invoice_number: Option<i64>,
    pub line: NewAdjustment,
    pub original_adjustment_uuid: Option<String>,
    /// What the credit lines reversing this one took back (positive cents), and how many of its
    /// units (declined refunds, whose invoices failed, take nothing).
    pub credited: i64,
    pub quantity_credited: i64,
    pub created_at: i64,
    pub updated_at: i64,
    /// The id of the address the line was shipped to (2.11).
    pub shipping_address_id: Option<i64>,
    /// That address, deleted since or not: read with the lines where they are shown
    /// ([`Store::invoice_lines`], [`Store::adjustment`], the lists), `None` on the reads of
    /// billing (which need only the id).
    pub shipping_address: Option<crate::shipping_addresses::ShippingAddress>,
}

impl Adjustment {
    pub fn position(&self, sort: Sort) -> Position {
        Position { value: if sort == Sort::CreatedAt { self.created_at } else { self.updated_at }, id: self.id }
    }
}

/// Narrows an adjustment list.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AdjustmentFilter {
    pub account_id: Option<i64>,
    pub kind: Option<AdjustmentKind>,
    pub state: Option<AdjustmentState>,
}

/// What deleting an adjustment did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdjustmentDeletion {
    Deleted,
    /// It is on an invoice and stays.
    Invoiced,
    NotFound,
}

/// The paying account as a transaction records it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AccountSnapshot {
    pub account_code: String,
    pub first_name: Option<String>,
    pub last_name: Option<String>,
    pub company: Option<String>,
    pub email: Option<String>,
}

/// What [`Store::begin_transaction`] records before the gateway is called.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewTransaction {
    /// Unique per charge; beginning again with the same key answers the recorded transaction.
    pub idempotency_key: String,
    pub account_id: i64,
    pub invoice_id: Option<i64>,
    pub subscription_uuid: Option<String>,
    /// Schema `transaction_action` name (`purchase`, `verify`, `refund`).
    pub action: String,
    pub amount: i64,
    pub tax: i64,
    pub currency: String,
    /// Billing info type of the payment method.
    pub kind: PaymentKind,
    /// `credit_card` or `ach`.
    pub payment_method: String,
    /// Schema `transaction_source` name (`transaction`, `subscription`, `billing_info`).
    pub source: String,
    /// Schema `transaction_origin` name (`api`, `recurring`, `api_verify_card`, …).
    pub origin: String,
    pub recurring: bool,
    pub test: bool,
    pub gateway_type: String,
    pub description: Option<String>,
    /// The purchase a refund gives money back from.
    pub original_transaction_id: Option<i64>,
    pub account: AccountSnapshot,
    /// The billing info's non-secret fields at charge time.
    pub billing: BillingFields,
}

/// Why a transaction was declined.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TransactionFailure {
    pub error_code: String,
    pub error_category: String,
    pub merchant_message: String,
    pub customer_message: String,
    pub gateway_error_code: Option<String>,
}

/// A CVV or AVS check result.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Check {
    pub code: String,
    pub message: String,
}

/// What the gateway answered ([`Store::complete_transaction`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransactionResult {
    pub status: TransactionStatus,
    pub reference: Option<String>,
    pub approval_code: Option<String>,
    pub message: Option<String>,
    pub fraud_review: bool,
    pub failure: Option<TransactionFailure>,
    pub cvv: Option<Check>,
    pub avs: Option<Check>,
    pub collected_at: Option<i64>,
}

/// A stored transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transaction {
    pub id: i64,
    pub uuid: String,
    pub site_id: i64,
    pub invoice_number: Option<i64>,
    pub new: NewTransaction,
    pub result: TransactionResult,
    pub original_transaction_uuid: Option<String>,
    /// What refunds of this transaction gave back or are giving back (successful or still
    /// processing), in cents.
    pub refunded: i64,
    pub created_at: i64,
    pub updated_at: i64,
}

impl Transaction {
    pub fn position(&self, sort: Sort) -> Position {
        Position { value: if sort == Sort::CreatedAt { self.created_at } else { self.updated_at }, id: self.id }
    }

    pub fn status(&self) -> TransactionStatus {
        self.result.status
    }
}

/// Narrows a transaction list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TransactionFilter {
    pub account_id: Option<i64>,
    /// Any of these statuses (all when empty).
    pub statuses: Vec<TransactionStatus>,
    /// Any of these actions (all when empty).
    pub actions: Vec<String>,
}

/// An account's stored payment method as charging it needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredPayment {
    pub kind: PaymentKind,
    /// The billing info's non-secret fields (a transaction's snapshot).
    pub fields: BillingFields,
    /// The gateway's reference of the stored method, if it has one.
    pub gateway_reference: Option<String>,
}

/// The paying side of an account ([`Work::payers`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Payer {
    pub account_id: i64,
    pub account: AccountSnapshot,
    /// `None` without billing info.
    pub payment: Option<StoredPayment>,
}

/// What recording a transaction whose idempotency key is already recorded does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Duplicate {
    /// Fails the statement (a database error): a batch never repeats a key.
    Fail,
    /// Answers the recorded transaction, whatever its status, and writes nothing.
    Answer,
}

/// One invoice for [`Work::create_invoices`].
#[derive(Debug, Clone, Copy)]
pub struct InvoiceDraft<'a> {
    pub invoice: &'a NewInvoice,
    /// Its line items, all new.
    pub lines: &'a [NewAdjustment],
    /// Creation time (site clock).
    pub now: i64,
    /// Events of the creation (subject: the invoice's number).
    pub events: &'a [NewEvent],
    /// Whether a charge invoice takes the account's available credit as it is made
    /// ([`Work::apply_credit`]).
    pub credit: Option<CreditUse>,
}

// ---- rows ----

pub(crate) const INVOICE_COLUMNS: &str = "id, uuid, site_id, account_id, \
     (SELECT account_code FROM accounts c WHERE c.id = invoices.account_id) AS account_code, invoice_number, kind, \
     original_invoice_id, \
     (SELECT o.invoice_number FROM invoices o WHERE o.id = invoices.original_invoice_id) AS original_invoice_number, \
     (SELECT CAST(COALESCE(-SUM(r.total), 0) AS BIGINT) FROM invoices r \
       WHERE r.original_invoice_id = invoices.id AND r.state <> 'failed') AS credited, state, \
     origin, currency, subtotal_before_discount, discount, subtotal_after_discount, tax, total, paid, balance, \
     net_terms, due_on, collection_method, po_number, customer_notes, terms_and_conditions, \
     vat_reverse_charge_notes, collection_attempts, attempt_next_collection_at, closed_at, created_at, updated_at";

pub(crate) fn invoice_from_row(row: &DbRow) -> Result<Invoice, StoreError> {
    Ok(Invoice {
        id: row.try_get("id")?,
        uuid: row.try_get("uuid")?,
        site_id: row.try_get("site_id")?,
        account_id: row.try_get("account_id")?,
        account_code: row.try_get("account_code")?,
        invoice_number: row.try_get("invoice_number")?,
        kind: parse(row, "kind", InvoiceKind::parse)?,
        original_invoice_id: row.try_get("original_invoice_id")?,
        original_invoice_number: row.try_get("original_invoice_number")?,
        credited: row.try_get("credited")?,
        state: parse(row, "state", InvoiceState::parse)?,
        origin: row.try_get("origin")?,
        currency: row.try_get("currency")?,
        amounts: InvoiceAmounts {
            subtotal_before_discount: row.try_get("subtotal_before_discount")?,
            discount: row.try_get("discount")?,
            subtotal_after_discount: row.try_get("subtotal_after_discount")?,
            tax: row.try_get("tax")?,
            total: row.try_get("total")?,
            paid: row.try_get("paid")?,
            balance: row.try_get("balance")?,
        },
        terms: InvoiceTerms {
            collection_method: parse(row, "collection_method", CollectionMethod::parse)?,
            net_terms: row.try_get("net_terms")?,
            po_number: row.try_get("po_number")?,
            customer_notes: row.try_get("customer_notes")?,
            terms_and_conditions: row.try_get("terms_and_conditions")?,
            vat_reverse_charge_notes: row.try_get("vat_reverse_charge_notes")?,
        },
        due_on: row.try_get("due_on")?,
        collection_attempts: row.try_get("collection_attempts")?,
        attempt_next_collection_at: row.try_get("attempt_next_collection_at")?,
        closed_at: row.try_get("closed_at")?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
    })
}

pub(crate) const ADJUSTMENT_COLUMNS: &str = "id, uuid, site_id, account_id, \
     (SELECT account_code FROM accounts c WHERE c.id = adjustments.account_id) AS account_code, invoice_id, \
     (SELECT invoice_number FROM invoices i WHERE i.id = adjustments.invoice_id) AS invoice_number, \
     subscription_uuid, state, kind, origin, description, accounting_code, product_code, currency, unit_amount, \
     quantity, discount, tax, total, tax_exempt, tax_code, credit_reason_code, start_date, end_date, item_kind, \
     item_code, period_start, period_end, line_period_end, proration_part, proration_whole, original_adjustment_id, \
     reversed_quantity, (SELECT o.uuid FROM adjustments o WHERE o.id = adjustments.original_adjustment_id) \
     AS original_adjustment_uuid, \
     (SELECT CAST(COALESCE(-SUM(r.total), 0) AS BIGINT) FROM adjustments r JOIN invoices ri ON ri.id = r.invoice_id \
       WHERE r.original_adjustment_id = adjustments.id AND ri.state <> 'failed') AS credited, \
     (SELECT CAST(COALESCE(SUM(r.reversed_quantity), 0) AS BIGINT) FROM adjustments r \
       JOIN invoices ri ON ri.id = r.invoice_id \
       WHERE r.original_adjustment_id = adjustments.id AND ri.state <> 'failed') AS quantity_credited, \
     created_at, updated_at, shipping_address_id";

/// The columns [`insert_adjustment`] writes, in bind order.
const ADJUSTMENT_INSERT: &str = "uuid, site_id, account_id, invoice_id, subscription_uuid, state, kind, origin, \
     description, accounting_code, product_code, currency, unit_amount, quantity, discount, tax, total, tax_exempt, \
     tax_code, credit_reason_code, start_date, end_date, item_kind, item_code, period_start, period_end, \
     line_period_end, proration_part, proration_whole, original_adjustment_id, reversed_quantity, created_at, \
     updated_at";

pub(crate) fn adjustment_from_row(row: &DbRow) -> Result<Adjustment, StoreError> {
    let item_kind: Option<String> = row.try_get("item_kind")?;
    let engine = match item_kind {
        Some(item_kind) => {
            let part: Option<i64> = row.try_get("proration_part")?;
            let whole: Option<i64> = row.try_get("proration_whole")?;
            Some(EngineKey {
                item_kind,
                item_code: row.try_get::<Option<String>, _>("item_code")?.unwrap_or_default(),
                period_start: row.try_get::<Option<i64>, _>("period_start")?.unwrap_or_default(),
                period_end: row.try_get::<Option<i64>, _>("period_end")?.unwrap_or_default(),
                line_period_end: row.try_get::<Option<i64>, _>("line_period_end")?.unwrap_or_default(),
                proration: part.zip(whole),
            })
        }
        None => None,
    };
    let tax_exempt: Option<i64> = row.try_get("tax_exempt")?;
    Ok(Adjustment {
        id: row.try_get("id")?,
        uuid: row.try_get("uuid")?,
        site_id: row.try_get("site_id")?,
        account_code: row.try_get("account_code")?,
        state: parse(row, "state", AdjustmentState::parse)?,
        invoice_id: row.try_get("invoice_id")?,
        invoice_number: row.try_get("invoice_number")?,
        line: NewAdjustment {
            account_id: row.try_get("account_id")?,
            subscription_uuid: row.try_get("subscription_uuid")?,
            kind: parse(row, "kind", AdjustmentKind::parse)?,
            origin: row.try_get("origin")?,
            description: row.try_get("description")?,
            accounting_code: row.try_get("accounting_code")?,
            product_code: row.try_get("product_code")?,
            currency: row.try_get("currency")?,
            unit_amount: row.try_get("unit_amount")?,
            quantity: row.try_get("quantity")?,
            discount: row.try_get("discount")?,
            tax: row.try_get("tax")?,
            total: row.try_get("total")?,
            tax_exempt: tax_exempt.map(|v| v != 0),
            tax_code: row.try_get("tax_code")?,
            credit_reason_code: row.try_get("credit_reason_code")?,
            start_date: row.try_get("start_date")?,
            end_date: row.try_get("end_date")?,
            engine,
            original_adjustment_id: row.try_get("original_adjustment_id")?,
            reversed_quantity: row.try_get("reversed_quantity")?,
        },
        original_adjustment_uuid: row.try_get("original_adjustment_uuid")?,
        credited: row.try_get("credited")?,
        quantity_credited: row.try_get("quantity_credited")?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
        shipping_address_id: row.try_get("shipping_address_id")?,
        shipping_address: None,
    })
}

/// Binds an adjustment's [`ADJUSTMENT_INSERT`] values.
fn bind_adjustment<'q>(
    query: DbQuery<'q>,
    uuid: String,
    site_id: i64,
    invoice_id: Option<i64>,
    line: &NewAdjustment,
    now: i64,
) -> DbQuery<'q> {
    let state = if invoice_id.is_some() { AdjustmentState::Invoiced } else { AdjustmentState::Pending };
    let e = line.engine.as_ref();
    query
        .bind(uuid)
        .bind(site_id)
        .bind(line.account_id)
        .bind(invoice_id)
        .bind(line.subscription_uuid.clone())
        .bind(state.as_str())
        .bind(line.kind.as_str())
        .bind(line.origin.clone())
        .bind(line.description.clone())
        .bind(line.accounting_code.clone())
        .bind(line.product_code.clone())
        .bind(line.currency.clone())
        .bind(line.unit_amount)
        .bind(line.quantity)
        .bind(line.discount)
        .bind(line.tax)
        .bind(line.total)
        .bind(line.tax_exempt.map(flag))
        .bind(line.tax_code.clone())
        .bind(line.credit_reason_code.clone())
        .bind(line.start_date)
        .bind(line.end_date)
        .bind(e.map(|e| e.item_kind.clone()))
        .bind(e.map(|e| e.item_code.clone()))
        .bind(e.map(|e| e.period_start))
        .bind(e.map(|e| e.period_end))
        .bind(e.map(|e| e.line_period_end))
        .bind(e.and_then(|e| e.proration).map(|p| p.0))
        .bind(e.and_then(|e| e.proration).map(|p| p.1))
        .bind(line.original_adjustment_id)
        .bind(line.reversed_quantity)
        .bind(now)
        .bind(now)
}

/// Values an adjustment binds ([`ADJUSTMENT_INSERT`]).
const ADJUSTMENT_VALUES: usize = 33;

pub(crate) async fn insert_adjustment<'c, E>(
    executor: E,
    site_id: i64,
    invoice_id: Option<i64>,
    line: &NewAdjustment,
    now: i64,
) -> Result<i64, StoreError>
where
    E: sqlx::Executor<'c, Database = Db>,
{
    let sql = format!(
        "INSERT INTO adjustments ({ADJUSTMENT_INSERT}) VALUES ({}) RETURNING id",
        placeholders(ADJUSTMENT_VALUES, 1)
    );
    let row =
        bind_adjustment(sqlx::query(&sql), new_uuid(), site_id, invoice_id, line, now).fetch_one(executor).await?;
    Ok(row.try_get("id")?)
}

/// The columns [`bind_invoice`] binds, in order.
const INVOICE_INSERT: &str = "uuid, site_id, account_id, invoice_number, kind, original_invoice_id, state, origin, currency, \
     subtotal_before_discount, discount, subtotal_after_discount, tax, total, paid, balance, net_terms, due_on, \
     collection_method, po_number, customer_notes, terms_and_conditions, vat_reverse_charge_notes, \
     attempt_next_collection_at, closed_at, created_at, updated_at";

/// Values an invoice binds ([`INVOICE_INSERT`]).
const INVOICE_VALUES: usize = 27;

/// Binds an invoice's [`INVOICE_INSERT`] values.
fn bind_invoice<'q>(
    query: DbQuery<'q>,
    uuid: String,
    site_id: i64,
    number: i64,
    new: &NewInvoice,
    now: i64,
) -> DbQuery<'q> {
    let a = &new.amounts;
    let t = &new.terms;
    query
        .bind(uuid)
        .bind(site_id)
        .bind(new.account_id)
        .bind(number)
        .bind(new.kind.as_str())
        .bind(new.original_invoice_id)
        .bind(new.state.as_str())
        .bind(new.origin.clone())
        .bind(new.currency.clone())
        .bind(a.subtotal_before_discount)
        .bind(a.discount)
        .bind(a.subtotal_after_discount)
        .bind(a.tax)
        .bind(a.total)
        .bind(a.paid)
        .bind(a.balance)
        .bind(t.net_terms)
        .bind(new.due_on)
        .bind(t.collection_method.as_str())
        .bind(t.po_number.clone())
        .bind(t.customer_notes.clone())
        .bind(t.terms_and_conditions.clone())
        .bind(t.vat_reverse_charge_notes.clone())
        .bind(new.attempt_next_collection_at)
        .bind(new.closed_at)
        .bind(now)
        .bind(now)
}

/// The columns [`bind_transaction`] binds before the billing fields, in order.
const TRANSACTION_INSERT: [&str; 27] = [
    "uuid",
    "idempotency_key",
    "site_id",
    "account_id",
    "invoice_id",
    "subscription_uuid",
    "action",
    "amount",
    "tax",
    "currency",
    "status",
    "kind",
    "payment_method",
    "source",
    "origin",
    "recurring",
    "test",
    "gateway_type",
    "description",
    "original_transaction_id",
    "account_code",
    "account_first_name",
    "account_last_name",
    "account_company",
    "account_email",
    "created_at",
    "updated_at",
];

/// Every column a new transaction writes: [`TRANSACTION_INSERT`], then [`FIELD_COLUMNS`].
fn transaction_insert() -> Vec<&'static str> {
    TRANSACTION_INSERT.iter().copied().chain(FIELD_COLUMNS).collect()
}

/// Binds a new (`processing`) transaction's values in [`transaction_insert`] order.
fn bind_transaction<'q>(query: DbQuery<'q>, uuid: String, site_id: i64, new: &NewTransaction, now: i64) -> DbQuery<'q> {
    let a = &new.account;
    let query = query
        .bind(uuid)
        .bind(new.idempotency_key.clone())
        .bind(site_id)
        .bind(new.account_id)
        .bind(new.invoice_id)
        .bind(new.subscription_uuid.clone())
        .bind(new.action.clone())
        .bind(new.amount)
        .bind(new.tax)
        .bind(new.currency.clone())
        .bind(TransactionStatus::Processing.as_str())
        .bind(new.kind.as_str())
        .bind(new.payment_method.clone())
        .bind(new.source.clone())
        .bind(new.origin.clone())
        .bind(flag(new.recurring))
        .bind(flag(new.test))
        .bind(new.gateway_type.clone())
        .bind(new.description.clone())
        .bind(new.original_transaction_id)
        .bind(a.account_code.clone())
        .bind(a.first_name.clone())
        .bind(a.last_name.clone())
        .bind(a.company.clone())
        .bind(a.email.clone())
        .bind(now)
        .bind(now);
    bind_fields(query, &new.billing)
}

const TRANSACTION_BASE_COLUMNS: &str = "id, uuid, idempotency_key, site_id, account_id, invoice_id, \
     (SELECT invoice_number FROM invoices i WHERE i.id = transactions.invoice_id) AS invoice_number, \
     subscription_uuid, action, amount, tax, currency, status, kind, payment_method, source, origin, recurring, test, \
     gateway_type, description, reference, approval_code, message, fraud_review, error_code, error_category, \
     merchant_message, customer_message, gateway_error_code, cvv_code, cvv_message, avs_code, avs_message, \
     account_code, account_first_name, account_last_name, account_company, account_email, collected_at, \
     original_transaction_id, \
     (SELECT o.uuid FROM transactions o WHERE o.id = transactions.original_transaction_id) AS original_transaction_uuid, \
     (SELECT CAST(COALESCE(SUM(r.amount), 0) AS BIGINT) FROM transactions r \
       WHERE r.original_transaction_id = transactions.id AND r.status IN ('success', 'processing')) AS refunded, \
     created_at, updated_at";

fn transaction_columns() -> String {
    format!("{TRANSACTION_BASE_COLUMNS}, {}", FIELD_COLUMNS.join(", "))
}

fn transaction_from_row(row: &DbRow) -> Result<Transaction, StoreError> {
    let error_code: Option<String> = row.try_get("error_code")?;
    let failure = match error_code {
        Some(error_code) => Some(TransactionFailure {
            error_code,
            error_category: row.try_get::<Option<String>, _>("error_category")?.unwrap_or_default(),
            merchant_message: row.try_get::<Option<String>, _>("merchant_message")?.unwrap_or_default(),
            customer_message: row.try_get::<Option<String>, _>("customer_message")?.unwrap_or_default(),
            gateway_error_code: row.try_get("gateway_error_code")?,
        }),
        None => None,
    };
    let check = |code: &str, message: &str| -> Result<Option<Check>, StoreError> {
        let code: Option<String> = row.try_get(code)?;
        let message: Option<String> = row.try_get(message)?;
        Ok(code.map(|code| Check { code, message: message.unwrap_or_default() }))
    };
    Ok(Transaction {
        id: row.try_get("id")?,
        uuid: row.try_get("uuid")?,
        site_id: row.try_get("site_id")?,
        invoice_number: row.try_get("invoice_number")?,
        new: NewTransaction {
            idempotency_key: row.try_get("idempotency_key")?,
            account_id: row.try_get("account_id")?,
            invoice_id: row.try_get("invoice_id")?,
            subscription_uuid: row.try_get("subscription_uuid")?,
            action: row.try_get("action")?,
            amount: row.try_get("amount")?,
            tax: row.try_get("tax")?,
            currency: row.try_get("currency")?,
            kind: parse(row, "kind", PaymentKind::parse)?,
            payment_method: row.try_get("payment_method")?,
            source: row.try_get("source")?,
            origin: row.try_get("origin")?,
            recurring: get_flag(row, "recurring")?,
            test: get_flag(row, "test")?,
            gateway_type: row.try_get("gateway_type")?,
            description: row.try_get("description")?,
            original_transaction_id: row.try_get("original_transaction_id")?,
            account: AccountSnapshot {
                account_code: row.try_get("account_code")?,
                first_name: row.try_get("account_first_name")?,
                last_name: row.try_get("account_last_name")?,
                company: row.try_get("account_company")?,
                email: row.try_get("account_email")?,
            },
            billing: fields_from_row(row)?,
        },
        result: TransactionResult {
            status: parse(row, "status", TransactionStatus::parse)?,
            reference: row.try_get("reference")?,
            approval_code: row.try_get("approval_code")?,
            message: row.try_get("message")?,
            fraud_review: get_flag(row, "fraud_review")?,
            failure,
            cvv: check("cvv_code", "cvv_message")?,
            avs: check("avs_code", "avs_message")?,
            collected_at: row.try_get("collected_at")?,
        },
        original_transaction_uuid: row.try_get("original_transaction_uuid")?,
        refunded: row.try_get("refunded")?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
    })
}

/// `column IN ($…)` over text values.
fn any_of(conditions: &mut Conditions, column: &str, values: impl IntoIterator<Item = String>) {
    let placeholders: Vec<String> = values.into_iter().map(|v| conditions.arg(Arg::Text(v))).collect();
    if !placeholders.is_empty() {
        conditions.push(format!("{column} IN ({})", placeholders.join(", ")));
    }
}

impl Store {
    // ---- invoices ----

    /// Creates an invoice with the next number of its site, its new `lines` and the account's
    /// pending adjustments `attach` (by id), all in one database transaction; a charge invoice
    /// made with `credit` takes the account's available credit in the same transaction. An adjustment of
    /// `attach` that is no longer pending (another invoice took it, or it was deleted) fails the
    /// whole creation with [`StoreError::Conflict`] and nothing is written. `events` are
    /// recorded with it (subject: its number). What coupons did to it (`discounted`: the pending
    /// adjustments' discounts, the redemptions' use) is written in the same transaction.
    #[allow(clippy::too_many_arguments)]
    pub async fn create_invoice(
        &self,
        site_id: i64,
        new: &NewInvoice,
        lines: &[NewAdjustment],
        attach: &[i64],
        now: i64,
        events: &[NewEvent],
        credit: Option<CreditUse>,
        discounted: Discounted<'_>,
    ) -> Result<(Invoice, Vec<Adjustment>), StoreError> {
        let mut work = self.begin_work().await?;
        work.reprice_pending(discounted.repriced).await?;
        let draft = InvoiceDraft { invoice: new, lines, now, events, credit };
        let mut made = work.make_invoices(site_id, &[(draft, attach)]).await?;
        let (invoice, _) = made.pop().ok_or_else(|| StoreError::Invalid("the invoice was not made".into()))?;
        work.record_redemption_uses(invoice.id, discounted.uses, now).await?;
        work.commit().await?;
        // The attached adjustments are lines too.
        let lines = self.invoice_lines(invoice.id).await?;
        Ok((invoice, lines))
    }

    async fn invoice_where(&self, pool: &Pool, condition: &str, args: &[Arg]) -> Result<Option<Invoice>, StoreError> {
        let sql = format!("SELECT {INVOICE_COLUMNS} FROM invoices WHERE {condition}");
        let mut query = sqlx::query(&sql);
        for a in args {
            query = match a {
                Arg::Int(v) => query.bind(*v),
                Arg::Text(v) => query.bind(v.clone()),
            };
        }
        query.fetch_optional(pool).await?.as_ref().map(invoice_from_row).transpose()
    }

    /// The site's invoice with this number.
    pub async fn invoice(&self, site_id: i64, invoice_number: i64) -> Result<Option<Invoice>, StoreError> {
        self.invoice_where(
            &self.reads,
            "site_id = $1 AND invoice_number = $2",
            &[Arg::Int(site_id), Arg::Int(invoice_number)],
        )
        .await
    }

    /// The invoice with this uuid (read on the writer: use it right after a write).
    pub async fn invoice_by_uuid(&self, uuid: &str) -> Result<Option<Invoice>, StoreError> {
        self.invoice_where(&self.pool, "uuid = $1", &[Arg::Text(uuid.to_owned())]).await
    }

    /// The invoice with this id (read on the writer).
    pub async fn invoice_by_id(&self, id: i64) -> Result<Option<Invoice>, StoreError> {
        self.invoice_where(&self.pool, "id = $1", &[Arg::Int(id)]).await
    }

    /// Moves an invoice that is in one of the states `from` to `change.state`; `None` (and no
    /// change) when it is in another state. `paid` also records the total as paid (balance 0);
    /// `paid` and `failed` close the invoice at `now`. `events` are recorded with the change
    /// (subject: the invoice's number), only when it is made. [`Work::set_invoice_states`] with
    /// one invoice, in a database transaction of its own.
    pub async fn set_invoice_state(
        &self,
        id: i64,
        from: &[InvoiceState],
        change: InvoiceChange,
        now: i64,
        events: &[NewEvent],
    ) -> Result<Option<Invoice>, StoreError> {
        let mut work = self.begin_work().await?;
        let changed = work.set_invoice_states(from, &[InvoiceStateChange { id, change, now, events }]).await?;
        if changed.is_empty() {
            // Dropped: rolled back, nothing written.
            return Ok(None);
        }
        work.commit().await?;
        self.invoice_by_id(id).await
    }

    /// A page of the site's invoices, with the number matching `filter` and the time range.
    pub async fn list_invoices(
        &self,
        site_id: i64,
        filter: &InvoiceFilter,
        page: &PageRequest,
    ) -> Result<Page<Invoice>, StoreError> {
        let mut conditions = Conditions::default();
        conditions.eq("site_id", Arg::Int(site_id));
        if let Some(account) = filter.account_id {
            conditions.eq("account_id", Arg::Int(account));
        }
        any_of(&mut conditions, "state", filter.states.iter().map(|s| s.as_str().to_owned()));
        conditions.time_range(page);
        let count_sql = format!("SELECT COUNT(*) AS n FROM invoices{}", conditions.sql());
        let total: i64 = conditions.bind(sqlx::query(&count_sql)).fetch_one(&self.reads).await?.try_get("n")?;
        conditions.after(page);
        let sql = format!("SELECT {INVOICE_COLUMNS} FROM invoices{}{}", conditions.sql(), order_and_limit(page));
        let rows = conditions.bind(sqlx::query(&sql)).fetch_all(&self.reads).await?;
        let items = rows.iter().map(invoice_from_row).collect::<Result<Vec<_>, _>>()?;
        Ok(into_page(items, page, total, |i| i.position(page.sort)))
    }

    /// Which of these accounts have a past-due invoice.
    pub async fn accounts_with_past_due_invoices(&self, account_ids: &[i64]) -> Result<Vec<i64>, StoreError> {
        if account_ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut conditions = Conditions::default();
        any_of(&mut conditions, "state", [InvoiceState::PastDue.as_str().to_owned()]);
        let ids: Vec<String> = account_ids.iter().map(|id| conditions.arg(Arg::Int(*id))).collect();
        conditions.push(format!("account_id IN ({})", ids.join(", ")));
        let sql = format!("SELECT DISTINCT account_id FROM invoices{}", conditions.sql());
        let rows = conditions.bind(sqlx::query(&sql)).fetch_all(&self.reads).await?;
        rows.iter().map(|r| r.try_get("account_id").map_err(StoreError::from)).collect()
    }

    /// The account's invoices summed per currency, one entry for every currency it was invoiced
    /// in (ordered by currency): what its open charge invoices (pending, processing, past due)
    /// still owe less the credit its credit and legacy invoices still hold (so negative when the
    /// credit is larger), and whether one of them is past due.
    pub async fn account_invoice_balances(&self, account_id: i64) -> Result<Vec<CurrencyBalance>, StoreError> {
        let open = InvoiceState::OPEN.map(|s| format!("'{}'", s.as_str())).join(", ");
        let past_due = InvoiceState::PastDue.as_str();
        let sql = format!(
            "SELECT currency, \
               CAST(COALESCE(SUM(CASE WHEN kind = 'charge' AND state IN ({open}) THEN balance \
                 WHEN kind <> 'charge' AND balance < 0 THEN balance ELSE 0 END), 0) AS BIGINT) AS open_balance, \
               CAST(MAX(CASE WHEN state = '{past_due}' THEN 1 ELSE 0 END) AS BIGINT) AS past_due \
             FROM invoices WHERE account_id = $1 GROUP BY currency ORDER BY currency"
        );
        let rows = sqlx::query(&sql).bind(account_id).fetch_all(&self.reads).await?;
        rows.iter()
            .map(|r| {
                Ok(CurrencyBalance {
                    currency: r.try_get("currency")?,
                    open: r.try_get("open_balance")?,
                    past_due: r.try_get::<i64, _>("past_due")? != 0,
                })
            })
            .collect()
    }

    /// The line items of an invoice, in the order they were added.
    pub async fn invoice_lines(&self, invoice_id: i64) -> Result<Vec<Adjustment>, StoreError> {
        let rows =
            sqlx::query(&format!("SELECT {ADJUSTMENT_COLUMNS} FROM adjustments WHERE invoice_id = $1 ORDER BY id"))
                .bind(invoice_id)
                .fetch_all(&self.pool)
                .await?;
        self.with_addresses(rows.iter().map(adjustment_from_row).collect::<Result<_, _>>()?).await
    }

    /// The transactions of an invoice, oldest first.
    pub async fn invoice_transactions(&self, invoice_id: i64) -> Result<Vec<Transaction>, StoreError> {
        let rows = sqlx::query(&format!(
            "SELECT {} FROM transactions WHERE invoice_id = $1 ORDER BY created_at, id",
            transaction_columns()
        ))
        .bind(invoice_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(transaction_from_row).collect()
    }

    // ---- adjustments ----

    /// Adds a pending adjustment to an account.
    pub async fn create_adjustment(
        &self,
        site_id: i64,
        new: &NewAdjustment,
        now: i64,
    ) -> Result<Adjustment, StoreError> {
        let id = insert_adjustment(&self.pool, site_id, None, new, now).await?;
        let row = sqlx::query(&format!("SELECT {ADJUSTMENT_COLUMNS} FROM adjustments WHERE id = $1"))
            .bind(id)
            .fetch_one(&self.pool)
            .await?;
        adjustment_from_row(&row)
    }

    /// The site's adjustment with this uuid.
    pub async fn adjustment(&self, site_id: i64, uuid: &str) -> Result<Option<Adjustment>, StoreError> {
        let row =
            sqlx::query(&format!("SELECT {ADJUSTMENT_COLUMNS} FROM adjustments WHERE site_id = $1 AND uuid = $2"))
                .bind(site_id)
                .bind(uuid)
                .fetch_optional(&self.reads)
                .await?;
        let Some(row) = row else { return Ok(None) };
        Ok(self.with_addresses(vec![adjustment_from_row(&row)?]).await?.pop())
    }

    /// Deletes a pending adjustment; an invoiced one stays.
    pub async fn delete_adjustment(&self, site_id: i64, uuid: &str) -> Result<AdjustmentDeletion, StoreError> {
        let done = sqlx::query("DELETE FROM adjustments WHERE site_id = $1 AND uuid = $2 AND state = $3")
            .bind(site_id)
            .bind(uuid)
            .bind(AdjustmentState::Pending.as_str())
            .execute(&self.pool)
            .await?;
        if done.rows_affected() > 0 {
            return Ok(AdjustmentDeletion::Deleted);
        }
        let exists = sqlx::query("SELECT id FROM adjustments WHERE site_id = $1 AND uuid = $2")
            .bind(site_id)
            .bind(uuid)
            .fetch_optional(&self.pool)
            .await?;
        Ok(if exists.is_some() { AdjustmentDeletion::Invoiced } else { AdjustmentDeletion::NotFound })
    }

    /// The account's pending adjustments, oldest first.
    pub async fn pending_adjustments(&self, account_id: i64) -> Result<Vec<Adjustment>, StoreError> {
        let rows = sqlx::query(&format!(
            "SELECT {ADJUSTMENT_COLUMNS} FROM adjustments WHERE account_id = $1 AND state = $2 ORDER BY created_at, id"
        ))
        .bind(account_id)
        .bind(AdjustmentState::Pending.as_str())
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(adjustment_from_row).collect()
    }

    /// Every adjustment of a subscription (pending or invoiced), oldest first: what was billed
    /// for it, to feed the invoice diff.
    pub async fn subscription_adjustments(&self, subscription_uuid: &str) -> Result<Vec<Adjustment>, StoreError> {
        let mut work = self.begin_work().await?;
        let adjustments = work.subscriptions_adjustments(&[subscription_uuid]).await?;
        work.commit().await?;
        Ok(adjustments)
    }

    /// A page of the site's adjustments.
    pub async fn list_adjustments(
        &self,
        site_id: i64,
        filter: &AdjustmentFilter,
        page: &PageRequest,
    ) -> Result<Page<Adjustment>, StoreError> {
        let mut conditions = Conditions::default();
        conditions.eq("site_id", Arg::Int(site_id));
        if let Some(account) = filter.account_id {
            conditions.eq("account_id", Arg::Int(account));
        }
        if let Some(kind) = filter.kind {
            any_of(&mut conditions, "kind", [kind.as_str().to_owned()]);
        }
        if let Some(state) = filter.state {
            any_of(&mut conditions, "state", [state.as_str().to_owned()]);
        }
        conditions.time_range(page);
        let count_sql = format!("SELECT COUNT(*) AS n FROM adjustments{}", conditions.sql());
        let total: i64 = conditions.bind(sqlx::query(&count_sql)).fetch_one(&self.reads).await?.try_get("n")?;
        conditions.after(page);
        let sql = format!("SELECT {ADJUSTMENT_COLUMNS} FROM adjustments{}{}", conditions.sql(), order_and_limit(page));
        let rows = conditions.bind(sqlx::query(&sql)).fetch_all(&self.reads).await?;
        let items = self.with_addresses(rows.iter().map(adjustment_from_row).collect::<Result<Vec<_>, _>>()?).await?;
        Ok(into_page(items, page, total, |a| a.position(page.sort)))
    }

    // ---- transactions ----

    /// Records a transaction (status `processing`) before the gateway is called. When a
    /// transaction with the same idempotency key exists, it is answered instead (whatever its
    /// status), and nothing is written. The flag tells which: `true` when it was recorded by an
    /// earlier call (one that may have reached the gateway before it stopped).
    pub async fn begin_transaction(
        &self,
        site_id: i64,
        new: &NewTransaction,
        now: i64,
    ) -> Result<(Transaction, bool), StoreError> {
        let mut work = self.begin_work().await?;
        let mut recorded = work.record_transactions(site_id, &[(new, now)], Duplicate::Answer).await?;
        work.commit().await?;
        recorded
            .pop()
            .ok_or_else(|| StoreError::Invalid(format!("transaction {} was not recorded", new.idempotency_key)))
    }

    /// Records what the gateway answered for a `processing` transaction. A transaction that is
    /// no longer processing stays as it is; either way the stored transaction is answered.
    /// `events` are recorded with the result (subject: the transaction's uuid), only when it is
    /// recorded.
    pub async fn complete_transaction(
        &self,
        id: i64,
        result: &TransactionResult,
        now: i64,
        events: &[NewEvent],
    ) -> Result<Transaction, StoreError> {
        let mut work = self.begin_work().await?;
        work.complete_transactions(&[(id, result, now, events)]).await?;
        let sql =
            format!("SELECT {} FROM transactions WHERE id = {}", transaction_columns(), work.backend.params(1, 1));
        let row = sqlx::query(&sql).bind(id).fetch_one(&mut *work.tx).await?;
        work.commit().await?;
        transaction_from_row(&row)
    }

    /// The site's transaction with this uuid.
    pub async fn transaction(&self, site_id: i64, uuid: &str) -> Result<Option<Transaction>, StoreError> {
        let row = sqlx::query(&format!(
            "SELECT {} FROM transactions WHERE site_id = $1 AND uuid = $2",
            transaction_columns()
        ))
        .bind(site_id)
        .bind(uuid)
        .fetch_optional(&self.reads)
        .await?;
        row.as_ref().map(transaction_from_row).transpose()
    }

    /// The transaction with this id (read on the writer).
    pub async fn transaction_by_id(&self, id: i64) -> Result<Option<Transaction>, StoreError> {
        let row = sqlx::query(&format!("SELECT {} FROM transactions WHERE id = $1", transaction_columns()))
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(transaction_from_row).transpose()
    }

    /// A page of the site's transactions.
    pub async fn list_transactions(
        &self,
        site_id: i64,
        filter: &TransactionFilter,
        page: &PageRequest,
    ) -> Result<Page<Transaction>, StoreError> {
        let mut conditions = Conditions::default();
        conditions.eq("site_id", Arg::Int(site_id));
        if let Some(account) = filter.account_id {
            conditions.eq("account_id", Arg::Int(account));
        }
        any_of(&mut conditions, "status", filter.statuses.iter().map(|s| s.as_str().to_owned()));
        any_of(&mut conditions, "action", filter.actions.iter().cloned());
        conditions.time_range(page);
        let count_sql = format!("SELECT COUNT(*) AS n FROM transactions{}", conditions.sql());
        let total: i64 = conditions.bind(sqlx::query(&count_sql)).fetch_one(&self.reads).await?.try_get("n")?;
        conditions.after(page);
        let sql =
            format!("SELECT {} FROM transactions{}{}", transaction_columns(), conditions.sql(), order_and_limit(page));
        let rows = conditions.bind(sqlx::query(&sql)).fetch_all(&self.reads).await?;
        let items = rows.iter().map(transaction_from_row).collect::<Result<Vec<_>, _>>()?;
        Ok(into_page(items, page, total, |t| t.position(page.sort)))
    }
}

impl Work {
    /// The site's accounts with these codes, each with its billing info's payment method.
    pub async fn payers(&mut self, site_id: i64, account_codes: &[&str]) -> Result<Vec<Payer>, StoreError> {
        if account_codes.is_empty() {
            return Ok(Vec::new());
        }
        let fields: Vec<String> = FIELD_COLUMNS.iter().map(|c| format!("b.{c}")).collect();
        let sql = format!(
            "SELECT a.id AS account_id, a.account_code, a.first_name AS account_first_name, \
             a.last_name AS account_last_name, a.company_name AS account_company, a.email AS account_email, \
             b.kind, {}, b.gateway_reference FROM accounts a LEFT JOIN billing_infos b ON b.account_id = a.id \
             WHERE a.site_id = {} AND a.account_code IN ({})",
            fields.join(", "),
            self.backend.params(1, 1),
            self.backend.params(account_codes.len(), 2)
        );
        let mut query = sqlx::query(&sql).bind(site_id);
        for code in account_codes {
            query = query.bind(*code);
        }
        let rows = query.fetch_all(&mut *self.tx).await?;
        rows.iter()
            .map(|row| {
                let payment = match row.try_get::<Option<String>, _>("kind")? {
                    Some(_) => Some(StoredPayment {
                        kind: kind_from_row(row)?,
                        fields: fields_from_row(row)?,
                        gateway_reference: row.try_get("gateway_reference")?,
                    }),
                    None => None,
                };
                Ok(Payer {
                    account_id: row.try_get("account_id")?,
                    account: AccountSnapshot {
                        account_code: row.try_get("account_code")?,
                        first_name: row.try_get("account_first_name")?,
                        last_name: row.try_get("account_last_name")?,
                        company: row.try_get("account_company")?,
                        email: row.try_get("account_email")?,
                    },
                    payment,
                })
            })
            .collect()
    }

    /// Every adjustment of these subscriptions (pending or invoiced), oldest first, as
    /// [`Store::subscription_adjustments`] gives them for one.
    pub async fn subscriptions_adjustments(
        &mut self,
        subscription_uuids: &[&str],
    ) -> Result<Vec<Adjustment>, StoreError> {
        if subscription_uuids.is_empty() {
            return Ok(Vec::new());
        }
        let sql = format!(
            "SELECT {ADJUSTMENT_COLUMNS} FROM adjustments WHERE subscription_uuid IN ({}) ORDER BY created_at, id",
            self.backend.params(subscription_uuids.len(), 1)
        );
        let mut query = sqlx::query(&sql);
        for uuid in subscription_uuids {
            query = query.bind(*uuid);
        }
        query.fetch_all(&mut *self.tx).await?.iter().map(adjustment_from_row).collect()
    }

    /// Creates invoices as [`Store::create_invoice`] does (without pending adjustments to take),
    /// numbered in order with the site's next numbers; answers each with its line items.
    pub async fn create_invoices(
        &mut self,
        site_id: i64,
        drafts: &[InvoiceDraft<'_>],
    ) -> Result<Vec<(Invoice, Vec<Adjustment>)>, StoreError> {
        let drafts: Vec<(InvoiceDraft<'_>, &[i64])> = drafts.iter().map(|d| (*d, &[][..])).collect();
        self.make_invoices(site_id, &drafts).await
    }

    /// The one invoice-making statement set ([`Work::create_invoices`], [`Store::create_invoice`]):
    /// numbers, invoices, then each invoice's pending adjustments to take (by id; one no longer
    /// pending is a [`StoreError::Conflict`] and the work must not be committed) and its new
    /// lines. Answers each invoice with its new lines.
    pub(crate) async fn make_invoices(
        &mut self,
        site_id: i64,
        drafts: &[(InvoiceDraft<'_>, &[i64])],
    ) -> Result<Vec<(Invoice, Vec<Adjustment>)>, StoreError> {
        if drafts.is_empty() {
            return Ok(Vec::new());
        }
        let count = i64::try_from(drafts.len()).map_err(|_| StoreError::Invalid("too many invoices".into()))?;
        let last: i64 = sqlx::query(
            "INSERT INTO invoice_counters (site_id, last_number) VALUES ($1, $2) \
             ON CONFLICT (site_id) DO UPDATE SET last_number = invoice_counters.last_number + $3 \
             RETURNING last_number",
        )
        .bind(site_id)
        .bind(FIRST_INVOICE_NUMBER + count - 1)
        .bind(count)
        .fetch_one(&mut *self.tx)
        .await?
        .try_get("last_number")?;
        let uuids: Vec<String> = drafts.iter().map(|_| new_uuid()).collect();
        let sql = format!(
            "INSERT INTO invoices ({INVOICE_INSERT}) VALUES {} RETURNING {INVOICE_COLUMNS}",
            self.backend.rows(drafts.len(), INVOICE_VALUES, 1)
        );
        let mut query = sqlx::query(&sql);
        for ((number, (draft, _)), uuid) in (last - count + 1..).zip(drafts).zip(&uuids) {
            query = bind_invoice(query, uuid.clone(), site_id, number, draft.invoice, draft.now);
        }
        let mut invoices =
            query.fetch_all(&mut *self.tx).await?.iter().map(invoice_from_row).collect::<Result<Vec<_>, _>>()?;
        invoices.sort_by_key(|i| i.invoice_number);
        if invoices.iter().map(|i| &i.uuid).ne(uuids.iter()) {
            return Err(StoreError::Invalid("the invoices inserted are not the invoices drafted".into()));
        }
        for (invoice, (draft, attach)) in invoices.iter().zip(drafts) {
            for adjustment in *attach {
                let sql = format!(
                    "UPDATE adjustments SET invoice_id = {}, state = {}, updated_at = {} \
                     WHERE id = {} AND account_id = {} AND state = {}",
                    self.backend.params(1, 1),
                    self.backend.params(1, 2),
                    self.backend.params(1, 3),
                    self.backend.params(1, 4),
                    self.backend.params(1, 5),
                    self.backend.params(1, 6)
                );
                let done = sqlx::query(&sql)
                    .bind(invoice.id)
                    .bind(AdjustmentState::Invoiced.as_str())
                    .bind(draft.now)
                    .bind(*adjustment)
                    .bind(draft.invoice.account_id)
                    .bind(AdjustmentState::Pending.as_str())
                    .execute(&mut *self.tx)
                    .await?;
                if done.rows_affected() != 1 {
                    return Err(StoreError::Conflict(format!("adjustment {adjustment} is no longer pending")));
                }
            }
        }
        let lines: Vec<(i64, &NewAdjustment, i64, String)> = invoices
            .iter()
            .zip(drafts)
            .flat_map(|(invoice, (draft, _))| draft.lines.iter().map(move |l| (invoice.id, l, draft.now, new_uuid())))
            .collect();
        let numbers: Vec<String> = invoices.iter().map(|i| i.invoice_number.to_string()).collect();
        let events: Vec<(i64, &str, &NewEvent)> = numbers
            .iter()
            .zip(drafts)
            .flat_map(|(number, (draft, _))| draft.events.iter().map(move |e| (site_id, number.as_str(), e)))
            .collect();
        self.append_events(&events).await?;
        let mut made: Vec<Adjustment> = Vec::new();
        if !lines.is_empty() {
            let sql = format!(
                "INSERT INTO adjustments ({ADJUSTMENT_INSERT}) VALUES {} RETURNING {ADJUSTMENT_COLUMNS}",
                self.backend.rows(lines.len(), ADJUSTMENT_VALUES, 1)
            );
            let mut query = sqlx::query(&sql);
            for (invoice_id, line, now, uuid) in &lines {
                query = bind_adjustment(query, uuid.clone(), site_id, Some(*invoice_id), line, *now);
            }
            made = query.fetch_all(&mut *self.tx).await?.iter().map(adjustment_from_row).collect::<Result<_, _>>()?;
            made.sort_by_key(|a| a.id);
            self.ship_subscription_lines(&mut made).await?;
        }
        let mut paid_by_credit = Vec::with_capacity(invoices.len());
        for (invoice, (draft, _)) in invoices.into_iter().zip(drafts) {
            paid_by_credit.push(match draft.credit {
                Some(credit) => self.apply_credit(invoice, draft.now, credit.recorded_at).await?,
                None => invoice,
            });
        }
        let invoices = paid_by_credit;
        Ok(invoices
            .into_iter()
            .map(|invoice| {
                let own = made.iter().filter(|a| a.invoice_id == Some(invoice.id)).cloned().collect();
                (invoice, own)
            })
            .collect())
    }

    /// Records new transactions (status `processing`) before the gateway is called, as
    /// [`Store::begin_transaction`] does; answers them in the order given. An idempotency key
    /// already recorded fails the whole work (a database error).
    pub async fn begin_transactions(
        &mut self,
        site_id: i64,
        new: &[(&NewTransaction, i64)],
    ) -> Result<Vec<Transaction>, StoreError> {
        Ok(self.record_transactions(site_id, new, Duplicate::Fail).await?.into_iter().map(|(t, _)| t).collect())
    }

    /// The one statement recording new transactions ([`Work::begin_transactions`],
    /// [`Store::begin_transaction`]); answers them in the order given.
    async fn record_transactions(
        &mut self,
        site_id: i64,
        new: &[(&NewTransaction, i64)],
        duplicate: Duplicate,
    ) -> Result<Vec<(Transaction, bool)>, StoreError> {
        if new.is_empty() {
            return Ok(Vec::new());
        }
        let columns = transaction_insert();
        let on_conflict = match duplicate {
            Duplicate::Fail => "",
            Duplicate::Answer => " ON CONFLICT (idempotency_key) DO NOTHING",
        };
        let sql = format!(
            "INSERT INTO transactions ({}) VALUES {}{on_conflict} RETURNING {}",
            columns.join(", "),
            self.backend.rows(new.len(), columns.len(), 1),
            transaction_columns()
        );
        let mut query = sqlx::query(&sql);
        for (t, now) in new {
            query = bind_transaction(query, new_uuid(), site_id, t, *now);
        }
        let mut made =
            query.fetch_all(&mut *self.tx).await?.iter().map(transaction_from_row).collect::<Result<Vec<_>, _>>()?;
        let mut answered = Vec::with_capacity(new.len());
        for (t, _) in new {
            let at = made.iter().position(|m| m.new.idempotency_key == t.idempotency_key);
            let transaction = match (at, duplicate) {
                (Some(i), _) => (made.swap_remove(i), false),
                (None, Duplicate::Answer) => {
                    let sql = format!(
                        "SELECT {} FROM transactions WHERE idempotency_key = {}",
                        transaction_columns(),
                        self.backend.params(1, 1)
                    );
                    let row = sqlx::query(&sql).bind(t.idempotency_key.clone()).fetch_one(&mut *self.tx).await?;
                    (transaction_from_row(&row)?, true)
                }
                (None, Duplicate::Fail) => {
                    return Err(StoreError::Invalid(format!("transaction {} was not recorded", t.idempotency_key)));
                }
            };
            answered.push(transaction);
        }
        Ok(answered)
    }

    /// Records what the gateway answered for `processing` transactions, as
    /// [`Store::complete_transaction`] does: (transaction id, result, time, events). Answers how
    /// many were still processing (the others stay as they are, and their events are not
    /// recorded).
    pub async fn complete_transactions(
        &mut self,
        results: &[(i64, &TransactionResult, i64, &[NewEvent])],
    ) -> Result<u64, StoreError> {
        if results.is_empty() {
            return Ok(0);
        }
        let sql = format!(
            "UPDATE transactions SET status = v.column2, reference = v.column3, approval_code = v.column4, \
             message = v.column5, fraud_review = v.column6, error_code = v.column7, error_category = v.column8, \
             merchant_message = v.column9, customer_message = v.column10, gateway_error_code = v.column11, \
             cvv_code = v.column12, cvv_message = v.column13, avs_code = v.column14, avs_message = v.column15, \
             collected_at = v.column16, updated_at = v.column17 FROM (VALUES {}) AS v \
             WHERE transactions.id = v.column1 AND transactions.status = '{}' \
             RETURNING transactions.id, transactions.site_id, transactions.uuid",
            self.backend.rows(results.len(), 17, 1),
            TransactionStatus::Processing.as_str()
        );
        let mut query = sqlx::query(&sql);
        for (id, r, now, _) in results {
            query = bind_result(query.bind(*id), r).bind(*now);
        }
        let rows = query.fetch_all(&mut *self.tx).await?;
        let mut completed: Vec<(i64, i64, String)> = Vec::with_capacity(rows.len());
        for row in &rows {
            completed.push((row.try_get("id")?, row.try_get("site_id")?, row.try_get("uuid")?));
        }
        let events: Vec<(i64, &str, &NewEvent)> = results
            .iter()
            .filter_map(|(id, _, _, events)| {
                completed.iter().find(|(done, _, _)| done == id).map(|(_, site, uuid)| (*site, uuid.as_str(), *events))
            })
            .flat_map(|(site, uuid, events)| events.iter().map(move |e| (site, uuid, e)))
            .collect();
        self.append_events(&events).await?;
        Ok(completed.len() as u64)
    }

    /// Moves the invoices of `changes` that are in one of the states `from` to their change's
    /// state, each at its time, as [`Store::set_invoice_state`] says (paid records the total as
    /// paid; paid and failed close the invoice); the events of an invoice are recorded only when
    /// it changed. Answers the ids of the invoices changed; the others were in another state.
    pub async fn set_invoice_states(
        &mut self,
        from: &[InvoiceState],
        changes: &[InvoiceStateChange<'_>],
    ) -> Result<Vec<i64>, StoreError> {
        if changes.is_empty() || from.is_empty() {
            return Ok(Vec::new());
        }
        // States are fixed schema names, written as literals.
        let from = from.iter().map(|s| format!("'{}'", s.as_str())).collect::<Vec<_>>().join(", ");
        let (paid, failed) = (InvoiceState::Paid.as_str(), InvoiceState::Failed.as_str());
        let sql = format!(
            "UPDATE invoices SET state = v.column2, \
             paid = CASE WHEN v.column2 = '{paid}' THEN invoices.total ELSE invoices.paid END, \
             balance = CASE WHEN v.column2 = '{paid}' THEN 0 ELSE invoices.balance END, \
             attempt_next_collection_at = CAST(v.column3 AS BIGINT), \
             collection_attempts = COALESCE(CAST(v.column4 AS BIGINT), invoices.collection_attempts), \
             closed_at = CASE WHEN v.column2 IN ('{paid}', '{failed}') THEN v.column5 ELSE NULL END, \
             updated_at = v.column5 FROM (VALUES {}) AS v \
             WHERE invoices.id = v.column1 AND invoices.state IN ({from}) \
             RETURNING invoices.id, invoices.site_id, invoices.invoice_number",
            self.backend.rows(changes.len(), 5, 1)
        );
        let mut query = sqlx::query(&sql);
        for c in changes {
            query = query
                .bind(c.id)
                .bind(c.change.state.as_str())
                .bind(c.change.attempt_next_collection_at)
                .bind(c.change.collection_attempts)
                .bind(c.now);
        }
        let rows = query.fetch_all(&mut *self.tx).await?;
        let mut done: Vec<(i64, i64, String)> = Vec::with_capacity(rows.len());
        for row in &rows {
            done.push((
                row.try_get("id")?,
                row.try_get("site_id")?,
                row.try_get::<i64, _>("invoice_number")?.to_string(),
            ));
        }
        let events: Vec<(i64, &str, &NewEvent)> = changes
            .iter()
            .filter_map(|c| {
                done.iter().find(|(d, _, _)| *d == c.id).map(|(_, site, number)| (*site, number.as_str(), c.events))
            })
            .flat_map(|(site, number, events)| events.iter().map(move |e| (site, number, e)))
            .collect();
        self.append_events(&events).await?;
        Ok(done.into_iter().map(|(id, _, _)| id).collect())
    }
}

impl Store {
    /// The site's account with this code and its billing info's payment method, as charging
    /// needs them ([`Work::payers`] with one account).
    pub async fn payer(&self, site_id: i64, account_code: &str) -> Result<Option<Payer>, StoreError> {
        let mut work = self.begin_work().await?;
        let payer = work.payers(site_id, &[account_code]).await?.pop();
        work.commit().await?;
        Ok(payer)
    }
}

/// Binds a transaction result's columns: status, reference, approval_code, message,
/// fraud_review, the failure's error_code, error_category, merchant_message, customer_message
/// and gateway_error_code, cvv_code, cvv_message, avs_code, avs_message, collected_at.
fn bind_result<'q>(query: DbQuery<'q>, r: &TransactionResult) -> DbQuery<'q> {
    let f = r.failure.as_ref();
    query
        .bind(r.status.as_str())
        .bind(r.reference.clone())
        .bind(r.approval_code.clone())
        .bind(r.message.clone())
        .bind(flag(r.fraud_review))
        .bind(f.map(|f| f.error_code.clone()))
        .bind(f.map(|f| f.error_category.clone()))
        .bind(f.map(|f| f.merchant_message.clone()))
        .bind(f.map(|f| f.customer_message.clone()))
        .bind(f.and_then(|f| f.gateway_error_code.clone()))
        .bind(r.cvv.as_ref().map(|c| c.code.clone()))
        .bind(r.cvv.as_ref().map(|c| c.message.clone()))
        .bind(r.avs.as_ref().map(|c| c.code.clone()))
        .bind(r.avs.as_ref().map(|c| c.message.clone()))
        .bind(r.collected_at)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::accounts::AccountFields;
    use crate::testing::both_backends;
    use crate::{Mode, NewSite, Order, Plan};

    const NOW: i64 = 1_800_000_000;

    async fn site(store: &Store, name: &str) -> i64 {
        let new =
            NewSite { name: name.into(), mode: Mode::Sandbox, plan: Plan::Core, credit_memos: false, contact: None };
        store.create_site(&new, NOW).await.expect("site").0.id
    }

    fn charge(account_id: i64, total: i64) -> NewAdjustment {
        NewAdjustment {
            account_id,
            subscription_uuid: None,
            kind: AdjustmentKind::Charge,
            origin: "debit".into(),
            description: Some("Widget".into()),
            accounting_code: None,
            product_code: None,
            currency: "USD".into(),
            unit_amount: total,
            quantity: 1,
            discount: 0,
            tax: 0,
            total,
            tax_exempt: None,
            tax_code: None,
            credit_reason_code: None,
            start_date: Some(NOW),
            end_date: None,
            engine: None,
            original_adjustment_id: None,
            reversed_quantity: 0,
        }
    }

    fn invoice(account_id: i64, total: i64) -> NewInvoice {
        NewInvoice {
            account_id,
            kind: InvoiceKind::Charge,
            original_invoice_id: None,
            state: InvoiceState::Pending,
            origin: "purchase".into(),
            currency: "USD".into(),
            amounts: InvoiceAmounts {
                subtotal_before_discount: total,
                subtotal_after_discount: total,
                total,
                balance: total,
                ..InvoiceAmounts::default()
            },
            terms: InvoiceTerms::default(),
            due_on: Some(NOW),
            attempt_next_collection_at: None,
            closed_at: None,
        }
    }

    #[tokio::test]
    async fn invoices_are_numbered_per_site_and_take_pending_adjustments() {
        for store in both_backends("invoicing").await {
            let s = site(&store, "a").await;
            let other = site(&store, "b").await;
            let account = store.create_account(s, "c1", &AccountFields::default(), NOW, &[]).await.expect("account").id;
            let foreign =
                store.create_account(other, "c1", &AccountFields::default(), NOW, &[]).await.expect("account").id;

            let pending = store.create_adjustment(s, &charge(account, 500), NOW).await.expect("adjustment");
            assert_eq!(
                (pending.state, pending.invoice_id, pending.account_code.as_str()),
                (AdjustmentState::Pending, None, "c1")
            );
            assert_eq!(store.pending_adjustments(account).await.expect("pending"), vec![pending.clone()]);

            let mut engine = charge(account, 1000);
            engine.subscription_uuid = Some("sub1".into());
            engine.origin = "plan".into();
            engine.engine = Some(EngineKey {
                item_kind: "plan".into(),
                item_code: "gold".into(),
                period_start: NOW,
                period_end: NOW + 100,
                line_period_end: NOW + 100,
                proration: Some((50, 100)),
            });
            let (first, lines) = store
                .create_invoice(
                    s,
                    &invoice(account, 1500),
                    &[engine.clone()],
                    &[pending.id],
                    NOW,
                    &[],
                    None,
                    Discounted::default(),
                )
                .await
                .expect("invoice");
            assert_eq!((first.invoice_number, first.account_code.as_str()), (FIRST_INVOICE_NUMBER, "c1"));
            assert_eq!(lines.len(), 2);
            assert!(
                lines
                    .iter()
                    .all(|l| l.state == AdjustmentState::Invoiced && l.invoice_number == Some(first.invoice_number))
            );
            assert_eq!(lines[1].line, engine);
            assert_eq!(store.subscription_adjustments("sub1").await.expect("billed"), vec![lines[1].clone()]);
            assert!(store.pending_adjustments(account).await.expect("pending").is_empty());
            assert_eq!(store.delete_adjustment(s, &pending.uuid).await.expect("delete"), AdjustmentDeletion::Invoiced);

            // Taking an adjustment that is no longer pending writes nothing.
            let taken = store
                .create_invoice(s, &invoice(account, 500), &[], &[pending.id], NOW, &[], None, Discounted::default())
                .await;
            assert!(matches!(taken, Err(StoreError::Conflict(_))), "{taken:?}");

            let (second, _) = store
                .create_invoice(
                    s,
                    &invoice(account, 1),
                    &[charge(account, 1)],
                    &[],
                    NOW + 1,
                    &[],
                    None,
                    Discounted::default(),
                )
                .await
                .expect("invoice");
            assert_eq!(second.invoice_number, FIRST_INVOICE_NUMBER + 1, "the conflict used no number");
            let (elsewhere, _) = store
                .create_invoice(other, &invoice(foreign, 1), &[], &[], NOW, &[], None, Discounted::default())
                .await
                .expect("invoice");
            assert_eq!(elsewhere.invoice_number, FIRST_INVOICE_NUMBER, "numbers are per site");
            assert_eq!(store.invoice(s, FIRST_INVOICE_NUMBER).await.expect("get").map(|i| i.id), Some(first.id));
            assert_eq!(store.invoice(other, FIRST_INVOICE_NUMBER + 1).await.expect("get"), None);
            assert_eq!(store.invoice_by_uuid(&second.uuid).await.expect("get"), Some(second.clone()));

            // Compare-and-set state changes.
            let paid = InvoiceChange {
                state: InvoiceState::Paid,
                attempt_next_collection_at: None,
                collection_attempts: None,
            };
            let done = store
                .set_invoice_state(first.id, &[InvoiceState::Pending], paid, NOW + 5, &[])
                .await
                .expect("pay")
                .expect("was pending");
            assert_eq!(
                (done.state, done.amounts.paid, done.amounts.balance, done.closed_at),
                (InvoiceState::Paid, 1500, 0, Some(NOW + 5))
            );
            assert_eq!(
                store.set_invoice_state(first.id, &[InvoiceState::Pending], paid, NOW + 6, &[]).await.expect("again"),
                None
            );
            let past_due = InvoiceChange {
                state: InvoiceState::PastDue,
                attempt_next_collection_at: Some(NOW + 86_400),
                collection_attempts: Some(1),
            };
            let due = store
                .set_invoice_state(second.id, &[InvoiceState::Pending], past_due, NOW + 7, &[])
                .await
                .expect("due")
                .expect("changed");
            assert_eq!(
                (due.attempt_next_collection_at, due.collection_attempts, due.closed_at),
                (Some(NOW + 86_400), 1, None)
            );
            assert_eq!(
                store.accounts_with_past_due_invoices(&[account, foreign]).await.expect("past due"),
                vec![account]
            );

            // Lists.
            let all = store.list_invoices(s, &InvoiceFilter::default(), &PageRequest::default()).await.expect("list");
            assert_eq!(
                all.items.iter().map(|i| i.invoice_number).collect::<Vec<_>>(),
                vec![FIRST_INVOICE_NUMBER + 1, FIRST_INVOICE_NUMBER]
            );
            let filter = InvoiceFilter { account_id: Some(account), states: vec![InvoiceState::Paid] };
            let paid_list = store
                .list_invoices(s, &filter, &PageRequest { order: Order::Asc, ..PageRequest::default() })
                .await
                .expect("list");
            assert_eq!((paid_list.total, paid_list.items[0].id), (1, first.id));
            let filter = AdjustmentFilter {
                account_id: Some(account),
                kind: Some(AdjustmentKind::Charge),
                state: Some(AdjustmentState::Invoiced),
            };
            assert_eq!(store.list_adjustments(s, &filter, &PageRequest::default()).await.expect("list").total, 3);
            let pending = AdjustmentFilter { state: Some(AdjustmentState::Pending), ..AdjustmentFilter::default() };
            assert_eq!(store.list_adjustments(s, &pending, &PageRequest::default()).await.expect("list").total, 0);
            let fresh = store.create_adjustment(s, &charge(account, 7), NOW).await.expect("adjustment");
            assert_eq!(store.delete_adjustment(s, &fresh.uuid).await.expect("delete"), AdjustmentDeletion::Deleted);
            assert_eq!(store.delete_adjustment(s, &fresh.uuid).await.expect("delete"), AdjustmentDeletion::NotFound);
        }
    }

    #[tokio::test]
    async fn invoice_balances_sum_the_open_invoices_per_currency() {
        for store in both_backends("invoice_balances").await {
            let s = site(&store, "a").await;
            let account = store.create_account(s, "c1", &AccountFields::default(), NOW, &[]).await.expect("account").id;
            let other = store.create_account(s, "c2", &AccountFields::default(), NOW, &[]).await.expect("account").id;
            assert_eq!(store.account_invoice_balances(account).await.expect("none"), vec![]);

            let mut eur = invoice(account, 700);
            eur.currency = "EUR".into();
            let states = [
                (invoice(account, 1000), InvoiceState::Pending),
                (invoice(account, 2000), InvoiceState::PastDue),
                (invoice(account, 4000), InvoiceState::Paid),
                (invoice(account, 8000), InvoiceState::Failed),
                (invoice(account, 16000), InvoiceState::Processing),
                (eur, InvoiceState::Paid),
                (invoice(other, 500), InvoiceState::PastDue),
            ];
            for (new, state) in states {
                let (created, _) = store
                    .create_invoice(s, &new, &[], &[], NOW, &[], None, Discounted::default())
                    .await
                    .expect("invoice");
                if state != InvoiceState::Pending {
                    let change = InvoiceChange { state, attempt_next_collection_at: None, collection_attempts: None };
                    store
                        .set_invoice_state(created.id, &[InvoiceState::Pending], change, NOW, &[])
                        .await
                        .expect("state");
                }
            }
            assert_eq!(
                store.account_invoice_balances(account).await.expect("balances"),
                vec![
                    CurrencyBalance { currency: "EUR".into(), open: 0, past_due: false },
                    CurrencyBalance { currency: "USD".into(), open: 19_000, past_due: true },
                ]
            );
            assert_eq!(
                store.account_invoice_balances(other).await.expect("balances"),
                vec![CurrencyBalance { currency: "USD".into(), open: 500, past_due: true }]
            );
        }
    }

    #[tokio::test]
    async fn concurrent_invoices_get_distinct_sequential_numbers() {
        for store in both_backends("invoice_numbers").await {
            let s = site(&store, "a").await;
            let account = store.create_account(s, "c1", &AccountFields::default(), NOW, &[]).await.expect("account").id;
            let tasks: Vec<_> = (0..8)
                .map(|i| {
                    let store = store.clone();
                    tokio::spawn(async move {
                        store
                            .create_invoice(s, &invoice(account, i), &[], &[], NOW, &[], None, Discounted::default())
                            .await
                    })
                })
                .collect();
            let mut numbers = Vec::new();
            for t in tasks {
                numbers.push(t.await.expect("task").expect("invoice").0.invoice_number);
            }
            numbers.sort_unstable();
            assert_eq!(numbers, (FIRST_INVOICE_NUMBER..FIRST_INVOICE_NUMBER + 8).collect::<Vec<_>>());
        }
    }

    #[tokio::test]
    async fn transactions_are_recorded_before_and_completed_after_the_gateway() {
        for store in both_backends("transactions").await {
            let s = site(&store, "a").await;
            let account = store.create_account(s, "c1", &AccountFields::default(), NOW, &[]).await.expect("account").id;
            let new = NewTransaction {
                idempotency_key: "k1".into(),
                account_id: account,
                invoice_id: None,
                subscription_uuid: None,
                action: "purchase".into(),
                amount: 1000,
                tax: 0,
                currency: "USD".into(),
                kind: PaymentKind::CreditCard,
                payment_method: "credit_card".into(),
                source: "transaction".into(),
                origin: "api".into(),
                recurring: false,
                test: true,
                gateway_type: "test".into(),
                description: None,
                original_transaction_id: None,
                account: AccountSnapshot { account_code: "c1".into(), ..AccountSnapshot::default() },
                billing: BillingFields {
                    first_six: Some("400000".into()),
                    last_four: Some("0077".into()),
                    ..BillingFields::default()
                },
            };
            let (begun, resumed) = store.begin_transaction(s, &new, NOW).await.expect("begin");
            assert!(!resumed, "a new transaction");
            assert_eq!((begun.status(), &begun.new), (TransactionStatus::Processing, &new));
            assert_eq!(
                store.begin_transaction(s, &new, NOW + 1).await.expect("again"),
                (begun.clone(), true),
                "same key, same row"
            );
            let result = TransactionResult {
                status: TransactionStatus::Declined,
                reference: Some("r".into()),
                approval_code: None,
                message: Some("declined".into()),
                fraud_review: false,
                failure: Some(TransactionFailure {
                    error_code: "insufficient_funds".into(),
                    error_category: "soft".into(),
                    merchant_message: "m".into(),
                    customer_message: "c".into(),
                    gateway_error_code: Some("51".into()),
                }),
                cvv: Some(Check { code: "M".into(), message: "Match".into() }),
                avs: None,
                collected_at: None,
            };
            let done = store.complete_transaction(begun.id, &result, NOW + 2, &[]).await.expect("complete");
            assert_eq!((&done.result, done.updated_at), (&result, NOW + 2));
            let other = TransactionResult { status: TransactionStatus::Success, failure: None, ..result.clone() };
            assert_eq!(
                store.complete_transaction(begun.id, &other, NOW + 3, &[]).await.expect("again"),
                done,
                "completed once"
            );
            assert_eq!(store.transaction(s, &done.uuid).await.expect("get"), Some(done.clone()));
            let declined =
                TransactionFilter { statuses: vec![TransactionStatus::Declined], ..TransactionFilter::default() };
            assert_eq!(store.list_transactions(s, &declined, &PageRequest::default()).await.expect("list").total, 1);
            let refunds = TransactionFilter { actions: vec!["refund".into()], ..TransactionFilter::default() };
            assert_eq!(store.list_transactions(s, &refunds, &PageRequest::default()).await.expect("list").total, 0);
        }
    }
    #[tokio::test]
    async fn work_creates_collects_and_pays_many_invoices_at_once() {
        for store in both_backends("invoicing_work").await {
            let s = site(&store, "a").await;
            let paying = store.create_account(s, "c1", &AccountFields::default(), NOW, &[]).await.expect("account");
            let other = store.create_account(s, "c2", &AccountFields::default(), NOW, &[]).await.expect("account");
            let fields = BillingFields { last_four: Some("1111".into()), ..BillingFields::default() };
            store
                .save_billing_info(s, paying.id, PaymentKind::CreditCard, &fields, Some("ref-1"), NOW, &[])
                .await
                .expect("billing info");
            // The site already has an invoice: the work's invoices take the next numbers.
            store
                .create_invoice(s, &invoice(other.id, 1), &[], &[], NOW, &[], None, Discounted::default())
                .await
                .expect("invoice");

            let mut work = store.begin_work().await.expect("work");
            let mut payers = work.payers(s, &["c1", "c2", "nope"]).await.expect("payers");
            payers.sort_by_key(|p| p.account_id);
            assert_eq!(payers.len(), 2);
            assert_eq!((payers[0].account_id, payers[0].account.account_code.as_str()), (paying.id, "c1"));
            let payment = payers[0].payment.clone().expect("billing info");
            assert_eq!(
                (payment.kind, payment.fields, payment.gateway_reference.as_deref()),
                (PaymentKind::CreditCard, fields.clone(), Some("ref-1"))
            );
            assert_eq!(payers[1].payment, None);

            let mut line = charge(paying.id, 700);
            line.subscription_uuid = Some("sub9".into());
            let first = [line.clone()];
            let second = [line.clone(), charge(paying.id, 300)];
            let (a, b) = (invoice(paying.id, 700), invoice(paying.id, 1000));
            let event = |kind: &str, at: i64| crate::events::NewEvent {
                kind: kind.into(),
                at,
                recorded_at: NOW,
                payload: format!(r#"{{"at":{at}}}"#),
                awaits_reaction: kind == "invoice.paid",
            };
            let created = [[event("invoice.created", NOW + 1)], [event("invoice.created", NOW + 2)]];
            let drafts = [
                InvoiceDraft { invoice: &a, lines: &first, now: NOW + 1, events: &created[0], credit: None },
                InvoiceDraft { invoice: &b, lines: &second, now: NOW + 2, events: &created[1], credit: None },
            ];
            let made = work.create_invoices(s, &drafts).await.expect("invoices");
            assert_eq!(
                made.iter().map(|(i, l)| (i.invoice_number, i.created_at, l.len())).collect::<Vec<_>>(),
                [(FIRST_INVOICE_NUMBER + 1, NOW + 1, 1), (FIRST_INVOICE_NUMBER + 2, NOW + 2, 2)]
            );
            assert_eq!(work.subscriptions_adjustments(&["sub9"]).await.expect("lines").len(), 2);
            let new: Vec<NewTransaction> = made
                .iter()
                .map(|(i, _)| NewTransaction {
                    idempotency_key: format!("invoice:{}:0", i.uuid),
                    account_id: paying.id,
                    invoice_id: Some(i.id),
                    subscription_uuid: None,
                    action: "purchase".into(),
                    amount: i.amounts.balance,
                    tax: 0,
                    currency: "USD".into(),
                    kind: PaymentKind::CreditCard,
                    payment_method: "credit_card".into(),
                    source: "subscription".into(),
                    origin: "recurring".into(),
                    recurring: true,
                    test: true,
                    gateway_type: "test".into(),
                    description: None,
                    original_transaction_id: None,
                    account: payers[0].account.clone(),
                    billing: fields.clone(),
                })
                .collect();
            let begun = work.begin_transactions(s, &[(&new[0], NOW + 1), (&new[1], NOW + 2)]).await.expect("begin");
            assert_eq!(begun.iter().map(|t| &t.new).collect::<Vec<_>>(), new.iter().collect::<Vec<_>>());
            assert!(begun.iter().all(|t| t.status() == TransactionStatus::Processing));
            let approved = TransactionResult {
                status: TransactionStatus::Success,
                reference: Some("r".into()),
                approval_code: Some("A".into()),
                message: Some("ok".into()),
                fraud_review: false,
                failure: None,
                cvv: None,
                avs: Some(Check { code: "Y".into(), message: "match".into() }),
                collected_at: Some(NOW + 3),
            };
            let approvals = [event("transaction.approved", NOW + 3)];
            let results =
                [(begun[0].id, &approved, NOW + 3, &approvals[..]), (begun[1].id, &approved, NOW + 3, &approvals[..])];
            assert_eq!(work.complete_transactions(&results).await.expect("complete"), 2);
            assert_eq!(work.complete_transactions(&results).await.expect("again"), 0, "completed once");
            let paid_event = [event("invoice.paid", NOW + 4)];
            let pay = InvoiceChange {
                state: InvoiceState::Paid,
                attempt_next_collection_at: None,
                collection_attempts: None,
            };
            let paying_first = |now| InvoiceStateChange { id: made[0].0.id, change: pay, now, events: &paid_event[..] };
            let paid = work.set_invoice_states(&InvoiceState::OPEN, &[paying_first(NOW + 4)]).await.expect("paid");
            assert_eq!(paid, [made[0].0.id]);
            let again = work.set_invoice_states(&InvoiceState::OPEN, &[paying_first(NOW + 5)]).await.expect("again");
            assert!(again.is_empty(), "paid once");
            // A batch moves each invoice as its change says: the second falls past due with a
            // retry scheduled and one attempt counted, and stays open.
            let retry = InvoiceChange {
                state: InvoiceState::PastDue,
                attempt_next_collection_at: Some(NOW + 86_400),
                collection_attempts: Some(1),
            };
            let changes = [
                paying_first(NOW + 6),
                InvoiceStateChange { id: made[1].0.id, change: retry, now: NOW + 6, events: &[] },
            ];
            let moved = work.set_invoice_states(&[InvoiceState::Pending], &changes).await.expect("past due");
            assert_eq!(moved, [made[1].0.id], "the paid one is not pending any more");
            work.commit().await.expect("commit");
            let first = store.invoice_by_id(made[0].0.id).await.expect("read").expect("first");
            assert_eq!((first.state, first.amounts.balance, first.closed_at), (InvoiceState::Paid, 0, Some(NOW + 4)));

            // One account's paying side is the batch read with one code.
            let single = store.payer(s, "c1").await.expect("payer").expect("c1");
            assert_eq!(single.account_id, paying.id);
            assert_eq!(single.payment.map(|p| p.gateway_reference), Some(Some("ref-1".to_owned())));
            assert_eq!(store.payer(s, "nope").await.expect("payer"), None);

            // Each change recorded its events, with its item as the subject, once.
            let kinds = |events: Vec<crate::events::Event>| {
                events.into_iter().map(|e| (e.kind, e.at, e.awaiting)).collect::<Vec<_>>()
            };
            let first_number = made[0].0.invoice_number.to_string();
            assert_eq!(
                kinds(store.events(s, &first_number).await.expect("events")),
                [("invoice.created".to_owned(), NOW + 1, false), ("invoice.paid".to_owned(), NOW + 4, true)]
            );
            assert_eq!(
                kinds(store.events(s, &made[1].0.invoice_number.to_string()).await.expect("events")),
                [("invoice.created".to_owned(), NOW + 2, false)]
            );
            for t in &begun {
                assert_eq!(
                    kinds(store.events(s, &t.uuid).await.expect("events")),
                    [("transaction.approved".to_owned(), NOW + 3, false)]
                );
            }

            // What the work made reads back as the one-at-a-time methods make it.
            for (invoice, lines) in &made {
                assert_eq!(store.invoice_lines(invoice.id).await.expect("lines"), *lines);
            }
            let settled = store.invoice_by_id(made[0].0.id).await.expect("read").expect("exists");
            assert_eq!(
                (settled.state, settled.amounts.paid, settled.amounts.balance, settled.closed_at),
                (InvoiceState::Paid, 700, 0, Some(NOW + 4))
            );
            let past_due = Invoice {
                state: InvoiceState::PastDue,
                attempt_next_collection_at: Some(NOW + 86_400),
                collection_attempts: 1,
                updated_at: NOW + 6,
                ..made[1].0.clone()
            };
            assert_eq!(store.invoice_by_id(made[1].0.id).await.expect("read"), Some(past_due));
            let stored = store.transaction(s, &begun[1].uuid).await.expect("read").expect("exists");
            assert_eq!((&stored.result, stored.updated_at, &stored.new), (&approved, NOW + 3, &new[1]));
            assert_eq!(store.begin_transaction(s, &new[0], NOW + 9).await.expect("same key").0.id, begun[0].id);
        }
    }
}
