-- Due work (renewals, trial ends, pause starts and ends, expirations, dunning retries): rows, not
-- timers, so that any number of service processes can claim them.
CREATE TABLE jobs (
    id BIGSERIAL PRIMARY KEY,
    site_id BIGINT NOT NULL REFERENCES sites(id),
    kind TEXT NOT NULL,
    subject TEXT NOT NULL,
    due_at BIGINT NOT NULL,
    attempts BIGINT NOT NULL DEFAULT 0,
    last_error TEXT,
    claim_token TEXT,
    claimed_until BIGINT,
    done_at BIGINT,
    UNIQUE (kind, subject, due_at)
);
CREATE INDEX jobs_due ON jobs (site_id, due_at) WHERE done_at IS NULL;

-- A sandbox site's clock runs this many seconds ahead of the service's clock.
ALTER TABLE sites ADD COLUMN clock_offset BIGINT NOT NULL DEFAULT 0;
