//! The list machinery shared by every list endpoint.
