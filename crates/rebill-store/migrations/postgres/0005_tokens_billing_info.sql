-- Tokens of the client-side library and the billing info of accounts.
--
-- A token row is keyed by the SHA-256 of the token id (the id itself is not stored). Its card
-- number and CVV, or bank account number, exist only inside `secret`: AES-256-GCM ciphertext
-- made with the service's vault key and bound to the token id. Every other column is the
-- non-secret part of what the customer entered. A token lives 20 minutes (expires_at); using it
-- deletes the row, and expired rows are deleted by a periodic purge.
--
-- Billing info holds no card number, CVV or bank account number at all: brand (card_type, the
-- token library's brand code), first six and last four digits, expiry, names and address; for
-- bank accounts the name, type, routing number and last four digits. One per account.
--
-- Times are UTC epoch seconds; kind is credit_card or bank_account.
CREATE TABLE tokens (
    id_hash TEXT PRIMARY KEY,
    site_id BIGINT NOT NULL REFERENCES sites(id),
    kind TEXT NOT NULL,
    secret TEXT NOT NULL,
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
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
);
CREATE INDEX tokens_expires ON tokens(expires_at);

CREATE TABLE billing_infos (
    id BIGSERIAL PRIMARY KEY,
    account_id BIGINT NOT NULL UNIQUE REFERENCES accounts(id),
    site_id BIGINT NOT NULL REFERENCES sites(id),
    kind TEXT NOT NULL,
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
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
