-- Private keys are numbered per site (1, 2, … in creation order), so that administrators name
-- a key by the number `rebill keys list --site NAME` shows, whatever other sites hold.
ALTER TABLE api_keys ADD COLUMN number BIGINT NOT NULL DEFAULT 0;
UPDATE api_keys SET number = (
    SELECT COUNT(*) FROM api_keys AS earlier WHERE earlier.site_id = api_keys.site_id AND earlier.id <= api_keys.id
);
CREATE UNIQUE INDEX api_keys_site_number ON api_keys(site_id, number);
