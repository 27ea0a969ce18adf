#![no_main]
//! Fuzz target `kswe_imports`: see `sharing_affinity_fuzz::kswe_imports`. The interpreter guest is
//! compiled once, before the first input.

libfuzzer_sys::fuzz_target!(
    init: {
        sharing_affinity_fuzz::interpreter();
    },
    |data: &[u8]| sharing_affinity_fuzz::kswe_imports(data)
);
