//! Replays the committed fuzz corpora (`fuzz/corpus/<target>/`: seeds and every input that once
//! crashed a target) through the fuzz targets' entry points, so the normal suite guards what the
//! fuzzers found without nightly or libFuzzer. The entry points are compiled from the fuzz crate's
//! own source file.

#[allow(
    dead_code,
    reason = "the fuzz crate's entry points; not all are used by this test"
)]
#[path = "../../fuzz/src/entries.rs"]
mod entries;
#[path = "../../fuzz/src/host_entries.rs"]
mod host_entries;

use std::path::PathBuf;

fn corpus(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = sharing_affinity_host::artifact::workspace_root()
        .join("fuzz")
        .join("corpus")
        .join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "{} is empty", dir.display());
    files
        .into_iter()
        .map(|p| {
            let data = std::fs::read(&p).unwrap();
            (p, data)
        })
        .collect()
}

fn replay(target: &str, entry: fn(&[u8])) {
    for (path, data) in corpus(target) {
        let result = std::panic::catch_unwind(|| entry(&data));
        assert!(result.is_ok(), "{target}: {} fails", path.display());
    }
}

#[test]
fn objects_corpus() {
    replay("objects", entries::objects);
}

#[test]
fn quantity_corpus() {
    replay("quantity", entries::quantity);
}

#[test]
fn cel_corpus() {
    replay("cel", entries::cel);
}

#[test]
fn cel_parsers_corpus() {
    replay("cel_parsers", entries::cel_parsers);
}

#[test]
fn regex_corpus() {
    replay("regex", entries::regex);
}

#[test]
fn cycle_corpus() {
    replay("cycle", entries::cycle);
}

/// The cycle property holds on a plain run: every pending pod of every bundled cluster gets a
/// full cycle and no Bind breaks a rule (checks the harness itself reaches Bind).
#[test]
fn cycle_entry_reaches_bind_without_violations() {
    for which in 0..entries::CLUSTERS.len() {
        let ops: Vec<entries::Op> = (0..20).map(|i| entries::Op::Cycle(i % 2)).collect();
        let binds = entries::run_cycle(which, &ops);
        assert!(binds > 0, "cluster {which}: no pod was bound");
    }
}

#[test]
fn kswe_imports_corpus() {
    replay("kswe_imports", host_entries::kswe_imports);
}

#[test]
fn component_events_corpus() {
    sharing_affinity_host::artifact::default_component().expect("the component builds");
    replay("component_events", host_entries::component_events);
}

/// The interpreter guest reaches the host functions: an empty program fails no hook; a program
/// whose one call makes the Go host panic (`currentPod` into a buffer outside memory) fails
/// every hook that runs it; `proc_exit` closes each instance it runs in.
#[test]
fn kswe_imports_programs_reach_the_host_functions() {
    use host_entries::{Arg, Call, host_functions, run_kswe_program};
    let index = |name: &str| {
        let i = host_functions()
            .iter()
            .position(|f| f.name == name)
            .unwrap_or_else(|| panic!("no host function {name}"));
        u16::try_from(i).unwrap()
    };
    assert_eq!(
        host_functions().len() + 1,
        74,
        "fuzz/seed_corpora.py's KSWE_HOST_FUNCTIONS must match"
    );
    assert_eq!(run_kswe_program(&[]), 0, "the empty program");
    let call = |function, args| Call { function, args };
    let garbage = call(
        index("currentPod"),
        [
            Arg::Any(0xffff_ff00),
            Arg::Any(0x7fff_ffff),
            Arg::Small(0),
            Arg::Small(0),
            Arg::Small(0),
        ],
    );
    // The hooks that answer with a status after a failed call: prefilter, filter, postfilter,
    // addpod, prescore, score, reserve, permit. (NormalizeScore's failure is the Go host's size
    // mismatch panic, an error; PreBind and Bind find no binding instance, as Permit's trapped
    // instance was dropped: an error too.)
    assert_eq!(run_kswe_program(std::slice::from_ref(&garbage)), 8);
    let exit = call(index("proc_exit"), [Arg::Small(3); 5]);
    assert_eq!(run_kswe_program(&[exit]), 8, "each replacement exits again");
    let in_bounds = call(
        index("currentPod"),
        [
            Arg::Low(0x1000),
            Arg::Low(0x8000),
            Arg::Small(0),
            Arg::Small(0),
            Arg::Small(0),
        ],
    );
    assert_eq!(run_kswe_program(&[in_bounds]), 0, "a pod written in bounds");
}

/// Undamaged events are all accepted by both; damaged ones are rejected by both, alike.
#[test]
fn component_events_reject_damaged_objects_alike() {
    use host_entries::{Damage, Ev, run_component_events};
    sharing_affinity_host::artifact::default_component().expect("the component builds");
    let objects: Vec<Ev> = (0..16)
        .map(|object| Ev {
            kind: 0,
            object,
            damage: Damage::None,
        })
        .collect();
    assert_eq!(run_component_events(&[&objects]), 0);
    let damaged: Vec<Ev> = (0..16)
        .map(|object| Ev {
            kind: 0,
            object,
            damage: Damage::Truncate(20),
        })
        .collect();
    assert_eq!(run_component_events(&[&objects, &damaged]), 16);
}
