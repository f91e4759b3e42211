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
