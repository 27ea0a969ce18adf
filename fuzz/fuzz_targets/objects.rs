#![no_main]
//! Fuzz target `objects`: see `sharing_affinity_fuzz::objects`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| sharing_affinity_fuzz::objects(data));
