//! Python virtualenvs for the suites that run a Python program (the official Python client, the
//! localstripe fake of Stripe): each one is cached in the cargo target directory (beside `debug/`)
//! under its own name, made with `python3 -m venv` and filled by pip from a pinned requirements
//! file, and reused while it holds exactly those requirements and passes its checks.
//!
//! A virtualenv is built in `<name>.building-<pid>` beside the cache and renamed into place when
//! complete, so an interrupted build is never taken for a cached one. Test processes that ask for
//! the same virtualenv at once take turns on an exclusive lock on `<name>.lock`: one builds, the
//! others wait for it and then use what it built. A missing `python3`, a virtualenv that cannot
//! be made, pip failing or a package registry that cannot be reached panics with what is
//! missing; nothing here is ever skipped.

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Mutex;
use std::time::Instant;

/// The file inside a virtualenv holding the requirements text it was built from.
const STAMP: &str = "rebill-requirements.txt";

/// The cargo target directory the tests run from: the directory above the profile directory of
/// the `rebill` binary ([`crate::bin`]), e.g. `target/` (or `$CARGO_TARGET_DIR`, or
/// `target/<triple>/`).
pub fn target_dir() -> PathBuf {
    let bin = crate::bin();
    bin.parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .unwrap_or_else(|| panic!("no target directory above {}", bin.display()))
}

/// The interpreter (`<venv>/bin/python`) of the virtualenv `<target>/<name>` holding exactly
/// `requirements_text`, made (or made again) when the cached one does not or fails a check.
///
/// `requirements_path` is the file pip installs from; `requirements_text` is its text (usually
/// `include_str!` of the same file), which the virtualenv records so that a change of it makes
/// the virtualenv be built again. Each of `check` is a Python program (`python -c`) that must
/// succeed for a cached virtualenv to be used, and that must succeed on a freshly built one
/// (e.g. `import localstripe`). Panics when the virtualenv cannot be had.
///
/// Several threads and processes may call this at once: they take turns on a lock file, so a
/// virtualenv that another process is building is waited for, never used half-made. The answer
/// is remembered for the rest of the process.
pub fn python_venv(name: &str, requirements_path: &Path, requirements_text: &str, check: &[&str]) -> PathBuf {
    type Key = (String, String, Vec<String>);
    static DONE: Mutex<Option<HashMap<Key, PathBuf>>> = Mutex::new(None);
    let mut done = DONE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let key = (name.to_owned(), requirements_text.to_owned(), check.iter().map(|c| (*c).to_owned()).collect());
    if let Some(python) = done.get_or_insert_with(HashMap::new).get(&key) {
        return python.clone();
    }
    let python = prepare(name, requirements_path, requirements_text, check);
    done.get_or_insert_with(HashMap::new).insert(key, python.clone());
    python
}

/// [`python_venv`] without the memory of this process.
fn prepare(name: &str, requirements_path: &Path, requirements_text: &str, check: &[&str]) -> PathBuf {
    assert!(
        !name.is_empty() && !name.contains(['/', '\\']) && !name.starts_with('.'),
        "a virtualenv's name is one plain file name, not {name:?}"
    );
    let target = target_dir();
    std::fs::create_dir_all(&target).unwrap_or_else(|e| panic!("create {}: {e}", target.display()));
    let venv = target.join(name);
    let python = interpreter(&venv);
    let _lock = lock(&target.join(format!("{name}.lock")));
    if is_ready(&venv, requirements_text, check) {
        return python;
    }

    // Partial builds of earlier runs that were interrupted go first: a build in progress holds
    // the lock, so any left now is stale.
    let prefixes = [format!("{name}.building-"), format!("{name}.old-")];
    for entry in std::fs::read_dir(&target).into_iter().flatten().flatten() {
        let file_name = entry.file_name();
        let file_name = file_name.to_string_lossy();
        if prefixes.iter().any(|prefix| file_name.starts_with(prefix.as_str())) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
    let building = target.join(format!("{name}.building-{}", std::process::id()));
    let started = Instant::now();
    let missing_python = "this suite needs python3 with the venv module and pip \
                          (Debian: apt-get install python3 python3-venv)";
    match Command::new("python3").arg("--version").output() {
        Ok(out) if out.status.success() => {}
        Ok(out) => panic!("{missing_python}: `python3 --version` failed: {}", String::from_utf8_lossy(&out.stderr)),
        Err(e) => panic!("{missing_python}: python3 cannot be run: {e}"),
    }
    run(
        Command::new("python3").args(["-m", "venv"]).arg(&building),
        &format!("creating the virtualenv {name} ({missing_python})"),
    );
    let building_python = interpreter(&building);
    run(
        Command::new(&building_python)
            .args(["-m", "pip", "install", "--disable-pip-version-check", "--no-input", "-r"])
            .arg(requirements_path),
        &format!(
            "installing {} into the virtualenv {name} from the package registry (PyPI must be reachable)",
            requirements_path.display()
        ),
    );
    for program in check {
        run(
            Command::new(&building_python).args(["-c", program]),
            &format!("checking the freshly built virtualenv {name} with `{program}`"),
        );
    }
    std::fs::write(building.join(STAMP), requirements_text)
        .unwrap_or_else(|e| panic!("write the stamp of {}: {e}", building.display()));

    // The old virtualenv is moved aside before the new one takes its place, so the place is
    // empty only between two renames.
    let old = target.join(format!("{name}.old-{}", std::process::id()));
    if venv.exists() {
        std::fs::rename(&venv, &old).unwrap_or_else(|e| panic!("move {} to {}: {e}", venv.display(), old.display()));
    }
    std::fs::rename(&building, &venv)
        .unwrap_or_else(|e| panic!("move {} to {}: {e}", building.display(), venv.display()));
    let _ = std::fs::remove_dir_all(&old);
    for program in check {
        run(
            Command::new(&python).args(["-c", program]),
            &format!("checking the moved virtualenv {name} with `{program}`"),
        );
    }
    eprintln!("virtualenv {name} made from {} in {:?}", requirements_path.display(), started.elapsed());
    python
}

/// The interpreter of the virtualenv `venv`.
fn interpreter(venv: &Path) -> PathBuf {
    if cfg!(windows) { venv.join("Scripts").join("python.exe") } else { venv.join("bin").join("python") }
}

/// Whether the virtualenv `venv` was built from exactly `requirements_text` and passes every
/// check.
fn is_ready(venv: &Path, requirements_text: &str, check: &[&str]) -> bool {
    let python = interpreter(venv);
    std::fs::read_to_string(venv.join(STAMP)).is_ok_and(|stamp| stamp == requirements_text)
        && check.iter().all(|program| {
            Command::new(&python).args(["-c", program]).output().is_ok_and(|output| output.status.success())
        })
}

/// Takes the exclusive lock on `path` (created when missing), waiting for whoever holds it; the
/// lock is released when the answered file is dropped.
fn lock(path: &Path) -> File {
    let file = File::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .unwrap_or_else(|e| panic!("open the lock file {}: {e}", path.display()));
    match fs4::FileExt::try_lock(&file) {
        Ok(()) => return file,
        Err(fs4::TryLockError::WouldBlock) => {}
        Err(fs4::TryLockError::Error(e)) => panic!("lock {}: {e}", path.display()),
    }
    eprintln!("waiting for another process holding {} (building a virtualenv)", path.display());
    fs4::FileExt::lock(&file).unwrap_or_else(|e| panic!("lock {}: {e}", path.display()));
    file
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
