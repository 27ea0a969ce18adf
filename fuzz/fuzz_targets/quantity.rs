#![no_main]
//! Fuzz target `quantity`: see `sharing_affinity_fuzz::quantity`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| sharing_affinity_fuzz::quantity(data));
