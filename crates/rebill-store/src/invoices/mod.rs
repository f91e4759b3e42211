//! The rows of invoices, their line items (adjustments) and transactions: the types the rest
//! of rebill names, and how they are read from and written to a row. The writes that combine
//! them with credit, coupons and shipping addresses are in [`crate::invoicing`].
//!
//! How each is read from and written to a row is the `rows` module.
//!
//! Money is integer cents, times UTC epoch seconds, booleans 0/1 (one integer type for both
//! backends, bound and decoded the same way by either driver).

pub(crate) mod rows;

use crate::billing_info::{BillingFields, PaymentKind};
use crate::events::NewEvent;
use crate::list::{Position, Sort};

use rebill_billing::states::{InvoiceState, TransactionStatus};

#[cfg(doc)]
use crate::{Store, work::Work};

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
    /// The gateway's reference of the stored payment method a purchase charges (never card
    /// data), so that a purchase whose outcome was not known is asked again with the same
    /// parameters; `None` for other transactions.
    pub payment_reference: Option<String>,
    pub account: AccountSnapshot,
    /// The billing info's non-secret fields at charge time.
    pub billing: BillingFields,
}

/// What [`Store::close_invoice`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Closing {
    /// Changed: the invoice as it is now.
    Closed(Box<Invoice>),
    /// Not in a state the change starts from: nothing was written.
    NotInState,
    /// A purchase of the invoice is still `processing` at the gateway (this one): nothing was
    /// written.
    Paying(Box<Transaction>),
}

/// What a purchase attempt keeps beyond its transaction ([`Store::begin_attempt`],
/// [`Store::attempt_of`]), for the settle job that finishes it when the gateway's answer was not
/// known.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AttemptFacts {
    /// The service's time (not the site's) when the attempt was begun: a gateway keeps an
    /// idempotency key for a span of real time, while a sandbox site's clock may be moved ahead.
    /// `None` for transactions recorded without it.
    pub begun_service_at: Option<i64>,
    /// The attempt charges a payment method the request named (stored with the gateway for the
    /// charge, not the account's billing info yet), which becomes the account's billing info once
    /// the charge is approved (or declined `declined_saveable`), whenever that answer comes.
    pub saves_payment_method: bool,
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
