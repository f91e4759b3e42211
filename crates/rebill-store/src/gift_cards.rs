//! Gift cards: the products a site sells (face values per product code and currency) and the
//! cards bought, delivered and redeemed.
//!
//! - A card is written with its purchase invoice in one database transaction
//!   ([`Store::create_gift_card_purchase`]) but exists for the API only once it is purchased
//!   ([`Store::confirm_gift_card`], after the payment was approved: `purchased_at`), or while
//!   its payment is still `processing` at the gateway; a declined payment removes it again
//!   ([`Store::discard_gift_card`]), so nothing of it is kept.
//! - Delivery sets `delivered_at` once ([`Store::deliver_gift_card`]).
//! - Redemption ([`Store::redeem_gift_card`]) is a compare-and-set on a card not yet redeemed,
//!   made in the database transaction that creates the invoice holding its credit (a credit
//!   invoice, or a legacy invoice without Credit Memos): two redemptions of one card never both
//!   succeed. What is left of a card is the negative balance of that invoice, which the
//!   account's later charge invoices use up (`crate::credits`).
//!
//! Every change appends its events in the same database transaction (subject: the card's id;
//! products: the product code).

use crate::db::is_unique_violation;

use crate::accounts::AddressFields;
use crate::db::DbRow;
use crate::events::NewEvent;
use crate::invoices::{Adjustment, Invoice, InvoiceDraft, NewAdjustment, NewInvoice};
use crate::list::{Arg, Conditions, Page, PageRequest, Position, Sort, into_page, order_and_limit};
use crate::{Store, StoreError};

/// A face value a site sells.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GiftCardProduct {
    pub product_code: String,
    pub currency: String,
    pub unit_amount: i64,
    pub created_at: i64,
}

/// How and to whom a card is delivered.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Delivery {
    /// `email` or `post`.
    pub method: String,
    pub email_address: Option<String>,
    pub first_name: Option<String>,
    pub last_name: Option<String>,
    pub gifter_name: Option<String>,
    pub personal_message: Option<String>,
    pub address: AddressFields,
    /// When to deliver (site clock); `None`: at purchase.
    pub deliver_at: Option<i64>,
}

/// A card to write with its purchase invoice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewGiftCard {
    pub redemption_code: String,
    pub product_code: String,
    pub currency: String,
    pub unit_amount: i64,
    pub gifter_account_id: i64,
    pub delivery: Delivery,
}

/// A stored card.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GiftCard {
    pub id: i64,
    pub site_id: i64,
    pub redemption_code: String,
    pub product_code: String,
    pub currency: String,
    pub unit_amount: i64,
    pub gifter_account_code: String,
    pub purchase_invoice_id: i64,
    pub purchase_invoice_number: i64,
    pub recipient_account_code: Option<String>,
    pub redemption_invoice_id: Option<i64>,
    pub redemption_invoice_number: Option<i64>,
    /// What is left of the card's credit (positive cents) once redeemed: the negative balance
    /// of its redemption invoice.
    pub balance: Option<i64>,
    pub redeemed_subscription_uuid: Option<String>,
    pub delivery: Delivery,
    pub purchased_at: Option<i64>,
    pub delivered_at: Option<i64>,
    pub redeemed_at: Option<i64>,
    pub canceled_at: Option<i64>,
    pub created_at: i64,
    pub updated_at: i64,
}

impl GiftCard {
    pub fn position(&self, sort: Sort) -> Position {
        Position { value: if sort == Sort::CreatedAt { self.created_at } else { self.updated_at }, id: self.id }
    }
}

/// Narrows a gift card list.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GiftCardFilter {
    pub gifter_account_id: Option<i64>,
    pub recipient_account_id: Option<i64>,
}

/// What a redemption writes.
#[derive(Debug, Clone, Copy)]
pub struct Redemption<'a> {
    pub card_id: i64,
    pub recipient_account_id: i64,
    /// The invoice holding the card's credit and its line.
    pub invoice: &'a NewInvoice,
    pub lines: &'a [NewAdjustment],
    /// Events of the invoice (subject: its number).
    pub invoice_events: &'a [NewEvent],
    /// Events of the card (subject: its id).
    pub card_events: &'a [NewEvent],
    /// The subscription created with the card, if any.
    pub subscription_uuid: Option<&'a str>,
    pub now: i64,
}

const COLUMNS: &str = "id, site_id, redemption_code, product_code, currency, unit_amount, \
     (SELECT account_code FROM accounts a WHERE a.id = gift_cards.gifter_account_id) AS gifter_account_code, \
     purchase_invoice_id, \
     (SELECT invoice_number FROM invoices i WHERE i.id = gift_cards.purchase_invoice_id) AS purchase_number, \
     (SELECT account_code FROM accounts a WHERE a.id = gift_cards.recipient_account_id) AS recipient_account_code, \
     redemption_invoice_id, \
     (SELECT invoice_number FROM invoices i WHERE i.id = gift_cards.redemption_invoice_id) AS redemption_number, \
     (SELECT -balance FROM invoices i WHERE i.id = gift_cards.redemption_invoice_id) AS left_over, \
     redeemed_subscription_uuid, delivery_method, delivery_email, delivery_first_name, delivery_last_name, \
     delivery_gifter_name, delivery_message, delivery_address1, delivery_address2, delivery_city, delivery_state, \
     delivery_zip, delivery_country, delivery_phone, deliver_at, purchased_at, delivered_at, redeemed_at, \
     canceled_at, created_at, updated_at";

/// The cards the API shows: purchased ones, and those whose purchase payment is still
/// `processing` at the gateway (its outcome not known yet; the settle job then confirms the card
/// or discards it). A card whose purchase was never charged (a crash in between) stays hidden.
const SHOWN: &str = "(purchased_at IS NOT NULL OR EXISTS (SELECT 1 FROM transactions t \
     WHERE t.invoice_id = gift_cards.purchase_invoice_id AND t.action = 'purchase' AND t.status = 'processing'))";

fn from_row(row: &DbRow) -> Result<GiftCard, StoreError> {
    Ok(GiftCard {
        id: row.try_get("id")?,
        site_id: row.try_get("site_id")?,
        redemption_code: row.try_get("redemption_code")?,
        product_code: row.try_get("product_code")?,
        currency: row.try_get("currency")?,
        unit_amount: row.try_get("unit_amount")?,
        gifter_account_code: row.try_get("gifter_account_code")?,
        purchase_invoice_id: row.try_get("purchase_invoice_id")?,
        purchase_invoice_number: row.try_get("purchase_number")?,
        recipient_account_code: row.try_get("recipient_account_code")?,
        redemption_invoice_id: row.try_get("redemption_invoice_id")?,
        redemption_invoice_number: row.try_get("redemption_number")?,
        balance: row.try_get("left_over")?,
        redeemed_subscription_uuid: row.try_get("redeemed_subscription_uuid")?,
        delivery: Delivery {
            method: row.try_get("delivery_method")?,
            email_address: row.try_get("delivery_email")?,
            first_name: row.try_get("delivery_first_name")?,
            last_name: row.try_get("delivery_last_name")?,
            gifter_name: row.try_get("delivery_gifter_name")?,
            personal_message: row.try_get("delivery_message")?,
            address: AddressFields {
                address1: row.try_get("delivery_address1")?,
                address2: row.try_get("delivery_address2")?,
                city: row.try_get("delivery_city")?,
                state: row.try_get("delivery_state")?,
                zip: row.try_get("delivery_zip")?,
                country: row.try_get("delivery_country")?,
                phone: row.try_get("delivery_phone")?,
            },
            deliver_at: row.try_get("deliver_at")?,
        },
        purchased_at: row.try_get("purchased_at")?,
        delivered_at: row.try_get("delivered_at")?,
        redeemed_at: row.try_get("redeemed_at")?,
        canceled_at: row.try_get("canceled_at")?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
    })
}

fn product_from_row(row: &DbRow) -> Result<GiftCardProduct, StoreError> {
    Ok(GiftCardProduct {
        product_code: row.try_get("product_code")?,
        currency: row.try_get("currency")?,
        unit_amount: row.try_get("unit_amount")?,
        created_at: row.try_get("created_at")?,
    })
}

impl Store {
    // ---- products ----

    /// Adds a face value to the site's gift card products; `false` (and no event) when the site
    /// sells it already.
    pub async fn add_gift_card_product(
        &self,
        site_id: i64,
        product: &GiftCardProduct,
        events: &[NewEvent],
    ) -> Result<bool, StoreError> {
        let mut work = self.begin_work().await?;
        let done = crate::db::query(
            "INSERT INTO gift_card_products (site_id, product_code, currency, unit_amount, created_at) \
             VALUES ($1, $2, $3, $4, $5) ON CONFLICT (site_id, product_code, currency, unit_amount) DO NOTHING",
        )
        .bind(site_id)
        .bind(product.product_code.clone())
        .bind(product.currency.clone())
        .bind(product.unit_amount)
        .bind(product.created_at)
        .execute(work.tx.exec())
        .await?;
        if done.rows_affected() == 0 {
            return Ok(false);
        }
        work.append_item_events(site_id, &product.product_code, events).await?;
        work.commit().await?;
        Ok(true)
    }

    /// Removes a face value (cards bought keep theirs); `false` (and no event) when the site
    /// does not sell it.
    pub async fn remove_gift_card_product(
        &self,
        site_id: i64,
        product_code: &str,
        currency: &str,
        unit_amount: i64,
        events: &[NewEvent],
    ) -> Result<bool, StoreError> {
        let mut work = self.begin_work().await?;
        let done = crate::db::query(
            "DELETE FROM gift_card_products WHERE site_id = $1 AND product_code = $2 AND currency = $3 \
             AND unit_amount = $4",
        )
        .bind(site_id)
        .bind(product_code)
        .bind(currency)
        .bind(unit_amount)
        .execute(work.tx.exec())
        .await?;
        if done.rows_affected() == 0 {
            return Ok(false);
        }
        work.append_item_events(site_id, product_code, events).await?;
        work.commit().await?;
        Ok(true)
    }

    /// The site's gift card products, by product code, currency and amount.
    pub async fn gift_card_products(&self, site_id: i64) -> Result<Vec<GiftCardProduct>, StoreError> {
        let rows = crate::db::query(
            "SELECT product_code, currency, unit_amount, created_at FROM gift_card_products WHERE site_id = $1 \
             ORDER BY product_code, currency, unit_amount",
        )
        .bind(site_id)
        .fetch_all(&self.reads)
        .await?;
        rows.iter().map(product_from_row).collect()
    }

    // ---- cards ----

    /// Writes the purchase invoice (with its lines and events, taking no credit) and the card
    /// bought with it, in one database transaction. The card is not purchased yet (see
    /// [`Store::confirm_gift_card`]). A redemption code the site already has is
    /// [`StoreError::Conflict`] and nothing is written.
    pub async fn create_gift_card_purchase(
        &self,
        site_id: i64,
        invoice: &NewInvoice,
        lines: &[NewAdjustment],
        invoice_events: &[NewEvent],
        card: &NewGiftCard,
        now: i64,
    ) -> Result<(Invoice, Vec<Adjustment>, GiftCard), StoreError> {
        let mut work = self.begin_work().await?;
        let draft = InvoiceDraft { invoice, lines, now, events: invoice_events, credit: None };
        let (invoice, lines) = work
            .create_invoices(site_id, &[draft])
            .await?
            .pop()
            .ok_or_else(|| StoreError::Invalid("the purchase invoice was not made".into()))?;
        let d = &card.delivery;
        let a = &d.address;
        let inserted = crate::db::query(
            "INSERT INTO gift_cards (site_id, redemption_code, product_code, currency, unit_amount, \
             gifter_account_id, purchase_invoice_id, delivery_method, delivery_email, delivery_first_name, \
             delivery_last_name, delivery_gifter_name, delivery_message, delivery_address1, delivery_address2, \
             delivery_city, delivery_state, delivery_zip, delivery_country, delivery_phone, deliver_at, created_at, \
             updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, \
             $19, $20, $21, $22, $22) RETURNING id",
        )
        .bind(site_id)
        .bind(card.redemption_code.clone())
        .bind(card.product_code.clone())
        .bind(card.currency.clone())
        .bind(card.unit_amount)
        .bind(card.gifter_account_id)
        .bind(invoice.id)
        .bind(d.method.clone())
        .bind(d.email_address.clone())
        .bind(d.first_name.clone())
        .bind(d.last_name.clone())
        .bind(d.gifter_name.clone())
        .bind(d.personal_message.clone())
        .bind(a.address1.clone())
        .bind(a.address2.clone())
        .bind(a.city.clone())
        .bind(a.state.clone())
        .bind(a.zip.clone())
        .bind(a.country.clone())
        .bind(a.phone.clone())
        .bind(d.deliver_at)
        .bind(now)
        .fetch_one(work.tx.exec())
        .await;
        let id: i64 = match inserted {
            Ok(row) => row.try_get("id")?,
            Err(e) if is_unique_violation(&e) => {
                return Err(StoreError::Conflict("the redemption code is taken".into()));
            }
            Err(e) => return Err(e.into()),
        };
        let card = card_in(&mut work, id).await?;
        work.commit().await?;
        Ok((invoice, lines, card))
    }

    /// Marks a card purchased (its invoice paid) at `at`, delivered too when `delivered` is set;
    /// `None` when it is not waiting for its purchase.
    pub async fn confirm_gift_card(
        &self,
        id: i64,
        at: i64,
        delivered: Option<i64>,
        events: &[NewEvent],
    ) -> Result<Option<GiftCard>, StoreError> {
        let mut work = self.begin_work().await?;
        let done = crate::db::query(
            "UPDATE gift_cards SET purchased_at = $1, delivered_at = $2, updated_at = $1 \
             WHERE id = $3 AND purchased_at IS NULL",
        )
        .bind(at)
        .bind(delivered)
        .bind(id)
        .execute(work.tx.exec())
        .await?;
        if done.rows_affected() == 0 {
            return Ok(None);
        }
        let card = card_in(&mut work, id).await?;
        work.append_item_events(card.site_id, &id.to_string(), events).await?;
        work.commit().await?;
        Ok(Some(card))
    }

    /// Removes a card whose purchase was declined (it was never purchased); `false` when there is
    /// no such card waiting.
    pub async fn discard_gift_card(&self, id: i64) -> Result<bool, StoreError> {
        let done = crate::db::query("DELETE FROM gift_cards WHERE id = $1 AND purchased_at IS NULL")
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Marks a purchased card delivered at `at`; `None` when it was delivered already (or is not
    /// purchased).
    pub async fn deliver_gift_card(
        &self,
        id: i64,
        at: i64,
        events: &[NewEvent],
    ) -> Result<Option<GiftCard>, StoreError> {
        let mut work = self.begin_work().await?;
        let done = crate::db::query(
            "UPDATE gift_cards SET delivered_at = $1, updated_at = $1 \
             WHERE id = $2 AND delivered_at IS NULL AND purchased_at IS NOT NULL",
        )
        .bind(at)
        .bind(id)
        .execute(work.tx.exec())
        .await?;
        if done.rows_affected() == 0 {
            return Ok(None);
        }
        let card = card_in(&mut work, id).await?;
        work.append_item_events(card.site_id, &id.to_string(), events).await?;
        work.commit().await?;
        Ok(Some(card))
    }

    /// Redeems a purchased card not yet redeemed onto an account: the card's recipient and
    /// redemption time, and the invoice holding its credit, in one database transaction.
    /// `None` (nothing written) when the card was redeemed meanwhile.
    pub async fn redeem_gift_card(
        &self,
        site_id: i64,
        redemption: &Redemption<'_>,
    ) -> Result<Option<(GiftCard, Invoice)>, StoreError> {
        let r = redemption;
        let mut work = self.begin_work().await?;
        let claimed = crate::db::query(
            "UPDATE gift_cards SET recipient_account_id = $1, redeemed_at = $2, updated_at = $2, \
             redeemed_subscription_uuid = $3 \
             WHERE id = $4 AND site_id = $5 AND redeemed_at IS NULL AND purchased_at IS NOT NULL",
        )
        .bind(r.recipient_account_id)
        .bind(r.now)
        .bind(r.subscription_uuid.map(str::to_owned))
        .bind(r.card_id)
        .bind(site_id)
        .execute(work.tx.exec())
        .await?;
        if claimed.rows_affected() == 0 {
            return Ok(None);
        }
        let draft =
            InvoiceDraft { invoice: r.invoice, lines: r.lines, now: r.now, events: r.invoice_events, credit: None };
        let (invoice, _) = work
            .create_invoices(site_id, &[draft])
            .await?
            .pop()
            .ok_or_else(|| StoreError::Invalid("the redemption invoice was not made".into()))?;
        crate::db::query("UPDATE gift_cards SET redemption_invoice_id = $1 WHERE id = $2")
            .bind(invoice.id)
            .bind(r.card_id)
            .execute(work.tx.exec())
            .await?;
        let card = card_in(&mut work, r.card_id).await?;
        work.append_item_events(site_id, &r.card_id.to_string(), r.card_events).await?;
        work.commit().await?;
        Ok(Some((card, invoice)))
    }

    /// Takes back the redemption of a card made for a creation that was then refused (a
    /// subscription whose first payment was declined): the credit its invoice gave to invoices
    /// that ended `failed` goes back to them (their credit payments and events removed, their
    /// paid amount and balance restored), the redemption invoice, its line and events are
    /// removed and the card is not redeemed any more; in one database transaction. `false`
    /// (nothing changed) when the card is not redeemed, or when its credit went to an invoice
    /// that did not fail (that use stays, and so does the redemption).
    pub async fn undo_gift_card_redemption(&self, card_id: i64) -> Result<bool, StoreError> {
        let mut work = self.begin_work().await?;
        let sql = format!(
            "SELECT site_id, redemption_invoice_id, \
             (SELECT invoice_number FROM invoices i WHERE i.id = gift_cards.redemption_invoice_id) AS number \
             FROM gift_cards WHERE id = $1 AND redemption_invoice_id IS NOT NULL{}",
            work.backend.for_update()
        );
        let Some(row) = crate::db::query(&sql).bind(card_id).fetch_optional(work.tx.exec()).await? else {
            return Ok(false);
        };
        let site_id: i64 = row.try_get("site_id")?;
        let invoice_id: i64 = row.try_get("redemption_invoice_id")?;
        let number: i64 = row.try_get("number")?;
        let uses = crate::db::query(
            "SELECT p.id, p.uuid, p.amount, p.action, p.applied_to_invoice_id, i.state FROM credit_payments p \
             LEFT JOIN invoices i ON i.id = p.applied_to_invoice_id WHERE p.original_invoice_id = $1",
        )
        .bind(invoice_id)
        .fetch_all(work.tx.exec())
        .await?;
        let mut taken_back = Vec::new();
        for r in &uses {
            let action: String = r.try_get("action")?;
            let state: Option<String> = r.try_get("state")?;
            if action != "payment" || state.as_deref() != Some("failed") {
                return Ok(false);
            }
            let id: i64 = r.try_get("id")?;
            let uuid: String = r.try_get("uuid")?;
            let amount: i64 = r.try_get("amount")?;
            let applied: i64 = r.try_get("applied_to_invoice_id")?;
            taken_back.push((id, uuid, amount, applied));
        }
        for (id, uuid, amount, applied) in &taken_back {
            crate::db::query("UPDATE invoices SET paid = paid - $1, balance = balance + $1 WHERE id = $2")
                .bind(*amount)
                .bind(*applied)
                .execute(work.tx.exec())
                .await?;
            crate::db::query(
                "DELETE FROM domain_events WHERE site_id = $1 AND subject = $2 AND kind = 'credit_payment.created'",
            )
            .bind(site_id)
            .bind(uuid.clone())
            .execute(work.tx.exec())
            .await?;
            crate::db::query("DELETE FROM credit_payments WHERE id = $1").bind(*id).execute(work.tx.exec()).await?;
        }
        crate::db::query(
            "UPDATE gift_cards SET recipient_account_id = NULL, redeemed_at = NULL, redemption_invoice_id = NULL, \
             redeemed_subscription_uuid = NULL, updated_at = COALESCE(delivered_at, purchased_at, created_at) \
             WHERE id = $1",
        )
        .bind(card_id)
        .execute(work.tx.exec())
        .await?;
        crate::db::query(
            "DELETE FROM domain_events WHERE site_id = $1 AND subject = $2 AND kind = 'gift_card.redeemed'",
        )
        .bind(site_id)
        .bind(card_id.to_string())
        .execute(work.tx.exec())
        .await?;
        crate::db::query(
            "DELETE FROM domain_events WHERE site_id = $1 AND subject = $2 \
             AND (kind LIKE 'invoice.%' OR kind LIKE 'credit_invoice.%')",
        )
        .bind(site_id)
        .bind(number.to_string())
        .execute(work.tx.exec())
        .await?;
        crate::db::query("DELETE FROM adjustments WHERE invoice_id = $1")
            .bind(invoice_id)
            .execute(work.tx.exec())
            .await?;
        crate::db::query("DELETE FROM invoices WHERE id = $1").bind(invoice_id).execute(work.tx.exec()).await?;
        work.commit().await?;
        Ok(true)
    }

    /// The site's card with this id: purchased, or waiting for a payment still processing at the
    /// gateway ([`SHOWN`]).
    pub async fn gift_card(&self, site_id: i64, id: i64) -> Result<Option<GiftCard>, StoreError> {
        let sql = format!("SELECT {COLUMNS} FROM gift_cards WHERE site_id = $1 AND id = $2 AND {SHOWN}");
        let row = crate::db::query(&sql).bind(site_id).bind(id).fetch_optional(&self.pool).await?;
        row.as_ref().map(from_row).transpose()
    }

    /// The card waiting for the payment of its purchase invoice `invoice_id` (not purchased yet),
    /// if there is one.
    pub async fn gift_card_awaiting(&self, invoice_id: i64) -> Result<Option<GiftCard>, StoreError> {
        let sql = format!("SELECT {COLUMNS} FROM gift_cards WHERE purchase_invoice_id = $1 AND purchased_at IS NULL");
        let row = crate::db::query(&sql).bind(invoice_id).fetch_optional(&self.pool).await?;
        row.as_ref().map(from_row).transpose()
    }

    /// The site's purchased card with this redemption code (as stored: uppercase).
    pub async fn gift_card_by_code(&self, site_id: i64, code: &str) -> Result<Option<GiftCard>, StoreError> {
        let sql = format!(
            "SELECT {COLUMNS} FROM gift_cards WHERE site_id = $1 AND redemption_code = $2 AND purchased_at IS NOT NULL"
        );
        let row = crate::db::query(&sql).bind(site_id).bind(code).fetch_optional(&self.pool).await?;
        row.as_ref().map(from_row).transpose()
    }

    /// The card whose redemption made the credit invoice `invoice_id`, if one did.
    pub async fn gift_card_redeemed_into(&self, site_id: i64, invoice_id: i64) -> Result<Option<GiftCard>, StoreError> {
        let sql = format!("SELECT {COLUMNS} FROM gift_cards WHERE site_id = $1 AND redemption_invoice_id = $2");
        let row = crate::db::query(&sql).bind(site_id).bind(invoice_id).fetch_optional(&self.reads).await?;
        row.as_ref().map(from_row).transpose()
    }

    /// The card redeemed when the subscription `uuid` was created, if one was.
    pub async fn subscription_gift_card(&self, site_id: i64, uuid: &str) -> Result<Option<GiftCard>, StoreError> {
        let sql = format!("SELECT {COLUMNS} FROM gift_cards WHERE site_id = $1 AND redeemed_subscription_uuid = $2");
        let row = crate::db::query(&sql).bind(site_id).bind(uuid).fetch_optional(&self.reads).await?;
        row.as_ref().map(from_row).transpose()
    }

    /// A page of the site's cards: purchased, or waiting for a payment still processing at the
    /// gateway ([`SHOWN`]).
    pub async fn list_gift_cards(
        &self,
        site_id: i64,
        filter: &GiftCardFilter,
        page: &PageRequest,
    ) -> Result<Page<GiftCard>, StoreError> {
        let mut conditions = Conditions::default();
        conditions.eq("site_id", Arg::Int(site_id));
        conditions.push(SHOWN.to_owned());
        if let Some(id) = filter.gifter_account_id {
            conditions.eq("gifter_account_id", Arg::Int(id));
        }
        if let Some(id) = filter.recipient_account_id {
            conditions.eq("recipient_account_id", Arg::Int(id));
        }
        conditions.time_range(page);
        let count_sql = format!("SELECT COUNT(*) AS n FROM gift_cards{}", conditions.sql());
        let total: i64 = conditions.bind(crate::db::query(&count_sql)).fetch_one(&self.reads).await?.try_get("n")?;
        conditions.after(page);
        let sql = format!("SELECT {COLUMNS} FROM gift_cards{}{}", conditions.sql(), order_and_limit(page));
        let rows = conditions.bind(crate::db::query(&sql)).fetch_all(&self.reads).await?;
        let items = rows.iter().map(from_row).collect::<Result<Vec<_>, _>>()?;
        Ok(into_page(items, page, total, |c| c.position(page.sort)))
    }
}

/// The card with this id, read in `work`.
async fn card_in(work: &mut crate::work::Work, id: i64) -> Result<GiftCard, StoreError> {
    let row = crate::db::query(&format!("SELECT {COLUMNS} FROM gift_cards WHERE id = $1"))
        .bind(id)
        .fetch_one(work.tx.exec())
        .await?;
    from_row(&row)
}
