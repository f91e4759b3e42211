-- Delivery bookkeeping of the alert outbox (the mailer in crates/rebill-mail).
-- attempts: deliveries started; last_error: why the last one failed; next_attempt_at: the alert
-- is not claimed before this time (retry backoff). claim_token and claimed_until: the mailer
-- delivering the alert and until when it may (a lease, so that the alerts of a mailer that died
-- come back). announced_at: when the alert was logged as queued.
ALTER TABLE alerts ADD COLUMN attempts BIGINT NOT NULL DEFAULT 0;
ALTER TABLE alerts ADD COLUMN last_error TEXT;
ALTER TABLE alerts ADD COLUMN next_attempt_at BIGINT NOT NULL DEFAULT 0;
ALTER TABLE alerts ADD COLUMN claim_token TEXT;
ALTER TABLE alerts ADD COLUMN claimed_until BIGINT;
ALTER TABLE alerts ADD COLUMN announced_at BIGINT;
CREATE INDEX alerts_unsent ON alerts(next_attempt_at) WHERE sent_at IS NULL;
CREATE INDEX alerts_unannounced ON alerts(id) WHERE announced_at IS NULL;
