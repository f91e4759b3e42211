-- What a purchase attempt keeps beyond its transaction, for the settle job that finishes it when
-- the gateway's answer was not known (`Store::begin_attempt`, `Store::attempt_of`):
-- `begun_service_at`: the service's time when the attempt was begun (a sandbox site's clock may
-- run ahead of it, but a gateway keeps an idempotency key for a span of real time); NULL for
-- transactions recorded otherwise or before it was kept.
-- `saves_payment_method`: 1 when the attempt charges a payment method the request named, which
-- becomes the account's billing info once the charge is approved (or declined
-- `declined_saveable`), whenever that answer comes.
ALTER TABLE transactions ADD COLUMN begun_service_at BIGINT;
ALTER TABLE transactions ADD COLUMN saves_payment_method BIGINT NOT NULL DEFAULT 0;
