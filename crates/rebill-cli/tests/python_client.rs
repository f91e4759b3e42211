//! The project's own real-client suite: the official Python v2 client (`recurly==2.10.20` from
//! the package registry, unmodified) runs a merchant's ordinary flows against the real `rebill`
//! binary, on SQLite and on PostgreSQL.
//!
//! The client lives in a virtualenv cached in the cargo target directory (`python-venv` beside
//! `debug/`), made with `python3 -m venv` and filled by pip from `tests/python/requirements.txt`;
//! it is reused while it holds exactly those requirements. The flows are
//! `tests/python/client_flows.py`: one function per flow, each reported as passed or failed with
//! the exception and the last requests and responses, the program exiting non-zero when any
//! failed. A missing `python3`, a virtualenv that cannot be made or a package registry that cannot
//! be reached fails this test; nothing here is ever skipped.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Mutex;
use std::time::Instant;

use rebill_testkit::*;

/// The pinned requirements; the virtualenv records the text it was built from.
const REQUIREMENTS: &str = include_str!("python/requirements.txt");

/// The directory of the Python program and its requirements.
fn python_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests").join("python")
}

/// The cargo target directory this test was built in (the `rebill` binary is `<target>/<profile>/rebill`,
/// also under `CARGO_TARGET_DIR` or a target triple directory).
fn target_dir() -> PathBuf {
    let bin = bin();
    bin.parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .unwrap_or_else(|| panic!("no target directory above {}", bin.display()))
}

/// The client's version pinned in the requirements (`recurly==…`).
fn pinned_client_version() -> &'static str {
    REQUIREMENTS
        .lines()
        .find_map(|line| line.trim().strip_prefix("recurly=="))
        .map(str::trim)
        .expect("tests/python/requirements.txt pins recurly==<version>")
}

/// Runs a command to completion, panicking with `what` and the command's output when it cannot be
/// started or fails.
#[track_caller]
fn run(command: &mut Command, what: &str) -> Output {
    let output = command.output().unwrap_or_else(|e| panic!("{what}: cannot run {command:?}: {e}"));
    assert!(
        output.status.success(),
        "{what}: {command:?} failed ({})\n--- stdout\n{}\n--- stderr\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// The version of the client a virtualenv's interpreter imports, if any.
fn installed_client_version(python: &Path) -> Option<String> {
    let output = Command::new(python).args(["-c", "import recurly; print(recurly.__version__)"]).output().ok()?;
    output.status.success().then(|| String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

/// The interpreter of a virtualenv holding exactly the pinned requirements, made (or made again)
/// when the cached one does not.
fn prepare_venv() -> PathBuf {
    let venv = target_dir().join("python-venv");
    let python = venv.join("bin").join("python");
    let stamp = venv.join("rebill-requirements.txt");
    let pinned = pinned_client_version();
    if std::fs::read_to_string(&stamp).is_ok_and(|s| s == REQUIREMENTS)
        && installed_client_version(&python).as_deref() == Some(pinned)
    {
        return python;
    }

    // Built beside the cache and moved into place when complete, so that an interrupted build
    // is never taken for a cached one; partial builds of earlier runs that failed go first.
    for entry in std::fs::read_dir(target_dir()).into_iter().flatten().flatten() {
        if entry.file_name().to_string_lossy().starts_with("python-venv.building-") {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
    let building = target_dir().join(format!("python-venv.building-{}", std::process::id()));
    let started = Instant::now();
    let missing_python = "the real-client suite needs python3 with the venv module and pip \
                          (Debian: apt-get install python3 python3-venv)";
    match Command::new("python3").arg("--version").output() {
        Ok(out) if out.status.success() => {}
        Ok(out) => panic!("{missing_python}: `python3 --version` failed: {}", String::from_utf8_lossy(&out.stderr)),
        Err(e) => panic!("{missing_python}: python3 cannot be run: {e}"),
    }
    run(
        Command::new("python3").args(["-m", "venv"]).arg(&building),
        &format!("creating the virtualenv ({missing_python})"),
    );
    let building_python = building.join("bin").join("python");
    run(
        Command::new(&building_python)
            .args(["-m", "pip", "install", "--disable-pip-version-check", "--no-input", "-r"])
            .arg(python_dir().join("requirements.txt")),
        "installing the pinned Python client from the package registry (PyPI must be reachable)",
    );
    let installed = installed_client_version(&building_python);
    assert_eq!(installed.as_deref(), Some(pinned), "the virtualenv imports the pinned client");
    std::fs::write(building.join("rebill-requirements.txt"), REQUIREMENTS).expect("write the virtualenv's stamp");
    let _ = std::fs::remove_dir_all(&venv);
    std::fs::rename(&building, &venv)
        .unwrap_or_else(|e| panic!("move {} to {}: {e}", building.display(), venv.display()));
    eprintln!("python client: virtualenv with recurly=={pinned} made in {:?}", started.elapsed());
    assert_eq!(installed_client_version(&python).as_deref(), Some(pinned), "the moved virtualenv imports the client");
    python
}

/// The prepared interpreter, made once per test process.
fn venv_python() -> PathBuf {
    static PYTHON: Mutex<Option<PathBuf>> = Mutex::new(None);
    let mut python = PYTHON.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    python.get_or_insert_with(prepare_venv).clone()
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
