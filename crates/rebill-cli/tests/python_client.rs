//! The project's own real-client suite: the official Python v2 client (`recurly==2.10.20` from
//! the package registry, unmodified) runs a merchant's ordinary flows against the real `rebill`
//! binary, on SQLite and on PostgreSQL.
//!
//! The client lives in a virtualenv cached in the cargo target directory (`python-venv` beside
//! `debug/`), made with `python3 -m venv` and filled by pip from `tests/python/requirements.txt`
//! by `rebill_testkit::python_venv`; it is reused while it holds exactly those requirements and
//! imports the pinned client. The flows are
//! `tests/python/client_flows.py`: one function per flow, each reported as passed or failed with
//! the exception and the last requests and responses, the program exiting non-zero when any
//! failed. A missing `python3`, a virtualenv that cannot be made or a package registry that cannot
//! be reached fails this test; nothing here is ever skipped.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use rebill_testkit::*;

/// The pinned requirements; the virtualenv records the text it was built from.
const REQUIREMENTS: &str = include_str!("python/requirements.txt");

/// The directory of the Python program and its requirements.
fn python_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests").join("python")
}

/// The client's version pinned in the requirements (`recurly==…`).
fn pinned_client_version() -> &'static str {
    REQUIREMENTS
        .lines()
        .find_map(|line| line.trim().strip_prefix("recurly=="))
        .map(str::trim)
        .expect("tests/python/requirements.txt pins recurly==<version>")
}

/// The version of the client a virtualenv's interpreter imports, if any.
fn installed_client_version(python: &Path) -> Option<String> {
    let output = Command::new(python).args(["-c", "import recurly; print(recurly.__version__)"]).output().ok()?;
    output.status.success().then(|| String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

/// The interpreter of the virtualenv holding exactly the pinned requirements (made when the cached
/// one does not, see `rebill_testkit::python_venv`), which imports the pinned client.
fn venv_python() -> PathBuf {
    let pinned = pinned_client_version();
    let check = format!("import recurly; assert recurly.__version__ == {pinned:?}, recurly.__version__");
    let python = python_venv("python-venv", &python_dir().join("requirements.txt"), REQUIREMENTS, &[&check]);
    assert_eq!(installed_client_version(&python).as_deref(), Some(pinned), "the virtualenv imports the pinned client");
    python
}

/// Runs every flow of the Python program against a fresh server on `db`.
fn client_flows(db: &str) {
    let python = venv_python();
    let key_file = vault_key_file();
    let server = start_with(db, Options { args: &["--vault-key-file", &key_file], ..Options::default() });
    // The gift card flow buys the product `gift_card` (no endpoint configures products).
    let products = ["gift-cards", "products", "add", "--site", "sandbox", "--product-code", "gift_card"];
    server.cli(&[&products[..], &["--currency", "USD", "2000", "5000"]].concat());
    let started = Instant::now();
    let output = Command::new(&python)
        .arg(python_dir().join("client_flows.py"))
        .env("REBILL_URL", format!("http://{}", server.addr))
        .env("REBILL_API_KEY", &server.key)
        .env("REBILL_PUBLIC_KEY", &server.public_key)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .unwrap_or_else(|e| panic!("run {}: {e}", python.display()));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the Python client's flows failed on {db} ({}):\n{stdout}\n{stderr}",
        output.status
    );
    assert!(stdout.contains(" passed, 0 failed\n"), "no summary line from the Python program:\n{stdout}\n{stderr}");
    println!("{stdout}(on {db}, {:?})", started.elapsed());
}

#[test]
fn python_client_flows_on_both_backends() {
    on_both_backends("pyclient", client_flows);
}
