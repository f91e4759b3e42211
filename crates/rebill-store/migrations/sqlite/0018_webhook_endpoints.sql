-- Webhook endpoints (`rebill webhooks add`): where a site's push notifications go. At most ten
-- live endpoints per site (checked by the write that adds one). url is an http or https URL;
-- http_user and http_password_sealed the optional HTTP Basic credentials (the password sealed
-- with the vault key); kinds the notification kinds it takes, comma-separated, or NULL for
-- every kind; secret_sealed its Standard Webhooks signing secret (`whsec_…`) sealed with the
-- vault key. A removed endpoint keeps its row (removed_at set) so that what was sent to it stays
-- readable. Times are UTC epoch seconds (service clock).
CREATE TABLE webhook_endpoints (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    site_id BIGINT NOT NULL REFERENCES sites(id),
    url TEXT NOT NULL,
    http_user TEXT,
    http_password_sealed TEXT,
    kinds TEXT,
    secret_sealed TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    removed_at BIGINT
);
CREATE INDEX webhook_endpoints_site ON webhook_endpoints (site_id, id);
