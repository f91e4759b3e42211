//! The wire context: which version, which site features and which base URL a document is
//! written or read for.

use crate::version::{ApiVersion, KNOWN_FEATURES};

/// Whether a document is a request body (sent by a client) or a response body (sent by rebill).
/// Request reading is strict; response reading is lenient.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mode {
    Request,
    Response,
}

/// Which documents a field appears in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    Request,
    Response,
    Both,
}

impl Direction {
    #[inline]
    pub fn allows(self, mode: Mode) -> bool {
        match self {
            Direction::Both => true,
            Direction::Request => mode == Mode::Request,
            Direction::Response => mode == Mode::Response,
        }
    }
}

/// The site features that change the wire (declared in `schema/versions.toml`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Features {
    enabled: Vec<&'static str>,
}

impl Features {
    pub fn none() -> Self {
        Self::default()
    }

    /// Every known feature.
    pub fn all() -> Self {
        Self { enabled: KNOWN_FEATURES.to_vec() }
    }

    /// Parses a comma-separated list of feature names (`credit_memos`). Unknown names are an error.
    pub fn parse(list: &str) -> Result<Self, UnknownFeature> {
        let mut features = Self::none();
        for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            features = features.with(name)?;
        }
        Ok(features)
    }

    /// Adds one feature by name.
    pub fn with(mut self, name: &str) -> Result<Self, UnknownFeature> {
        let known = KNOWN_FEATURES.iter().find(|k| **k == name).ok_or_else(|| UnknownFeature(name.to_owned()))?;
        if !self.enabled.contains(known) {
            self.enabled.push(known);
            self.enabled.sort_unstable();
        }
        Ok(self)
    }

    #[inline]
    pub fn has(&self, name: &str) -> bool {
        self.enabled.contains(&name)
    }

    pub fn names(&self) -> &[&'static str] {
        &self.enabled
    }
}

/// A feature name that `schema/versions.toml` does not declare.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown site feature `{0}`; known features: {list}", list = KNOWN_FEATURES.join(", "))]
pub struct UnknownFeature(pub String);

/// Everything a codec needs to know about the document's audience.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireContext {
    pub version: ApiVersion,
    pub features: Features,
    /// Scheme, host and port that hrefs are built on, without a trailing slash
    /// (`https://api.rebill.test`).
    base_url: String,
}

impl WireContext {
    pub fn new(version: ApiVersion, features: Features, base_url: &str) -> Self {
        Self { version, features, base_url: base_url.trim_end_matches('/').to_owned() }
    }

    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// Whether a field with these bounds exists in this context.
    #[inline]
    pub fn has(&self, since: Option<ApiVersion>, until: Option<ApiVersion>, feature: Option<&str>) -> bool {
        self.version.within(since, until) && feature.is_none_or(|f| self.features.has(f))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn features_parse_and_reject_unknown() {
        let f = Features::parse("credit_memos").expect("known feature");
        assert!(f.has("credit_memos"));
        assert!(!Features::none().has("credit_memos"));
        let err = Features::parse("credit_memos,gift_wrap").expect_err("unknown feature");
        assert_eq!(err.0, "gift_wrap");
    }

    #[test]
    fn base_url_loses_trailing_slash() {
        let ctx = WireContext::new(ApiVersion::default(), Features::none(), "http://127.0.0.1:8080/");
        assert_eq!(ctx.base_url(), "http://127.0.0.1:8080");
    }
}
