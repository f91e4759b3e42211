CREATE TABLE sites (
    id BIGSERIAL PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    mode TEXT NOT NULL,
    plan TEXT NOT NULL,
    credit_memos BIGINT NOT NULL,
    good_standing BIGINT NOT NULL,
    contact TEXT,
    public_key TEXT NOT NULL UNIQUE,
    created_at BIGINT NOT NULL
);

CREATE TABLE api_keys (
    id BIGSERIAL PRIMARY KEY,
    site_id BIGINT NOT NULL REFERENCES sites(id),
    key_hash TEXT NOT NULL UNIQUE,
    key_hint TEXT NOT NULL,
    read_only BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    expires_at BIGINT
);
CREATE INDEX api_keys_site ON api_keys(site_id);

CREATE TABLE alerts (
    id BIGSERIAL PRIMARY KEY,
    site_id BIGINT NOT NULL REFERENCES sites(id),
    kind TEXT NOT NULL,
    recipient TEXT,
    subject TEXT NOT NULL,
    body TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    sent_at BIGINT
);
