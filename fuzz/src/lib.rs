//! What the fuzz targets share: the selector byte of the API version and site features, and a
//! service state (`AppState` on a SQLite database in a temporary file, made once per process)
//! for the targets that run the service's own request functions. The protocol layers and the
//! token endpoint's form reading take an `AppState` only for its settings and clock; no target
//! reaches the database.

use std::sync::{Arc, OnceLock};

use rebill_server::{AppState, Config, Deprecation, SystemClock};
use rebill_xml::version::{KNOWN_FEATURES, SUPPORTED_VERSIONS};
use rebill_xml::{ApiVersion, Features, WireContext};

/// The base URL of every wire context.
pub const BASE_URL: &str = "https://api.rebill.test";

/// The version and features a selector byte names: the low four bits pick the version (modulo
/// the number of versions), bit 4 onwards each known feature in order.
pub fn wire_context(selector: u8) -> WireContext {
    let version = SUPPORTED_VERSIONS[usize::from(selector & 0x0f) % SUPPORTED_VERSIONS.len()];
    WireContext::new(version, features(selector >> 4), BASE_URL)
}

/// The features of bits 0.. of `bits`, one per known feature.
pub fn features(bits: u8) -> Features {
    let mut features = Features::none();
    for (i, name) in KNOWN_FEATURES.iter().enumerate().take(8) {
        if bits & (1 << i) != 0 {
            features = features.with(name).unwrap_or_else(|_| Features::none());
        }
    }
    features
}

/// The runtime the async request functions run on (one thread, this one).
pub fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a current-thread tokio runtime")
    })
}

/// The service state: default settings, with API version 2.2 past its sunset and 2.3
/// deprecated with a sunset far ahead (so both deprecation answers are reachable).
pub fn state() -> &'static AppState {
    static STATE: OnceLock<AppState> = OnceLock::new();
    STATE.get_or_init(|| {
        let path = std::env::temp_dir().join(format!("rebill-fuzz-{}.db", std::process::id()));
        for stale in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{stale}", path.display()));
        }
        let url = format!("sqlite://{}", path.display());
        let store = runtime().block_on(rebill_store::Store::connect(&url)).expect("a SQLite store in a temporary file");
        let config = Config {
            deprecations: vec![
                Deprecation { version: ApiVersion::V2_2, sunset: 0 },
                Deprecation { version: ApiVersion::V2_3, sunset: 32_503_680_000 },
            ],
            ..Config::default()
        };
        AppState::new(store, Arc::new(SystemClock), config)
    })
}
