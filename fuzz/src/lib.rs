//! The fuzz targets' entry points. The same file is compiled into the normal test suite
//! (`host/tests/fuzz_corpora.rs`), which replays the committed corpora through these functions.

#[path = "entries.rs"]
mod entries;
pub use entries::*;
