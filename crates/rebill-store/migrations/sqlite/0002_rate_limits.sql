-- Requests per site and minute (UTC epoch minute), summed over the last five minutes.
CREATE TABLE rate_buckets (
    site_id BIGINT NOT NULL REFERENCES sites(id),
    minute BIGINT NOT NULL,
    count BIGINT NOT NULL,
    PRIMARY KEY (site_id, minute)
);

-- When the site's technical contact was last alerted about the rate limit.
ALTER TABLE sites ADD COLUMN rate_alert_at BIGINT;

-- An operator-set requests-per-minute limit replacing the mode's default (NULL: the default).
ALTER TABLE sites ADD COLUMN rate_limit_per_minute BIGINT;
