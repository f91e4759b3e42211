//! Credit: the balance of credit (and legacy refund) invoices and its movements, the credit
//! payments.
//!
//! - **Available credit** is the negative balance of an account's credit and legacy invoices.
//!   A charge invoice made with [`CreditUse`](crate::invoices::CreditUse) takes it, in the
//!   invoice's currency, oldest credit invoice first, in the database transaction that makes the invoice
//!   ([`Work::apply_credit`]): each use is a `payment` credit payment, the credit invoice's
//!   balance rises toward zero (a credit invoice left with nothing is `closed`) and the charge
//!   invoice's balance falls (it is paid by the invoicing that follows once nothing is left).
//!   Every balance change is a compare-and-set on the balance read, so two invoices made at the
//!   same time never use the same credit twice.
//! - **Other movements** ([`Work::record_credit_payment`]): `refund` (credit paid back to a
//!   card), `reduction` (a voided balance), `write_off`.
//!
//! Each credit payment records a [`CREDIT_PAYMENT_CREATED`] event (subject: its uuid) in the
//! same database transaction.

use crate::db::DbRow;
use crate::events::NewEvent;
use crate::invoices::{Adjustment, Invoice, InvoiceKind, new_uuid};
use crate::list::{Arg, Conditions, Page, PageRequest, Position, Sort, into_page, order_and_limit};
use crate::work::Work;
use crate::{Store, StoreError};

use rebill_billing::states::{InvoiceState, credit_state};

/// Kind of the event every credit payment records.
pub const CREDIT_PAYMENT_CREATED: &str = "credit_payment.created";
/// Kind of the event of a credit payment voided (subject: its uuid).
pub const CREDIT_PAYMENT_VOIDED: &str = "credit_payment.voided";

/// Kinds of the events of a credit invoice's state changing after its creation (subject: its
/// number), recorded by the writes below that change it: its balance reached zero, its whole
/// balance was voided unused, credit came back to it once closed, or a payout of it began.
pub const CREDIT_INVOICE_CLOSED: &str = "credit_invoice.closed";
pub const CREDIT_INVOICE_VOIDED: &str = "credit_invoice.voided";
pub const CREDIT_INVOICE_REOPENED: &str = "credit_invoice.reopened";
pub const CREDIT_INVOICE_PROCESSING: &str = "credit_invoice.processing";

/// The event of a credit invoice of the account `account_code` entering `state`; `None` for a
/// state without one.
pub(crate) fn credit_invoice_event(
    account_code: &str,
    state: InvoiceState,
    at: i64,
    recorded_at: i64,
) -> Option<NewEvent> {
    let kind = match state {
        InvoiceState::Closed => CREDIT_INVOICE_CLOSED,
        InvoiceState::Voided => CREDIT_INVOICE_VOIDED,
        InvoiceState::Open => CREDIT_INVOICE_REOPENED,
        InvoiceState::Processing => CREDIT_INVOICE_PROCESSING,
        _ => return None,
    };
    Some(NewEvent {
        kind: kind.to_owned(),
        at,
        recorded_at,
        payload: serde_json::json!({ "account_code": account_code, "state": state.as_str() }).to_string(),
        awaits_reaction: false,
    })
}

/// What a credit payment did (schema `credit_payment_action`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CreditPaymentAction {
    /// A credit invoice's balance paid a charge invoice.
    Payment,
    /// Credit paid back to the payment method that funded it.
    Refund,
    /// A credit invoice's balance voided.
    Reduction,
    /// A failed charge invoice written off.
    WriteOff,
}

impl CreditPaymentAction {
    pub const ALL: [CreditPaymentAction; 4] = [Self::Payment, Self::Refund, Self::Reduction, Self::WriteOff];

    /// The schema name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Payment => "payment",
            Self::Refund => "refund",
            Self::Reduction => "reduction",
            Self::WriteOff => "write_off",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|a| a.as_str() == text)
    }
}

/// What [`Work::record_credit_payment`] records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewCreditPayment {
    pub account_id: i64,
    pub action: CreditPaymentAction,
    pub currency: String,
    /// Positive cents.
    pub amount: i64,
    /// The credit invoice the credit comes from.
    pub original_invoice_id: i64,
    pub applied_to_invoice_id: Option<i64>,
    pub original_credit_payment_id: Option<i64>,
    pub refund_transaction_id: Option<i64>,
}

/// A stored credit payment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreditPayment {
    pub id: i64,
    pub uuid: String,
    pub site_id: i64,
    pub account_id: i64,
    pub account_code: String,
    pub action: CreditPaymentAction,
    pub currency: String,
    pub amount: i64,
    pub original_invoice_id: i64,
    pub original_invoice_number: i64,
    pub applied_to_invoice_id: Option<i64>,
    pub applied_to_invoice_number: Option<i64>,
    pub original_credit_payment_uuid: Option<String>,
    pub refund_transaction_uuid: Option<String>,
    pub created_at: i64,
    pub updated_at: i64,
    pub voided_at: Option<i64>,
}

impl CreditPayment {
    pub fn position(&self, sort: Sort) -> Position {
        Position { value: if sort == Sort::CreatedAt { self.created_at } else { self.updated_at }, id: self.id }
    }
}

/// Narrows a credit payment list.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CreditPaymentFilter {
    pub account_id: Option<i64>,
    pub action: Option<CreditPaymentAction>,
}

const COLUMNS: &str = "id, uuid, site_id, account_id, \
     (SELECT account_code FROM accounts c WHERE c.id = credit_payments.account_id) AS account_code, action, currency, \
     amount, original_invoice_id, \
     (SELECT invoice_number FROM invoices i WHERE i.id = credit_payments.original_invoice_id) AS original_number, \
     applied_to_invoice_id, \
     (SELECT invoice_number FROM invoices i WHERE i.id = credit_payments.applied_to_invoice_id) AS applied_number, \
     (SELECT o.uuid FROM credit_payments o WHERE o.id = credit_payments.original_credit_payment_id) \
       AS original_credit_payment_uuid, \
     (SELECT t.uuid FROM transactions t WHERE t.id = credit_payments.refund_transaction_id) AS refund_transaction_uuid, \
     created_at, updated_at, voided_at";

fn from_row(row: &DbRow) -> Result<CreditPayment, StoreError> {
    let action: String = row.try_get("action")?;
    Ok(CreditPayment {
        id: row.try_get("id")?,
        uuid: row.try_get("uuid")?,
        site_id: row.try_get("site_id")?,
        account_id: row.try_get("account_id")?,
        account_code: row.try_get("account_code")?,
        action: CreditPaymentAction::parse(&action)
            .ok_or_else(|| StoreError::Invalid(format!("stored credit payment action `{action}`")))?,
        currency: row.try_get("currency")?,
        amount: row.try_get("amount")?,
        original_invoice_id: row.try_get("original_invoice_id")?,
        original_invoice_number: row.try_get("original_number")?,
        applied_to_invoice_id: row.try_get("applied_to_invoice_id")?,
        applied_to_invoice_number: row.try_get("applied_number")?,
        original_credit_payment_uuid: row.try_get("original_credit_payment_uuid")?,
        refund_transaction_uuid: row.try_get("refund_transaction_uuid")?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
        voided_at: row.try_get("voided_at")?,
    })
}

/// The event `kind` of a credit payment (its payload names the invoices by number).
fn event(kind: &str, payment: &CreditPayment, at: i64, recorded_at: i64) -> NewEvent {
    NewEvent {
        kind: kind.to_owned(),
        at,
        recorded_at,
        payload: format!(
            "{{\"uuid\":\"{}\",\"action\":\"{}\",\"currency\":\"{}\",\"amount_in_cents\":{},\"original_invoice\":{},\
             \"applied_to_invoice\":{}}}",
            payment.uuid,
            payment.action.as_str(),
            payment.currency,
            payment.amount,
            payment.original_invoice_number,
            payment.applied_to_invoice_number.map_or_else(|| "null".to_owned(), |n| n.to_string()),
        ),
        awaits_reaction: false,
    }
}

impl Work {
    /// Records a credit payment and its event (at `at` site time, recorded at `recorded_at`).
    /// It moves no balance: the caller changes the invoices in the same work.
    pub async fn record_credit_payment(
        &mut self,
        site_id: i64,
        new: &NewCreditPayment,
        at: i64,
        recorded_at: i64,
    ) -> Result<CreditPayment, StoreError> {
        if new.amount <= 0 {
            return Err(StoreError::Invalid(format!("a credit payment of {} cents", new.amount)));
        }
        let sql = format!(
            "INSERT INTO credit_payments (uuid, site_id, account_id, action, currency, amount, original_invoice_id, \
             applied_to_invoice_id, original_credit_payment_id, refund_transaction_id, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $11) RETURNING {COLUMNS}"
        );
        let row = crate::db::query(&sql)
            .bind(new_uuid())
            .bind(site_id)
            .bind(new.account_id)
            .bind(new.action.as_str())
            .bind(new.currency.clone())
            .bind(new.amount)
            .bind(new.original_invoice_id)
            .bind(new.applied_to_invoice_id)
            .bind(new.original_credit_payment_id)
            .bind(new.refund_transaction_id)
            .bind(at)
            .fetch_one(self.tx.exec())
            .await?;
        let payment = from_row(&row)?;
        let recorded = event(CREDIT_PAYMENT_CREATED, &payment, at, recorded_at);
        self.append_events(&[(site_id, payment.uuid.as_str(), &recorded)]).await?;
        Ok(payment)
    }

    /// Takes `amount` (> 0) of a credit invoice's balance for a movement of credit: its balance
    /// rises by `amount` (it must have that much left), and a credit invoice left with nothing
    /// is closed — or voided when `voided` is the whole of it (with the event of its new state,
    /// recorded at `recorded_at`). Answers whether the balance held the amount (nothing changes
    /// otherwise).
    pub async fn take_credit(
        &mut self,
        invoice: &Invoice,
        amount: i64,
        voided: i64,
        at: i64,
        recorded_at: i64,
    ) -> Result<bool, StoreError> {
        let balance = invoice.amounts.balance + amount;
        let state = match invoice.kind {
            InvoiceKind::Credit if invoice.state != InvoiceState::Processing => {
                credit_state(invoice.amounts.total, balance, voided)
            }
            _ => invoice.state,
        };
        let closed_at = (balance == 0).then_some(at);
        let done = crate::db::query(
            "UPDATE invoices SET balance = balance + $1, paid = paid - $1, state = $2, \
             closed_at = COALESCE($3, closed_at), updated_at = $4 WHERE id = $5 AND balance = $6 AND balance <= -$1",
        )
        .bind(amount)
        .bind(state.as_str())
        .bind(closed_at)
        .bind(at)
        .bind(invoice.id)
        .bind(invoice.amounts.balance)
        .execute(self.tx.exec())
        .await?;
        if done.rows_affected() != 1 {
            return Ok(false);
        }
        if state != invoice.state {
            self.record_credit_invoice_state(invoice, state, at, recorded_at).await?;
        }
        Ok(true)
    }

    /// Records the event of the credit invoice `invoice` entering `state` (none for a state
    /// without one, or for another kind of invoice).
    pub(crate) async fn record_credit_invoice_state(
        &mut self,
        invoice: &Invoice,
        state: InvoiceState,
        at: i64,
        recorded_at: i64,
    ) -> Result<(), StoreError> {
        if invoice.kind != InvoiceKind::Credit {
            return Ok(());
        }
        match credit_invoice_event(&invoice.account_code, state, at, recorded_at) {
            Some(event) => self.record_invoice_events(invoice, &[event]).await,
            None => Ok(()),
        }
    }

    /// Takes `amount` (> 0, at most its balance) of the open credit invoice `invoice` to pay it
    /// out through the gateway: the amount leaves the balance at once and the invoice is
    /// `processing` until the gateway answered (compare-and-set on the state and balance read).
    /// Answers whether it held.
    pub async fn begin_payout(
        &mut self,
        invoice: &Invoice,
        amount: i64,
        at: i64,
        recorded_at: i64,
    ) -> Result<bool, StoreError> {
        let done = crate::db::query(
            "UPDATE invoices SET balance = balance + $1, paid = paid - $1, state = $2, updated_at = $3 \
             WHERE id = $4 AND kind = $5 AND state = $6 AND balance = $7 AND balance <= -$1",
        )
        .bind(amount)
        .bind(InvoiceState::Processing.as_str())
        .bind(at)
        .bind(invoice.id)
        .bind(InvoiceKind::Credit.as_str())
        .bind(InvoiceState::Open.as_str())
        .bind(invoice.amounts.balance)
        .execute(self.tx.exec())
        .await?;
        if done.rows_affected() != 1 {
            return Ok(false);
        }
        self.record_credit_invoice_state(invoice, InvoiceState::Processing, at, recorded_at).await?;
        Ok(true)
    }

    /// Records the event of the credit payment `payment` voided at `at`.
    async fn record_voided(&mut self, payment: &CreditPayment, at: i64, recorded_at: i64) -> Result<(), StoreError> {
        let recorded = event(CREDIT_PAYMENT_VOIDED, payment, at, recorded_at);
        self.append_events(&[(payment.site_id, payment.uuid.as_str(), &recorded)]).await
    }

    /// Voids the `refund` credit payment of the refund transaction `refund_transaction_id` (the
    /// gateway declined it: the credit stays with its credit invoice, whose balance the caller
    /// sets). Answers the payment voided, if there was one.
    pub async fn void_refund_credit_payment(
        &mut self,
        refund_transaction_id: i64,
        at: i64,
        recorded_at: i64,
    ) -> Result<Option<CreditPayment>, StoreError> {
        let found = crate::db::query(&format!(
            "SELECT {COLUMNS} FROM credit_payments WHERE refund_transaction_id = $1 AND action = $2 \
             AND voided_at IS NULL"
        ))
        .bind(refund_transaction_id)
        .bind(CreditPaymentAction::Refund.as_str())
        .fetch_optional(self.tx.exec())
        .await?;
        let Some(row) = found else { return Ok(None) };
        let payment = from_row(&row)?;
        crate::db::query("UPDATE credit_payments SET voided_at = $1, updated_at = $1 WHERE id = $2")
            .bind(at)
            .bind(payment.id)
            .execute(self.tx.exec())
            .await?;
        let voided = CreditPayment { voided_at: Some(at), updated_at: at, ..payment };
        self.record_voided(&voided, at, recorded_at).await?;
        Ok(Some(voided))
    }

    /// What of the purchase `transaction_id` is still refundable (its amount less its refunds
    /// succeeded or under way), its row locked for this work on PostgreSQL so that two refunds
    /// of it are made one after the other.
    pub async fn refundable_left(&mut self, transaction_id: i64) -> Result<i64, StoreError> {
        let lock = format!("SELECT amount FROM transactions WHERE id = $1{}", self.backend.for_update());
        let Some(row) = crate::db::query(&lock).bind(transaction_id).fetch_optional(self.tx.exec()).await? else {
            return Ok(0);
        };
        let amount: i64 = row.try_get("amount")?;
        let row = crate::db::query(
            "SELECT CAST(COALESCE(SUM(amount), 0) AS BIGINT) AS refunded FROM transactions \
             WHERE original_transaction_id = $1 AND status IN ('success', 'processing')",
        )
        .bind(transaction_id)
        .fetch_one(self.tx.exec())
        .await?;
        let refunded: i64 = row.try_get("refunded")?;
        Ok((amount - refunded).max(0))
    }

    /// The account's credit invoices with credit left in `currency`, oldest first, locked for
    /// this work on PostgreSQL (SQLite has one writer).
    pub async fn available_credit(&mut self, account_id: i64, currency: &str) -> Result<Vec<Invoice>, StoreError> {
        let sql = format!(
            "SELECT {} FROM invoices WHERE account_id = $1 AND currency = $2 AND balance < 0 \
             ORDER BY created_at, id{}",
            crate::invoices::rows::INVOICE_COLUMNS,
            self.backend.for_update()
        );
        let rows = crate::db::query(&sql).bind(account_id).bind(currency).fetch_all(self.tx.exec()).await?;
        rows.iter().map(crate::invoices::rows::invoice_from_row).collect()
    }

    /// Pays what it can of the charge invoice `invoice` (made in this work) with the account's
    /// available credit in its currency, oldest credit invoice first: one `payment` credit
    /// payment per credit invoice used. Answers the invoice as it is afterwards.
    pub async fn apply_credit(&mut self, invoice: Invoice, at: i64, recorded_at: i64) -> Result<Invoice, StoreError> {
        if invoice.kind != InvoiceKind::Charge || invoice.amounts.balance <= 0 {
            return Ok(invoice);
        }
        let credits = self.available_credit(invoice.account_id, &invoice.currency).await?;
        let mut due = invoice.amounts.balance;
        let mut used = 0;
        for credit in credits {
            if due == 0 {
                break;
            }
            let amount = due.min(-credit.amounts.balance);
            let payment = NewCreditPayment {
                account_id: invoice.account_id,
                action: CreditPaymentAction::Payment,
                currency: invoice.currency.clone(),
                amount,
                original_invoice_id: credit.id,
                applied_to_invoice_id: Some(invoice.id),
                original_credit_payment_id: None,
                refund_transaction_id: None,
            };
            // The payment first, so that its event comes before the credit invoice's closing.
            self.record_credit_payment(invoice.site_id, &payment, at, recorded_at).await?;
            if !self.take_credit(&credit, amount, 0, at, recorded_at).await? {
                return Err(StoreError::Conflict(format!("the credit of invoice {} changed", credit.invoice_number)));
            }
            due -= amount;
            used += amount;
        }
        if used == 0 {
            return Ok(invoice);
        }
        if !self.pay_by_credit(&invoice, used, at).await? {
            return Err(StoreError::Conflict(format!(
                "invoice {} changed while credit paid it",
                invoice.invoice_number
            )));
        }
        self.invoice(invoice.id).await?.ok_or_else(|| StoreError::Invalid("the invoice paid by credit is gone".into()))
    }

    /// Which of these accounts have credit left in some currency.
    pub async fn accounts_with_credit(&mut self, account_ids: &[i64]) -> Result<Vec<i64>, StoreError> {
        if account_ids.is_empty() {
            return Ok(Vec::new());
        }
        let sql = format!(
            "SELECT DISTINCT account_id FROM invoices WHERE balance < 0 AND account_id IN ({})",
            self.backend.params(account_ids.len(), 1)
        );
        let mut query = crate::db::counted(&sql, account_ids.len());
        for id in account_ids {
            query = query.bind(*id);
        }
        let rows = query.fetch_all(self.tx.exec()).await?;
        rows.iter().map(|r| r.try_get("account_id").map_err(StoreError::from)).collect()
    }

    /// The invoice with this id, locked for this work on PostgreSQL, then read: the lock is
    /// taken by a statement of its own, so the read (a later statement, with a newer snapshot
    /// under READ COMMITTED) sees everything committed by whoever held the lock before, also
    /// what its derived columns (`credited`: the invoices crediting it) are summed from. A
    /// `SELECT … FOR UPDATE` computing them itself would evaluate those sums on the snapshot
    /// taken before it waited for the lock.
    pub async fn invoice(&mut self, id: i64) -> Result<Option<Invoice>, StoreError> {
        if !self.lock_invoice(id).await? {
            return Ok(None);
        }
        let sql = format!("SELECT {} FROM invoices WHERE id = $1", crate::invoices::rows::INVOICE_COLUMNS);
        let row = crate::db::query(&sql).bind(id).fetch_optional(self.tx.exec()).await?;
        row.as_ref().map(crate::invoices::rows::invoice_from_row).transpose()
    }

    /// Locks the invoice `id` for this work (PostgreSQL `FOR UPDATE`; SQLite's one writer holds
    /// every row already); answers whether it exists. Amounts read after this see every change
    /// committed before the lock was granted.
    pub async fn lock_invoice(&mut self, id: i64) -> Result<bool, StoreError> {
        let sql = format!("SELECT id FROM invoices WHERE id = $1{}", self.backend.for_update());
        Ok(crate::db::query(&sql).bind(id).fetch_optional(self.tx.exec()).await?.is_some())
    }

    /// What credit paid of an invoice: its `payment` credit payments not voided.
    pub async fn credit_paid(&mut self, invoice_id: i64) -> Result<i64, StoreError> {
        let row = crate::db::query(
            "SELECT CAST(COALESCE(SUM(amount), 0) AS BIGINT) AS paid FROM credit_payments \
             WHERE applied_to_invoice_id = $1 AND action = 'payment' AND voided_at IS NULL",
        )
        .bind(invoice_id)
        .fetch_one(self.tx.exec())
        .await?;
        Ok(row.try_get("paid")?)
    }
}

impl Store {
    /// The site's credit payment with this uuid.
    pub async fn credit_payment(&self, site_id: i64, uuid: &str) -> Result<Option<CreditPayment>, StoreError> {
        let row = crate::db::query(&format!("SELECT {COLUMNS} FROM credit_payments WHERE site_id = $1 AND uuid = $2"))
            .bind(site_id)
            .bind(uuid)
            .fetch_optional(&self.reads)
            .await?;
        row.as_ref().map(from_row).transpose()
    }

    /// The credit payments an invoice took part in (applied to it, or taken from it), oldest
    /// first.
    pub async fn invoice_credit_payments(&self, invoice_id: i64) -> Result<Vec<CreditPayment>, StoreError> {
        let rows = crate::db::query(&format!(
            "SELECT {COLUMNS} FROM credit_payments WHERE applied_to_invoice_id = $1 OR original_invoice_id = $1 \
             ORDER BY created_at, id"
        ))
        .bind(invoice_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(from_row).collect()
    }

    /// What of each credit payment `ids` was paid back to a card since (its `refund` credit
    /// payments not voided), by id; payments with none are left out.
    pub async fn credit_payments_refunded(&self, ids: &[i64]) -> Result<Vec<(i64, i64)>, StoreError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut conditions = Conditions::default();
        conditions.eq("action", Arg::Text(CreditPaymentAction::Refund.as_str().to_owned()));
        conditions.push("voided_at IS NULL".to_owned());
        let args: Vec<String> = ids.iter().map(|id| conditions.arg(Arg::Int(*id))).collect();
        conditions.push(format!("original_credit_payment_id IN ({})", args.join(", ")));
        let sql = format!(
            "SELECT original_credit_payment_id AS id, CAST(SUM(amount) AS BIGINT) AS refunded FROM credit_payments{} \
             GROUP BY original_credit_payment_id",
            conditions.sql()
        );
        let rows = conditions.bind(crate::db::counted(&sql, ids.len())).fetch_all(&self.pool).await?;
        rows.iter().map(|r| Ok((r.try_get("id")?, r.try_get("refunded")?))).collect()
    }

    /// A page of the site's credit payments.
    pub async fn list_credit_payments(
        &self,
        site_id: i64,
        filter: &CreditPaymentFilter,
        page: &PageRequest,
    ) -> Result<Page<CreditPayment>, StoreError> {
        let mut conditions = Conditions::default();
        conditions.eq("site_id", Arg::Int(site_id));
        if let Some(account) = filter.account_id {
            conditions.eq("account_id", Arg::Int(account));
        }
        if let Some(action) = filter.action {
            conditions.eq("action", Arg::Text(action.as_str().to_owned()));
        }
        conditions.time_range(page);
        let count_sql = format!("SELECT COUNT(*) AS n FROM credit_payments{}", conditions.sql());
        let total: i64 = conditions.bind(crate::db::query(&count_sql)).fetch_one(&self.reads).await?.try_get("n")?;
        conditions.after(page);
        let sql = format!("SELECT {COLUMNS} FROM credit_payments{}{}", conditions.sql(), order_and_limit(page));
        let rows = conditions.bind(crate::db::query(&sql)).fetch_all(&self.reads).await?;
        let items = rows.iter().map(from_row).collect::<Result<Vec<_>, _>>()?;
        Ok(into_page(items, page, total, |c| c.position(page.sort)))
    }

    /// The invoices crediting `invoice_id` (its refund and other credit invoices), oldest first.
    pub async fn crediting_invoices(&self, invoice_id: i64) -> Result<Vec<Invoice>, StoreError> {
        let rows = crate::db::query(&format!(
            "SELECT {} FROM invoices WHERE original_invoice_id = $1 ORDER BY created_at, id",
            crate::invoices::rows::INVOICE_COLUMNS
        ))
        .bind(invoice_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(crate::invoices::rows::invoice_from_row).collect()
    }
}

impl Work {
    /// Records `events` of a change this work made to `invoice` (subject: its number), such as
    /// the void of a credit invoice's balance through [`Work::take_credit`]. Call it only once
    /// the change is made: the events commit with the work.
    pub async fn record_invoice_events(&mut self, invoice: &Invoice, events: &[NewEvent]) -> Result<(), StoreError> {
        let number = invoice.invoice_number.to_string();
        let rows: Vec<(i64, &str, &NewEvent)> = events.iter().map(|e| (invoice.site_id, number.as_str(), e)).collect();
        self.append_events(&rows).await
    }
}

/// Reads of credit invoices, the invoices and lines they reverse, and credit payments.
impl Store {
    /// A page of the site's invoices matching `conditions` (site and time range added here).
    async fn invoice_page(
        &self,
        site_id: i64,
        mut conditions: Conditions,
        page: &PageRequest,
    ) -> Result<Page<Invoice>, StoreError> {
        conditions.eq("site_id", Arg::Int(site_id));
        conditions.time_range(page);
        let count_sql = format!("SELECT COUNT(*) AS n FROM invoices{}", conditions.sql());
        let total: i64 = conditions.bind(crate::db::query(&count_sql)).fetch_one(&self.reads).await?.try_get("n")?;
        conditions.after(page);
        let sql = format!(
            "SELECT {} FROM invoices{}{}",
            crate::invoices::rows::INVOICE_COLUMNS,
            conditions.sql(),
            order_and_limit(page)
        );
        let rows = conditions.bind(crate::db::query(&sql)).fetch_all(&self.reads).await?;
        let items = rows.iter().map(crate::invoices::rows::invoice_from_row).collect::<Result<Vec<_>, _>>()?;
        Ok(into_page(items, page, total, |i| i.position(page.sort)))
    }

    /// A page of the invoices issued against the invoice `invoice_id` (its refund and other
    /// credit invoices: those whose original invoice it is).
    pub async fn list_crediting_invoices(
        &self,
        site_id: i64,
        invoice_id: i64,
        page: &PageRequest,
    ) -> Result<Page<Invoice>, StoreError> {
        let mut conditions = Conditions::default();
        conditions.eq("original_invoice_id", Arg::Int(invoice_id));
        self.invoice_page(site_id, conditions, page).await
    }

    /// A page of the invoices `invoice` was issued against: its original invoice, when it is a
    /// credit or refund invoice that has one (none otherwise).
    pub async fn list_original_invoices(
        &self,
        site_id: i64,
        invoice: &Invoice,
        page: &PageRequest,
    ) -> Result<Page<Invoice>, StoreError> {
        let Some(original) = invoice.original_invoice_id else {
            return Ok(Page { items: Vec::new(), next: None, total: 0 });
        };
        let mut conditions = Conditions::default();
        conditions.eq("id", Arg::Int(original));
        self.invoice_page(site_id, conditions, page).await
    }

    /// A page of the credit lines reversing the adjustment `adjustment_id` (those whose original
    /// adjustment it is).
    pub async fn list_credit_adjustments(
        &self,
        site_id: i64,
        adjustment_id: i64,
        page: &PageRequest,
    ) -> Result<Page<Adjustment>, StoreError> {
        let mut conditions = Conditions::default();
        conditions.eq("site_id", Arg::Int(site_id));
        conditions.eq("original_adjustment_id", Arg::Int(adjustment_id));
        conditions.time_range(page);
        let count_sql = format!("SELECT COUNT(*) AS n FROM adjustments{}", conditions.sql());
        let total: i64 = conditions.bind(crate::db::query(&count_sql)).fetch_one(&self.reads).await?.try_get("n")?;
        conditions.after(page);
        let sql = format!(
            "SELECT {} FROM adjustments{}{}",
            crate::invoices::rows::ADJUSTMENT_COLUMNS,
            conditions.sql(),
            order_and_limit(page)
        );
        let rows = conditions.bind(crate::db::query(&sql)).fetch_all(&self.reads).await?;
        let items = rows.iter().map(crate::invoices::rows::adjustment_from_row).collect::<Result<Vec<_>, _>>()?;
        let items = self.with_addresses(&self.pool, items).await?;
        Ok(into_page(items, page, total, |a| a.position(page.sort)))
    }

    /// Which of the invoices `invoice_ids` are paid charge invoices (whose charges can be
    /// refunded).
    pub async fn paid_charge_invoices(&self, invoice_ids: &[i64]) -> Result<Vec<i64>, StoreError> {
        if invoice_ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut conditions = Conditions::default();
        conditions.eq("kind", Arg::Text(InvoiceKind::Charge.as_str().to_owned()));
        conditions.eq("state", Arg::Text(InvoiceState::Paid.as_str().to_owned()));
        let ids: Vec<String> = invoice_ids.iter().map(|id| conditions.arg(Arg::Int(*id))).collect();
        conditions.push(format!("id IN ({})", ids.join(", ")));
        let sql = format!("SELECT id FROM invoices{}", conditions.sql());
        let rows = conditions.bind(crate::db::counted(&sql, invoice_ids.len())).fetch_all(&self.reads).await?;
        rows.iter().map(|r| r.try_get("id").map_err(StoreError::from)).collect()
    }
}

/// Origin of the credit invoice that writes off a failed charge invoice.
pub const WRITE_OFF_ORIGIN: &str = "write_off";

impl Work {
    /// Voids the `payment` credit payments applied to the charge invoice `invoice_id` (it
    /// failed): each gets `voided_at`, its credit goes back to the credit invoice it came from
    /// (an emptied credit invoice opens again) and off the charge invoice (which owes it again).
    /// Each voided payment and each credit invoice reopened records its event. Answers the
    /// payments voided.
    pub async fn void_credit_payments_to(
        &mut self,
        invoice_id: i64,
        at: i64,
        recorded_at: i64,
    ) -> Result<Vec<CreditPayment>, StoreError> {
        let sql = format!(
            "SELECT {COLUMNS} FROM credit_payments WHERE applied_to_invoice_id = $1 AND action = $2 \
             AND voided_at IS NULL AND original_invoice_id <> $1 ORDER BY id"
        );
        let rows = crate::db::query(&sql)
            .bind(invoice_id)
            .bind(CreditPaymentAction::Payment.as_str())
            .fetch_all(self.tx.exec())
            .await?;
        let payments: Vec<CreditPayment> = rows.iter().map(from_row).collect::<Result<_, _>>()?;
        let mut voided = Vec::with_capacity(payments.len());
        for p in payments {
            // Only a payment still in force is voided (and its credit moved back), also when
            // another work voided it after the read above.
            let done = crate::db::query(
                "UPDATE credit_payments SET voided_at = $1, updated_at = $1 WHERE id = $2 AND voided_at IS NULL",
            )
            .bind(at)
            .bind(p.id)
            .execute(self.tx.exec())
            .await?;
            if done.rows_affected() != 1 {
                continue;
            }
            let credit = self.invoice(p.original_invoice_id).await?;
            crate::db::query(
                "UPDATE invoices SET balance = balance - $1, paid = paid + $1, \
                 state = CASE WHEN kind = $2 THEN $3 ELSE state END, closed_at = NULL, updated_at = $4 WHERE id = $5",
            )
            .bind(p.amount)
            .bind(InvoiceKind::Credit.as_str())
            .bind(InvoiceState::Open.as_str())
            .bind(at)
            .bind(p.original_invoice_id)
            .execute(self.tx.exec())
            .await?;
            crate::db::query(
                "UPDATE invoices SET balance = balance + $1, paid = paid - $1, updated_at = $2 WHERE id = $3",
            )
            .bind(p.amount)
            .bind(at)
            .bind(invoice_id)
            .execute(self.tx.exec())
            .await?;
            let p = CreditPayment { voided_at: Some(at), updated_at: at, ..p };
            self.record_voided(&p, at, recorded_at).await?;
            if let Some(credit) = credit.filter(|c| c.state == InvoiceState::Closed) {
                self.record_credit_invoice_state(&credit, InvoiceState::Open, at, recorded_at).await?;
            }
            voided.push(p);
        }
        Ok(voided)
    }

    /// Whether the invoice `invoice_id` has been written off (a credit invoice of origin
    /// [`WRITE_OFF_ORIGIN`] credits it).
    pub async fn written_off(&mut self, invoice_id: i64) -> Result<bool, StoreError> {
        let row = crate::db::query("SELECT COUNT(*) AS n FROM invoices WHERE original_invoice_id = $1 AND origin = $2")
            .bind(invoice_id)
            .bind(WRITE_OFF_ORIGIN)
            .fetch_one(self.tx.exec())
            .await?;
        Ok(row.try_get::<i64, _>("n")? > 0)
    }

    /// Records `amount` (> 0) of the charge invoice `invoice` as paid by credit (credit payments,
    /// a write-off): its balance falls by it, compare-and-set on the balance read. Answers whether
    /// it held.
    pub async fn pay_by_credit(&mut self, invoice: &Invoice, amount: i64, at: i64) -> Result<bool, StoreError> {
        let done = crate::db::query(
            "UPDATE invoices SET balance = balance - $1, paid = paid + $1, updated_at = $2 \
             WHERE id = $3 AND balance = $4 AND balance >= $1",
        )
        .bind(amount)
        .bind(at)
        .bind(invoice.id)
        .bind(invoice.amounts.balance)
        .execute(self.tx.exec())
        .await?;
        Ok(done.rows_affected() == 1)
    }
}

impl Store {
    /// Whether the site has Credit Memos (`None`: no such site).
    pub async fn site_has_credit_memos(&self, site_id: i64) -> Result<Option<bool>, StoreError> {
        let row = crate::db::query("SELECT credit_memos FROM sites WHERE id = $1")
            .bind(site_id)
            .fetch_optional(&self.pool)
            .await?;
        row.map(|r| r.try_get::<i64, _>("credit_memos").map(|v| v != 0)).transpose().map_err(Into::into)
    }
}

#[cfg(test)]
mod tests;
