-- Domain events: one row per business change (account created, billing info updated,
-- subscription created/changed/renewed/paused/resumed/canceled/expired, invoice created/paid/
-- failed/past due, transaction approved/declined, …), appended by the same database transaction
-- that makes the change, so an event exists exactly when its change does.
--
-- `id` is the global order of the changes. `kind` names the change (`invoice.paid`); `subject`
-- is what changed, named as the API names it: an account code (`account.*`, `billing_info.*`),
-- a subscription uuid (`subscription.*`), an invoice number (`invoice.*`) or a transaction uuid
-- (`transaction.*`). `at` is the site-clock time of the change, `recorded_at` the service-clock
-- time it was recorded. `payload` is a JSON document with its layout version (the store's
-- `document.rs`). Times are UTC epoch seconds.
--
-- Reactions inside rebill (the subscriptions' reaction to a paid or failed invoice) are marked
-- here: `awaiting` is 1 while a reaction is still to run, and becomes 0 with `handled_at` (service
-- clock) once it ran; a reaction lost to a crash is found again through the partial index.
CREATE TABLE domain_events (
    id BIGSERIAL PRIMARY KEY,
    site_id BIGINT NOT NULL REFERENCES sites(id),
    kind TEXT NOT NULL,
    subject TEXT NOT NULL,
    at BIGINT NOT NULL,
    recorded_at BIGINT NOT NULL,
    payload TEXT NOT NULL,
    awaiting BIGINT NOT NULL DEFAULT 0,
    handled_at BIGINT
);
CREATE INDEX domain_events_subject ON domain_events (site_id, subject, id);
CREATE INDEX domain_events_awaiting ON domain_events (id) WHERE awaiting = 1;

-- The subscription history (one row per accepted action, written and never read) is replaced by
-- the subscription events. Its rows are kept as events of their own kind,
-- `subscription.history`, in their order: subject the subscription's uuid, payload the action
-- document as it was stored, both times the action's site time (the service time was not
-- recorded). No reaction awaits them.
INSERT INTO domain_events (site_id, kind, subject, at, recorded_at, payload)
SELECT s.site_id, 'subscription.history', s.uuid, h.at, h.at, h.action
FROM subscription_history h JOIN subscriptions s ON s.id = h.subscription_id
ORDER BY h.id;
DROP INDEX subscription_history_subscription;
DROP TABLE subscription_history;
