#![no_main]
//! Fuzz target `component_events`: see `sharing_affinity_fuzz::component_events`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| sharing_affinity_fuzz::component_events(data));
