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
//!   A purchase attempt also keeps the service's time it was begun at and whether it charges a
//!   payment method to save ([`Store::begin_attempt`], [`AttemptFacts`]), for the settle job.
//!   While a purchase of an invoice is `processing`, [`Store::close_invoice`] refuses to settle
//!   the invoice by hand.
//!
//! Money is integer cents, times UTC epoch seconds, booleans 0/1 (one integer type for both
//! backends, bound and decoded the same way by either driver). Lists use the keyset paging of [`crate::list`].

use crate::billing_info::{FIELD_COLUMNS, fields_from_row, kind_from_row};
use crate::coupons::Discounted;
use crate::db::DbQuery;
use crate::events::NewEvent;
use crate::list::{Arg, Conditions, Page, PageRequest, Within, into_page, order_and_limit};
use crate::work::Work;
use crate::{Store, StoreError, flag};

use rebill_billing::states::{InvoiceState, TransactionStatus};

use crate::invoices::rows::*;
use crate::invoices::*;

impl Work {
    /// The invoice's purchase still `processing` at the gateway, if any (the first begun). Read
    /// under the invoice's lock ([`Work::lock_invoice`]), which beginning an attempt takes too,
    /// so an attempt and a payment entered otherwise never cross.
    pub async fn processing_purchase(&mut self, invoice_id: i64) -> Result<Option<Transaction>, StoreError> {
        let sql = format!(
            "SELECT {} FROM transactions WHERE invoice_id = $1 AND action = 'purchase' AND status = '{}' \
             ORDER BY id LIMIT 1",
            transaction_columns(),
            TransactionStatus::Processing.as_str()
        );
        let row = crate::db::query(&sql).bind(invoice_id).fetch_optional(self.tx.exec()).await?;
        row.as_ref().map(transaction_from_row).transpose()
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

    async fn invoice_where<'e, E>(&self, pool: E, condition: &str, args: &[Arg]) -> Result<Option<Invoice>, StoreError>
    where
        E: Into<crate::db::Exec<'e>>,
    {
        let sql = format!("SELECT {INVOICE_COLUMNS} FROM invoices WHERE {condition}");
        let mut query = crate::db::query(&sql);
        for a in args {
            query = a.bind_to(query);
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

    /// The site's invoices with these numbers (one statement per 500; a number with no invoice
    /// has none), in no particular order.
    pub async fn invoices_by_numbers(&self, site_id: i64, numbers: &[i64]) -> Result<Vec<Invoice>, StoreError> {
        let select = format!("SELECT {INVOICE_COLUMNS} FROM invoices");
        let rows =
            crate::list::rows_with_keys(self, &select, Within::Site(site_id), "invoice_number", &Arg::ints(numbers))
                .await?;
        rows.iter().map(invoice_from_row).collect()
    }

    /// The invoices with these ids, as [`Store::invoices_by_numbers`].
    pub async fn invoices_by_ids(&self, ids: &[i64]) -> Result<Vec<Invoice>, StoreError> {
        let select = format!("SELECT {INVOICE_COLUMNS} FROM invoices");
        let rows = crate::list::rows_with_keys(self, &select, Within::AllSites, "id", &Arg::ints(ids)).await?;
        rows.iter().map(invoice_from_row).collect()
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

    /// [`Store::set_invoice_state`], refused while a purchase of the invoice is still
    /// `processing` at the gateway (its outcome not known: it may still pay the invoice). The
    /// invoice is locked first, as [`Store::begin_transaction`] locks it, so a purchase begun at
    /// the same time and this change see each other: one of them comes second.
    pub async fn close_invoice(
        &self,
        id: i64,
        from: &[InvoiceState],
        change: InvoiceChange,
        now: i64,
        events: &[NewEvent],
    ) -> Result<Closing, StoreError> {
        let mut work = self.begin_work().await?;
        work.lock_invoice(id).await?;
        if let Some(paying) = work.processing_purchase(id).await? {
            // Dropped: rolled back, nothing written.
            return Ok(Closing::Paying(Box::new(paying)));
        }
        let changed = work.set_invoice_states(from, &[InvoiceStateChange { id, change, now, events }]).await?;
        if changed.is_empty() {
            return Ok(Closing::NotInState);
        }
        work.commit().await?;
        Ok(self.invoice_by_id(id).await?.map_or(Closing::NotInState, |i| Closing::Closed(Box::new(i))))
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
        let total: i64 = conditions.bind(crate::db::query(&count_sql)).fetch_one(&self.reads).await?.try_get("n")?;
        conditions.after(page);
        let sql = format!("SELECT {INVOICE_COLUMNS} FROM invoices{}{}", conditions.sql(), order_and_limit(page));
        let rows = conditions.bind(crate::db::query(&sql)).fetch_all(&self.reads).await?;
        let items = rows.iter().map(invoice_from_row).collect::<Result<Vec<_>, _>>()?;
        Ok(into_page(items, page, total, |i| i.position(page.sort)))
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
        let rows = crate::db::query(&sql).bind(account_id).fetch_all(&self.reads).await?;
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
        let rows = crate::db::query(&format!(
            "SELECT {ADJUSTMENT_COLUMNS} FROM adjustments WHERE invoice_id = $1 ORDER BY id"
        ))
        .bind(invoice_id)
        .fetch_all(&self.pool)
        .await?;
        self.with_addresses(&self.pool, rows.iter().map(adjustment_from_row).collect::<Result<_, _>>()?).await
    }

    /// The line items of these invoices (with the addresses they were shipped to), each
    /// invoice's in the order they were added, as [`Store::invoice_lines`] reads one invoice's.
    pub async fn lines_of_invoices(&self, invoice_ids: &[i64]) -> Result<Vec<Adjustment>, StoreError> {
        let select = format!("SELECT {ADJUSTMENT_COLUMNS} FROM adjustments");
        let rows =
            crate::list::rows_with_keys(self, &select, Within::AllSites, "invoice_id", &Arg::ints(invoice_ids)).await?;
        let mut lines = rows.iter().map(adjustment_from_row).collect::<Result<Vec<_>, _>>()?;
        lines.sort_by_key(|l| (l.invoice_id, l.id));
        self.with_addresses(&self.reads, lines).await
    }

    /// The transactions of an invoice, oldest first.
    pub async fn invoice_transactions(&self, invoice_id: i64) -> Result<Vec<Transaction>, StoreError> {
        let rows = crate::db::query(&format!(
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
        let row = crate::db::query(&format!("SELECT {ADJUSTMENT_COLUMNS} FROM adjustments WHERE id = $1"))
            .bind(id)
            .fetch_one(&self.pool)
            .await?;
        adjustment_from_row(&row)
    }

    /// The site's adjustment with this uuid.
    pub async fn adjustment(&self, site_id: i64, uuid: &str) -> Result<Option<Adjustment>, StoreError> {
        let row =
            crate::db::query(&format!("SELECT {ADJUSTMENT_COLUMNS} FROM adjustments WHERE site_id = $1 AND uuid = $2"))
                .bind(site_id)
                .bind(uuid)
                .fetch_optional(&self.reads)
                .await?;
        let Some(row) = row else { return Ok(None) };
        Ok(self.with_addresses(&self.pool, vec![adjustment_from_row(&row)?]).await?.pop())
    }

    /// Deletes a pending adjustment; an invoiced one stays.
    pub async fn delete_adjustment(&self, site_id: i64, uuid: &str) -> Result<AdjustmentDeletion, StoreError> {
        let done = crate::db::query("DELETE FROM adjustments WHERE site_id = $1 AND uuid = $2 AND state = $3")
            .bind(site_id)
            .bind(uuid)
            .bind(AdjustmentState::Pending.as_str())
            .execute(&self.pool)
            .await?;
        if done.rows_affected() > 0 {
            return Ok(AdjustmentDeletion::Deleted);
        }
        let exists = crate::db::query("SELECT id FROM adjustments WHERE site_id = $1 AND uuid = $2")
            .bind(site_id)
            .bind(uuid)
            .fetch_optional(&self.pool)
            .await?;
        Ok(if exists.is_some() { AdjustmentDeletion::Invoiced } else { AdjustmentDeletion::NotFound })
    }

    /// The account's pending adjustments, oldest first.
    pub async fn pending_adjustments(&self, account_id: i64) -> Result<Vec<Adjustment>, StoreError> {
        let rows = crate::db::query(&format!(
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
        let total: i64 = conditions.bind(crate::db::query(&count_sql)).fetch_one(&self.reads).await?.try_get("n")?;
        conditions.after(page);
        let sql = format!("SELECT {ADJUSTMENT_COLUMNS} FROM adjustments{}{}", conditions.sql(), order_and_limit(page));
        let rows = conditions.bind(crate::db::query(&sql)).fetch_all(&self.reads).await?;
        let items = self
            .with_addresses(&self.pool, rows.iter().map(adjustment_from_row).collect::<Result<Vec<_>, _>>()?)
            .await?;
        Ok(into_page(items, page, total, |a| a.position(page.sort)))
    }

    // ---- transactions ----

    /// Records a transaction (status `processing`) before the gateway is called. When a
    /// transaction with the same idempotency key exists, it is answered instead (whatever its
    /// status), and nothing is written. The flag tells which: `true` when it was recorded by an
    /// earlier call (one that may have reached the gateway before it stopped).
    ///
    /// A purchase of an invoice is never begun while another purchase of the same invoice is
    /// still `processing` (its outcome unknown): that one is answered instead, flagged `true`
    /// like a recorded one, and nothing is written. The invoice is locked first (PostgreSQL
    /// `FOR UPDATE`), so two attempts begun at once see each other.
    pub async fn begin_transaction(
        &self,
        site_id: i64,
        new: &NewTransaction,
        now: i64,
    ) -> Result<(Transaction, bool), StoreError> {
        self.begin_attempt(site_id, new, now, AttemptFacts::default()).await
    }

    /// [`Store::begin_transaction`] of a purchase attempt, recording `facts` with it
    /// ([`Store::attempt_of`] reads them back). A transaction answered instead (recorded by an
    /// earlier call) keeps the facts it was recorded with.
    pub async fn begin_attempt(
        &self,
        site_id: i64,
        new: &NewTransaction,
        now: i64,
        facts: AttemptFacts,
    ) -> Result<(Transaction, bool), StoreError> {
        let mut work = self.begin_work().await?;
        if let Some(invoice_id) = new.invoice_id.filter(|_| new.action == "purchase") {
            work.lock_invoice(invoice_id).await?;
            let sql = format!(
                "SELECT {} FROM transactions WHERE invoice_id = $1 AND action = 'purchase' AND status = '{}' \
                 AND idempotency_key <> $2 ORDER BY id LIMIT 1",
                transaction_columns(),
                TransactionStatus::Processing.as_str()
            );
            let row = crate::db::query(&sql)
                .bind(invoice_id)
                .bind(new.idempotency_key.clone())
                .fetch_optional(work.tx.exec())
                .await?;
            if let Some(row) = row {
                // Dropped: rolled back, nothing written.
                return Ok((transaction_from_row(&row)?, true));
            }
        }
        let mut recorded = work.record_transactions(site_id, &[(new, now)], Duplicate::Answer, facts).await?;
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
        Ok(self.settle_transaction(id, result, now, events).await?.0)
    }

    /// [`Store::complete_transaction`], also answering whether this call recorded the result
    /// (`false`: the transaction was no longer processing, someone else settled it first, and
    /// what follows its result is theirs to do).
    pub async fn settle_transaction(
        &self,
        id: i64,
        result: &TransactionResult,
        now: i64,
        events: &[NewEvent],
    ) -> Result<(Transaction, bool), StoreError> {
        let mut work = self.begin_work().await?;
        let recorded = work.complete_transactions(&[(id, result, now, events)]).await? == 1;
        let sql =
            format!("SELECT {} FROM transactions WHERE id = {}", transaction_columns(), work.backend.params(1, 1));
        let row = crate::db::query(&sql).bind(id).fetch_one(work.tx.exec()).await?;
        work.commit().await?;
        Ok((transaction_from_row(&row)?, recorded))
    }

    /// The site's transactions still `processing` that were begun before `before` (site time),
    /// oldest first, at most `limit`: attempts whose outcome is not known, or whose process
    /// stopped before it recorded one.
    pub async fn processing_transactions(
        &self,
        site_id: i64,
        before: i64,
        limit: i64,
    ) -> Result<Vec<Transaction>, StoreError> {
        let sql = format!(
            "SELECT {} FROM transactions WHERE site_id = $1 AND status = '{}' AND created_at < $2 \
             ORDER BY created_at, id LIMIT $3",
            transaction_columns(),
            TransactionStatus::Processing.as_str()
        );
        let rows = crate::db::query(&sql).bind(site_id).bind(before).bind(limit).fetch_all(&self.pool).await?;
        rows.iter().map(transaction_from_row).collect()
    }

    /// What the purchase attempt of the transaction with this id was recorded with
    /// ([`Store::begin_attempt`]); `None` when there is no such transaction.
    pub async fn attempt_of(&self, id: i64) -> Result<Option<AttemptFacts>, StoreError> {
        let row = crate::db::query("SELECT begun_service_at, saves_payment_method FROM transactions WHERE id = $1")
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        row.map(|row| {
            Ok(AttemptFacts {
                begun_service_at: row.try_get("begun_service_at")?,
                saves_payment_method: crate::get_flag(&row, "saves_payment_method")?,
            })
        })
        .transpose()
    }

    /// The site's transaction with this uuid.
    pub async fn transaction(&self, site_id: i64, uuid: &str) -> Result<Option<Transaction>, StoreError> {
        let row = crate::db::query(&format!(
            "SELECT {} FROM transactions WHERE site_id = $1 AND uuid = $2",
            transaction_columns()
        ))
        .bind(site_id)
        .bind(uuid)
        .fetch_optional(&self.reads)
        .await?;
        row.as_ref().map(transaction_from_row).transpose()
    }

    /// The site's transactions with these uuids (one statement per 500; a uuid with no
    /// transaction has none), in no particular order.
    pub async fn transactions_by_uuids(
        &self,
        site_id: i64,
        uuids: &[impl AsRef<str>],
    ) -> Result<Vec<Transaction>, StoreError> {
        let select = format!("SELECT {} FROM transactions", transaction_columns());
        let rows =
            crate::list::rows_with_keys(self, &select, Within::SiteOfUniqueKey(site_id), "uuid", &Arg::texts(uuids))
                .await?;
        rows.iter().map(transaction_from_row).collect()
    }

    /// The transaction with this id (read on the writer).
    pub async fn transaction_by_id(&self, id: i64) -> Result<Option<Transaction>, StoreError> {
        let row = crate::db::query(&format!("SELECT {} FROM transactions WHERE id = $1", transaction_columns()))
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
        let total: i64 = conditions.bind(crate::db::query(&count_sql)).fetch_one(&self.reads).await?.try_get("n")?;
        conditions.after(page);
        let sql =
            format!("SELECT {} FROM transactions{}{}", transaction_columns(), conditions.sql(), order_and_limit(page));
        let rows = conditions.bind(crate::db::query(&sql)).fetch_all(&self.reads).await?;
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
        let mut query = crate::db::counted(&sql, account_codes.len()).bind(site_id);
        for code in account_codes {
            query = query.bind(*code);
        }
        let rows = query.fetch_all(self.tx.exec()).await?;
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
        let mut query = crate::db::counted(&sql, subscription_uuids.len());
        for uuid in subscription_uuids {
            query = query.bind(*uuid);
        }
        query.fetch_all(self.tx.exec()).await?.iter().map(adjustment_from_row).collect()
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
        let last: i64 = crate::db::query(
            "INSERT INTO invoice_counters (site_id, last_number) VALUES ($1, $2) \
             ON CONFLICT (site_id) DO UPDATE SET last_number = invoice_counters.last_number + $3 \
             RETURNING last_number",
        )
        .bind(site_id)
        .bind(FIRST_INVOICE_NUMBER + count - 1)
        .bind(count)
        .fetch_one(self.tx.exec())
        .await?
        .try_get("last_number")?;
        let uuids: Vec<String> = drafts.iter().map(|_| new_uuid()).collect();
        let sql = format!(
            "INSERT INTO invoices ({INVOICE_INSERT}) VALUES {} RETURNING {INVOICE_COLUMNS}",
            self.backend.rows(drafts.len(), INVOICE_VALUES, 1)
        );
        let mut query = crate::db::counted(&sql, drafts.len());
        for ((number, (draft, _)), uuid) in (last - count + 1..).zip(drafts).zip(&uuids) {
            query = bind_invoice(query, uuid.clone(), site_id, number, draft.invoice, draft.now);
        }
        let mut invoices =
            query.fetch_all(self.tx.exec()).await?.iter().map(invoice_from_row).collect::<Result<Vec<_>, _>>()?;
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
                let done = crate::db::query(&sql)
                    .bind(invoice.id)
                    .bind(AdjustmentState::Invoiced.as_str())
                    .bind(draft.now)
                    .bind(*adjustment)
                    .bind(draft.invoice.account_id)
                    .bind(AdjustmentState::Pending.as_str())
                    .execute(self.tx.exec())
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
            let mut query = crate::db::counted(&sql, lines.len());
            for (invoice_id, line, now, uuid) in &lines {
                query = bind_adjustment(query, uuid.clone(), site_id, Some(*invoice_id), line, *now);
            }
            made = query.fetch_all(self.tx.exec()).await?.iter().map(adjustment_from_row).collect::<Result<_, _>>()?;
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
        self.begin_attempts(site_id, new, AttemptFacts::default()).await
    }

    /// [`Work::begin_transactions`] of purchase attempts, each recorded with `facts` (see
    /// [`Store::begin_attempt`]).
    pub async fn begin_attempts(
        &mut self,
        site_id: i64,
        new: &[(&NewTransaction, i64)],
        facts: AttemptFacts,
    ) -> Result<Vec<Transaction>, StoreError> {
        Ok(self.record_transactions(site_id, new, Duplicate::Fail, facts).await?.into_iter().map(|(t, _)| t).collect())
    }

    /// The one statement recording new transactions ([`Work::begin_attempts`],
    /// [`Store::begin_attempt`]), each with `facts`; answers them in the order given.
    async fn record_transactions(
        &mut self,
        site_id: i64,
        new: &[(&NewTransaction, i64)],
        duplicate: Duplicate,
        facts: AttemptFacts,
    ) -> Result<Vec<(Transaction, bool)>, StoreError> {
        if new.is_empty() {
            return Ok(Vec::new());
        }
        let mut columns = transaction_insert();
        columns.extend(["begun_service_at", "saves_payment_method"]);
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
        let mut query = crate::db::counted(&sql, new.len());
        for (t, now) in new {
            query = bind_transaction(query, new_uuid(), site_id, t, *now)
                .bind(facts.begun_service_at)
                .bind(flag(facts.saves_payment_method));
        }
        let mut made =
            query.fetch_all(self.tx.exec()).await?.iter().map(transaction_from_row).collect::<Result<Vec<_>, _>>()?;
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
                    let row = crate::db::query(&sql).bind(t.idempotency_key.clone()).fetch_one(self.tx.exec()).await?;
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
        let mut query = crate::db::counted(&sql, results.len());
        for (id, r, now, _) in results {
            query = bind_result(query.bind(*id), r).bind(*now);
        }
        let rows = query.fetch_all(self.tx.exec()).await?;
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
        let mut query = crate::db::counted(&sql, changes.len());
        for c in changes {
            query = query
                .bind(c.id)
                .bind(c.change.state.as_str())
                .bind(c.change.attempt_next_collection_at)
                .bind(c.change.collection_attempts)
                .bind(c.now);
        }
        let rows = query.fetch_all(self.tx.exec()).await?;
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
mod tests;
