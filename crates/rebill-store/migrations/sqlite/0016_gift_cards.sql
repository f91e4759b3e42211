-- Gift cards.
--
-- gift_card_products are the face values a site sells, per product code and currency: a gift
-- card can be bought only for one of them (configured with `rebill gift-cards products`).
--
-- gift_cards are the cards bought. gifter_account_id bought it through purchase_invoice_id (a
-- charge invoice with one gift-card line). redemption_code is 16 uppercase characters, unique per
-- site. The delivery_* columns are the delivery request; delivered_at is set at purchase when
-- no deliver_at was asked, else by the `gift_card_delivery` job at deliver_at (site clock).
-- purchased_at is set once the purchase invoice is paid: before it (and after a declined
-- payment, which removes the row) the card does not exist for the API. Redeeming sets recipient_account_id, redeemed_at and redemption_invoice_id, the credit (or,
-- without Credit Memos, legacy) invoice holding the card's credit: its negative balance is what
-- is left of the card. redeemed_subscription_uuid is the subscription a card was redeemed with
-- at its creation. Money is integer cents, times UTC epoch seconds.
CREATE TABLE gift_card_products (
    site_id BIGINT NOT NULL REFERENCES sites(id),
    product_code TEXT NOT NULL,
    currency TEXT NOT NULL,
    unit_amount BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (site_id, product_code, currency, unit_amount)
);

CREATE TABLE gift_cards (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    site_id BIGINT NOT NULL REFERENCES sites(id),
    redemption_code TEXT NOT NULL,
    product_code TEXT NOT NULL,
    currency TEXT NOT NULL,
    unit_amount BIGINT NOT NULL,
    gifter_account_id BIGINT NOT NULL REFERENCES accounts(id),
    purchase_invoice_id BIGINT NOT NULL REFERENCES invoices(id),
    recipient_account_id BIGINT REFERENCES accounts(id),
    redemption_invoice_id BIGINT REFERENCES invoices(id),
    redeemed_subscription_uuid TEXT,
    purchased_at BIGINT,
    delivery_method TEXT NOT NULL,
    delivery_email TEXT,
    delivery_first_name TEXT,
    delivery_last_name TEXT,
    delivery_gifter_name TEXT,
    delivery_message TEXT,
    delivery_address1 TEXT,
    delivery_address2 TEXT,
    delivery_city TEXT,
    delivery_state TEXT,
    delivery_zip TEXT,
    delivery_country TEXT,
    delivery_phone TEXT,
    deliver_at BIGINT,
    delivered_at BIGINT,
    redeemed_at BIGINT,
    canceled_at BIGINT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    UNIQUE (site_id, redemption_code)
);
CREATE INDEX gift_cards_site_created ON gift_cards(site_id, created_at, id);
CREATE INDEX gift_cards_site_updated ON gift_cards(site_id, updated_at, id);
CREATE INDEX gift_cards_gifter ON gift_cards(gifter_account_id);
CREATE INDEX gift_cards_recipient ON gift_cards(recipient_account_id);
CREATE INDEX gift_cards_redemption_invoice ON gift_cards(redemption_invoice_id);
CREATE INDEX gift_cards_subscription ON gift_cards(redeemed_subscription_uuid);
