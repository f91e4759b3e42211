//! The client's generated endpoint methods: one file per resource group, every endpoint of the
//! table with a method, and `--check` covering the client's directory like the models'.

use std::path::{Path, PathBuf};

use rebill_codegen::{CLIENT_DIR, generate, stale_files, write};

fn schema() -> rebill_schema::Schema {
    let schema_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../schema");
    rebill_schema::load_dir(&schema_dir).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn every_endpoint_has_a_client_method_through_its_marker_type() {
    let schema = schema();
    let files = generate(&schema).unwrap_or_else(|e| panic!("{e}"));
    let client: Vec<_> = files.iter().filter(|f| f.path.starts_with(CLIENT_DIR)).collect();
    assert!(client.iter().any(|f| f.path == Path::new(CLIENT_DIR).join("mod.rs")));
    assert!(client.iter().any(|f| f.path == Path::new(CLIENT_DIR).join("subscriptions.rs")));
    let all: String = client.iter().map(|f| f.contents.as_str()).collect();
    for e in &schema.endpoints {
        let marker = format!("api::{}", rebill_schema::camel_case(&e.name));
        let called = all.contains(&format!("{marker}>")) || all.contains(&format!("{marker},\n"));
        assert!(called, "no client method calls {marker}");
    }
    let accounts = &client.iter().find(|f| f.path.ends_with("accounts.rs")).expect("accounts.rs").contents;
    assert!(accounts.contains("pub async fn create("), "{accounts}");
    assert!(accounts.contains("pub fn list_invoices("), "{accounts}");
}

#[test]
fn check_covers_the_client_directory() {
    let root: PathBuf = std::env::temp_dir().join(format!("rebill-codegen-client-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let files = generate(&schema()).unwrap_or_else(|e| panic!("{e}"));
    write(&root, &files).expect("write");
    let edited = Path::new(CLIENT_DIR).join("invoices.rs");
    std::fs::write(root.join(&edited), "// hand edit\n").expect("edit");
    let leftover = Path::new(CLIENT_DIR).join("widgets.rs");
    std::fs::write(root.join(&leftover), "// a removed group\n").expect("leftover");
    assert_eq!(stale_files(&root, &files), vec![edited, leftover.clone()]);
    write(&root, &files).expect("repair");
    assert!(stale_files(&root, &files).is_empty());
    assert!(!root.join(&leftover).exists());
    let _ = std::fs::remove_dir_all(&root);
}
