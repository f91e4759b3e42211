-- Subscriptions of a site's accounts.
--
-- The billing engine's value (rebill_billing::lifecycle::Subscription) is kept whole as a JSON
-- document in `value`, the creation request in `creation`, and the invoice notes and other
-- settings the engine does not know in `details`; the columns beside them copy what lists
-- filter on (state, trial, past due, account) and are rewritten with the value.
--
-- A change claims the row first: `lock_token` and `locked_until` (service clock) are set
-- by a conditional UPDATE that succeeds only when no other unexpired claim holds the row, so a
-- second change while one is in progress (in any process on the database) is refused. Every
-- save checks the claim and bumps `version`.
--
-- Times are UTC epoch seconds (site clock, except locked_until); booleans 0/1. Lists page by
-- (created_at, id) or (updated_at, id).
CREATE TABLE subscriptions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    site_id BIGINT NOT NULL REFERENCES sites(id),
    account_id BIGINT NOT NULL REFERENCES accounts(id),
    plan_id BIGINT NOT NULL REFERENCES plans(id),
    uuid TEXT NOT NULL UNIQUE,
    state TEXT NOT NULL,
    past_due BIGINT NOT NULL DEFAULT 0,
    trial_started_at BIGINT,
    trial_ends_at BIGINT,
    value TEXT NOT NULL,
    creation TEXT NOT NULL,
    details TEXT NOT NULL,
    last_invoice TEXT,
    version BIGINT NOT NULL DEFAULT 0,
    lock_token TEXT,
    locked_until BIGINT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE INDEX subscriptions_site_created ON subscriptions(site_id, created_at, id);
CREATE INDEX subscriptions_site_updated ON subscriptions(site_id, updated_at, id);
CREATE INDEX subscriptions_account_created ON subscriptions(account_id, created_at, id);
CREATE INDEX subscriptions_site_state ON subscriptions(site_id, state);

-- The append-only history of every subscription: one row per accepted action (JSON of
-- rebill_billing::lifecycle::Action) at its site time, in order of id.
CREATE TABLE subscription_history (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    subscription_id BIGINT NOT NULL REFERENCES subscriptions(id),
    at BIGINT NOT NULL,
    action TEXT NOT NULL
);
CREATE INDEX subscription_history_subscription ON subscription_history(subscription_id, id);

-- Charges and credits a transition produced (a JSON array of line items), written in the same
-- transaction as the subscription, then invoiced (one invoice per row) and marked with the
-- invoice. A row still without an invoice is invoiced by the next change or job of the
-- subscription, so a crash between the two never loses nor repeats a charge.
CREATE TABLE subscription_charges (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    subscription_id BIGINT NOT NULL REFERENCES subscriptions(id),
    origin TEXT NOT NULL,
    at BIGINT NOT NULL,
    lines TEXT NOT NULL,
    invoice_ref TEXT,
    billed_at BIGINT
);
CREATE INDEX subscription_charges_subscription ON subscription_charges(subscription_id, id);
