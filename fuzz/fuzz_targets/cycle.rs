#![no_main]
//! Fuzz target `cycle`: see `sharing_affinity_fuzz::cycle`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| sharing_affinity_fuzz::cycle(data));
