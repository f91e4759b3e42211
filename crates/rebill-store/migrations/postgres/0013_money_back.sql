-- Money back: credit invoices, refunds and credit payments.
--
-- invoices.kind is `charge` (money owed by the account), `credit` (money owed to the account,
-- on sites with Credit Memos) or `legacy` (a refund invoice of a site without Credit Memos). A
-- credit or legacy invoice has a negative total; its negative balance is the credit still
-- available, which later charge invoices of the account in the same currency use up (oldest
-- first) through credit payments. original_invoice_id links a refund (or termination) credit to
-- the charge invoice it reverses.
--
-- adjustments.original_adjustment_id links a credit line to the charge line it reverses, and
-- reversed_quantity is how many units of that charge it takes back (0 for a refund of an
-- amount, which reverses money, not units).
--
-- transactions.original_transaction_id links a refund to the purchase it gives money back from.
--
-- credit_payments record every movement of credit: `payment` (a credit invoice's balance paying a
-- charge invoice), `refund` (credit paid back to a card), `reduction` (a voided balance) and
-- `write_off`. original_invoice_id is the credit invoice the credit came from,
-- applied_to_invoice_id the invoice it went to. Money is integer cents, times UTC epoch seconds.
ALTER TABLE invoices ADD COLUMN kind TEXT NOT NULL DEFAULT 'charge';
ALTER TABLE invoices ADD COLUMN original_invoice_id BIGINT REFERENCES invoices(id);
CREATE INDEX invoices_original ON invoices(original_invoice_id);
CREATE INDEX invoices_credit_available ON invoices(account_id, currency, created_at, id) WHERE balance < 0;

ALTER TABLE adjustments ADD COLUMN original_adjustment_id BIGINT REFERENCES adjustments(id);
ALTER TABLE adjustments ADD COLUMN reversed_quantity BIGINT NOT NULL DEFAULT 0;
CREATE INDEX adjustments_original ON adjustments(original_adjustment_id);

ALTER TABLE transactions ADD COLUMN original_transaction_id BIGINT REFERENCES transactions(id);
CREATE INDEX transactions_original ON transactions(original_transaction_id);

CREATE TABLE credit_payments (
    id BIGSERIAL PRIMARY KEY,
    uuid TEXT NOT NULL UNIQUE,
    site_id BIGINT NOT NULL REFERENCES sites(id),
    account_id BIGINT NOT NULL REFERENCES accounts(id),
    action TEXT NOT NULL,
    currency TEXT NOT NULL,
    amount BIGINT NOT NULL,
    original_invoice_id BIGINT NOT NULL REFERENCES invoices(id),
    applied_to_invoice_id BIGINT REFERENCES invoices(id),
    original_credit_payment_id BIGINT REFERENCES credit_payments(id),
    refund_transaction_id BIGINT REFERENCES transactions(id),
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    voided_at BIGINT
);
CREATE INDEX credit_payments_site_created ON credit_payments(site_id, created_at, id);
CREATE INDEX credit_payments_site_updated ON credit_payments(site_id, updated_at, id);
CREATE INDEX credit_payments_account ON credit_payments(account_id, created_at, id);
CREATE INDEX credit_payments_applied ON credit_payments(applied_to_invoice_id);
CREATE INDEX credit_payments_original ON credit_payments(original_invoice_id);
