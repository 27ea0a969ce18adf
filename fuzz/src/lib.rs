//! The fuzz targets' entry points. The same files are compiled into the normal test suite
//! (`host/tests/fuzz_corpora.rs`), which replays the committed corpora through these functions:
//! `entries.rs` for the core library's surfaces, `host_entries.rs` for the wasm hosts'.

mod entries;
pub use entries::*;

mod host_entries;
pub use host_entries::*;
