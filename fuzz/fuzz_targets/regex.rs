#![no_main]
//! Fuzz target `regex`: see `sharing_affinity_fuzz::regex`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| sharing_affinity_fuzz::regex(data));
