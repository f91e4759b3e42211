-- The real payment gateway of a site (`rebill gateway set`). A site without a row uses the
-- sandbox gateway in sandbox mode and has no gateway in production. kind names the gateway
-- (`stripe`); secret_sealed is its secret key sealed with the vault key (never in clear);
-- key_last4 is what `rebill gateway show` prints of it; api_base the gateway's API root;
-- version grows with every change, so a process knows when its built gateway is stale.
CREATE TABLE site_gateways (
    site_id BIGINT PRIMARY KEY REFERENCES sites(id),
    kind TEXT NOT NULL,
    secret_sealed TEXT NOT NULL,
    key_last4 TEXT NOT NULL,
    api_base TEXT NOT NULL,
    version BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
