//! `write` and `stale_files` (behind `cargo xtask regen` and `--check`) on a scratch checkout.

use std::path::{Path, PathBuf};

use rebill_codegen::{MODELS_DIR, generate, stale_files, stale_message, write};

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rebill-codegen-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

fn files() -> Vec<rebill_codegen::GeneratedFile> {
    let schema_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../schema");
    let schema = rebill_schema::load_dir(&schema_dir).unwrap_or_else(|e| panic!("{e}"));
    generate(&schema).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn write_then_check_finds_nothing_stale() {
    let root = scratch("fresh");
    let files = files();
    assert_eq!(write(&root, &files).expect("write").len(), files.len());
    assert!(stale_files(&root, &files).is_empty());
    assert!(write(&root, &files).expect("rewrite").is_empty(), "an unchanged schema writes nothing");
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn check_names_edited_and_leftover_files() {
    let root = scratch("drift");
    let files = files();
    write(&root, &files).expect("write");
    let edited = Path::new(MODELS_DIR).join("invoice.rs");
    std::fs::write(root.join(&edited), "// hand edit\n").expect("edit");
    let leftover = Path::new(MODELS_DIR).join("gone.rs");
    std::fs::write(root.join(&leftover), "// from a removed resource\n").expect("leftover");
    let stale = stale_files(&root, &files);
    assert_eq!(stale, vec![leftover.clone(), edited.clone()]);
    let message = stale_message(&stale);
    assert!(message.contains("crates/rebill-models/src/generated/invoice.rs"), "{message}");
    assert!(message.ends_with("run `cargo xtask regen` and commit the result"), "{message}");
    write(&root, &files).expect("repair");
    assert!(stale_files(&root, &files).is_empty());
    assert!(!root.join(&leftover).exists(), "files the schema no longer produces are removed");
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn output_is_deterministic() {
    assert_eq!(files(), files());
}
