#![no_main]
//! Fuzz target `cel`: see `sharing_affinity_fuzz::cel`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| sharing_affinity_fuzz::cel(data));
