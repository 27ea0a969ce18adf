#![no_main]
//! Fuzz target `cel_parsers`: see `sharing_affinity_fuzz::cel_parsers`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| sharing_affinity_fuzz::cel_parsers(data));
