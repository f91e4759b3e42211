//! Helpers shared by the cross-crate tests (`rebill-tests`): the workspace root, the API versions
//! and site feature sets every wire test runs over, and the wire contexts built from them.

use std::path::{Path, PathBuf};

use rebill_xml::version::SUPPORTED_VERSIONS;
use rebill_xml::{ApiVersion, Features, WireContext};

/// Base URL used by the examples under `schema/examples/`.
pub const BASE_URL: &str = "https://api.rebill.test";

pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().map(Path::to_path_buf).unwrap_or_default()
}

/// Every combination of site features (none, then each known feature set).
pub fn feature_sets() -> Vec<Features> {
    vec![Features::none(), Features::all()]
}

pub fn ctx(version: ApiVersion, features: &Features) -> WireContext {
    WireContext::new(version, features.clone(), BASE_URL)
}

/// The latest version with every feature: the context examples are written in.
pub fn example_ctx() -> WireContext {
    ctx(rebill_xml::version::LATEST_VERSION, &Features::all())
}

pub fn versions() -> &'static [ApiVersion] {
    &SUPPORTED_VERSIONS
}

/// `credit_memos` or `none`, for names.
pub fn features_label(features: &Features) -> String {
    if features.names().is_empty() { "none".to_owned() } else { features.names().join("+") }
}
