-- Customer accounts of a site. account_code is the merchant's identifier, unique per site.
-- Times are UTC epoch seconds; booleans 0/1; the address is flattened into address_* columns.
-- The only unique key is (site_id, account_code): a violation on insert means a taken code.
-- Lists page by (created_at, id) or (updated_at, id).
CREATE TABLE accounts (
    id BIGSERIAL PRIMARY KEY,
    site_id BIGINT NOT NULL REFERENCES sites(id),
    account_code TEXT NOT NULL,
    state TEXT NOT NULL,
    username TEXT,
    email TEXT,
    cc_emails TEXT,
    first_name TEXT,
    last_name TEXT,
    company_name TEXT,
    vat_number TEXT,
    tax_exempt BIGINT,
    entity_use_code TEXT,
    address1 TEXT,
    address2 TEXT,
    address_city TEXT,
    address_state TEXT,
    address_zip TEXT,
    address_country TEXT,
    address_phone TEXT,
    accept_language TEXT,
    preferred_locale TEXT,
    hosted_login_token TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    closed_at BIGINT,
    UNIQUE (site_id, account_code)
);
CREATE INDEX accounts_site_created ON accounts(site_id, created_at, id);
CREATE INDEX accounts_site_updated ON accounts(site_id, updated_at, id);
