//! The rows of invoices, their line items (adjustments) and transactions: the types the rest
//! of rebill names, and how they are read from and written to a row. The writes that combine
//! them with credit, coupons and shipping addresses are in [`crate::invoicing`].
//!
//! Money is integer cents, times UTC epoch seconds, booleans 0/1 (the `Any` driver sends one
//! integer type to both backends).

use sqlx::Row;

use crate::billing_info::{BillingFields, FIELD_COLUMNS, PaymentKind, bind_fields, fields_from_row};
use crate::db::{Db, DbQuery, DbRow};
use crate::events::NewEvent;
use crate::list::{Arg, Conditions, Position, Sort};
use crate::work::placeholders;
use crate::{StoreError, flag, get_flag};

use rebill_billing::states::{InvoiceState, TransactionStatus};

/// A charge invoice's use of the account's credit when it is made: the events of its credit
/// payments are recorded at this service-clock time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CreditUse {
    pub recorded_at: i64,
}

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

pub(crate) fn parse<T>(row: &DbRow, column: &str, f: impl Fn(&str) -> Option<T>) -> Result<T, StoreError> {
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
pub(crate) enum Duplicate {
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
pub(crate) const ADJUSTMENT_INSERT: &str = "uuid, site_id, account_id, invoice_id, subscription_uuid, state, kind, origin, \
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
pub(crate) fn bind_adjustment<'q>(
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
pub(crate) const ADJUSTMENT_VALUES: usize = 33;

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
pub(crate) const INVOICE_INSERT: &str = "uuid, site_id, account_id, invoice_number, kind, original_invoice_id, state, origin, currency, \
     subtotal_before_discount, discount, subtotal_after_discount, tax, total, paid, balance, net_terms, due_on, \
     collection_method, po_number, customer_notes, terms_and_conditions, vat_reverse_charge_notes, \
     attempt_next_collection_at, closed_at, created_at, updated_at";

/// Values an invoice binds ([`INVOICE_INSERT`]).
pub(crate) const INVOICE_VALUES: usize = 27;

/// Binds an invoice's [`INVOICE_INSERT`] values.
pub(crate) fn bind_invoice<'q>(
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
pub(crate) const TRANSACTION_INSERT: [&str; 27] = [
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
pub(crate) fn transaction_insert() -> Vec<&'static str> {
    TRANSACTION_INSERT.iter().copied().chain(FIELD_COLUMNS).collect()
}

/// Binds a new (`processing`) transaction's values in [`transaction_insert`] order.
pub(crate) fn bind_transaction<'q>(
    query: DbQuery<'q>,
    uuid: String,
    site_id: i64,
    new: &NewTransaction,
    now: i64,
) -> DbQuery<'q> {
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

pub(crate) const TRANSACTION_BASE_COLUMNS: &str = "id, uuid, idempotency_key, site_id, account_id, invoice_id, \
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

pub(crate) fn transaction_columns() -> String {
    format!("{TRANSACTION_BASE_COLUMNS}, {}", FIELD_COLUMNS.join(", "))
}

pub(crate) fn transaction_from_row(row: &DbRow) -> Result<Transaction, StoreError> {
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
pub(crate) fn any_of(conditions: &mut Conditions, column: &str, values: impl IntoIterator<Item = String>) {
    let placeholders: Vec<String> = values.into_iter().map(|v| conditions.arg(Arg::Text(v))).collect();
    if !placeholders.is_empty() {
        conditions.push(format!("{column} IN ({})", placeholders.join(", ")));
    }
}
