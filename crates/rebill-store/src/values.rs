//! The values a statement binds, of the types both backends store: kept with the statement
//! ([`crate::db::DbQuery`]) until it runs, then bound by the driver of its connection.

use std::borrow::Cow;

/// A value bound to a statement, of one of the types both backends store. `None` is a null of
/// that type (PostgreSQL is told the type of every parameter, nulls included).
#[derive(Debug, Clone)]
pub(crate) enum Value<'q> {
    /// A 64-bit integer (`INTEGER` on SQLite, `BIGINT` on PostgreSQL; also the 0/1 flags).
    Int(Option<i64>),
    /// A 32-bit integer.
    Int4(Option<i32>),
    /// A double.
    Real(Option<f64>),
    /// A boolean.
    Bool(Option<bool>),
    /// Text.
    Text(Option<Cow<'q, str>>),
    /// Bytes.
    Bytes(Option<Vec<u8>>),
}

impl Value<'_> {
    /// The value, owning what it borrowed.
    pub(crate) fn to_static(&self) -> Value<'static> {
        match self {
            Value::Int(v) => Value::Int(*v),
            Value::Int4(v) => Value::Int4(*v),
            Value::Real(v) => Value::Real(*v),
            Value::Bool(v) => Value::Bool(*v),
            Value::Text(v) => Value::Text(v.as_ref().map(|t| Cow::Owned(t.to_string()))),
            Value::Bytes(v) => Value::Bytes(v.clone()),
        }
    }
}

macro_rules! values {
    ($($kind:ident: $($t:ty => $to:expr),+;)+) => {$($(
        impl<'q> From<$t> for Value<'q> {
            fn from(v: $t) -> Self {
                #[allow(clippy::redundant_closure_call)]
                Value::$kind(Some(($to)(v)))
            }
        }
        impl<'q> From<Option<$t>> for Value<'q> {
            fn from(v: Option<$t>) -> Self {
                #[allow(clippy::redundant_closure_call)]
                Value::$kind(v.map($to))
            }
        }
    )+)+};
}

values! {
    Int: i64 => |v| v, &i64 => |v: &i64| *v, u32 => i64::from, u16 => i64::from, u8 => i64::from;
    Int4: i32 => |v| v, &i32 => |v: &i32| *v;
    Real: f64 => |v| v, &f64 => |v: &f64| *v;
    Bool: bool => |v| v, &bool => |v: &bool| *v;
    Text: String => Cow::Owned, &'q String => |v: &'q String| Cow::Borrowed(v.as_str()), &'q str => Cow::Borrowed,
        Cow<'q, str> => |v| v, &'q Cow<'q, str> => |v: &'q Cow<'q, str>| Cow::Borrowed(v.as_ref());
    Bytes: Vec<u8> => |v| v, &'q [u8] => <[u8]>::to_vec;
}

impl<'q> From<&'q Option<String>> for Value<'q> {
    fn from(v: &'q Option<String>) -> Self {
        Value::Text(v.as_deref().map(Cow::Borrowed))
    }
}

impl<'q> From<&'q Option<i64>> for Value<'q> {
    fn from(v: &'q Option<i64>) -> Self {
        Value::Int(*v)
    }
}
