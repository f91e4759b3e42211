//! The rebill v2 XML dialect runtime.
//!
//! - [`ApiVersion`] and [`WireContext`]: which version, site features and base URL a document
//!   is for.
//! - [`XmlReader`] and [`XmlWriter`]: a strict-or-lenient pull reader and an indenting writer
//!   over quick-xml, which never expand entities.
//! - [`codec`]: the traits the `rebill-xml-derive` macros implement ([`XmlResource`],
//!   [`XmlEnum`], [`Project`]) and the field helpers their generated code calls.
//!
//! Requests are read strictly (unknown, other-version, feature-gated and read-only elements are
//! errors naming the element path); responses are read leniently (unknown elements and enum
//! values are kept or skipped).

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
