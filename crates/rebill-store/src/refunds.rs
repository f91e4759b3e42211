//! The writes of a refund beyond making its invoice and transactions: scheduling its recovery
//! and settling its invoice once the gateway answered.
//!
//! A refund is made in two database transactions around the gateway calls: the first makes
//! the refund invoice (state `processing` while a refund transaction awaits the gateway), its
//! lines and its `processing` refund transactions, and schedules a recovery job; the second
//! ([`Work::settle_refund_invoice`]) records the outcome. A crash between the two leaves the
//! invoice `processing`; the recovery job asks the gateway again under the same idempotency
//! keys and settles it, so nothing is refunded twice and nothing recorded is lost.

use crate::StoreError;
use crate::events::NewEvent;
use crate::work::Work;

use rebill_billing::states::{InvoiceState, TransactionTransition};

impl Work {
    /// Schedules `kind` for `subject` at `due_at` (site clock) in this work, as
    /// [`crate::Store::schedule_job`] does.
    pub async fn schedule_job(
        &mut self,
        site_id: i64,
        kind: &str,
        subject: &str,
        due_at: i64,
    ) -> Result<(), StoreError> {
        crate::db::query(
            "INSERT INTO jobs (site_id, kind, subject, due_at) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (kind, subject, due_at) DO NOTHING",
        )
        .bind(site_id)
        .bind(kind)
        .bind(subject)
        .bind(due_at)
        .execute(self.tx.exec())
        .await?;
        Ok(())
    }

    /// Settles a refund invoice that is still `processing`: its new state and balance (what is
    /// left as credit, ≤ 0; `paid` follows as total − balance), closed at `at` unless credit is
    /// left. `events` are recorded with it (subject: its number), then, for a credit invoice that
    /// closes, the event of its closing (recorded at `recorded_at`). Answers whether it was
    /// still processing (otherwise nothing changes).
    pub async fn settle_refund_invoice(
        &mut self,
        id: i64,
        state: InvoiceState,
        balance: i64,
        at: i64,
        recorded_at: i64,
        events: &[NewEvent],
    ) -> Result<bool, StoreError> {
        let closed_at = (balance == 0).then_some(at);
        let row = crate::db::query(
            "UPDATE invoices SET state = $1, balance = $2, paid = total - $2, closed_at = $3, updated_at = $4 \
             WHERE id = $5 AND state = $6 RETURNING site_id, invoice_number",
        )
        .bind(state.as_str())
        .bind(balance)
        .bind(closed_at)
        .bind(at)
        .bind(id)
        .bind(InvoiceState::Processing.as_str())
        .fetch_optional(self.tx.exec())
        .await?;
        let Some(row) = row else { return Ok(false) };
        let site: i64 = row.try_get("site_id")?;
        let number: i64 = row.try_get("invoice_number")?;
        let number = number.to_string();
        let recorded: Vec<(i64, &str, &NewEvent)> = events.iter().map(|e| (site, number.as_str(), e)).collect();
        self.append_events(&recorded).await?;
        if state == InvoiceState::Closed
            && let Some(invoice) = self.invoice(id).await?
        {
            self.record_credit_invoice_state(&invoice, state, at, recorded_at).await?;
        }
        Ok(true)
    }

    /// Voids a successful transaction (its status becomes `void`), recording `events` with it
    /// (subject: its uuid). Answers whether it was still successful (otherwise nothing changes).
    pub async fn void_transaction(&mut self, id: i64, at: i64, events: &[NewEvent]) -> Result<bool, StoreError> {
        let change = TransactionTransition::Void;
        let from: Vec<String> = change.from_statuses().iter().map(|s| format!("'{}'", s.as_str())).collect();
        let sql = format!(
            "UPDATE transactions SET status = $1, updated_at = $2 WHERE id = $3 AND status IN ({}) \
             RETURNING site_id, uuid",
            from.join(", ")
        );
        let row =
            crate::db::query(&sql).bind(change.to().as_str()).bind(at).bind(id).fetch_optional(self.tx.exec()).await?;
        let Some(row) = row else { return Ok(false) };
        let site: i64 = row.try_get("site_id")?;
        let uuid: String = row.try_get("uuid")?;
        let recorded: Vec<(i64, &str, &NewEvent)> = events.iter().map(|e| (site, uuid.as_str(), e)).collect();
        self.append_events(&recorded).await?;
        Ok(true)
    }
}
