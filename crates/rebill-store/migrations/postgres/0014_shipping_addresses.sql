-- Shipping addresses of accounts, the address of each invoiced line and CVV checks.
--
-- shipping_addresses are an account's addresses (at most 20 live ones, a rule of the service).
-- A deleted address keeps its row (deleted_at set) so the line items that were shipped to it
-- still show it; lists and reads by id leave it out.
--
-- adjustments.shipping_address_id is the address a line was shipped to: a subscription's
-- address when its charge was invoiced, or the one given with a one-off adjustment.
--
-- cvv_checks count the CVV checks of a stored card (card_key names the card: its billing info
-- and the gateway's reference), for the limit of checks per card in a rolling day; the value
-- checked is never stored, nor whether it matched. checked_at is the site clock, UTC epoch seconds.
CREATE TABLE shipping_addresses (
    id BIGSERIAL PRIMARY KEY,
    site_id BIGINT NOT NULL REFERENCES sites(id),
    account_id BIGINT NOT NULL REFERENCES accounts(id),
    nickname TEXT,
    first_name TEXT,
    last_name TEXT,
    company TEXT,
    email TEXT,
    phone TEXT,
    vat_number TEXT,
    address1 TEXT,
    address2 TEXT,
    city TEXT,
    state TEXT,
    zip TEXT,
    country TEXT,
    geo_code TEXT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    deleted_at BIGINT
);
CREATE INDEX shipping_addresses_account_created ON shipping_addresses(account_id, created_at, id);
CREATE INDEX shipping_addresses_account_updated ON shipping_addresses(account_id, updated_at, id);

ALTER TABLE adjustments ADD COLUMN shipping_address_id BIGINT REFERENCES shipping_addresses(id);

CREATE TABLE cvv_checks (
    id BIGSERIAL PRIMARY KEY,
    site_id BIGINT NOT NULL REFERENCES sites(id),
    account_id BIGINT NOT NULL REFERENCES accounts(id),
    card_key TEXT NOT NULL,
    checked_at BIGINT NOT NULL
);
CREATE INDEX cvv_checks_card ON cvv_checks(account_id, card_key, checked_at);
