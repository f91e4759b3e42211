//! Decoding errors. Every error carries the path of the element it concerns, built while the
//! error travels up through the nested decoders (nothing is tracked on the happy path).

use std::fmt;

use crate::version::ApiVersion;

/// What went wrong while reading a document.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeErrorKind {
    /// The bytes are not well-formed XML (unclosed or mismatched tags, bad attributes, …).
    #[error("malformed XML at byte {position}: {message}")]
    Malformed { position: u64, message: String },
    #[error("invalid UTF-8 at byte {position}")]
    InvalidUtf8 { position: u64 },
    /// DOCTYPE declarations (and with them every custom entity) are refused outright.
    #[error("DOCTYPE declarations are not accepted")]
    Doctype,
    #[error("unknown entity `&{0};`")]
    UnknownEntity(String),
    #[error("invalid character reference `&{0};`")]
    InvalidCharRef(String),
    /// A character XML 1.0 forbids (a C0 control other than tab and line breaks, U+FFFE, U+FFFF).
    #[error("character U+{0:04X} is not allowed in XML")]
    ForbiddenChar(u32),
    #[error("the document has no root element")]
    NoRoot,
    #[error("unexpected content after the root element")]
    TrailingContent,
    #[error("expected root element `{expected}`, found `{found}`")]
    UnexpectedRoot { expected: String, found: String },
    #[error("elements nested deeper than {0} levels")]
    TooDeep(usize),
    /// An element the resource does not have (at any version).
    #[error("unknown element")]
    UnknownElement,
    /// An element the resource has, but not at the requested version.
    #[error("element not available at API version {0}")]
    NotAtVersion(ApiVersion),
    /// An element that exists only for sites with a feature.
    #[error("element requires the `{0}` site feature")]
    FeatureRequired(&'static str),
    /// A response-only element sent in a request.
    #[error("read-only element cannot be sent in a request")]
    ResponseOnly,
    #[error("unexpected text")]
    UnexpectedText,
    #[error("unexpected child element `{0}` in a value element")]
    UnexpectedChild(String),
    #[error("`{value}` is not {expected}")]
    InvalidValue { value: String, expected: String },
    #[error("nil is not allowed here")]
    NilNotAllowed,
    #[error("missing attribute `{0}`")]
    MissingAttribute(&'static str),
}

/// One step of an element path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathSegment {
    Element(String),
    Index(usize),
}

/// A decoding error and the path of the element it concerns, e.g.
/// `subscription.account.billing_info.number`.
///
/// The error is one pointer wide, so the decoders' `Result`s stay small on the happy path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError(Box<Inner>);

#[derive(Debug, Clone, PartialEq, Eq)]
struct Inner {
    kind: DecodeErrorKind,
    /// Innermost segment first; reversed when rendered.
    reversed_path: Vec<PathSegment>,
}

impl DecodeError {
    pub fn new(kind: DecodeErrorKind) -> Self {
        Self(Box::new(Inner { kind, reversed_path: Vec::new() }))
    }

    pub fn kind(&self) -> &DecodeErrorKind {
        &self.0.kind
    }

    /// Prefixes the path with an element name (called by each enclosing decoder).
    #[must_use]
    pub fn within(mut self, element: &str) -> Self {
        self.0.reversed_path.push(PathSegment::Element(element.to_owned()));
        self
    }

    /// Prefixes the path with a list index.
    #[must_use]
    pub fn at_index(mut self, index: usize) -> Self {
        self.0.reversed_path.push(PathSegment::Index(index));
        self
    }

    /// The dotted element path (`invoice.line_items[0].quantity`), empty for document-level errors.
    pub fn path(&self) -> String {
        let mut out = String::new();
        for segment in self.0.reversed_path.iter().rev() {
            match segment {
                PathSegment::Element(name) => {
                    if !out.is_empty() {
                        out.push('.');
                    }
                    out.push_str(name);
                }
                PathSegment::Index(i) => {
                    out.push('[');
                    out.push_str(&i.to_string());
                    out.push(']');
                }
            }
        }
        out
    }

    /// Whether the document itself is not acceptable XML (as opposed to well-formed XML with a
    /// wrong element or value). The service answers the first kind with 400 `invalid_xml`.
    pub fn is_syntax(&self) -> bool {
        matches!(
            self.0.kind,
            DecodeErrorKind::Malformed { .. }
                | DecodeErrorKind::InvalidUtf8 { .. }
                | DecodeErrorKind::Doctype
                | DecodeErrorKind::UnknownEntity(_)
                | DecodeErrorKind::InvalidCharRef(_)
                | DecodeErrorKind::ForbiddenChar(_)
                | DecodeErrorKind::NoRoot
                | DecodeErrorKind::TrailingContent
                | DecodeErrorKind::TooDeep(_)
        )
    }
}

impl From<DecodeErrorKind> for DecodeError {
    fn from(kind: DecodeErrorKind) -> Self {
        Self::new(kind)
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = self.path();
        if path.is_empty() { write!(f, "{}", self.0.kind) } else { write!(f, "{} at `{}`", self.0.kind, path) }
    }
}

impl std::error::Error for DecodeError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_is_built_outwards() {
        let err = DecodeError::new(DecodeErrorKind::UnknownElement)
            .within("quantity")
            .at_index(2)
            .within("line_items")
            .within("invoice");
        assert_eq!(err.path(), "invoice.line_items[2].quantity");
        assert_eq!(err.to_string(), "unknown element at `invoice.line_items[2].quantity`");
    }
}
