//! API versions (`X-Api-Version`) and version ranges.

use std::fmt;
use std::str::FromStr;

pub use crate::generated::versions::{DEFAULT_VERSION, KNOWN_FEATURES, LATEST_VERSION, SUPPORTED_VERSIONS};

/// One API version, such as `2.11`. Only the versions in [`SUPPORTED_VERSIONS`] can be parsed;
/// ordering follows the version numbers (2.9 < 2.10).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ApiVersion {
    major: u8,
    minor: u8,
}

impl ApiVersion {
    /// Builds a version from its numbers without checking that it is supported. Generated code
    /// uses this for versions the schema loader has already checked.
    pub const fn new(major: u8, minor: u8) -> Self {
        Self { major, minor }
    }

    pub const fn major(self) -> u8 {
        self.major
    }

    pub const fn minor(self) -> u8 {
        self.minor
    }

    /// Parses a version string as sent in `X-Api-Version`. Surrounding whitespace is ignored.
    pub fn parse(text: &str) -> Result<Self, VersionError> {
        let trimmed = text.trim();
        let unsupported = || VersionError::Unsupported(trimmed.to_owned());
        let (major, minor) = trimmed.split_once('.').ok_or_else(unsupported)?;
        let parse_part = |part: &str| -> Option<u8> {
            if part.is_empty() || part.len() > 3 || !part.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            part.parse().ok()
        };
        let version = Self::new(parse_part(major).ok_or_else(unsupported)?, parse_part(minor).ok_or_else(unsupported)?);
        if SUPPORTED_VERSIONS.contains(&version) { Ok(version) } else { Err(unsupported()) }
    }

    /// The version used when a request names none.
    pub const fn default_version() -> Self {
        DEFAULT_VERSION
    }

    /// Whether this version lies in `[since, until)`; `None` bounds are open.
    #[inline]
    pub fn within(self, since: Option<ApiVersion>, until: Option<ApiVersion>) -> bool {
        since.is_none_or(|s| self >= s) && until.is_none_or(|u| self < u)
    }

    /// Supported versions as a comma-separated list, for error messages.
    pub fn supported_list() -> String {
        SUPPORTED_VERSIONS.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
    }
}

impl Default for ApiVersion {
    fn default() -> Self {
        DEFAULT_VERSION
    }
}

impl fmt::Display for ApiVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

impl FromStr for ApiVersion {
    type Err = VersionError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

/// A version string that names no supported version.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VersionError {
    #[error("unsupported API version `{0}`; supported versions: {list}", list = ApiVersion::supported_list())]
    Unsupported(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_supported_versions() {
        assert_eq!(ApiVersion::parse("2.11"), Ok(ApiVersion::new(2, 11)));
        assert_eq!(ApiVersion::parse(" 2.0 "), Ok(ApiVersion::new(2, 0)));
        assert_eq!(ApiVersion::default(), ApiVersion::new(2, 0));
    }

    #[test]
    fn orders_numerically() {
        assert!(ApiVersion::new(2, 9) < ApiVersion::new(2, 10));
        assert!(ApiVersion::new(2, 0) < ApiVersion::new(2, 2));
        let mut sorted = SUPPORTED_VERSIONS.to_vec();
        sorted.sort();
        assert_eq!(sorted, SUPPORTED_VERSIONS);
    }

    #[test]
    fn rejects_unsupported_versions() {
        for bad in ["2.1", "2.12", "3.0", "2", "", "two", "2.x", "+2.5", "2.05x", "2.-1"] {
            let err = ApiVersion::parse(bad).expect_err(bad);
            assert!(err.to_string().contains("supported versions: 2.0, 2.2"), "{err}");
        }
    }

    #[test]
    fn range_check() {
        let v = ApiVersion::new(2, 10);
        assert!(v.within(Some(ApiVersion::new(2, 10)), None));
        assert!(!v.within(None, Some(ApiVersion::new(2, 10))));
        assert!(v.within(None, None));
    }
}
