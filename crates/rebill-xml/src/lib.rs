//! The rebill v2 XML dialect runtime.
//!
//! - [`ApiVersion`] and [`WireContext`]: which version, site features and base URL a document
//!   is for (the version table is generated, `src/generated/`).
//! - [`XmlReader`] and [`XmlWriter`]: a strict-or-lenient pull reader and an indenting writer
//!   over quick-xml, which never expand entities.
//! - [`codec`]: the traits the `rebill-xml-derive` macros implement ([`XmlResource`],
//!   [`XmlEnum`], [`Project`]) and the field helpers their generated code calls.
//! - [`value`]: [`Money`], [`Href`] and the scalars, including the one grammar of request times.
//! - [`DecodeError`]: every decoding error, with the path of the element it concerns.
//! - `arbitrary` (feature `arbitrary`): random values for property tests.
//!
//! This crate knows no resource by name: the models are generated in `rebill-models`.
//!
//! # Reading
//!
//! Requests are read strictly (unknown, other-version, feature-gated and read-only elements are
//! errors naming the element path); responses are read leniently (unknown elements and enum
//! values are kept or skipped). Hostile input gives an error, never a panic: DOCTYPE is refused,
//! only the predefined entities and character references are decoded, characters XML 1.0 forbids
//! are refused wherever they occur (raw or as references), nesting stops at
//! [`reader::MAX_DEPTH`] levels and unknown subtrees are skipped iteratively.
//!
//! In a request, the element of a value that is not free text (integers and amounts, floats,
//! booleans, dates, times, enum values) with no text or only whitespace means nil, exactly as
//! `nil="nil"` does: that is how clients send an unset value. A string keeps its empty text. A
//! required value sent empty is refused as nil is, and text that is not a value is still refused.
//!
//! Every time a request carries, in its body or its query, is read by one bounded grammar (ISO
//! 8601 and Ruby's `Time#to_s`, `2026-11-26 20:49:03 UTC` / `+0100`; `docs/times.md`):
//! [`value::parse_datetime`], [`value::parse_query_datetime`].
//!
//! # Writing
//!
//! A field that exists in the context but has no value is written `nil="nil"`; an empty string is
//! an empty element. Links, anchors and lists without a value are left out, and so are fields
//! marked `omit_empty` (a successful transaction has no `transaction_error`; clients read its
//! presence as a decline). Root `href`s are built from the resource's href pattern and the
//! context's base URL; a parameter without an element of its own (`href_only`, such as the
//! account code of `<billing_info>`) is written only there and read back from it, so the round
//! trip holds. The writer cannot emit a character XML forbids: it writes U+FFFD in its place.

#[cfg(feature = "arbitrary")]
pub mod arbitrary;
pub mod codec;
pub mod context;
pub mod error;
#[rustfmt::skip]
mod generated;
pub mod reader;
pub mod value;
pub mod version;
pub mod writer;

pub use codec::{
    ElementInfo, Project, XmlEnum, XmlResource, from_xml, list_from_xml, list_from_xml_in, list_to_xml, list_to_xml_in,
    to_xml,
};
pub use context::{Direction, Features, Mode, UnknownFeature, WireContext};
pub use error::{DecodeError, DecodeErrorKind};
pub use reader::{Tag, XmlReader};
pub use value::{Href, Money, XmlScalar};
pub use version::{ApiVersion, VersionError};
pub use writer::XmlWriter;

/// Re-exports for derived code.
#[doc(hidden)]
pub mod __private {
    pub use chrono::{DateTime, NaiveDate, Utc};
}
