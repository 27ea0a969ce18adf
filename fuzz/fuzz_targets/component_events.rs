#![no_main]
//! Fuzz target `component_events`: see `sharing_affinity_fuzz::component_events`. The component is
//! compiled once, before the first input (it takes longer than libFuzzer's timeout).

libfuzzer_sys::fuzz_target!(
    init: {
        sharing_affinity_fuzz::component_plugin();
    },
    |data: &[u8]| sharing_affinity_fuzz::component_events(data)
);
