//! What the benchmarks of this crate share: starting `rebill serve` and reading what it printed,
//! the `rebill` command line, the release binaries' directory and a process's memory and file
//! descriptors ([`process`]); plain HTTP/1.1 calls, keep-alive clients and card tokens
//! ([`http`]); a local webhook receiver ([`receiver`]); latency percentiles ([`stats`]).

pub mod http;
pub mod process;
pub mod receiver;
pub mod stats;
