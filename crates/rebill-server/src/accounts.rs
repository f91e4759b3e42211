//! Account endpoints.
