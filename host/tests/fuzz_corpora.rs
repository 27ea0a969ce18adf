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
