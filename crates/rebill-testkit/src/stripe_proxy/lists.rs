//! `GET /v1/payment_intents` and `GET /v1/refunds` as Stripe answers them, made from
//! localstripe's whole list: newest first, filtered (by `customer` for intents, by
//! `payment_intent` for refunds, by `created` for both), then cut at a cursor into a page.

use std::fmt;

use serde_json::{Value, json};

/// The most objects a page holds (Stripe's bound of `limit`).
pub(crate) const MAX_LIMIT: usize = 100;

/// How many objects a page holds when the request does not say.
const DEFAULT_LIMIT: usize = 10;

/// A list the proxy answers itself.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Listed {
    /// `GET /v1/payment_intents`: filtered by `customer`.
    #[default]
    Intents,
    /// `GET /v1/refunds`: filtered by `payment_intent`.
    Refunds,
}

impl Listed {
    /// The list's path.
    pub(crate) fn path(self) -> &'static str {
        match self {
            Listed::Intents => "/v1/payment_intents",
            Listed::Refunds => "/v1/refunds",
        }
    }

    /// The list answered for a request path, if the proxy answers it.
    pub(crate) fn of(path: &str) -> Option<Listed> {
        [Listed::Intents, Listed::Refunds].into_iter().find(|l| l.path() == path)
    }

    /// The name of the list's filter by owner (`customer`, `payment_intent`).
    fn owner(self) -> &'static str {
        match self {
            Listed::Intents => "customer",
            Listed::Refunds => "payment_intent",
        }
    }

    /// An object as Stripe shows it where localstripe leaves a field out: a PaymentIntent's
    /// `amount_received` (what it collected: its amount once `succeeded`, else 0).
    pub(crate) fn complete(self, mut object: Value) -> Value {
        if self == Listed::Intents && object.get("amount_received").is_none() {
            let received = if object["status"] == "succeeded" { object["amount"].as_i64().unwrap_or(0) } else { 0 };
            object["amount_received"] = json!(received);
        }
        object
    }
}

/// A list request's parameters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ListQuery {
    /// Which list.
    pub(crate) listed: Listed,
    /// `customer` (intents) or `payment_intent` (refunds): only the objects whose field of
    /// that name is this id.
    pub(crate) owner: Option<String>,
    /// `created`, `created[gt]`, `created[gte]`, `created[lt]`, `created[lte]`.
    pub(crate) created: Created,
    /// `limit` (1 to [`MAX_LIMIT`], [`DEFAULT_LIMIT`] when absent).
    pub(crate) limit: usize,
    /// `starting_after` or `ending_before`.
    pub(crate) cursor: Option<Cursor>,
    /// `expand[]` (each value as given, e.g. `data.latest_charge`), passed on upstream.
    pub(crate) expand: Vec<String>,
}

/// Where a page starts: an object's id, the page holding the objects listed after it (older) or
/// before it (newer).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Cursor {
    StartingAfter(String),
    EndingBefore(String),
}

/// Bounds on `created` (epoch seconds), each optional; `created=N` is `gte` and `lte` N.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Created {
    pub(crate) gt: Option<i64>,
    pub(crate) gte: Option<i64>,
    pub(crate) lt: Option<i64>,
    pub(crate) lte: Option<i64>,
}

impl Created {
    /// Whether `created` is within every bound.
    pub(crate) fn contains(&self, created: i64) -> bool {
        self.gt.is_none_or(|b| created > b)
            && self.gte.is_none_or(|b| created >= b)
            && self.lt.is_none_or(|b| created < b)
            && self.lte.is_none_or(|b| created <= b)
    }
}

/// Why a list request is refused (400, `invalid_request_error`, as Stripe refuses it).
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum ListError {
    /// A parameter the endpoint does not take.
    UnknownParameter(String),
    /// A parameter given twice.
    Repeated(String),
    /// A query that is not valid percent-encoded UTF-8.
    BadEncoding,
    /// A parameter that must be an integer and is not.
    NotAnInteger { param: String, value: String },
    /// `limit` below 1 or above [`MAX_LIMIT`].
    LimitOutOfRange(i64),
    /// Both `starting_after` and `ending_before`.
    TwoCursors,
    /// A cursor naming no object of the list.
    NoSuchObject { param: &'static str, id: String },
}

impl fmt::Display for ListError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ListError::UnknownParameter(name) => write!(f, "Received unknown parameter: {name}"),
            ListError::Repeated(name) => write!(f, "The parameter {name} was given more than once"),
            ListError::BadEncoding => f.write_str("The query is not valid percent-encoded UTF-8"),
            ListError::NotAnInteger { value, .. } => write!(f, "Invalid integer: {value}"),
            ListError::LimitOutOfRange(limit) if *limit < 1 => {
                write!(f, "This value must be greater than or equal to 1 (it was {limit}).")
            }
            ListError::LimitOutOfRange(limit) => {
                write!(f, "This value must be less than or equal to {MAX_LIMIT} (it was {limit}).")
            }
            ListError::TwoCursors => {
                f.write_str("You may only specify one of these parameters: ending_before, starting_after.")
            }
            ListError::NoSuchObject { id, .. } => write!(f, "No such object: '{id}'"),
        }
    }
}

impl std::error::Error for ListError {}

impl ListError {
    /// Stripe's error body for it: `{"error":{"type":"invalid_request_error",…}}`.
    pub(crate) fn to_json(&self) -> Value {
        let (code, param) = match self {
            ListError::UnknownParameter(name) => ("parameter_unknown", Some(name.clone())),
            ListError::Repeated(name) => ("parameter_invalid_string", Some(name.clone())),
            ListError::BadEncoding => ("parameter_invalid_string", None),
            ListError::NotAnInteger { param, .. } => ("parameter_invalid_integer", Some(param.clone())),
            ListError::LimitOutOfRange(_) => ("parameter_invalid_integer", Some("limit".to_owned())),
            ListError::TwoCursors => ("parameters_exclusive", None),
            ListError::NoSuchObject { param, .. } => ("resource_missing", Some((*param).to_owned())),
        };
        let mut error = json!({"type": "invalid_request_error", "code": code, "message": self.to_string()});
        if let Some(param) = param {
            error["param"] = Value::String(param);
        }
        json!({ "error": error })
    }
}

/// Reads the query of a list request (the part after `?`, percent-encoded, `+` for a space).
/// An empty value is taken as an absent parameter, as Stripe takes it.
pub(crate) fn parse_query(listed: Listed, query: &str) -> Result<ListQuery, ListError> {
    let mut out = ListQuery { listed, limit: DEFAULT_LIMIT, ..ListQuery::default() };
    let mut seen: Vec<String> = Vec::new();
    let mut starting_after = None;
    let mut ending_before = None;
    for pair in query.split('&').filter(|pair| !pair.is_empty()) {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        let (name, value) = (decode(name)?, decode(value)?);
        let repeatable = name == "expand[]";
        if !repeatable {
            if seen.contains(&name) {
                return Err(ListError::Repeated(name));
            }
            seen.push(name.clone());
        }
        let known = name == listed.owner()
            || matches!(
                name.as_str(),
                "limit"
                    | "starting_after"
                    | "ending_before"
                    | "created"
                    | "created[gt]"
                    | "created[gte]"
                    | "created[lt]"
                    | "created[lte]"
                    | "expand[]"
            );
        if !known {
            return Err(ListError::UnknownParameter(name));
        }
        if value.is_empty() {
            continue;
        }
        match name.as_str() {
            "customer" | "payment_intent" => out.owner = Some(value),
            "limit" => {
                let limit = integer(&name, &value)?;
                out.limit = usize::try_from(limit)
                    .ok()
                    .filter(|limit| (1..=MAX_LIMIT).contains(limit))
                    .ok_or(ListError::LimitOutOfRange(limit))?;
            }
            "starting_after" => starting_after = Some(value),
            "ending_before" => ending_before = Some(value),
            "created" => {
                let at = integer(&name, &value)?;
                out.created.gte = Some(at);
                out.created.lte = Some(at);
            }
            "created[gt]" => out.created.gt = Some(integer(&name, &value)?),
            "created[gte]" => out.created.gte = Some(integer(&name, &value)?),
            "created[lt]" => out.created.lt = Some(integer(&name, &value)?),
            "created[lte]" => out.created.lte = Some(integer(&name, &value)?),
            _ => out.expand.push(value),
        }
    }
    out.cursor = match (starting_after, ending_before) {
        (Some(_), Some(_)) => return Err(ListError::TwoCursors),
        (Some(id), None) => Some(Cursor::StartingAfter(id)),
        (None, Some(id)) => Some(Cursor::EndingBefore(id)),
        (None, None) => None,
    };
    Ok(out)
}

fn integer(name: &str, value: &str) -> Result<i64, ListError> {
    value.parse().map_err(|_| ListError::NotAnInteger { param: name.to_owned(), value: value.to_owned() })
}

/// Percent-decodes one name or value of a query (`+` is a space).
fn decode(text: &str) -> Result<String, ListError> {
    let mut bytes = Vec::with_capacity(text.len());
    let mut rest = text.as_bytes();
    while let Some((&byte, tail)) = rest.split_first() {
        match byte {
            b'+' => {
                bytes.push(b' ');
                rest = tail;
            }
            b'%' => {
                let hex = tail.get(..2).and_then(|hex| std::str::from_utf8(hex).ok()).ok_or(ListError::BadEncoding)?;
                bytes.push(u8::from_str_radix(hex, 16).map_err(|_| ListError::BadEncoding)?);
                rest = &tail[2..];
            }
            _ => {
                bytes.push(byte);
                rest = tail;
            }
        }
    }
    String::from_utf8(bytes).map_err(|_| ListError::BadEncoding)
}

/// The page Stripe answers to `query` from `all`, every object of the list in the upstream's
/// order (localstripe's: oldest first): the objects ordered newest first (by `created`, then
/// later in `all` first), a cursor placed among all of them (so it may name an object the
/// filters leave out; one naming none is refused), the filters applied, and at most
/// `query.limit` kept: those right after `starting_after`, or right before `ending_before`.
/// `has_more` says whether more objects pass the filters beyond the page in its direction.
pub(crate) fn page(all: Vec<Value>, query: &ListQuery, url: &str) -> Result<Value, ListError> {
    let mut ordered: Vec<(usize, Value)> = all.into_iter().enumerate().collect();
    ordered.sort_by(|(a_at, a), (b_at, b)| created(b).cmp(&created(a)).then(b_at.cmp(a_at)));
    let ordered: Vec<Value> = ordered.into_iter().map(|(_, object)| object).collect();
    let position = |param: &'static str, id: &str| {
        ordered
            .iter()
            .position(|object| object["id"].as_str() == Some(id))
            .ok_or_else(|| ListError::NoSuchObject { param, id: id.to_owned() })
    };
    let kept = |object: &&Value| {
        query.owner.as_deref().is_none_or(|owner| owner_of(object, query.listed.owner()) == Some(owner))
            && query.created.contains(created(object))
    };
    let (data, has_more): (Vec<Value>, bool) = match &query.cursor {
        Some(Cursor::EndingBefore(id)) => {
            let before: Vec<&Value> = ordered[..position("ending_before", id)?].iter().filter(kept).collect();
            let skip = before.len().saturating_sub(query.limit);
            (before[skip..].iter().map(|object| (*object).clone()).collect(), skip > 0)
        }
        cursor => {
            let start = match cursor {
                Some(Cursor::StartingAfter(id)) => position("starting_after", id)? + 1,
                _ => 0,
            };
            let mut after = ordered[start..].iter().filter(kept);
            let data: Vec<Value> = after.by_ref().take(query.limit).cloned().collect();
            (data, after.next().is_some())
        }
    };
    Ok(json!({"object": "list", "data": data, "has_more": has_more, "url": url}))
}

/// An object's `created` (0 when it has none).
fn created(object: &Value) -> i64 {
    object["created"].as_i64().unwrap_or(0)
}

/// An object's owner of the field `field` (`customer`, `payment_intent`): the field as an id,
/// or the `id` of the expanded object.
fn owner_of<'a>(object: &'a Value, field: &str) -> Option<&'a str> {
    let owner = &object[field];
    owner.as_str().or_else(|| owner["id"].as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn intent(id: &str, customer: Option<&str>, created: i64) -> Value {
        json!({"id": id, "object": "payment_intent", "customer": customer, "created": created})
    }

    fn ids(page: &Value) -> Vec<&str> {
        page["data"].as_array().expect("data").iter().map(|o| o["id"].as_str().expect("an id")).collect()
    }

    /// localstripe's order: oldest first; pi_2 and pi_3 made in the same second.
    fn upstream() -> Vec<Value> {
        vec![
            intent("pi_1", Some("cus_a"), 100),
            intent("pi_2", Some("cus_b"), 200),
            intent("pi_3", Some("cus_a"), 200),
            intent("pi_4", None, 300),
            json!({"id": "pi_5", "customer": {"id": "cus_a", "object": "customer"}, "created": 400}),
        ]
    }

    fn query(text: &str) -> ListQuery {
        super::parse_query(Listed::Intents, text).expect("a valid query")
    }

    fn parse_query(text: &str) -> Result<ListQuery, ListError> {
        super::parse_query(Listed::Intents, text)
    }

    #[test]
    fn queries_are_read() {
        assert_eq!(query(""), ListQuery { limit: 10, ..ListQuery::default() });
        let refunds = super::parse_query(Listed::Refunds, "payment_intent=pi_1&created[gte]=3").expect("valid");
        assert_eq!((refunds.owner.as_deref(), refunds.created.gte), (Some("pi_1"), Some(3)));
        assert_eq!(
            super::parse_query(Listed::Refunds, "customer=cus_a"),
            Err(ListError::UnknownParameter("customer".to_owned())),
            "refunds are not listed by customer"
        );
        assert_eq!(parse_query("payment_intent=pi_1"), Err(ListError::UnknownParameter("payment_intent".to_owned())));
        let q = query(concat!(
            "customer=cus_a&limit=100&starting_after=pi_1&created%5Bgte%5D=5&created[lt]=9",
            "&expand%5B%5D=data.latest_charge&expand[]=data.customer",
        ));
        assert_eq!(q.owner.as_deref(), Some("cus_a"));
        assert_eq!(q.limit, 100);
        assert_eq!(q.cursor, Some(Cursor::StartingAfter("pi_1".to_owned())));
        assert_eq!(q.created, Created { gte: Some(5), lt: Some(9), ..Created::default() });
        assert_eq!(q.expand, ["data.latest_charge", "data.customer"]);
        assert_eq!(query("created=7").created, Created { gte: Some(7), lte: Some(7), ..Created::default() });
        assert_eq!(query("ending_before=pi_2&customer=").cursor, Some(Cursor::EndingBefore("pi_2".to_owned())));
        assert_eq!(query("customer=").owner, None, "an empty value is no value");
        assert_eq!(query("customer=a+b%2Bc").owner.as_deref(), Some("a b+c"));

        assert_eq!(parse_query("email=x"), Err(ListError::UnknownParameter("email".to_owned())));
        assert_eq!(parse_query("created[eq]=1"), Err(ListError::UnknownParameter("created[eq]".to_owned())));
        assert_eq!(parse_query("limit=0"), Err(ListError::LimitOutOfRange(0)));
        assert_eq!(parse_query("limit=101"), Err(ListError::LimitOutOfRange(101)));
        assert_eq!(
            parse_query("limit=ten"),
            Err(ListError::NotAnInteger { param: "limit".to_owned(), value: "ten".to_owned() })
        );
        assert_eq!(parse_query("starting_after=a&ending_before=b"), Err(ListError::TwoCursors));
        assert_eq!(parse_query("customer=a&customer=b"), Err(ListError::Repeated("customer".to_owned())));
        assert_eq!(parse_query("customer=%E2%82"), Err(ListError::BadEncoding));
        assert_eq!(parse_query("customer=%4"), Err(ListError::BadEncoding));
        let body = ListError::UnknownParameter("email".to_owned()).to_json();
        assert_eq!(body["error"]["type"], "invalid_request_error");
        assert_eq!(body["error"]["param"], "email");
        assert_eq!(body["error"]["message"], "Received unknown parameter: email");
    }

    #[test]
    fn a_list_is_newest_first_and_filtered() {
        let all = page(upstream(), &query("limit=100"), "/v1/payment_intents").expect("a page");
        assert_eq!(ids(&all), ["pi_5", "pi_4", "pi_3", "pi_2", "pi_1"], "a tie in created: the later first");
        assert_eq!(all["has_more"], false);
        assert_eq!(all["object"], "list");
        assert_eq!(all["url"], "/v1/payment_intents");

        let mine = page(upstream(), &query("customer=cus_a"), "/v1/payment_intents").expect("a page");
        assert_eq!(ids(&mine), ["pi_5", "pi_3", "pi_1"], "an expanded customer counts too");
        let nobody = page(upstream(), &query("customer=cus_z"), "/v1/payment_intents").expect("a page");
        assert_eq!(ids(&nobody), Vec::<&str>::new());
        assert_eq!(nobody["has_more"], false);

        let range = |q: &str| ids(&page(upstream(), &query(q), "u").expect("a page")).join(",");
        assert_eq!(range("created[gte]=200"), "pi_5,pi_4,pi_3,pi_2");
        assert_eq!(range("created[gt]=200"), "pi_5,pi_4");
        assert_eq!(range("created[lte]=200"), "pi_3,pi_2,pi_1");
        assert_eq!(range("created[lt]=200"), "pi_1");
        assert_eq!(range("created=200"), "pi_3,pi_2");
        assert_eq!(range("created[gte]=200&created[lt]=400&customer=cus_a"), "pi_3");
    }

    #[test]
    fn refunds_are_filtered_by_their_intent_and_intents_show_what_they_received() {
        let refund =
            |id: &str, intent: &str, created: i64| json!({"id": id, "payment_intent": intent, "created": created});
        let all = vec![refund("re_1", "pi_1", 100), refund("re_2", "pi_2", 200), refund("re_3", "pi_1", 300)];
        let q = super::parse_query(Listed::Refunds, "payment_intent=pi_1").expect("valid");
        assert_eq!(ids(&page(all, &q, "/v1/refunds").expect("a page")), ["re_3", "re_1"]);

        let succeeded = json!({"id": "pi_1", "status": "succeeded", "amount": 700});
        assert_eq!(Listed::Intents.complete(succeeded)["amount_received"], 700);
        let declined = json!({"id": "pi_2", "status": "requires_payment_method", "amount": 700});
        assert_eq!(Listed::Intents.complete(declined)["amount_received"], 0);
        let partial = json!({"id": "pi_3", "status": "succeeded", "amount": 700, "amount_received": 500});
        assert_eq!(Listed::Intents.complete(partial)["amount_received"], 500, "a value given is kept");
        assert!(Listed::Refunds.complete(refund("re_1", "pi_1", 1)).get("amount_received").is_none());
    }

    #[test]
    fn pages_are_cut_at_cursors() {
        let cut = |q: &str| {
            let page = page(upstream(), &query(q), "u").expect("a page");
            (ids(&page).join(","), page["has_more"].as_bool().expect("has_more"))
        };
        assert_eq!(cut("limit=2"), ("pi_5,pi_4".to_owned(), true));
        assert_eq!(cut("limit=2&starting_after=pi_4"), ("pi_3,pi_2".to_owned(), true));
        assert_eq!(cut("limit=2&starting_after=pi_2"), ("pi_1".to_owned(), false));
        assert_eq!(cut("limit=2&starting_after=pi_1"), (String::new(), false));
        assert_eq!(cut("limit=1&customer=cus_a&starting_after=pi_5"), ("pi_3".to_owned(), true));
        // A cursor the filter leaves out still places the page.
        assert_eq!(cut("customer=cus_a&starting_after=pi_4"), ("pi_3,pi_1".to_owned(), false));
        assert_eq!(cut("limit=2&ending_before=pi_1"), ("pi_3,pi_2".to_owned(), true));
        assert_eq!(cut("limit=2&ending_before=pi_3"), ("pi_5,pi_4".to_owned(), false));
        assert_eq!(cut("customer=cus_a&ending_before=pi_1"), ("pi_5,pi_3".to_owned(), false));
        assert_eq!(cut("ending_before=pi_5"), (String::new(), false));
        assert_eq!(
            page(upstream(), &query("starting_after=pi_9"), "u"),
            Err(ListError::NoSuchObject { param: "starting_after", id: "pi_9".to_owned() })
        );
    }
}
