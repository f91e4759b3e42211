//! Versioned JSON documents. Every JSON column the store writes (a subscription's `value`,
//! `creation` and `details`, an event's `payload`, a charge's `lines`) carries the version
//! of its layout, so that a later layout can be told apart from this one and migrated on read.
//!
//! The service hands the store documents as text and gets them back as it gave them: the
//! version is added on write and taken off on read, without parsing the document (renewals
//! write and read thousands at once). An object gets a last member `"document_version": N`
//! (`{"a":1}` is stored `{"a":1,"document_version":1}`; readers of the column that parse it
//! skip the unknown member); anything else (an array) is wrapped:
//! `{"document_version":1,"document":[…]}`. A document stored before versions existed has
//! neither and is read as it is (version 0, the same layout as version 1).

use crate::StoreError;

/// The layout version written today.
pub(crate) const DOCUMENT_VERSION: u32 = 1;

const MEMBER: &str = "\"document_version\":";
const WRAPPED: &str = "\"document\":";

/// `json` as stored: with its version.
pub(crate) fn seal(json: &str) -> String {
    let trimmed = json.trim();
    match trimmed.strip_prefix('{').and_then(|t| t.strip_suffix('}')) {
        Some(members) if members.trim().is_empty() => format!("{{{MEMBER}{DOCUMENT_VERSION}}}"),
        Some(members) => format!("{{{members},{MEMBER}{DOCUMENT_VERSION}}}"),
        None => format!("{{{MEMBER}{DOCUMENT_VERSION},{WRAPPED}{trimmed}}}"),
    }
}

/// A stored document as the service wrote it, and the version it was stored with (0: before
/// versions). A version newer than [`DOCUMENT_VERSION`] is refused: this build cannot know its
/// layout.
pub(crate) fn open(stored: &str) -> Result<(String, u32), StoreError> {
    let (document, version) = unseal(stored);
    if version > DOCUMENT_VERSION {
        return Err(StoreError::Invalid(format!(
            "a stored document has layout version {version}; this rebill reads up to {DOCUMENT_VERSION}"
        )));
    }
    Ok((document, version))
}

/// A stored document as the service wrote it (see [`open`]).
pub(crate) fn read(stored: String) -> Result<String, StoreError> {
    if !stored.contains(MEMBER) {
        return Ok(stored);
    }
    Ok(open(&stored)?.0)
}

fn unseal(stored: &str) -> (String, u32) {
    let text = stored.trim();
    // Wrapped: {"document_version":N,"document":…}
    if let Some(rest) = text.strip_prefix('{').and_then(|t| t.strip_prefix(MEMBER)) {
        let digits = rest.chars().take_while(char::is_ascii_digit).count();
        if let (Ok(version), Some(inner)) = (
            rest[..digits].parse::<u32>(),
            rest[digits..].strip_prefix(',').and_then(|t| t.strip_prefix(WRAPPED)).and_then(|t| t.strip_suffix('}')),
        ) {
            return (inner.to_owned(), version);
        }
        // Only the version: an empty object.
        if let (Ok(version), "}") = (rest[..digits].parse::<u32>(), &rest[digits..]) {
            return ("{}".to_owned(), version);
        }
    }
    // Last member: {…,"document_version":N}
    if let Some(body) = text.strip_suffix('}')
        && let Some(at) = body.rfind(MEMBER)
        && let Some(members) = body[..at].strip_suffix(',')
        && let Ok(version) = body[at + MEMBER.len()..].parse::<u32>()
    {
        return (format!("{members}}}"), version);
    }
    (text.to_owned(), 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_get_a_last_member_and_lose_it_on_read() {
        let doc = r#"{"uuid":"u1","terms":{"plan_code":"gold"}}"#;
        let stored = seal(doc);
        assert_eq!(stored, r#"{"uuid":"u1","terms":{"plan_code":"gold"},"document_version":1}"#);
        assert_eq!(open(&stored).expect("current"), (doc.to_owned(), 1));
        assert_eq!(read(stored).expect("current"), doc);
    }

    #[test]
    fn an_empty_object_keeps_only_the_version() {
        assert_eq!(seal("{}"), r#"{"document_version":1}"#);
        assert_eq!(seal(" { } "), r#"{"document_version":1}"#);
        assert_eq!(open(r#"{"document_version":1}"#).expect("current"), ("{}".to_owned(), 1));
    }

    #[test]
    fn arrays_are_wrapped() {
        let doc = r#"[{"kind":"plan","total_in_cents":1000},{"kind":"credit"}]"#;
        let stored = seal(doc);
        assert_eq!(stored, format!(r#"{{"document_version":1,"document":{doc}}}"#));
        assert_eq!(open(&stored).expect("current"), (doc.to_owned(), 1));
        assert_eq!(open(&seal("[]")).expect("current"), ("[]".to_owned(), 1));
    }

    #[test]
    fn legacy_unversioned_documents_read_as_they_are() {
        for legacy in [r#"{"action":"cancel"}"#, "[]", r#"[{"a":1}]"#, "{}", r#"{"v":2}"#, r#"{"document":1}"#] {
            assert_eq!(open(legacy).expect("legacy"), (legacy.to_owned(), 0), "{legacy}");
            assert_eq!(read(legacy.to_owned()).expect("legacy"), legacy);
        }
    }

    #[test]
    fn a_member_named_like_the_version_inside_the_document_is_kept() {
        // Only the store's own last member is taken off.
        let doc = r#"{"notes":{"document_version":7},"x":1}"#;
        assert_eq!(open(doc).expect("legacy"), (doc.to_owned(), 0));
        assert_eq!(open(&seal(doc)).expect("current"), (doc.to_owned(), 1));
    }

    #[test]
    fn a_newer_layout_is_refused() {
        assert!(matches!(open(r#"{"a":1,"document_version":2}"#), Err(StoreError::Invalid(_))));
        assert!(matches!(open(r#"{"document_version":9,"document":[]}"#), Err(StoreError::Invalid(_))));
    }
}
