//! Payment gateways: the [`Gateway`] trait (object-safe, so the service holds an
//! `Arc<dyn Gateway>` and a real gateway can be plugged in) and [`SandboxGateway`], the test
//! gateway of sandbox sites, whose outcome is chosen by the card or bank account number.
//!
//! Sandbox outcomes (purchases and verifications alike):
//!
//! | Number | Outcome |
//! |---|---|
//! | 4111111111111111 and any other valid number not below | approved |
//! | 4222222222222220 | approved, flagged for fraud review (`approved_fraud_review`) |
//! | 4000000000002024 | approved; a refund of it is declined (`transaction_cannot_be_refunded`) |
//! | 4000000000000002 | `declined` |
//! | 4000000000000010 / 0028 / 0036 | `fraud_address` (AVS `N` street and postal / `Z` street / `A` postal) |
//! | 4000000000000044 | `fraud_advanced_verification` |
//! | 4000000000000051 | `declined_card_number` |
//! | 4000000000000069 | `expired_card` |
//! | 4000000000000077 | `insufficient_funds` |
//! | 4000000000000085 | `fraud_gateway` |
//! | 4000000000000093 | `fraud_ip_address` |
//! | 4000000000001190 | `fraud_risk_check` |
//! | 4000000000000101 | `fraud_security_code` (CVV `N`) |
//! | 4000000000000119 | `call_issuer` |
//! | 4000000000000200 | `invalid_data` |
//! | 4000000000000226 | `declined_expiration_date` |
//! | 4000000000000309 | `gateway_timeout` |
//! | 4000000000000317 | `duplicate_transaction` |
//! | 4000000000000325 | `card_type_not_accepted` |
//! | 4000000000000341 | `declined_saveable` (declined, but the card may be stored) |
//! | 4000000000003220, 4000000000003063 | `three_d_secure_action_required` (challenge, device fingerprint) |
//! | 4000008400001629 | approved when the customer is present; `three_d_secure_action_required` on recurring charges |
//! | a number failing the Luhn check (e.g. 4222222222222222) | `invalid_card_number` |
//!
//! ACH (routing number 123456780 only, any other is `invalid_data`): account 111111111 settles;
//! 111111112 and 111111113 are canceled by the bank (`ach_cancel`); 111111114 succeeds and is
//! later charged back ([`Approval::chargeback_expected`]); 111111115 succeeds and refunds;
//! 111111116 succeeds but its refund is declined; any other account number settles.
//!
//! # Refunds and voids
//!
//! Refunds and voids are decided by the reference of the original purchase: the sandbox marks
//! the references of purchases that cannot be given back (card 4000000000002024, ACH account
//! 111111116, and stored references of either), so neither call needs a card number.
//!
//! | Request | Outcome |
//! |---|---|
//! | amount ≤ 0 | `invalid_amount` (hard), refund and void alike |
//! | refund of a marked purchase | `transaction_cannot_be_refunded` (hard) |
//! | void of a marked purchase | `transaction_cannot_be_voided` (hard) |
//! | refund of any other purchase (ACH 111111115 included) | approved, with a new reference for the refund |
//! | void of any other purchase | approved, answering the reference of the voided purchase |
//!
//! A void is asked for the amount of the purchase; the sandbox does not check it against the
//! purchase (it keeps no record of them), nor whether the purchase has settled: when to void
//! rather than refund is the billing rule of [`crate::settlement`].
//!
//! # Stored payment methods
//!
//! Later charges (renewals, dunning retries, one-off charges of an account) need no card number:
//! [`Gateway::store_payment_method`] answers an opaque reference that the service keeps on the
//! billing info, and [`PaymentMethod::Stored`] charges it. A sandbox reference is
//! `sbx_<24 hex digits>_<behaviour>`, where the behaviour is all it remembers of the card or
//! bank account: `approved`, `approved_fraud_review`, `no_refund` (4000000000002024),
//! `chargeback` (ACH 111111114), `three_d_secure_recurring` (4000008400001629: approved with the
//! customer present, `three_d_secure_action_required` on recurring charges) or the decline code
//! of a declining test card or account (`insufficient_funds`, `fraud_security_code`, …). Charging
//! a stored reference therefore approves or declines exactly as the number did, and never holds
//! the number. A reference the sandbox did not make declines with `gateway_token_not_found`.

use std::future::Future;
use std::pin::Pin;

use crate::card::{BankAccount, Card, luhn_valid};
use crate::errors::{TransactionErrorInfo, lookup_or_unknown};

/// The payment method of a request: the full details, held only for the call, or the reference
/// of a payment method stored with the gateway earlier ([`Gateway::store_payment_method`]).
#[derive(Debug, Clone, Copy)]
pub enum PaymentMethod<'a> {
    Card(&'a Card),
    BankAccount(&'a BankAccount),
    /// A payment method the gateway holds, by its opaque reference.
    Stored {
        reference: &'a str,
    },
}

/// The billing address parts used for address verification (AVS).
#[derive(Debug, Clone, Copy, Default)]
pub struct AvsAddress<'a> {
    pub street: Option<&'a str>,
    pub postal_code: Option<&'a str>,
}

/// A purchase or a verification.
#[derive(Debug, Clone, Copy)]
pub struct PaymentRequest<'a> {
    /// Minor units; a verification authorizes this amount and voids it at once.
    pub amount_in_cents: i64,
    /// ISO 4217 code.
    pub currency: &'a str,
    pub method: PaymentMethod<'a>,
    pub address: AvsAddress<'a>,
    /// A merchant-initiated charge (renewal) rather than one with the customer present.
    pub recurring: bool,
    /// A key unique to the charge (e.g. the uuid of the transaction recorded before the call),
    /// so that a gateway that supports it charges once however often the call is repeated.
    pub idempotency_key: Option<&'a str>,
    /// The transaction was recorded by an earlier call whose outcome is not known (it may have
    /// reached the gateway, and may still be running there): a gateway that can find what it
    /// did under [`PaymentRequest::idempotency_key`] answers that instead of charging again.
    pub resumed: bool,
    /// With [`PaymentRequest::resumed`]: whether the request may still be sent again under its
    /// idempotency key when nothing is found (the gateway still keeps the key's first result, so
    /// sending again cannot charge twice). `false` once the key may have been forgotten
    /// (Stripe keeps keys 24 hours): then only a look-up is made, and nothing found is a decline.
    pub may_resend: bool,
    /// What the charge pays (an invoice number), for the gateway's own records.
    pub invoice: Option<&'a str>,
    /// The stored payment method (its reference) that a verified new one will replace: a
    /// gateway may keep its customer record and retire the old method.
    pub replacing: Option<&'a str>,
}

/// A refund of (part of) an earlier purchase.
#[derive(Debug, Clone, Copy)]
pub struct RefundRequest<'a> {
    pub amount_in_cents: i64,
    pub currency: &'a str,
    /// The gateway reference of the purchase.
    pub reference: &'a str,
    /// A key unique to the refund (e.g. the uuid of the refund transaction recorded before the
    /// call), so that a gateway that supports it refunds once however often the call is repeated.
    pub idempotency_key: Option<&'a str>,
}

/// A void of an earlier purchase that has not settled yet: the whole purchase is canceled and
/// no money moves.
#[derive(Debug, Clone, Copy)]
pub struct VoidRequest<'a> {
    /// The gateway reference of the purchase.
    pub reference: &'a str,
    /// The amount of the purchase (a void always cancels all of it).
    pub amount_in_cents: i64,
    pub currency: &'a str,
    /// A key unique to the void, as for [`RefundRequest::idempotency_key`].
    pub idempotency_key: Option<&'a str>,
}

/// A check of a stored card's security code: no money moves.
#[derive(Debug, Clone, Copy)]
pub struct CvvRequest<'a> {
    /// The gateway reference of the stored card ([`Gateway::store_payment_method`]).
    pub reference: &'a str,
    /// The security code the customer entered (never stored).
    pub verification_value: &'a str,
    /// A key unique to the check, as for [`PaymentRequest::idempotency_key`].
    pub idempotency_key: Option<&'a str>,
}

/// The sandbox's security code that never matches (any other well-formed code matches).
pub const SANDBOX_MISMATCHED_CVV: &str = "999";

/// The result of a CVV or AVS check: a one-letter code and its meaning.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckResult {
    pub code: String,
    pub message: String,
}

impl CheckResult {
    fn new(code: &str, message: &str) -> Self {
        Self { code: code.to_owned(), message: message.to_owned() }
    }
}

/// An approved transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Approval {
    /// The gateway's reference of the transaction (needed to refund it).
    pub reference: String,
    /// `approved` or `approved_fraud_review`.
    pub code: &'static str,
    pub cvv_result: Option<CheckResult>,
    pub avs_result: Option<CheckResult>,
    /// The bank will charge the payment back later (sandbox ACH account 111111114).
    pub chargeback_expected: bool,
    /// The payment method stored by the gateway as part of a verification (its reference, as
    /// [`Gateway::store_payment_method`] answers it), when the gateway stores while it verifies.
    pub stored: Option<String>,
}

impl Approval {
    pub fn fraud_review(&self) -> bool {
        self.code == "approved_fraud_review"
    }
}

/// A declined transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decline {
    /// A code of the transaction error table.
    pub code: &'static str,
    /// The gateway's own code for the decline.
    pub gateway_error_code: Option<String>,
    pub cvv_result: Option<CheckResult>,
    pub avs_result: Option<CheckResult>,
    /// The gateway's reference of the declined attempt, when it made one.
    pub reference: Option<String>,
}

impl Decline {
    /// The table row of the decline's code (category and messages).
    pub fn error(&self) -> &'static TransactionErrorInfo {
        lookup_or_unknown(self.code)
    }

    /// Whether the payment method may be stored despite the decline (`declined_saveable`).
    pub fn saveable(&self) -> bool {
        self.code == "declined_saveable"
    }
}

/// A call whose outcome is not known: no definite answer came (a time-out, a connection lost
/// after sending, a 5xx, a request with the same key still running at the gateway, or a
/// payment the gateway still shows as moving). The gateway may have acted or may still act, so
/// the transaction is neither approved nor declined: it stays `processing` until the gateway's
/// own record settles it (the caller asks again with [`PaymentRequest::resumed`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pending {
    /// Why it is not known, as a code of the transaction error table's `communication`
    /// category (`gateway_timeout`, `gateway_unavailable`, `gateway_error`, …).
    pub code: &'static str,
    /// The gateway's reference of the attempt, when one is known.
    pub reference: Option<String>,
}

impl Pending {
    /// An unknown outcome for `code`, with no reference.
    pub fn new(code: &'static str) -> Self {
        Self { code, reference: None }
    }
}

/// What a gateway answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Approved(Approval),
    Declined(Decline),
    /// Not known yet: neither approved nor declined (see [`Pending`]).
    Pending(Pending),
}

impl Outcome {
    pub fn is_approved(&self) -> bool {
        matches!(self, Outcome::Approved(_))
    }

    /// Whether the outcome is not known yet.
    pub fn is_pending(&self) -> bool {
        matches!(self, Outcome::Pending(_))
    }

    /// The outcome of a call that moves no money (a verification, a security-code check): an
    /// unknown outcome is a decline with its code, since nothing is left for the gateway to
    /// settle. Never for purchases, refunds or voids.
    pub fn or_declined(self) -> Outcome {
        match self {
            Outcome::Pending(p) => Outcome::Declined(Decline {
                code: p.code,
                gateway_error_code: None,
                cvv_result: None,
                avs_result: None,
                reference: p.reference,
            }),
            definite => definite,
        }
    }
}

/// The future of a gateway call.
pub type GatewayFuture<'a> = Pin<Box<dyn Future<Output = Outcome> + Send + 'a>>;

/// The future of storing a payment method: its opaque reference, or why the gateway refused it.
pub type StoreFuture<'a> = Pin<Box<dyn Future<Output = Result<String, Box<Decline>>> + Send + 'a>>;

/// The future of reading a gateway's own records ([`Gateway::records`]).
pub type RecordsFuture<'a> = Pin<Box<dyn Future<Output = Result<Records, RecordsError>> + Send + 'a>>;

/// A payment or a refund as the gateway's own record shows it: what reconciliation compares
/// with rebill's transactions (`crate::reconcile`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewayRecord {
    pub kind: RecordKind,
    /// The gateway's id of the record (a Stripe PaymentIntent's or Refund's).
    pub reference: String,
    /// The attempt key rebill gave the record (its metadata); `None`: not made by rebill.
    pub attempt: Option<String>,
    /// For a refund, the reference of the payment it gives back.
    pub payment: Option<String>,
    /// Where the money stands.
    pub state: RecordState,
    /// Cents: what moved when [`RecordState::Moved`], else what was asked for.
    pub amount: i64,
    /// ISO 4217, upper case.
    pub currency: String,
    /// When the gateway made it (epoch seconds, the gateway's clock).
    pub created_at: i64,
}

/// What a [`GatewayRecord`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RecordKind {
    Payment,
    Refund,
}

/// Where the money of a [`GatewayRecord`] stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordState {
    /// Taken (a captured payment) or given back (a refund made, or on its way).
    Moved,
    /// Authorized and not captured: the customer's funds are held, nothing taken.
    Held,
    /// Still being processed by the gateway.
    Moving,
    /// Nothing moved: declined, failed, canceled or never confirmed.
    Nothing,
}

/// The gateway's records made since a time ([`Gateway::records`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Records {
    pub records: Vec<GatewayRecord>,
    /// False when the listing stopped at its bound before the oldest record of the window.
    pub complete: bool,
}

/// Why a gateway's records could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordsError {
    #[error("the {0} gateway keeps no records rebill can read")]
    Unsupported(&'static str),
    #[error("the gateway's records could not be read: {0}")]
    Unavailable(String),
}

/// A payment gateway. Every call answers an [`Outcome`]. A failure to reach the gateway before
/// anything was sent is a decline of the `communication` category (`gateway_unavailable`, …);
/// a call of a purchase, refund or void that may have reached the gateway without a definite
/// answer is [`Outcome::Pending`], never a decline. A call that never answers is the caller's
/// to bound: the use cases wait at most their configured gateway timeout and then hold the
/// outcome as pending too.
pub trait Gateway: Send + Sync {
    /// The `gateway_type` written on transactions (`test` for the sandbox).
    fn kind(&self) -> &'static str;

    /// Whether transactions through this gateway are test transactions.
    fn is_test(&self) -> bool;

    /// Charges the amount.
    fn purchase<'a>(&'a self, request: &'a PaymentRequest<'a>) -> GatewayFuture<'a>;

    /// Checks the payment method with an authorization of the amount (zero or one unit) that is
    /// voided at once.
    fn verify<'a>(&'a self, request: &'a PaymentRequest<'a>) -> GatewayFuture<'a>;

    /// Refunds (part of) an earlier purchase. An approval's reference is the refund's own.
    fn refund<'a>(&'a self, request: &'a RefundRequest<'a>) -> GatewayFuture<'a>;

    /// Voids an earlier purchase that has not settled. An approval's reference is the voided
    /// purchase's.
    fn void<'a>(&'a self, request: &'a VoidRequest<'a>) -> GatewayFuture<'a>;

    /// Stores a card or bank account with the gateway for later charges and answers its opaque
    /// reference (charged with [`PaymentMethod::Stored`]). The reference never contains the card
    /// or account number. Storing a [`PaymentMethod::Stored`] answers its own reference.
    /// `replacing`: the stored method this one replaces, as [`PaymentRequest::replacing`].
    fn store_payment_method<'a>(&'a self, method: PaymentMethod<'a>, replacing: Option<&'a str>) -> StoreFuture<'a>;

    /// The name of the bank with this routing number, if the gateway knows it.
    fn bank_name(&self, routing_number: &str) -> Option<String>;

    /// Whether the gateway takes bank accounts (ACH) at all: one that does not declines them
    /// by name (`ach_transactions_not_supported`) rather than by their routing number.
    fn accepts_bank_accounts(&self) -> bool {
        true
    }

    /// Checks a security code against a stored card: approved with CVV result `M` when it
    /// matches, declined `fraud_security_code` (CVV result `N`) when it does not. Only called
    /// when [`Gateway::checks_stored_cvv`].
    fn check_cvv<'a>(&'a self, request: &'a CvvRequest<'a>) -> GatewayFuture<'a>;

    /// Whether the gateway can check a security code against a card it stored earlier.
    fn checks_stored_cvv(&self) -> bool {
        true
    }

    /// The gateway's own records of payments and refunds made since `since` (epoch seconds),
    /// for reconciliation. A gateway that keeps none rebill can read answers
    /// [`RecordsError::Unsupported`].
    fn records(&self, since: i64) -> RecordsFuture<'_> {
        let _ = since;
        let kind = self.kind();
        Box::pin(async move { Err(RecordsError::Unsupported(kind)) })
    }
}

/// The sandbox's one routing number.
pub const SANDBOX_ROUTING_NUMBER: &str = "123456780";
/// Name of the sandbox's bank.
pub const SANDBOX_BANK_NAME: &str = "SANDBOX TEST BANK";
/// Suffix of sandbox references whose refund is declined.
const NO_REFUND: &str = "-norefund";

/// The test gateway of sandbox sites (see the module documentation for its outcomes).
#[derive(Debug, Clone, Copy, Default)]
pub struct SandboxGateway;

/// A sandbox decision before references are made.
enum Decision {
    Approve { code: &'static str, refundable: bool, chargeback: bool },
    Decline { code: &'static str, gateway_code: &'static str },
}

const fn approve() -> Decision {
    Decision::Approve { code: "approved", refundable: true, chargeback: false }
}

const fn decline(code: &'static str, gateway_code: &'static str) -> Decision {
    Decision::Decline { code, gateway_code }
}

/// Declining test cards: number, decline code, the gateway's own code.
const DECLINING_CARDS: &[(&str, &str, &str)] = &[
    ("4000000000000002", "declined", "05"),
    ("4000000000000010", "fraud_address", "AVS"),
    ("4000000000000028", "fraud_address", "AVS"),
    ("4000000000000036", "fraud_address", "AVS"),
    ("4000000000000044", "fraud_advanced_verification", "R1"),
    ("4000000000000051", "declined_card_number", "14"),
    ("4000000000000069", "expired_card", "54"),
    ("4000000000000077", "insufficient_funds", "51"),
    ("4000000000000085", "fraud_gateway", "59"),
    ("4000000000000093", "fraud_ip_address", "59"),
    ("4000000000001190", "fraud_risk_check", "59"),
    ("4000000000000101", "fraud_security_code", "N7"),
    ("4000000000000119", "call_issuer", "01"),
    ("4000000000000200", "invalid_data", "12"),
    ("4000000000000226", "declined_expiration_date", "33"),
    ("4000000000000309", "gateway_timeout", "91"),
    ("4000000000000317", "duplicate_transaction", "94"),
    ("4000000000000325", "card_type_not_accepted", "57"),
    ("4000000000000341", "declined_saveable", "05"),
    ("4000000000003220", "three_d_secure_action_required", "1A"),
    ("4000000000003063", "three_d_secure_action_required", "1A"),
];

/// Declines that are not a card of [`DECLINING_CARDS`]: code and the gateway's own code.
const OTHER_DECLINES: &[(&str, &str)] = &[
    ("invalid_card_number", "14"),
    ("ach_cancel", "R08"),
    ("invalid_data", "R28"),
    ("three_d_secure_action_required", "1A"),
];

/// What a sandbox payment method does, as remembered by its stored reference.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Behaviour {
    Approved,
    FraudReview,
    NoRefund,
    Chargeback,
    ThreeDSecureRecurring,
    Decline { code: &'static str, gateway_code: &'static str },
}

impl Behaviour {
    fn name(self) -> &'static str {
        match self {
            Behaviour::Approved => "approved",
            Behaviour::FraudReview => "approved_fraud_review",
            Behaviour::NoRefund => "no_refund",
            Behaviour::Chargeback => "chargeback",
            Behaviour::ThreeDSecureRecurring => "three_d_secure_recurring",
            Behaviour::Decline { code, .. } => code,
        }
    }

    fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "approved" => Behaviour::Approved,
            "approved_fraud_review" => Behaviour::FraudReview,
            "no_refund" => Behaviour::NoRefund,
            "chargeback" => Behaviour::Chargeback,
            "three_d_secure_recurring" => Behaviour::ThreeDSecureRecurring,
            code => {
                let (code, gateway_code) = DECLINING_CARDS
                    .iter()
                    .map(|(_, c, g)| (*c, *g))
                    .chain(OTHER_DECLINES.iter().copied())
                    .find(|(c, _)| *c == code)?;
                Behaviour::Decline { code, gateway_code }
            }
        })
    }

    fn decision(self, recurring: bool) -> Decision {
        match self {
            Behaviour::Approved => approve(),
            Behaviour::FraudReview => {
                Decision::Approve { code: "approved_fraud_review", refundable: true, chargeback: false }
            }
            Behaviour::NoRefund => Decision::Approve { code: "approved", refundable: false, chargeback: false },
            Behaviour::Chargeback => Decision::Approve { code: "approved", refundable: true, chargeback: true },
            Behaviour::ThreeDSecureRecurring if recurring => decline("three_d_secure_action_required", "1A"),
            Behaviour::ThreeDSecureRecurring => approve(),
            Behaviour::Decline { code, gateway_code } => decline(code, gateway_code),
        }
    }
}

/// What a test card does (numbers not listed approve when they pass the Luhn check).
fn card_behaviour(number: &str) -> Behaviour {
    match number {
        "4222222222222220" => Behaviour::FraudReview,
        "4000000000002024" => Behaviour::NoRefund,
        "4000008400001629" => Behaviour::ThreeDSecureRecurring,
        n => match DECLINING_CARDS.iter().find(|(card, _, _)| *card == n) {
            Some((_, code, gateway_code)) => Behaviour::Decline { code, gateway_code },
            None if !luhn_valid(n) => Behaviour::Decline { code: "invalid_card_number", gateway_code: "14" },
            None => Behaviour::Approved,
        },
    }
}

/// What a test bank account does.
fn bank_behaviour(account: &BankAccount) -> Behaviour {
    if account.routing_number != SANDBOX_ROUTING_NUMBER {
        return Behaviour::Decline { code: "invalid_data", gateway_code: "R28" };
    }
    match account.account_number.as_str() {
        "111111112" | "111111113" => Behaviour::Decline { code: "ach_cancel", gateway_code: "R08" },
        "111111114" => Behaviour::Chargeback,
        // Refunds of 111111115 succeed like those of any other account; 111111116's purchases
        // carry a reference marked not to be given back.
        "111111116" => Behaviour::NoRefund,
        _ => Behaviour::Approved,
    }
}

/// Prefix of sandbox stored-payment-method references.
const STORED_PREFIX: &str = "sbx_";

/// A new stored-payment-method reference remembering only `behaviour`.
fn stored_reference(behaviour: Behaviour) -> String {
    let mut bytes = [0u8; 12];
    // Without the operating system's random source no reference can be made.
    getrandom::fill(&mut bytes).expect("the operating system's random source");
    format!("{STORED_PREFIX}{}_{}", hex::encode(bytes), behaviour.name())
}

/// The behaviour a stored reference remembers (`None`: not a sandbox reference).
fn stored_behaviour(reference: &str) -> Option<Behaviour> {
    let rest = reference.strip_prefix(STORED_PREFIX)?;
    let (random, behaviour) = rest.split_once('_')?;
    if random.len() != 24 || !random.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    Behaviour::parse(behaviour)
}

/// Card outcomes by number.
fn card_decision(number: &str, recurring: bool) -> Decision {
    card_behaviour(number).decision(recurring)
}

/// ACH outcomes by routing and account number.
fn bank_decision(account: &BankAccount) -> Decision {
    bank_behaviour(account).decision(false)
}

/// The CVV and AVS results of a charge of a stored reference: no CVV is kept, so only the
/// mismatch outcomes are reported.
fn stored_checks(behaviour: Option<Behaviour>) -> (Option<CheckResult>, Option<CheckResult>) {
    match behaviour {
        Some(Behaviour::Decline { code: "fraud_security_code", .. }) => (Some(CheckResult::new("N", "No Match")), None),
        Some(Behaviour::Decline { code: "fraud_address", .. }) => {
            (None, Some(CheckResult::new("N", "Street address and postal code do not match.")))
        }
        _ => (None, None),
    }
}

/// The CVV check of a card request: `N` for the mismatch card, `M` when a CVV was given.
fn cvv_result(card: &Card) -> Option<CheckResult> {
    if card.number == "4000000000000101" {
        return Some(CheckResult::new("N", "No Match"));
    }
    card.cvv.as_ref().map(|_| CheckResult::new("M", "Match"))
}

/// The AVS check of a card request: failures for the AVS cards, `Y` when an address was given.
fn avs_result(card: &Card, address: &AvsAddress<'_>) -> Option<CheckResult> {
    match card.number.as_str() {
        "4000000000000010" => Some(CheckResult::new("N", "Street address and postal code do not match.")),
        "4000000000000028" => {
            Some(CheckResult::new("Z", "Street address does not match, but 5-digit postal code matches."))
        }
        "4000000000000036" => {
            Some(CheckResult::new("A", "Street address matches, but 5-digit and 9-digit postal code do not match."))
        }
        _ if address.street.is_some() || address.postal_code.is_some() => {
            Some(CheckResult::new("Y", "Street address and 5-digit postal code match."))
        }
        _ => None,
    }
}

/// A new sandbox reference; `refundable: false` marks a purchase whose refund will be declined.
fn reference(refundable: bool) -> String {
    let mut bytes = [0u8; 12];
    // Without the operating system's random source no reference can be made.
    getrandom::fill(&mut bytes).expect("the operating system's random source");
    format!("sandbox-{}{}", hex::encode(bytes), if refundable { "" } else { NO_REFUND })
}

impl SandboxGateway {
    /// The outcome of a purchase or verification (the sandbox treats them alike).
    pub fn decide(&self, request: &PaymentRequest<'_>) -> Outcome {
        let (decision, cvv, avs) = match request.method {
            PaymentMethod::Card(card) => {
                (card_decision(&card.number, request.recurring), cvv_result(card), avs_result(card, &request.address))
            }
            PaymentMethod::BankAccount(account) => (bank_decision(account), None, None),
            PaymentMethod::Stored { reference } => {
                let behaviour = stored_behaviour(reference);
                let decision = match behaviour {
                    Some(b) => b.decision(request.recurring),
                    None => decline("gateway_token_not_found", "TNF"),
                };
                let (cvv, avs) = stored_checks(behaviour);
                (decision, cvv, avs)
            }
        };
        match decision {
            Decision::Approve { code, refundable, chargeback } => Outcome::Approved(Approval {
                reference: reference(refundable),
                code,
                cvv_result: cvv,
                avs_result: avs,
                chargeback_expected: chargeback,
                stored: None,
            }),
            Decision::Decline { code, gateway_code } => Outcome::Declined(Decline {
                code,
                gateway_error_code: Some(gateway_code.to_owned()),
                cvv_result: cvv,
                avs_result: avs,
                reference: Some(reference(true)),
            }),
        }
    }

    /// The reference of a payment method stored with the sandbox (see the module documentation).
    pub fn stored_reference(&self, method: PaymentMethod<'_>) -> Result<String, Box<Decline>> {
        let behaviour = match method {
            PaymentMethod::Card(card) => card_behaviour(&card.number),
            PaymentMethod::BankAccount(account) => bank_behaviour(account),
            PaymentMethod::Stored { reference } => {
                return match stored_behaviour(reference) {
                    Some(_) => Ok(reference.to_owned()),
                    None => Err(Box::new(Decline {
                        code: "gateway_token_not_found",
                        gateway_error_code: Some("TNF".to_owned()),
                        cvv_result: None,
                        avs_result: None,
                        reference: None,
                    })),
                };
            }
        };
        Ok(stored_reference(behaviour))
    }

    /// The outcome of a refund (see the module documentation).
    pub fn decide_refund(&self, request: &RefundRequest<'_>) -> Outcome {
        match give_back_decline(request.amount_in_cents, request.reference, "transaction_cannot_be_refunded") {
            Some(decline) => Outcome::Declined(decline),
            None => Outcome::Approved(Approval {
                reference: reference(true),
                code: "approved",
                cvv_result: None,
                avs_result: None,
                chargeback_expected: false,
                stored: None,
            }),
        }
    }

    /// The outcome of a void (see the module documentation).
    pub fn decide_void(&self, request: &VoidRequest<'_>) -> Outcome {
        match give_back_decline(request.amount_in_cents, request.reference, "transaction_cannot_be_voided") {
            Some(decline) => Outcome::Declined(decline),
            None => Outcome::Approved(Approval {
                reference: request.reference.to_owned(),
                code: "approved",
                cvv_result: None,
                avs_result: None,
                chargeback_expected: false,
                stored: None,
            }),
        }
    }
}

/// Why the sandbox declines giving back `amount` of the purchase `original`, if it does:
/// `invalid_amount` for an amount ≤ 0, else `refused` for a purchase marked not to be given back.
fn give_back_decline(amount: i64, original: &str, refused: &'static str) -> Option<Decline> {
    let code = if amount <= 0 {
        "invalid_amount"
    } else if original.ends_with(NO_REFUND) {
        refused
    } else {
        return None;
    };
    Some(Decline {
        code,
        gateway_error_code: Some("12".to_owned()),
        cvv_result: None,
        avs_result: None,
        reference: Some(reference(true)),
    })
}

impl Gateway for SandboxGateway {
    fn kind(&self) -> &'static str {
        "test"
    }

    fn is_test(&self) -> bool {
        true
    }

    fn purchase<'a>(&'a self, request: &'a PaymentRequest<'a>) -> GatewayFuture<'a> {
        Box::pin(std::future::ready(self.decide(request)))
    }

    fn verify<'a>(&'a self, request: &'a PaymentRequest<'a>) -> GatewayFuture<'a> {
        Box::pin(std::future::ready(self.decide(request)))
    }

    fn refund<'a>(&'a self, request: &'a RefundRequest<'a>) -> GatewayFuture<'a> {
        Box::pin(std::future::ready(self.decide_refund(request)))
    }

    fn void<'a>(&'a self, request: &'a VoidRequest<'a>) -> GatewayFuture<'a> {
        Box::pin(std::future::ready(self.decide_void(request)))
    }

    fn store_payment_method<'a>(&'a self, method: PaymentMethod<'a>, _replacing: Option<&'a str>) -> StoreFuture<'a> {
        Box::pin(std::future::ready(self.stored_reference(method)))
    }

    fn bank_name(&self, routing_number: &str) -> Option<String> {
        (routing_number.trim() == SANDBOX_ROUTING_NUMBER).then(|| SANDBOX_BANK_NAME.to_owned())
    }

    fn check_cvv<'a>(&'a self, request: &'a CvvRequest<'a>) -> GatewayFuture<'a> {
        Box::pin(std::future::ready(sandbox_cvv(request)))
    }
}

/// The sandbox's CVV check: [`SANDBOX_MISMATCHED_CVV`] does not match, any other code does.
fn sandbox_cvv(request: &CvvRequest<'_>) -> Outcome {
    if request.verification_value.trim() == SANDBOX_MISMATCHED_CVV {
        Outcome::Declined(Decline {
            code: "fraud_security_code",
            gateway_error_code: Some("N7".to_owned()),
            cvv_result: Some(CheckResult::new("N", "No Match")),
            avs_result: None,
            reference: Some(reference(true)),
        })
    } else {
        Outcome::Approved(Approval {
            reference: reference(true),
            code: "approved",
            cvv_result: Some(CheckResult::new("M", "Match")),
            avs_result: None,
            chargeback_expected: false,
            stored: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::task::{Context, Poll, Waker};

    use super::*;
    use crate::card::{AccountType, Brand, Expiry};

    /// Runs a ready future (the sandbox never waits).
    fn now<T>(mut future: Pin<Box<dyn Future<Output = T> + Send + '_>>) -> T {
        let mut cx = Context::from_waker(Waker::noop());
        match future.as_mut().poll(&mut cx) {
            Poll::Ready(v) => v,
            Poll::Pending => panic!("the sandbox answers at once"),
        }
    }

    fn card(number: &str, cvv: Option<&str>) -> Card {
        Card {
            number: number.to_owned(),
            brand: Brand::detect(number, false),
            expiry: Expiry { month: 12, year: 2030 },
            cvv: cvv.map(str::to_owned),
        }
    }

    fn request<'a>(method: PaymentMethod<'a>, recurring: bool) -> PaymentRequest<'a> {
        PaymentRequest {
            amount_in_cents: 100,
            currency: "USD",
            method,
            address: AvsAddress { street: Some("1 Main St."), postal_code: Some("94105") },
            recurring,
            idempotency_key: None,
            resumed: false,
            may_resend: false,
            invoice: None,
            replacing: None,
        }
    }

    fn purchase(gateway: &dyn Gateway, number: &str, recurring: bool) -> Outcome {
        let c = card(number, Some("123"));
        let r = request(PaymentMethod::Card(&c), recurring);
        now(gateway.purchase(&r))
    }

    #[test]
    fn the_sandbox_cvv_check_mismatches_999_only() {
        let check = |value: &str| {
            let r = CvvRequest { reference: "ref", verification_value: value, idempotency_key: None };
            now(SandboxGateway.check_cvv(&r))
        };
        assert_eq!(declined_code(&check("999")), "fraud_security_code");
        match check("123") {
            Outcome::Approved(a) => assert_eq!(a.cvv_result.map(|c| c.code).as_deref(), Some("M")),
            other => panic!("not approved: {other:?}"),
        }
        assert!(check("9999").is_approved());
    }

    fn declined_code(outcome: &Outcome) -> &'static str {
        match outcome {
            Outcome::Declined(d) => d.code,
            other => panic!("not declined: {other:?}"),
        }
    }

    const DECLINING_CARDS: &[(&str, &str, &str)] = &[
        ("4000000000000002", "declined", "soft"),
        ("4000000000000010", "fraud_address", "fraud"),
        ("4000000000000028", "fraud_address", "fraud"),
        ("4000000000000036", "fraud_address", "fraud"),
        ("4000000000000044", "fraud_advanced_verification", "fraud"),
        ("4000000000000051", "declined_card_number", "hard"),
        ("4000000000000069", "expired_card", "hard"),
        ("4000000000000077", "insufficient_funds", "soft"),
        ("4000000000000085", "fraud_gateway", "fraud"),
        ("4000000000000093", "fraud_ip_address", "fraud"),
        ("4000000000001190", "fraud_risk_check", "fraud"),
        ("4000000000000101", "fraud_security_code", "fraud"),
        ("4000000000000119", "call_issuer", "soft"),
        ("4000000000000200", "invalid_data", "hard"),
        ("4222222222222222", "invalid_card_number", "hard"),
        ("4000000000000226", "declined_expiration_date", "hard"),
        ("4000000000000309", "gateway_timeout", "communication"),
        ("4000000000000317", "duplicate_transaction", "duplicate"),
        ("4000000000000325", "card_type_not_accepted", "hard"),
        ("4000000000000341", "declined_saveable", "soft"),
        ("4000000000003220", "three_d_secure_action_required", "three_d_secure_action_required"),
        ("4000000000003063", "three_d_secure_action_required", "three_d_secure_action_required"),
    ];

    const SUCCESS_CARDS: &[&str] = &[
        "4111111111111111",
        "378282246310005",
        "371449635398431",
        "378734493671000",
        "30569309025904",
        "38520000023237",
        "6011000990139424",
        "3530111333300000",
        "3566002020360505",
        "5555555555554444",
        "5105105105105100",
        "2223000048400011",
        "4012888888881881",
        "4222222222222",
        "4000008400001629",
    ];

    #[test]
    fn every_declining_test_card_declines_with_its_code_and_category() {
        let gateway: Arc<dyn Gateway> = Arc::new(SandboxGateway);
        for &(number, code, category) in DECLINING_CARDS {
            let outcome = purchase(gateway.as_ref(), number, false);
            assert_eq!(declined_code(&outcome), code, "{number}");
            let Outcome::Declined(d) = &outcome else { unreachable!() };
            assert_eq!(d.error().category, category, "{number}");
            assert_eq!(d.error().code, code);
            assert!(d.gateway_error_code.is_some());
            assert_eq!(d.saveable(), code == "declined_saveable");
            // Every test card but the Luhn failure is a valid number.
            assert_eq!(crate::card::is_valid_number(number), number != "4222222222222222", "{number}");
            // Verification answers the same.
            let c = card(number, Some("123"));
            let r = request(PaymentMethod::Card(&c), false);
            assert_eq!(declined_code(&now(gateway.verify(&r))), code, "{number}");
        }
    }

    #[test]
    fn stored_references_hold_no_number_and_charge_like_the_card() {
        let gateway: Arc<dyn Gateway> = Arc::new(SandboxGateway);
        let numbers = DECLINING_CARDS.iter().map(|(n, _, _)| *n).chain(SUCCESS_CARDS.iter().copied());
        for number in numbers.chain(["4222222222222220", "4000000000002024"]) {
            let c = card(number, Some("123"));
            let reference = now(gateway.store_payment_method(PaymentMethod::Card(&c), None)).expect("stored");
            // `sbx_<random hex>_<behaviour>`: the random part may happen to hold any digits, so
            // the card's number, last four and security code are looked for in the rest.
            let (random, behaviour) =
                reference.strip_prefix("sbx_").and_then(|r| r.split_once('_')).expect("sbx_<hex>_<behaviour>");
            assert!(!random.is_empty() && random.bytes().all(|b| b.is_ascii_hexdigit()), "{reference}");
            assert!(!behaviour.contains(number) && !behaviour.contains(&number[number.len() - 4..]), "{reference}");
            assert!(!behaviour.contains("123"), "{reference}");
            for recurring in [false, true] {
                let direct = purchase(gateway.as_ref(), number, recurring);
                let r =
                    PaymentRequest { recurring, ..request(PaymentMethod::Stored { reference: &reference }, recurring) };
                let stored = now(gateway.purchase(&r));
                match (&direct, &stored) {
                    (Outcome::Approved(a), Outcome::Approved(b)) => {
                        assert_eq!((a.code, a.chargeback_expected), (b.code, b.chargeback_expected), "{number}");
                    }
                    (Outcome::Declined(a), Outcome::Declined(b)) => {
                        assert_eq!((a.code, &a.gateway_error_code), (b.code, &b.gateway_error_code), "{number}");
                    }
                    other => panic!("{number} recurring={recurring}: {other:?}"),
                }
            }
            // Storing a stored reference keeps it.
            let again = now(gateway.store_payment_method(PaymentMethod::Stored { reference: &reference }, None));
            assert_eq!(again.as_deref(), Ok(reference.as_str()));
        }
        // The security-code mismatch is reported on recurring charges too.
        let c = card("4000000000000101", None);
        let reference = SandboxGateway.stored_reference(PaymentMethod::Card(&c)).expect("stored");
        match SandboxGateway.decide(&request(PaymentMethod::Stored { reference: &reference }, true)) {
            Outcome::Declined(d) => assert_eq!(d.cvv_result.map(|r| r.code).as_deref(), Some("N")),
            other => panic!("{other:?}"),
        }
        // References the sandbox did not make.
        for bogus in ["sbx_zz_approved", "sbx_0123456789abcdef01234567_nonsense", "tok_4111111111111111", ""] {
            assert_eq!(
                declined_code(&SandboxGateway.decide(&request(PaymentMethod::Stored { reference: bogus }, false))),
                "gateway_token_not_found",
                "{bogus}"
            );
            assert!(SandboxGateway.stored_reference(PaymentMethod::Stored { reference: bogus }).is_err());
        }
    }

    #[test]
    fn stored_bank_accounts_charge_like_the_account() {
        let account = |number: &str| BankAccount {
            routing_number: "123456780".to_owned(),
            account_number: number.to_owned(),
            account_type: AccountType::Checking,
            name_on_account: "Verena Example".to_owned(),
        };
        for (number, behaviour) in [
            ("111111111", "approved"),
            ("111111112", "ach_cancel"),
            ("111111114", "chargeback"),
            ("111111116", "no_refund"),
        ] {
            let a = account(number);
            let reference = SandboxGateway.stored_reference(PaymentMethod::BankAccount(&a)).expect("stored");
            assert!(reference.ends_with(&format!("_{behaviour}")) && !reference.contains(number), "{reference}");
            let direct = SandboxGateway.decide(&request(PaymentMethod::BankAccount(&a), false));
            let stored = SandboxGateway.decide(&request(PaymentMethod::Stored { reference: &reference }, true));
            assert_eq!(direct.is_approved(), stored.is_approved(), "{number}");
        }
    }

    #[test]
    fn success_cards_approve_with_cvv_and_avs_matches() {
        for &number in SUCCESS_CARDS {
            assert!(crate::card::is_valid_number(number), "{number}");
            match purchase(&SandboxGateway, number, false) {
                Outcome::Approved(a) => {
                    assert_eq!(a.code, "approved", "{number}");
                    assert!(a.reference.starts_with("sandbox-") && !a.reference.ends_with(NO_REFUND));
                    assert_eq!(a.cvv_result, Some(CheckResult::new("M", "Match")));
                    assert_eq!(a.avs_result.as_ref().map(|r| r.code.as_str()), Some("Y"));
                    assert!(!a.fraud_review() && !a.chargeback_expected);
                }
                other => panic!("{number}: {other:?}"),
            }
        }
        let c = card("4111111111111111", None);
        let r = PaymentRequest { address: AvsAddress::default(), ..request(PaymentMethod::Card(&c), false) };
        match SandboxGateway.decide(&r) {
            Outcome::Approved(a) => assert_eq!((a.cvv_result, a.avs_result), (None, None)),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn check_results_of_the_cvv_and_avs_cards() {
        let results = |number| match purchase(&SandboxGateway, number, false) {
            Outcome::Declined(d) => {
                (d.cvv_result.map(|r| r.code).unwrap_or_default(), d.avs_result.map(|r| r.code).unwrap_or_default())
            }
            other => panic!("{other:?}"),
        };
        assert_eq!(results("4000000000000101"), ("N".to_owned(), "Y".to_owned()));
        assert_eq!(results("4000000000000010"), ("M".to_owned(), "N".to_owned()));
        assert_eq!(results("4000000000000028"), ("M".to_owned(), "Z".to_owned()));
        assert_eq!(results("4000000000000036"), ("M".to_owned(), "A".to_owned()));
    }

    #[test]
    fn fraud_review_and_three_d_secure_dunning_cards() {
        match purchase(&SandboxGateway, "4222222222222220", false) {
            Outcome::Approved(a) => assert!(a.fraud_review()),
            other => panic!("{other:?}"),
        }
        assert!(purchase(&SandboxGateway, "4000008400001629", false).is_approved());
        assert_eq!(
            declined_code(&purchase(&SandboxGateway, "4000008400001629", true)),
            "three_d_secure_action_required"
        );
        // The card whose refunds are declined is charged like any other.
        assert!(purchase(&SandboxGateway, "4000000000002024", false).is_approved());
    }

    #[test]
    fn ach_outcomes_by_account_number() {
        let account = |routing: &str, number: &str| BankAccount {
            routing_number: routing.to_owned(),
            account_number: number.to_owned(),
            account_type: AccountType::Checking,
            name_on_account: "Verena Example".to_owned(),
        };
        let outcome = |a: &BankAccount| SandboxGateway.decide(&request(PaymentMethod::BankAccount(a), false));
        let settled = outcome(&account("123456780", "111111111"));
        assert!(matches!(&settled, Outcome::Approved(a) if !a.chargeback_expected && a.cvv_result.is_none()));
        for canceled in ["111111112", "111111113"] {
            let o = outcome(&account("123456780", canceled));
            assert_eq!(declined_code(&o), "ach_cancel");
            let Outcome::Declined(d) = o else { unreachable!() };
            assert_eq!(d.error().category, "soft");
        }
        assert!(matches!(outcome(&account("123456780", "111111114")), Outcome::Approved(a) if a.chargeback_expected));
        // Purchases from the accounts whose refunds succeed or are declined are approved.
        for number in ["111111115", "111111116"] {
            assert!(matches!(outcome(&account("123456780", number)), Outcome::Approved(a) if !a.chargeback_expected));
        }
        assert!(outcome(&account("123456780", "987654321")).is_approved());
        assert_eq!(declined_code(&outcome(&account("021000021", "111111111"))), "invalid_data");
        assert_eq!(SandboxGateway.bank_name("123456780").as_deref(), Some(SANDBOX_BANK_NAME));
        assert_eq!(SandboxGateway.bank_name("021000021"), None);
        assert_eq!((SandboxGateway.kind(), SandboxGateway.is_test()), ("test", true));
    }

    /// A purchase approved by the sandbox, by card number, ACH account number or through the
    /// stored reference of either.
    fn approved_purchase(method: PaymentMethod<'_>) -> Approval {
        match SandboxGateway.decide(&request(method, false)) {
            Outcome::Approved(a) => a,
            other => panic!("the purchase succeeds: {other:?}"),
        }
    }

    fn refund_of(original: &str, amount_in_cents: i64, key: Option<&str>) -> Outcome {
        let r = RefundRequest { amount_in_cents, currency: "USD", reference: original, idempotency_key: key };
        now(SandboxGateway.refund(&r))
    }

    fn void_of(original: &str, amount_in_cents: i64, key: Option<&str>) -> Outcome {
        let r = VoidRequest { reference: original, amount_in_cents, currency: "USD", idempotency_key: key };
        now(SandboxGateway.void(&r))
    }

    /// The original references of purchases by the test cards and ACH accounts whose refunds
    /// behave as named, made directly and through stored references.
    fn purchases_by(card_number: &str, account_number: &str) -> Vec<(String, String)> {
        let c = card(card_number, Some("123"));
        let a = BankAccount {
            routing_number: SANDBOX_ROUTING_NUMBER.to_owned(),
            account_number: account_number.to_owned(),
            account_type: AccountType::Checking,
            name_on_account: "Verena Example".to_owned(),
        };
        let stored_card = SandboxGateway.stored_reference(PaymentMethod::Card(&c)).expect("stored card");
        let stored_account = SandboxGateway.stored_reference(PaymentMethod::BankAccount(&a)).expect("stored account");
        [
            (format!("card {card_number}"), PaymentMethod::Card(&c)),
            (format!("ACH {account_number}"), PaymentMethod::BankAccount(&a)),
            (format!("stored card {card_number}"), PaymentMethod::Stored { reference: &stored_card }),
            (format!("stored ACH {account_number}"), PaymentMethod::Stored { reference: &stored_account }),
        ]
        .into_iter()
        .map(|(name, method)| (name, approved_purchase(method).reference))
        .collect()
    }

    fn assert_hard_decline(outcome: &Outcome, code: &str, what: &str) {
        match outcome {
            Outcome::Declined(d) => {
                assert_eq!(d.code, code, "{what}");
                assert_eq!(d.error().code, code, "{what}: a row of the error table");
                assert_eq!(d.error().category, "hard", "{what}");
                assert!(d.gateway_error_code.is_some() && d.cvv_result.is_none() && d.avs_result.is_none(), "{what}");
            }
            other => panic!("{what}: not declined {other:?}"),
        }
    }

    #[test]
    fn refunds_and_voids_of_ordinary_purchases_are_approved() {
        for (what, original) in purchases_by("4111111111111111", "111111115") {
            for (amount, key) in [(100, Some("refund-1")), (1, None), (i64::MAX, Some("refund-2"))] {
                match refund_of(&original, amount, key) {
                    Outcome::Approved(a) => {
                        assert_eq!(a.code, "approved", "{what}");
                        // The refund is a transaction of its own, not marked.
                        assert!(a.reference.starts_with("sandbox-") && !a.reference.ends_with(NO_REFUND), "{what}");
                        assert_ne!(a.reference, original, "{what}");
                        assert!(a.cvv_result.is_none() && a.avs_result.is_none() && !a.chargeback_expected);
                    }
                    other => panic!("{what}: refund of {amount}: {other:?}"),
                }
                match void_of(&original, amount, key) {
                    // A void answers the purchase it canceled.
                    Outcome::Approved(a) => assert_eq!((a.code, a.reference.as_str()), ("approved", original.as_str())),
                    other => panic!("{what}: void of {amount}: {other:?}"),
                }
            }
        }
        // Refunds of the other approving cards and accounts succeed too.
        for (what, original) in purchases_by("4222222222222220", "111111114") {
            assert!(refund_of(&original, 100, None).is_approved(), "{what}");
            assert!(void_of(&original, 100, None).is_approved(), "{what}");
        }
    }

    #[test]
    fn refunds_and_voids_of_the_no_refund_card_and_account_are_declined() {
        for (what, original) in purchases_by("4000000000002024", "111111116") {
            assert!(original.ends_with(NO_REFUND), "{what}: the purchase is marked");
            for key in [None, Some("key-1")] {
                assert_hard_decline(&refund_of(&original, 100, key), "transaction_cannot_be_refunded", &what);
                assert_hard_decline(&void_of(&original, 100, key), "transaction_cannot_be_voided", &what);
                // The same however often asked.
                assert_hard_decline(&refund_of(&original, 1, key), "transaction_cannot_be_refunded", &what);
                assert_hard_decline(&void_of(&original, 1, key), "transaction_cannot_be_voided", &what);
            }
        }
    }

    #[test]
    fn refunds_and_voids_of_no_positive_amount_are_invalid() {
        let references = purchases_by("4111111111111111", "111111115")
            .into_iter()
            .chain(purchases_by("4000000000002024", "111111116"));
        for (what, original) in references {
            for amount in [0, -1, -100, i64::MIN] {
                let what = format!("{what}, amount {amount}");
                assert_hard_decline(&refund_of(&original, amount, Some("k")), "invalid_amount", &what);
                assert_hard_decline(&void_of(&original, amount, Some("k")), "invalid_amount", &what);
            }
        }
    }

    #[test]
    fn the_sandbox_answers_every_give_back_call_through_the_trait_object() {
        let gateway: Arc<dyn Gateway> = Arc::new(SandboxGateway);
        let original = approved_purchase(PaymentMethod::Stored {
            reference: &SandboxGateway
                .stored_reference(PaymentMethod::Card(&card("4111111111111111", None)))
                .expect("stored"),
        })
        .reference;
        let refund =
            RefundRequest { amount_in_cents: 250, currency: "EUR", reference: &original, idempotency_key: None };
        let void =
            VoidRequest { reference: &original, amount_in_cents: 1000, currency: "EUR", idempotency_key: Some("v") };
        assert_eq!(now(gateway.refund(&refund)).is_approved(), SandboxGateway.decide_refund(&refund).is_approved());
        assert_eq!(now(gateway.void(&void)), SandboxGateway.decide_void(&void));
    }
}
