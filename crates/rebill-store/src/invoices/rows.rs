//! How invoices, their line items (adjustments) and transactions are read from and written to
//! a row: the column lists, the binds of an insert and the row readers. Only the store's own
//! modules use them.

use crate::billing_info::PaymentKind;
use crate::billing_info::{FIELD_COLUMNS, bind_fields, fields_from_row};
use crate::db::{DbQuery, DbRow};
use crate::list::{Arg, Conditions};
use crate::work::placeholders;
use crate::{StoreError, flag, get_flag};
use rebill_billing::states::{InvoiceState, TransactionStatus};

use super::{
    AccountSnapshot, Adjustment, AdjustmentKind, AdjustmentState, Check, CollectionMethod, EngineKey, Invoice,
    InvoiceAmounts, InvoiceKind, InvoiceTerms, NewAdjustment, NewInvoice, NewTransaction, Transaction,
    TransactionFailure, TransactionResult, new_uuid,
};

pub(crate) fn parse<T>(row: &DbRow, column: &str, f: impl Fn(&str) -> Option<T>) -> Result<T, StoreError> {
    let text: String = row.try_get(column)?;
    f(&text).ok_or_else(|| StoreError::Invalid(format!("stored {column} `{text}`")))
}

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
    E: Into<crate::db::Exec<'c>>,
{
    let sql = format!(
        "INSERT INTO adjustments ({ADJUSTMENT_INSERT}) VALUES ({}) RETURNING id",
        placeholders(ADJUSTMENT_VALUES, 1)
    );
    let row =
        bind_adjustment(crate::db::query(&sql), new_uuid(), site_id, invoice_id, line, now).fetch_one(executor).await?;
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
pub(crate) const TRANSACTION_INSERT: [&str; 28] = [
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
    "payment_reference",
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
        .bind(new.payment_reference.clone())
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
     original_transaction_id, payment_reference, \
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
            payment_reference: row.try_get("payment_reference")?,
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
