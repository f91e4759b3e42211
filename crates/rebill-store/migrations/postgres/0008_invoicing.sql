-- Invoices, their line items (adjustments) and transactions, and the gateway reference of
-- billing info.
--
-- billing_infos.gateway_reference is the gateway's opaque reference of the stored payment method
-- (renewals and retries charge it); it never contains a card or account number.
--
-- invoice_counters holds the last invoice number of each site: a new invoice takes the next one
-- with one `INSERT … ON CONFLICT DO UPDATE … RETURNING` inside the transaction that inserts the
-- invoice, so numbers are sequential per site without gaps or duplicates under concurrency.
--
-- Invoice states, adjustment origins and transaction actions and statuses are stored by their
-- schema names (invoice: pending, paid, failed, past_due, …; transaction status: processing while
-- the gateway is called, then success, declined or void). Money is integer cents, times UTC epoch
-- seconds, booleans 0/1. An adjustment's invoice_id is NULL while it is pending. The item_*,
-- period_* and proration_* columns of an adjustment keep the billing engine's origin key
-- (subscription, item, period) so that billed items can be fed back to the invoice diff.
-- A transaction's idempotency_key is unique: a charge repeated after a crash finds its row again.
ALTER TABLE billing_infos ADD COLUMN gateway_reference TEXT;

CREATE TABLE invoice_counters (
    site_id BIGINT PRIMARY KEY REFERENCES sites(id),
    last_number BIGINT NOT NULL
);

CREATE TABLE invoices (
    id BIGSERIAL PRIMARY KEY,
    uuid TEXT NOT NULL UNIQUE,
    site_id BIGINT NOT NULL REFERENCES sites(id),
    account_id BIGINT NOT NULL REFERENCES accounts(id),
    invoice_number BIGINT NOT NULL,
    state TEXT NOT NULL,
    origin TEXT NOT NULL,
    currency TEXT NOT NULL,
    subtotal_before_discount BIGINT NOT NULL,
    discount BIGINT NOT NULL,
    subtotal_after_discount BIGINT NOT NULL,
    tax BIGINT NOT NULL,
    total BIGINT NOT NULL,
    paid BIGINT NOT NULL,
    balance BIGINT NOT NULL,
    net_terms BIGINT NOT NULL,
    due_on BIGINT,
    collection_method TEXT NOT NULL,
    po_number TEXT,
    customer_notes TEXT,
    terms_and_conditions TEXT,
    vat_reverse_charge_notes TEXT,
    collection_attempts BIGINT NOT NULL DEFAULT 0,
    attempt_next_collection_at BIGINT,
    closed_at BIGINT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    UNIQUE (site_id, invoice_number)
);
CREATE INDEX invoices_site_created ON invoices(site_id, created_at, id);
CREATE INDEX invoices_site_updated ON invoices(site_id, updated_at, id);
CREATE INDEX invoices_account ON invoices(account_id, created_at, id);

CREATE TABLE adjustments (
    id BIGSERIAL PRIMARY KEY,
    uuid TEXT NOT NULL UNIQUE,
    site_id BIGINT NOT NULL REFERENCES sites(id),
    account_id BIGINT NOT NULL REFERENCES accounts(id),
    invoice_id BIGINT REFERENCES invoices(id),
    subscription_uuid TEXT,
    state TEXT NOT NULL,
    kind TEXT NOT NULL,
    origin TEXT NOT NULL,
    description TEXT,
    accounting_code TEXT,
    product_code TEXT,
    currency TEXT NOT NULL,
    unit_amount BIGINT NOT NULL,
    quantity BIGINT NOT NULL,
    discount BIGINT NOT NULL,
    tax BIGINT NOT NULL,
    total BIGINT NOT NULL,
    tax_exempt BIGINT,
    tax_code TEXT,
    credit_reason_code TEXT,
    start_date BIGINT,
    end_date BIGINT,
    item_kind TEXT,
    item_code TEXT,
    period_start BIGINT,
    period_end BIGINT,
    line_period_end BIGINT,
    proration_part BIGINT,
    proration_whole BIGINT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE INDEX adjustments_account ON adjustments(account_id, created_at, id);
CREATE INDEX adjustments_invoice ON adjustments(invoice_id);
CREATE INDEX adjustments_subscription ON adjustments(subscription_uuid);

CREATE TABLE transactions (
    id BIGSERIAL PRIMARY KEY,
    uuid TEXT NOT NULL UNIQUE,
    idempotency_key TEXT NOT NULL UNIQUE,
    site_id BIGINT NOT NULL REFERENCES sites(id),
    account_id BIGINT NOT NULL REFERENCES accounts(id),
    invoice_id BIGINT REFERENCES invoices(id),
    subscription_uuid TEXT,
    action TEXT NOT NULL,
    amount BIGINT NOT NULL,
    tax BIGINT NOT NULL,
    currency TEXT NOT NULL,
    status TEXT NOT NULL,
    kind TEXT NOT NULL,
    payment_method TEXT NOT NULL,
    source TEXT NOT NULL,
    origin TEXT NOT NULL,
    recurring BIGINT NOT NULL,
    test BIGINT NOT NULL,
    gateway_type TEXT NOT NULL,
    description TEXT,
    reference TEXT,
    approval_code TEXT,
    message TEXT,
    fraud_review BIGINT NOT NULL DEFAULT 0,
    error_code TEXT,
    error_category TEXT,
    merchant_message TEXT,
    customer_message TEXT,
    gateway_error_code TEXT,
    cvv_code TEXT,
    cvv_message TEXT,
    avs_code TEXT,
    avs_message TEXT,
    account_code TEXT NOT NULL,
    account_first_name TEXT,
    account_last_name TEXT,
    account_company TEXT,
    account_email TEXT,
    first_name TEXT,
    last_name TEXT,
    company TEXT,
    address1 TEXT,
    address2 TEXT,
    address_city TEXT,
    address_state TEXT,
    address_zip TEXT,
    address_country TEXT,
    address_phone TEXT,
    vat_number TEXT,
    ip_address TEXT,
    ip_address_country TEXT,
    geo_code TEXT,
    card_type TEXT,
    first_six TEXT,
    last_four TEXT,
    exp_month BIGINT,
    exp_year BIGINT,
    name_on_account TEXT,
    account_type TEXT,
    routing_number TEXT,
    collected_at BIGINT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE INDEX transactions_site_created ON transactions(site_id, created_at, id);
CREATE INDEX transactions_account ON transactions(account_id, created_at, id);
CREATE INDEX transactions_invoice ON transactions(invoice_id);
