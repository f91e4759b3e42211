-- A payment whose gateway answer was not known is settled later from the gateway's own record,
-- asked with the same parameters: the transaction keeps the gateway reference of the stored
-- payment method it charged (never card data: an opaque reference such as `cus_…/pm_…`).
ALTER TABLE transactions ADD COLUMN payment_reference TEXT;

-- The settle job and the sweep after a crash look for transactions still `processing`.
CREATE INDEX transactions_processing ON transactions (site_id, created_at) WHERE status = 'processing';
