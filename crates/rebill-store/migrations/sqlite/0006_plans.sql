-- Plans of a site and the add-ons of each plan.
--
-- plan_code is unique per site and add_on_code unique per plan, deleted records included: a
-- delete only sets deleted_at (subscriptions keep referring to the record by id), and the code
-- of a deleted record is not used again. A unique violation on insert means a taken code.
--
-- Amounts are integer cents per currency in child tables, one row per currency:
-- plan_amounts.kind is 'unit' (price per billing interval) or 'setup_fee'. An update that sets
-- a plan's or add-on's amounts replaces that kind's rows whole.
--
-- Times are UTC epoch seconds; booleans 0/1; enums stored by schema name. Lists page by
-- (created_at, id) or (updated_at, id).
CREATE TABLE plans (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    site_id BIGINT NOT NULL REFERENCES sites(id),
    plan_code TEXT NOT NULL,
    name TEXT NOT NULL,
    description TEXT,
    success_url TEXT,
    cancel_url TEXT,
    display_donation_amounts BIGINT NOT NULL,
    display_quantity BIGINT NOT NULL,
    display_phone_number BIGINT NOT NULL,
    bypass_hosted_confirmation BIGINT NOT NULL,
    unit_name TEXT,
    payment_page_tos_link TEXT,
    payment_page_css TEXT,
    plan_interval_length BIGINT NOT NULL,
    plan_interval_unit TEXT NOT NULL,
    trial_interval_length BIGINT NOT NULL,
    trial_interval_unit TEXT NOT NULL,
    total_billing_cycles BIGINT,
    accounting_code TEXT,
    setup_fee_accounting_code TEXT,
    revenue_schedule_type TEXT NOT NULL,
    setup_fee_revenue_schedule_type TEXT NOT NULL,
    trial_requires_billing_info BIGINT NOT NULL,
    tax_exempt BIGINT NOT NULL,
    tax_code TEXT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    deleted_at BIGINT,
    UNIQUE (site_id, plan_code)
);
CREATE INDEX plans_site_created ON plans(site_id, created_at, id);
CREATE INDEX plans_site_updated ON plans(site_id, updated_at, id);

CREATE TABLE plan_amounts (
    plan_id BIGINT NOT NULL REFERENCES plans(id),
    kind TEXT NOT NULL,
    currency TEXT NOT NULL,
    amount_in_cents BIGINT NOT NULL CHECK (amount_in_cents >= 0),
    PRIMARY KEY (plan_id, kind, currency)
);

CREATE TABLE add_ons (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    plan_id BIGINT NOT NULL REFERENCES plans(id),
    add_on_code TEXT NOT NULL,
    name TEXT NOT NULL,
    default_quantity BIGINT NOT NULL,
    display_quantity_on_hosted_page BIGINT NOT NULL,
    display_quantity BIGINT NOT NULL,
    add_on_type TEXT NOT NULL,
    measured_unit_id BIGINT,
    usage_type TEXT,
    usage_percentage BIGINT, -- ten-thousandths of a percent (2.5 % = 25000), exact
    optional BIGINT NOT NULL,
    accounting_code TEXT,
    revenue_schedule_type TEXT NOT NULL,
    tax_code TEXT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    deleted_at BIGINT,
    UNIQUE (plan_id, add_on_code)
);
CREATE INDEX add_ons_plan_created ON add_ons(plan_id, created_at, id);
CREATE INDEX add_ons_plan_updated ON add_ons(plan_id, updated_at, id);

CREATE TABLE add_on_amounts (
    add_on_id BIGINT NOT NULL REFERENCES add_ons(id),
    currency TEXT NOT NULL,
    amount_in_cents BIGINT NOT NULL CHECK (amount_in_cents >= 0),
    PRIMARY KEY (add_on_id, currency)
);
