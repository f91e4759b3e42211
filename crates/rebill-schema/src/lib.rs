//! The rebill schema IR: loads `schema/` (TOML) into typed data and rejects a broken schema with
//! a message naming the file and the field. See `schema/README.md` for the format.

mod ir;
mod load;

pub use ir::*;
pub use load::{SchemaError, camel_case, load_dir, load_sources};
