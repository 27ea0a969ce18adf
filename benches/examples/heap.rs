//! The native plugin's heap per object kind, counted by a global allocator: live bytes, live
//! blocks, and what the blocks would cost in a 32-bit dlmalloc (the wasm guests' allocator: 4
//! bytes of header per block, 8-byte granularity, 16 bytes at least). A finer view than
//! `examples/memory` (which sees only the guest's linear memory, in 64 KiB pages), for finding
//! where the bytes of one kind of object go; pointers are 8 bytes here and 4 in the guests, so
//! structs are larger than in the guest, strings are not.
//!
//! ```text
//! cargo build --release -p sharing-affinity-benches --example heap
//! target/release/examples/heap /tmp/g5000m/cluster.json [KIND]
//! ```
//!
//! With a kind (e.g. `ResourceClaim`), also prints the blocks that loading that kind left live,
//! by size (with `PreFilter`, the blocks the first PreFilter left live, per node); with `HEAP_TRACE=864,384` (sizes in bytes), prints to stderr where one block of each
//! of those sizes was allocated while loading that kind (a backtrace; release builds keep the
//! function names).

use std::alloc::{GlobalAlloc, Layout, System};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

use sharing_affinity_benches::KINDS_IN_LOAD_ORDER;
use sharing_affinity_core::object::Kind;
use sharing_affinity_core::{EventKind, Plugin};
use sharing_affinity_host::replay::Cluster;

/// Sizes above this are counted in the last bucket.
const BUCKETS: usize = 4097;

struct Counting;

static BYTES: AtomicI64 = AtomicI64::new(0);
static BLOCKS: AtomicI64 = AtomicI64::new(0);
static DLMALLOC: AtomicI64 = AtomicI64::new(0);
static BY_SIZE: [AtomicI64; BUCKETS] = [const { AtomicI64::new(0) }; BUCKETS];
static HISTOGRAM: AtomicBool = AtomicBool::new(false);

/// A 32-bit dlmalloc block for `size` bytes.
fn dlmalloc(size: usize) -> i64 {
    ((size + 4).div_ceil(8) * 8).max(16) as i64
}

thread_local! {
    static IN_TRACE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}
static TRACE: [AtomicBool; BUCKETS] = [const { AtomicBool::new(false) }; BUCKETS];
static TRACED: [AtomicI64; BUCKETS] = [const { AtomicI64::new(0) }; BUCKETS];

fn trace(size: usize) {
    if !TRACE.get(size).is_some_and(|t| t.load(Ordering::Relaxed)) {
        return;
    }
    if TRACED[size.min(BUCKETS - 1)].fetch_add(1, Ordering::Relaxed) != 3 {
        return;
    }
    if IN_TRACE.with(|t| t.replace(true)) {
        return;
    }
    eprintln!("--- {size}\n{}", std::backtrace::Backtrace::force_capture());
    IN_TRACE.with(|t| t.set(false));
}

fn count(size: usize, sign: i64) {
    if sign > 0 && HISTOGRAM.load(Ordering::Relaxed) && !IN_TRACE.with(|t| t.get()) {
        trace(size);
    }
    BYTES.fetch_add(sign * size as i64, Ordering::Relaxed);
    BLOCKS.fetch_add(sign, Ordering::Relaxed);
    DLMALLOC.fetch_add(sign * dlmalloc(size), Ordering::Relaxed);
    if HISTOGRAM.load(Ordering::Relaxed) {
        BY_SIZE[size.min(BUCKETS - 1)].fetch_add(sign, Ordering::Relaxed);
    }
}

// SAFETY: forwards every call to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size(), 1);
        // SAFETY: the caller's contract is passed on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        count(layout.size(), -1);
        // SAFETY: the caller's contract is passed on.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(layout.size(), -1);
        count(new_size, 1);
        // SAFETY: the caller's contract is passed on.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let file = args.first().expect("usage: heap <cluster.json> [KIND]");
    let prefilter_detail = args.get(1).is_some_and(|k| k == "PreFilter");
    let detail = args
        .get(1)
        .filter(|_| !prefilter_detail)
        .map(|k| Kind::from_name(k).expect("a kind name, or PreFilter"));
    if let Ok(sizes) = std::env::var("HEAP_TRACE") {
        for s in sizes.split(',') {
            TRACE[s.parse::<usize>().expect("sizes")].store(true, Ordering::Relaxed);
        }
    }
    let cluster = Cluster::from_file(Path::new(file)).expect("reading the cluster");
    let mut plugin = Plugin::new("").expect("plugin");
    let now = || [&BYTES, &BLOCKS, &DLMALLOC].map(|c| c.load(Ordering::Relaxed));
    println!(
        "{:>22} {:>7} {:>10} {:>8} {:>10} {:>8}",
        "kind", "objects", "bytes", "each", "dlmalloc32", "each"
    );
    for kind in KINDS_IN_LOAD_ORDER {
        let texts: Vec<String> = cluster
            .objects
            .iter()
            .filter(|o| o.kind() == kind)
            .map(|o| o.to_json_string())
            .collect();
        if texts.is_empty() {
            continue;
        }
        HISTOGRAM.store(detail == Some(kind), Ordering::Relaxed);
        let before = now();
        for t in &texts {
            plugin
                .apply(EventKind::Add, t)
                .expect("an object the plugin takes");
        }
        let after = now();
        HISTOGRAM.store(false, Ordering::Relaxed);
        let n = texts.len() as i64;
        let grew = [0, 1, 2].map(|i| after[i] - before[i]);
        println!(
            "{:>22} {:>7} {:>10} {:>8} {:>10} {:>8}   ({} blocks, {} each)",
            kind.as_str(),
            n,
            grew[0],
            grew[0] / n,
            grew[2],
            grew[2] / n,
            grew[1],
            grew[1] as f64 / n as f64
        );
        if detail == Some(kind) {
            print_live_blocks(n, "object");
        }
    }
    let pod = cluster.pending.first().expect("a pending pod");
    HISTOGRAM.store(prefilter_detail, Ordering::Relaxed);
    let before = now();
    let status = plugin.prefilter(pod);
    let after = now();
    HISTOGRAM.store(false, Ordering::Relaxed);
    println!(
        "{:>22} {:>7} {:>10} {:>8} {:>10}   status {status:?}",
        "first PreFilter",
        "",
        after[0] - before[0],
        "",
        after[2] - before[2]
    );
    if prefilter_detail {
        // Per node: the first PreFilter builds per-device and per-node state.
        print_live_blocks(cluster.nodes.len() as i64, "node");
    }
}

/// The blocks counted while [`HISTOGRAM`] was set, by size, per `n` objects (`what`); sizes
/// with at least one block per 20 objects.
fn print_live_blocks(n: i64, what: &str) {
    println!("  live blocks by size (per {what}): size count dlmalloc32-bytes");
    for (size, c) in BY_SIZE.iter().enumerate() {
        let c = c.load(Ordering::Relaxed);
        if c.abs() * 20 >= n {
            println!(
                "  {:>5} {:>8.2} {:>8.1}",
                size,
                c as f64 / n as f64,
                (c * dlmalloc(size)) as f64 / n as f64
            );
        }
    }
}
