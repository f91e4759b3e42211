//! The body of a push notification (the webhooks reference, §1 and §5.5): the XML declaration,
//! then a bare root element naming the kind, alone on its line, then the carried resources in
//! their notification shapes, pretty-printed with two-space indents; `nil="true"` for nulls
//! (never an empty typed element), `type` attributes on integers, booleans and datetimes
//! (ISO 8601 UTC with `Z`), no `href`.

use quick_xml::Writer;
use quick_xml::events::{BytesDecl, BytesEnd, BytesStart, BytesText, Event};

/// A value of a notification element.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// Text; `None` is written as a nil element.
    Text(Option<String>),
    Integer(Option<i64>),
    Boolean(Option<bool>),
    /// Epoch seconds, written as ISO 8601 UTC.
    DateTime(Option<i64>),
    /// Nested elements.
    Nested(Vec<Element>),
    /// A list (`type="array"`) of elements.
    Array(Vec<Element>),
    /// Text with a `code` attribute (`<cvv_result code="M">Match</cvv_result>`); nil when `None`.
    Coded(Option<(String, String)>),
    /// Text of another declared type (`symbol`, `dateTime`), read as text by the clients.
    Typed(&'static str, Option<String>),
}

/// One element of a notification.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Element {
    pub name: &'static str,
    pub value: Value,
}

impl Element {
    pub fn text(name: &'static str, value: Option<&str>) -> Element {
        Element { name, value: Value::Text(value.map(str::to_owned)) }
    }

    pub fn integer(name: &'static str, value: Option<i64>) -> Element {
        Element { name, value: Value::Integer(value) }
    }

    pub fn boolean(name: &'static str, value: Option<bool>) -> Element {
        Element { name, value: Value::Boolean(value) }
    }

    pub fn datetime(name: &'static str, value: Option<i64>) -> Element {
        Element { name, value: Value::DateTime(value) }
    }

    pub fn nested(name: &'static str, children: Vec<Element>) -> Element {
        Element { name, value: Value::Nested(children) }
    }

    pub fn array(name: &'static str, items: Vec<Element>) -> Element {
        Element { name, value: Value::Array(items) }
    }

    pub fn coded(name: &'static str, value: Option<(&str, &str)>) -> Element {
        Element { name, value: Value::Coded(value.map(|(c, t)| (c.to_owned(), t.to_owned()))) }
    }
}

/// An account as notifications carry it: shape A0 (`phone: false`) or A1 (with `phone`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AccountFields<'a> {
    pub account_code: &'a str,
    pub username: Option<&'a str>,
    pub email: Option<&'a str>,
    pub first_name: Option<&'a str>,
    pub last_name: Option<&'a str>,
    pub company_name: Option<&'a str>,
    pub phone: Option<&'a str>,
}

/// The `<account>` of a notification: A0, or A1 with `phone`.
pub fn account(fields: &AccountFields<'_>, with_phone: bool) -> Element {
    let mut children = vec![
        Element::text("account_code", Some(fields.account_code)),
        Element::text("username", fields.username),
        Element::text("email", fields.email),
        Element::text("first_name", fields.first_name),
        Element::text("last_name", fields.last_name),
        Element::text("company_name", fields.company_name),
    ];
    if with_phone {
        children.push(Element::text("phone", fields.phone));
    }
    Element::nested("account", children)
}

/// An add-on of a subscription as notifications carry it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AddOnFields<'a> {
    pub add_on_code: &'a str,
    pub name: Option<&'a str>,
    pub quantity: i64,
    pub unit_amount_in_cents: i64,
}

/// A subscription as notifications carry it (times in epoch seconds).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SubscriptionFields<'a> {
    pub plan_code: &'a str,
    pub plan_name: Option<&'a str>,
    pub uuid: &'a str,
    pub state: &'a str,
    pub quantity: i64,
    pub total_amount_in_cents: i64,
    pub add_ons: Vec<AddOnFields<'a>>,
    pub activated_at: Option<i64>,
    pub canceled_at: Option<i64>,
    pub expires_at: Option<i64>,
    pub current_period_started_at: Option<i64>,
    pub current_period_ends_at: Option<i64>,
    pub trial_started_at: Option<i64>,
    pub trial_ends_at: Option<i64>,
    pub collection_method: &'a str,
    pub paused_at: Option<i64>,
    pub resume_at: Option<i64>,
    pub remaining_pause_cycles: Option<i64>,
}

/// The `<subscription>` of a notification: shape S, or S-pause (without `collection_method`,
/// with the pause fields) for the pause family.
pub fn subscription(fields: &SubscriptionFields<'_>, pause: bool) -> Element {
    let add_ons = fields
        .add_ons
        .iter()
        .map(|a| {
            Element::nested(
                "subscription_add_on",
                vec![
                    Element::text("add_on_code", Some(a.add_on_code)),
                    Element::text("name", a.name),
                    Element::integer("quantity", Some(a.quantity)),
                    Element::integer("unit_amount_in_cents", Some(a.unit_amount_in_cents)),
                ],
            )
        })
        .collect();
    let mut children = vec![
        Element::nested(
            "plan",
            vec![Element::text("plan_code", Some(fields.plan_code)), Element::text("name", fields.plan_name)],
        ),
        Element::text("uuid", Some(fields.uuid)),
        Element::text("state", Some(fields.state)),
        Element::integer("quantity", Some(fields.quantity)),
        Element::integer("total_amount_in_cents", Some(fields.total_amount_in_cents)),
        Element::array("subscription_add_ons", add_ons),
        Element::datetime("activated_at", fields.activated_at),
        Element::datetime("canceled_at", fields.canceled_at),
        Element::datetime("expires_at", fields.expires_at),
        Element::datetime("current_period_started_at", fields.current_period_started_at),
        Element::datetime("current_period_ends_at", fields.current_period_ends_at),
        Element::datetime("trial_started_at", fields.trial_started_at),
        Element::datetime("trial_ends_at", fields.trial_ends_at),
    ];
    if pause {
        children.push(Element::datetime("paused_at", fields.paused_at));
        children.push(Element::datetime("resume_at", fields.resume_at));
        children.push(Element::integer("remaining_pause_cycles", fields.remaining_pause_cycles));
    } else {
        children.push(Element::text("collection_method", Some(fields.collection_method)));
    }
    Element::nested("subscription", children)
}

/// An invoice as notifications carry it (money in cents, times in epoch seconds).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InvoiceFields<'a> {
    pub uuid: &'a str,
    /// The state as the shape names it (legacy invoices: `open`, `collected`, `past_due`, `failed`, …).
    pub state: &'a str,
    pub origin: &'a str,
    pub invoice_number: i64,
    pub currency: &'a str,
    pub balance_in_cents: i64,
    pub total_in_cents: i64,
    pub tax_in_cents: i64,
    pub subtotal_in_cents: i64,
    pub subtotal_before_discount_in_cents: i64,
    pub discount_in_cents: i64,
    pub subscription_ids: Vec<&'a str>,
    pub customer_notes: Option<&'a str>,
    pub created_at: i64,
    pub updated_at: i64,
    pub closed_at: Option<i64>,
    pub po_number: Option<&'a str>,
    pub terms_and_conditions: Option<&'a str>,
    pub due_on: Option<i64>,
    pub net_terms: i64,
    pub collection_method: &'a str,
    /// The billing address (charge and credit shapes; the legacy shape has none).
    pub address: AddressFields<'a>,
}

/// Which invoice shape a notification carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InvoiceShape {
    /// IL: an invoice of a site without Credit Memos.
    Legacy,
    /// IC: a charge invoice.
    Charge,
    /// ICR: a credit invoice (IC up to `closed_at`).
    Credit,
}

/// The `<invoice>` of a notification in `shape`.
pub fn invoice(fields: &InvoiceFields<'_>, shape: InvoiceShape) -> Element {
    let iso = |t: Option<i64>| t.and_then(iso8601);
    if shape == InvoiceShape::Legacy {
        return Element::nested(
            "invoice",
            vec![
                Element::text("uuid", Some(fields.uuid)),
                Element::text("subscription_id", fields.subscription_ids.first().copied()),
                Element::text("state", Some(fields.state)),
                Element::text("invoice_number_prefix", Some("")),
                Element::integer("invoice_number", Some(fields.invoice_number)),
                Element::text("po_number", fields.po_number),
                Element::text("vat_number", None),
                Element::integer("total_in_cents", Some(fields.total_in_cents)),
                Element::text("currency", Some(fields.currency)),
                Element::datetime("date", Some(fields.created_at)),
                Element::datetime("closed_at", fields.closed_at),
                Element::integer("net_terms", Some(fields.net_terms)),
                Element::text("collection_method", Some(fields.collection_method)),
            ],
        );
    }
    let mut children = vec![
        Element::text("uuid", Some(fields.uuid)),
        Element::text("state", Some(fields.state)),
        Element { name: "origin", value: Value::Typed("symbol", Some(fields.origin.to_owned())) },
        Element::text("invoice_number_prefix", Some("")),
        Element::integer("invoice_number", Some(fields.invoice_number)),
        address(&fields.address),
        Element::text("vat_number", None),
        Element::text("currency", Some(fields.currency)),
        Element::integer("balance_in_cents", Some(fields.balance_in_cents)),
        Element::integer("total_in_cents", Some(fields.total_in_cents)),
        Element::integer("tax_in_cents", Some(fields.tax_in_cents)),
        Element::integer("subtotal_in_cents", Some(fields.subtotal_in_cents)),
        Element::integer("subtotal_before_discount_in_cents", Some(fields.subtotal_before_discount_in_cents)),
        Element::integer("discount_in_cents", Some(fields.discount_in_cents)),
        Element::array(
            "subscription_ids",
            fields.subscription_ids.iter().map(|id| Element::text("subscription_id", Some(id))).collect(),
        ),
        Element::text("customer_notes", fields.customer_notes),
        Element::datetime("created_at", Some(fields.created_at)),
        Element::datetime("updated_at", Some(fields.updated_at)),
        Element::datetime("closed_at", fields.closed_at),
    ];
    if shape == InvoiceShape::Charge {
        children.extend([
            Element::text("po_number", fields.po_number),
            Element::text("terms_and_conditions", fields.terms_and_conditions),
            Element { name: "due_on", value: Value::Typed("dateTime", iso(fields.due_on)) },
            Element::integer("net_terms", Some(fields.net_terms)),
            Element::text("collection_method", Some(fields.collection_method)),
        ]);
    }
    Element::nested("invoice", children)
}

/// A transaction as notifications carry it (shape T0).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TransactionFields<'a> {
    pub id: &'a str,
    pub invoice_id: Option<&'a str>,
    pub invoice_number: Option<i64>,
    pub subscription_id: Option<&'a str>,
    /// `purchase`, `credit` (a refund), `verify`.
    pub action: &'a str,
    pub date: i64,
    pub amount_in_cents: i64,
    pub status: &'a str,
    pub message: Option<&'a str>,
    pub reference: Option<&'a str>,
    pub source: &'a str,
    pub cvv_result: Option<(&'a str, &'a str)>,
    pub avs_result: Option<(&'a str, &'a str)>,
    pub test: bool,
    pub voidable: bool,
    pub refundable: bool,
}

/// The `<transaction>` of a notification (T0).
pub fn transaction(fields: &TransactionFields<'_>) -> Element {
    Element::nested(
        "transaction",
        vec![
            Element::text("id", Some(fields.id)),
            Element::text("invoice_id", fields.invoice_id),
            Element::integer("invoice_number", fields.invoice_number),
            Element::text("subscription_id", fields.subscription_id),
            Element::text("action", Some(fields.action)),
            Element::datetime("date", Some(fields.date)),
            Element::integer("amount_in_cents", Some(fields.amount_in_cents)),
            Element::text("status", Some(fields.status)),
            Element::text("message", fields.message),
            Element::text("reference", fields.reference),
            Element::text("source", Some(fields.source)),
            Element::coded("cvv_result", fields.cvv_result),
            Element::coded("avs_result", fields.avs_result),
            Element::text("avs_result_street", None),
            Element::text("avs_result_postal", None),
            Element::boolean("test", Some(fields.test)),
            Element::boolean("voidable", Some(fields.voidable)),
            Element::boolean("refundable", Some(fields.refundable)),
        ],
    )
}

/// A credit payment as notifications carry it (shape CP).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CreditPaymentFields<'a> {
    pub uuid: &'a str,
    /// `payment`, `refund`, `reduction`, `write_off`.
    pub action: &'a str,
    pub currency: &'a str,
    pub amount_in_cents: i64,
    pub original_invoice_number: i64,
    pub applied_to_invoice_number: Option<i64>,
    pub original_credit_payment_uuid: Option<&'a str>,
    pub refund_transaction_uuid: Option<&'a str>,
    pub created_at: i64,
    pub updated_at: i64,
    pub voided_at: Option<i64>,
}

/// The `<credit_payment>` of a notification (CP).
pub fn credit_payment(fields: &CreditPaymentFields<'_>) -> Element {
    Element::nested(
        "credit_payment",
        vec![
            Element::text("uuid", Some(fields.uuid)),
            Element { name: "action", value: Value::Typed("symbol", Some(fields.action.to_owned())) },
            Element::text("currency", Some(fields.currency)),
            Element::integer("amount_in_cents", Some(fields.amount_in_cents)),
            Element::integer("original_invoice_number", Some(fields.original_invoice_number)),
            Element::integer("applied_to_invoice_number", fields.applied_to_invoice_number),
            Element::text("original_credit_payment_uuid", fields.original_credit_payment_uuid),
            Element::text("refund_transaction_uuid", fields.refund_transaction_uuid),
            Element::datetime("created_at", Some(fields.created_at)),
            Element::datetime("updated_at", Some(fields.updated_at)),
            Element::datetime("voided_at", fields.voided_at),
        ],
    )
}

/// A dunning step as the dunning notification's invoice carries it (shapes ID and IDL).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Dunning {
    /// When the invoice was due (legacy shape only: `due_at`).
    pub due_at: Option<i64>,
    /// The dunning events of the invoice so far, this one included.
    pub events_count: i64,
    /// Whether this is the last one (the invoice fails with it).
    pub last: bool,
}

/// The `<invoice>` of a dunning notification: IC + the dunning counters (ID) on Credit Memos
/// sites, IL + `due_at` and the counters (IDL) elsewhere.
pub fn dunning_invoice(fields: &InvoiceFields<'_>, shape: InvoiceShape, dunning: Dunning) -> Element {
    let mut element = invoice(fields, shape);
    if let Value::Nested(children) = &mut element.value {
        if shape == InvoiceShape::Legacy {
            children.push(Element::datetime("due_at", dunning.due_at));
        }
        children.push(Element::integer("dunning_events_count", Some(dunning.events_count)));
        children.push(Element::boolean("final_dunning_event", Some(dunning.last)));
    }
    element
}

/// A postal address as notifications nest it (`address1` … `phone`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AddressFields<'a> {
    pub address1: Option<&'a str>,
    pub address2: Option<&'a str>,
    pub city: Option<&'a str>,
    pub state: Option<&'a str>,
    pub zip: Option<&'a str>,
    pub country: Option<&'a str>,
    pub phone: Option<&'a str>,
}

fn address(fields: &AddressFields<'_>) -> Element {
    Element::nested(
        "address",
        vec![
            Element::text("address1", fields.address1),
            Element::text("address2", fields.address2),
            Element::text("city", fields.city),
            Element::text("state", fields.state),
            Element::text("zip", fields.zip),
            Element::text("country", fields.country),
            Element::text("phone", fields.phone),
        ],
    )
}

/// A shipping address as notifications carry it (shape SA).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShippingAddressFields<'a> {
    pub id: i64,
    pub nickname: Option<&'a str>,
    pub first_name: Option<&'a str>,
    pub last_name: Option<&'a str>,
    pub company_name: Option<&'a str>,
    pub vat_number: Option<&'a str>,
    pub street1: Option<&'a str>,
    pub street2: Option<&'a str>,
    pub city: Option<&'a str>,
    pub state: Option<&'a str>,
    pub zip: Option<&'a str>,
    pub country: Option<&'a str>,
    pub email: Option<&'a str>,
    pub phone: Option<&'a str>,
}

/// The `<shipping_address>` of a notification (SA).
pub fn shipping_address(fields: &ShippingAddressFields<'_>) -> Element {
    Element::nested(
        "shipping_address",
        vec![
            Element::integer("id", Some(fields.id)),
            Element::text("nickname", fields.nickname),
            Element::text("first_name", fields.first_name),
            Element::text("last_name", fields.last_name),
            Element::text("company_name", fields.company_name),
            Element::text("vat_number", fields.vat_number),
            Element::text("street1", fields.street1),
            Element::text("street2", fields.street2),
            Element::text("city", fields.city),
            Element::text("state", fields.state),
            Element::text("zip", fields.zip),
            Element::text("country", fields.country),
            Element::text("email", fields.email),
            Element::text("phone", fields.phone),
        ],
    )
}

/// A gift card's delivery as notifications carry it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GiftCardDeliveryFields<'a> {
    pub method: &'a str,
    pub email_address: Option<&'a str>,
    pub deliver_at: Option<i64>,
    pub first_name: Option<&'a str>,
    pub last_name: Option<&'a str>,
    pub address: AddressFields<'a>,
    pub gifter_name: Option<&'a str>,
    pub personal_message: Option<&'a str>,
}

/// A gift card as notifications carry it (shape GC).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GiftCardFields<'a> {
    pub redemption_code: &'a str,
    pub id: i64,
    pub product_code: &'a str,
    pub unit_amount_in_cents: i64,
    pub currency: &'a str,
    pub gifter_account_code: &'a str,
    pub recipient_account_code: Option<&'a str>,
    pub invoice_number: i64,
    pub delivery: GiftCardDeliveryFields<'a>,
    pub created_at: i64,
    pub updated_at: i64,
    pub delivered_at: Option<i64>,
    pub redeemed_at: Option<i64>,
    pub canceled_at: Option<i64>,
}

/// The `<gift_card>` of a notification (GC); `balance` adds `balance_in_cents` (the
/// updated-balance notification).
pub fn gift_card(fields: &GiftCardFields<'_>, balance: Option<i64>) -> Element {
    let d = &fields.delivery;
    let mut children = vec![
        Element::text("redemption_code", Some(fields.redemption_code)),
        Element::integer("id", Some(fields.id)),
        Element::text("product_code", Some(fields.product_code)),
        Element::integer("unit_amount_in_cents", Some(fields.unit_amount_in_cents)),
        Element::text("currency", Some(fields.currency)),
        Element::text("gifter_account_code", Some(fields.gifter_account_code)),
        Element::text("recipient_account_code", fields.recipient_account_code),
        Element::integer("invoice_number", Some(fields.invoice_number)),
        Element::nested(
            "delivery",
            vec![
                Element::text("method", Some(d.method)),
                Element::text("email_address", d.email_address),
                Element::datetime("deliver_at", d.deliver_at),
                Element::text("first_name", d.first_name),
                Element::text("last_name", d.last_name),
                address(&d.address),
                Element::text("gifter_name", d.gifter_name),
                Element::text("personal_message", d.personal_message),
            ],
        ),
        Element::datetime("created_at", Some(fields.created_at)),
        Element::datetime("updated_at", Some(fields.updated_at)),
        Element::datetime("delivered_at", fields.delivered_at),
        Element::datetime("redeemed_at", fields.redeemed_at),
        Element::datetime("canceled_at", fields.canceled_at),
    ];
    if let Some(balance) = balance {
        children.push(Element::integer("balance_in_cents", Some(balance)));
    }
    Element::nested("gift_card", children)
}

/// An epoch-seconds time as ISO 8601 UTC (`2027-01-15T08:00:00Z`); out of range: nil.
fn iso8601(secs: i64) -> Option<String> {
    chrono::DateTime::from_timestamp(secs, 0).map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
}

/// Writes `element` (and what it holds).
fn write(writer: &mut Writer<Vec<u8>>, element: &Element) -> std::io::Result<()> {
    let (kind, text) = match &element.value {
        Value::Text(t) => (None, t.clone()),
        Value::Integer(i) => (Some("integer"), i.map(|i| i.to_string())),
        Value::Boolean(b) => (Some("boolean"), b.map(|b| b.to_string())),
        Value::DateTime(t) => (Some("datetime"), t.and_then(iso8601)),
        Value::Nested(children) => {
            writer.write_event(Event::Start(BytesStart::new(element.name)))?;
            for child in children {
                write(writer, child)?;
            }
            return writer.write_event(Event::End(BytesEnd::new(element.name)));
        }
        Value::Coded(coded) => {
            let mut start = BytesStart::new(element.name);
            return match coded {
                Some((code, text)) => {
                    start.push_attribute(("code", code.as_str()));
                    writer.write_event(Event::Start(start))?;
                    writer.write_event(Event::Text(BytesText::new(text)))?;
                    writer.write_event(Event::End(BytesEnd::new(element.name)))
                }
                None => {
                    start.push_attribute(("nil", "true"));
                    writer.write_event(Event::Empty(start))
                }
            };
        }
        Value::Typed(kind, text) => (Some(*kind), text.clone()),
        Value::Array(items) => {
            let mut start = BytesStart::new(element.name);
            start.push_attribute(("type", "array"));
            if items.is_empty() {
                return writer.write_event(Event::Empty(start));
            }
            writer.write_event(Event::Start(start))?;
            for item in items {
                write(writer, item)?;
            }
            return writer.write_event(Event::End(BytesEnd::new(element.name)));
        }
    };
    let mut start = BytesStart::new(element.name);
    if let Some(kind) = kind {
        start.push_attribute(("type", kind));
    }
    match text {
        None => {
            start.push_attribute(("nil", "true"));
            writer.write_event(Event::Empty(start))
        }
        Some(text) => {
            writer.write_event(Event::Start(start))?;
            writer.write_event(Event::Text(BytesText::new(&text)))?;
            writer.write_event(Event::End(BytesEnd::new(element.name)))
        }
    }
}

/// The body of a notification of `kind` carrying `children`.
pub fn render(kind: &str, children: &[Element]) -> String {
    let mut writer = Writer::new_with_indent(Vec::new(), b' ', 2);
    let written = (|| -> std::io::Result<()> {
        writer.write_event(Event::Decl(BytesDecl::new("1.0", Some("UTF-8"), None)))?;
        writer.write_event(Event::Start(BytesStart::new(kind)))?;
        for child in children {
            write(&mut writer, child)?;
        }
        writer.write_event(Event::End(BytesEnd::new(kind)))
    })();
    // Writing into memory does not fail.
    debug_assert!(written.is_ok());
    let mut body = String::from_utf8(writer.into_inner()).unwrap_or_default();
    body.push('\n');
    body
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_account_notification_is_written_as_the_reference_shows() {
        let fields = AccountFields {
            account_code: "1",
            email: Some("verena@example.com"),
            first_name: Some("Verena"),
            last_name: Some("Example & Co"),
            ..AccountFields::default()
        };
        let body = render("new_account_notification", &[account(&fields, false)]);
        assert_eq!(
            body,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
             <new_account_notification>\n\
             \x20 <account>\n\
             \x20   <account_code>1</account_code>\n\
             \x20   <username nil=\"true\"/>\n\
             \x20   <email>verena@example.com</email>\n\
             \x20   <first_name>Verena</first_name>\n\
             \x20   <last_name>Example &amp; Co</last_name>\n\
             \x20   <company_name nil=\"true\"/>\n\
             \x20 </account>\n\
             </new_account_notification>\n"
        );
        let a1 = render("subscription_paused_notification", &[account(&fields, true)]);
        assert!(a1.contains("    <phone nil=\"true\"/>\n"), "{a1}");
    }

    #[test]
    fn a_subscription_in_its_two_shapes() {
        let fields = SubscriptionFields {
            plan_code: "gold",
            plan_name: Some("Gold"),
            uuid: "abc",
            state: "active",
            quantity: 2,
            total_amount_in_cents: 2500,
            add_ons: vec![AddOnFields { add_on_code: "ip", name: Some("IP"), quantity: 1, unit_amount_in_cents: 500 }],
            activated_at: Some(1_800_000_000),
            collection_method: "automatic",
            ..SubscriptionFields::default()
        };
        let s = render("new_subscription_notification", &[subscription(&fields, false)]);
        assert!(
            s.contains("    <plan>\n      <plan_code>gold</plan_code>\n      <name>Gold</name>\n    </plan>\n"),
            "{s}"
        );
        assert!(s.contains("<subscription_add_ons type=\"array\">\n      <subscription_add_on>"), "{s}");
        assert!(s.contains("<total_amount_in_cents type=\"integer\">2500</total_amount_in_cents>"), "{s}");
        assert!(s.contains("<canceled_at type=\"datetime\" nil=\"true\"/>"), "{s}");
        assert!(s.contains("<collection_method>automatic</collection_method>") && !s.contains("paused_at"), "{s}");
        let none = SubscriptionFields { add_ons: Vec::new(), ..fields };
        let p = render("subscription_paused_notification", &[subscription(&none, true)]);
        assert!(p.contains("<subscription_add_ons type=\"array\"/>"), "{p}");
        assert!(p.contains("<paused_at type=\"datetime\" nil=\"true\"/>") && !p.contains("collection_method"), "{p}");
        assert!(p.contains("<remaining_pause_cycles type=\"integer\" nil=\"true\"/>"), "{p}");
    }

    #[test]
    fn shipping_addresses_gift_cards_and_dunning_invoices() {
        let sa = ShippingAddressFields { id: 7, street1: Some("1 Main St"), country: Some("US"), ..Default::default() };
        let body = render("new_shipping_address_notification", &[shipping_address(&sa)]);
        assert!(
            body.contains("  <shipping_address>\n    <id type=\"integer\">7</id>\n    <nickname nil=\"true\"/>"),
            "{body}"
        );
        assert!(body.contains("<street1>1 Main St</street1>") && body.contains("<phone nil=\"true\"/>"), "{body}");
        let card = GiftCardFields {
            redemption_code: "ABC",
            id: 3,
            product_code: "gift_card",
            unit_amount_in_cents: 2000,
            currency: "USD",
            gifter_account_code: "gus",
            invoice_number: 1001,
            delivery: GiftCardDeliveryFields { method: "email", ..Default::default() },
            created_at: 1_800_000_000,
            updated_at: 1_800_000_000,
            ..Default::default()
        };
        let purchased = render("purchased_gift_card_notification", &[gift_card(&card, None)]);
        assert!(purchased.contains("<recipient_account_code nil=\"true\"/>"), "{purchased}");
        assert!(purchased.contains("<delivery>\n      <method>email</method>"), "{purchased}");
        assert!(purchased.contains("<address>\n        <address1 nil=\"true\"/>"), "{purchased}");
        assert!(!purchased.contains("balance_in_cents"), "{purchased}");
        let balance = render("updated_balance_gift_card_notification", &[gift_card(&card, Some(1500))]);
        assert!(
            balance.contains("<balance_in_cents type=\"integer\">1500</balance_in_cents>\n  </gift_card>"),
            "{balance}"
        );
        let fields = InvoiceFields { uuid: "u", state: "past_due", invoice_number: 1002, ..Default::default() };
        let step = Dunning { due_at: Some(1_800_000_000), events_count: 2, last: true };
        let id = render("new_dunning_event_notification", &[dunning_invoice(&fields, InvoiceShape::Charge, step)]);
        assert!(id.contains("<dunning_events_count type=\"integer\">2</dunning_events_count>"), "{id}");
        assert!(id.contains("<final_dunning_event type=\"boolean\">true</final_dunning_event>"), "{id}");
        assert!(!id.contains("due_at"), "{id}");
        let idl = render("new_dunning_event_notification", &[dunning_invoice(&fields, InvoiceShape::Legacy, step)]);
        assert!(idl.contains("<due_at type=\"datetime\">2027-01-15T08:00:00Z</due_at>"), "{idl}");
        assert!(idl.contains("<final_dunning_event type=\"boolean\">true</final_dunning_event>"), "{idl}");
    }

    #[test]
    fn typed_values_and_nulls() {
        let body = render(
            "x_notification",
            &[Element::nested(
                "subscription",
                vec![
                    Element::integer("quantity", Some(2)),
                    Element::boolean("test", Some(true)),
                    Element::datetime("activated_at", Some(1_800_000_000)),
                    Element::datetime("canceled_at", None),
                ],
            )],
        );
        assert!(body.contains("<quantity type=\"integer\">2</quantity>"), "{body}");
        assert!(body.contains("<test type=\"boolean\">true</test>"), "{body}");
        assert!(body.contains("<activated_at type=\"datetime\">2027-01-15T08:00:00Z</activated_at>"), "{body}");
        assert!(body.contains("<canceled_at type=\"datetime\" nil=\"true\"/>"), "{body}");
        assert!(body.starts_with("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<x_notification>\n"), "{body}");
    }
}
