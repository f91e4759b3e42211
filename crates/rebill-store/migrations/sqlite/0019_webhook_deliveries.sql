-- Webhook deliveries. Every domain event is turned into the push notifications it sends (none
-- for most sites, which have no endpoint) exactly once: `notified` is 0 until the notifications
-- of the event are written, in the same database transaction that sets it to 1 by
-- compare-and-set, so a crash loses none and two processes never write one twice. The events
-- recorded before webhooks existed are not sent.
ALTER TABLE domain_events ADD COLUMN notified BIGINT NOT NULL DEFAULT 0;
UPDATE domain_events SET notified = 1;
CREATE INDEX domain_events_unnotified ON domain_events (id) WHERE notified = 0;

-- One row per notification per endpoint. message_id is the notification's `webhook-id`, the
-- same on every attempt. state: pending (no attempt yet), retrying, delivered, failed.
-- next_attempt_at and claimed_until are service time in milliseconds: a delivery is sent by the
-- process that claimed it until claimed_until; per endpoint only the oldest undelivered one is
-- sent (event order). attempts counts the attempts made.
CREATE TABLE webhook_deliveries (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    site_id BIGINT NOT NULL REFERENCES sites(id),
    endpoint_id BIGINT NOT NULL REFERENCES webhook_endpoints(id),
    event_id BIGINT NOT NULL REFERENCES domain_events(id),
    kind TEXT NOT NULL,
    message_id TEXT NOT NULL UNIQUE,
    body TEXT NOT NULL,
    state TEXT NOT NULL,
    attempts BIGINT NOT NULL DEFAULT 0,
    next_attempt_at BIGINT NOT NULL,
    claimed_until BIGINT,
    created_at BIGINT NOT NULL,
    delivered_at BIGINT
);
CREATE INDEX webhook_deliveries_waiting ON webhook_deliveries (endpoint_id, id) WHERE state IN ('pending', 'retrying');
CREATE INDEX webhook_deliveries_site ON webhook_deliveries (site_id, id);

-- Each attempt of a delivery: when (ms), the status code or the error, how long it took.
CREATE TABLE webhook_attempts (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    delivery_id BIGINT NOT NULL REFERENCES webhook_deliveries(id),
    at BIGINT NOT NULL,
    status_code BIGINT,
    error TEXT,
    duration_ms BIGINT NOT NULL
);
CREATE INDEX webhook_attempts_delivery ON webhook_attempts (delivery_id, id);
