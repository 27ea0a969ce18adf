#![no_main]
//! Fuzz target `kswe_imports`: see `sharing_affinity_fuzz::kswe_imports`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| sharing_affinity_fuzz::kswe_imports(data));
