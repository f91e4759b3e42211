-- Coupons, their generated unique codes and their redemptions.
--
-- A coupon row is a single-code coupon, a bulk coupon, or one unique code of a bulk coupon
-- (coupon_type `unique_code`, bulk_coupon_id naming the bulk coupon, whose terms it follows).
-- A code may be used again once its earlier coupon is expired or maxed out; the most recent
-- coupon with a code is the one the code names. discount_amounts lists the amounts of a fixed
-- discount (`EUR:400,USD:500`), plan_codes the plans it is limited to (`gold,silver`). redemptions_count counts every redemption ever made
-- (removed ones too: they still count towards max_redemptions); expired_at is set by DELETE.
--
-- A redemption ties a coupon to an account, and to one subscription for coupons redeemed on
-- subscriptions. state is `active` or `inactive` (used up, lapsed, replaced or removed);
-- removed_at marks a removal (removed ones are not listed), expires_at the end of a temporal
-- coupon's window. redemption_invoices records the discount each redemption gave each invoice.
-- Money is integer cents, times UTC epoch seconds.
CREATE TABLE coupons (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    site_id BIGINT NOT NULL REFERENCES sites(id),
    coupon_code TEXT NOT NULL,
    bulk_coupon_id BIGINT REFERENCES coupons(id),
    name TEXT NOT NULL,
    description TEXT,
    invoice_description TEXT,
    discount_type TEXT NOT NULL,
    discount_percent BIGINT,
    discount_amounts TEXT NOT NULL,
    free_trial_amount BIGINT,
    free_trial_unit TEXT,
    duration TEXT NOT NULL,
    temporal_unit TEXT,
    temporal_amount BIGINT,
    applies_to_all_plans BIGINT NOT NULL,
    plan_codes TEXT NOT NULL,
    applies_to_non_plan_charges BIGINT NOT NULL,
    redemption_resource TEXT NOT NULL,
    max_redemptions BIGINT,
    max_redemptions_per_account BIGINT,
    redeem_by_date BIGINT,
    coupon_type TEXT NOT NULL,
    unique_code_template TEXT,
    redemptions_count BIGINT NOT NULL DEFAULT 0,
    unique_codes_count BIGINT NOT NULL DEFAULT 0,
    redeemed_at BIGINT,
    expired_at BIGINT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE INDEX coupons_code ON coupons(site_id, coupon_code, id);
CREATE INDEX coupons_bulk ON coupons(bulk_coupon_id, created_at, id);
CREATE INDEX coupons_list ON coupons(site_id, created_at, id);

CREATE TABLE redemptions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    uuid TEXT NOT NULL UNIQUE,
    site_id BIGINT NOT NULL REFERENCES sites(id),
    coupon_id BIGINT NOT NULL REFERENCES coupons(id),
    account_id BIGINT NOT NULL REFERENCES accounts(id),
    subscription_uuid TEXT,
    currency TEXT NOT NULL,
    state TEXT NOT NULL,
    total_discounted BIGINT NOT NULL DEFAULT 0,
    expires_at BIGINT,
    removed_at BIGINT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE INDEX redemptions_account ON redemptions(account_id, created_at, id);
CREATE INDEX redemptions_coupon ON redemptions(coupon_id, account_id);
CREATE INDEX redemptions_subscription ON redemptions(subscription_uuid);

CREATE TABLE redemption_invoices (
    redemption_id BIGINT NOT NULL REFERENCES redemptions(id),
    invoice_id BIGINT NOT NULL REFERENCES invoices(id),
    discount BIGINT NOT NULL,
    PRIMARY KEY (redemption_id, invoice_id)
);
CREATE INDEX redemption_invoices_invoice ON redemption_invoices(invoice_id);
