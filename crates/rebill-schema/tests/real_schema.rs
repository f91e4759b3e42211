//! The committed schema/ loads and has the shape the rest of rebill relies on.

use rebill_schema::{Direction, FieldType, load_dir};

#[test]
fn committed_schema_loads() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../schema");
    let schema = load_dir(&dir).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(schema.versions.len(), 11);
    assert_eq!(schema.default_version.to_string(), "2.0");
    assert_eq!(schema.latest_version().to_string(), "2.11");
    let refund = schema.resource("refund").expect("refund request");
    assert!(refund.is_request_only());
    assert_eq!(refund.root, "invoice");
    let invoice = schema.resource("invoice").expect("invoice");
    let line_items = invoice.fields.iter().find(|f| f.name == "line_items").expect("line_items");
    assert!(matches!(&line_items.ty, FieldType::List { item, .. } if item == "adjustment"));
    assert!(invoice.fields.iter().any(|f| f.direction == Direction::Response));
}
