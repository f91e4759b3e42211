//! The cached virtualenvs: test processes that ask for the same one at once get one build between
//! them, and a change of the requirements builds it again. The requirements here install nothing,
//! so no package registry is needed.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use rebill_testkit::{python_venv, target_dir};

const CHILD_NAME: &str = "REBILL_TESTKIT_VENV_NAME";
const CHILD_REQUIREMENTS: &str = "REBILL_TESTKIT_VENV_REQUIREMENTS";
const REQUIREMENTS: &str = "# nothing to install: the virtualenv of the testkit's own test\n";

/// The part of [`several_processes_share_one_build`] run in each child process; it does nothing
/// when run by itself.
#[test]
fn venv_child() {
    let (Some(name), Some(requirements)) = (std::env::var_os(CHILD_NAME), std::env::var_os(CHILD_REQUIREMENTS)) else {
        return;
    };
    let name = name.to_str().expect("a UTF-8 name");
    let python = python_venv(name, Path::new(&requirements), REQUIREMENTS, &["import sys"]);
    println!("python: {}", python.display());
}

/// Removes the virtualenv `name`, its lock file and any partial build from the target directory,
/// and a temporary directory, when dropped.
struct Cleanup(String, PathBuf);

impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.1);
        let _ = std::fs::remove_dir_all(target_dir().join(&self.0));
        // The lock file and any partial build.
        for entry in std::fs::read_dir(target_dir()).into_iter().flatten().flatten() {
            if entry.file_name().to_string_lossy().starts_with(&format!("{}.", self.0)) {
                let path = entry.path();
                let _ = if path.is_dir() { std::fs::remove_dir_all(&path) } else { std::fs::remove_file(&path) };
            }
        }
    }
}

#[test]
fn several_processes_share_one_build() {
    let unique = format!(
        "{}-{}",
        std::process::id(),
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0)
    );
    let name = format!("testkit-selftest-venv-{unique}");
    let dir = std::env::temp_dir().join(format!("rebill-testkit-venv-{unique}"));
    let _cleanup = Cleanup(name.clone(), dir.clone());
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let requirements = dir.join("requirements.txt");
    std::fs::write(&requirements, REQUIREMENTS).expect("write the requirements");

    // Three processes at once: one builds, the others wait for it and use what it built.
    let exe = std::env::current_exe().expect("the test executable");
    let children: Vec<_> = (0..3)
        .map(|_| {
            Command::new(&exe)
                .args(["--exact", "venv_child", "--nocapture", "--test-threads=1"])
                .env(CHILD_NAME, &name)
                .env(CHILD_REQUIREMENTS, &requirements)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("start a child test process")
        })
        .collect();
    let venv = target_dir().join(&name);
    let mut builds = 0;
    for child in children {
        let output = child.wait_with_output().expect("a child's output");
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "a child failed:\n{stdout}\n{stderr}");
        let python = stdout
            .lines()
            .find_map(|l| l.split_once("python: ").map(|(_, path)| path))
            .expect("the child's interpreter");
        assert_eq!(PathBuf::from(python), venv.join("bin").join("python"));
        builds += stderr.matches(&format!("virtualenv {name} made")).count();
    }
    assert_eq!(builds, 1, "one process built the virtualenv, the others used it");
    assert_eq!(std::fs::read_to_string(venv.join("rebill-requirements.txt")).expect("the stamp"), REQUIREMENTS);
    let leftovers: Vec<_> = std::fs::read_dir(target_dir())
        .expect("the target directory")
        .flatten()
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|file| file.starts_with(&format!("{name}.")) && *file != format!("{name}.lock"))
        .collect();
    assert_eq!(leftovers, Vec::<String>::new(), "no partial build is left");

    // Other requirements: built again in place (the check runs on it).
    let changed = format!("{REQUIREMENTS}# changed\n");
    std::fs::write(&requirements, &changed).expect("write the requirements");
    let python = python_venv(&name, &requirements, &changed, &["import sys"]);
    assert_eq!(python, venv.join("bin").join("python"));
    assert_eq!(std::fs::read_to_string(venv.join("rebill-requirements.txt")).expect("the stamp"), changed);
    let output = Command::new(&python).args(["-c", "import sys; print(sys.prefix)"]).output().expect("run it");
    assert_eq!(String::from_utf8_lossy(&output.stdout).trim(), venv.display().to_string());

    // A check that fails is not accepted on a fresh build either.
    let failing = std::panic::catch_unwind(|| python_venv(&name, &requirements, &changed, &["raise SystemExit(3)"]));
    assert!(failing.is_err(), "a virtualenv failing its check is an error");
}
