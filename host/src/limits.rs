//! Resource limits of a wasm guest, shared by the component host ([`crate::component`]) and the
//! KSWE host ([`crate::kswe`]): wall time per call (wasmtime epoch interruption), linear memory and
//! table size per instance (a [`wasmtime::ResourceLimiter`]), the wasm stack, and the length of a
//! status reason the host accepts.
//!
//! Time: every engine compiled here has epoch interruption on, and one process-wide ticker thread
//! advances the epoch of every live engine each [`TICK`]. Before each call into a guest the host
//! sets the store's deadline to [`Limits::deadline_ticks`] ticks from now; a guest still running
//! then traps with [`wasmtime::Trap::Interrupt`]. The check is a load and a compare at each
//! function entry and loop back-edge, cheaper than fuel's counting of every instruction.
//!
//! Every limit that is hit ends the call with an error whose text says which limit, its value and
//! what the guest did ([`exceeded`]); the hosts turn it into an `Error` status and replace the
//! instance.

use std::fmt;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use wasmtime::{EngineWeak, Trap};

/// How often the epoch advances: the resolution of the time limit.
pub const TICK: Duration = Duration::from_millis(10);

/// Default time per call: a load of a 5,000-node cluster (20,000 running pods) takes about 21 s
/// in the component and a cold KSWE PreFilter about 16 s on the project's 2-core machine
/// (docs/PERFORMANCE.md); the default leaves room for a loaded machine.
pub const DEFAULT_TIME_PER_CALL: Duration = Duration::from_secs(60);

/// Default memory per instance: the 5,000-node cluster peaks at 506 MiB (component) and 705 MiB
/// (KSWE) of linear memory (docs/PERFORMANCE.md).
pub const DEFAULT_MEMORY_BYTES: usize = 1 << 30;

/// Default wasm stack: wasmtime's own default (512 KiB), which every recorded cycle fits in.
pub const DEFAULT_MAX_WASM_STACK: usize = 512 << 10;

/// Default longest status reason: kube-scheduler shows reasons in events and pod conditions,
/// which are short; a replay keeps one per node, so 5,000 nodes × 16 KiB stay under 80 MiB.
pub const DEFAULT_MAX_STATUS_REASON_BYTES: usize = 16 << 10;

/// Largest table (in elements) an instance may grow: far above any compiled guest's function
/// table, far below the 32 GiB a `u32` element count would reserve.
pub const MAX_TABLE_ELEMENTS: usize = 1 << 20;

/// The largest deadline set, in ticks (about 1.5 billion years at [`TICK`]): effectively none.
pub const MAX_DEADLINE_TICKS: u64 = 1 << 62;

/// Resource limits for one plugin instance. See the module docs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Wall time for one call into the guest (each event batch, hook, or `_start`); running past
    /// it is a trap. Resolution [`TICK`]; `Duration::ZERO` interrupts at the guest's first
    /// function entry (tests use it to force a trap).
    pub time_per_call: Duration,
    /// Largest linear memory an instance may grow to, in bytes. Growing past it is a trap (not a
    /// failed `memory.grow`), so the error names the limit.
    pub memory_bytes: usize,
    /// Largest wasm stack in bytes (wasmtime's `max_wasm_stack`). It is fixed when a guest is
    /// compiled, so it must be the same when an instance is created from it.
    pub max_wasm_stack: usize,
    /// Longest status reason, in bytes, the host accepts from a guest; a longer one makes the
    /// call's status an `Error` saying so.
    pub max_status_reason_bytes: usize,
}

impl Default for Limits {
    /// 60 s per call, 1 GiB of memory, 512 KiB of wasm stack, 16 KiB per status reason.
    fn default() -> Self {
        Limits {
            time_per_call: DEFAULT_TIME_PER_CALL,
            memory_bytes: DEFAULT_MEMORY_BYTES,
            max_wasm_stack: DEFAULT_MAX_WASM_STACK,
            max_status_reason_bytes: DEFAULT_MAX_STATUS_REASON_BYTES,
        }
    }
}

impl Limits {
    /// The epoch deadline for one call, in ticks from now: 0 for a zero time limit; otherwise one
    /// more than the time rounded up, so the guest gets at least `time_per_call` whenever the
    /// next tick falls. At most [`MAX_DEADLINE_TICKS`]: wasmtime adds it to the current epoch
    /// unchecked, and a wrapped sum would interrupt at once.
    pub fn deadline_ticks(&self) -> u64 {
        if self.time_per_call.is_zero() {
            return 0;
        }
        let tick = TICK.as_nanos();
        let nanos = self.time_per_call.as_nanos();
        // Set before every call into a guest: times up to 584 years divide in 64 bits (a division
        // by a constant, no 128-bit division routine), longer ones in 128.
        if let (Ok(nanos), Ok(tick)) = (u64::try_from(nanos), u64::try_from(tick)) {
            return nanos.div_ceil(tick).saturating_add(1).min(MAX_DEADLINE_TICKS);
        }
        let ticks = nanos.div_ceil(tick).saturating_add(1);
        u64::try_from(ticks).map_or(MAX_DEADLINE_TICKS, |t| t.min(MAX_DEADLINE_TICKS))
    }

    /// Sets the engine-level settings: epoch interruption and the wasm stack. With
    /// `SA_WASM_PERFMAP` set in the environment, wasmtime also writes `/tmp/perf-<pid>.map`, so that
    /// `perf report` names the guest's functions (for profiling; build the guest with its name
    /// section, `CARGO_PROFILE_WASM_STRIP=debuginfo`, to see Rust names).
    pub fn configure(&self, config: &mut wasmtime::Config) {
        config.epoch_interruption(true);
        config.max_wasm_stack(self.max_wasm_stack);
        if std::env::var_os("SA_WASM_PERFMAP").is_some() {
            config.profiler(wasmtime::ProfilingStrategy::PerfMap);
        }
    }

    /// The memory limiter a store of this instance uses.
    pub fn limiter(&self) -> MemoryLimiter {
        MemoryLimiter {
            memory_bytes: self.memory_bytes,
            peak_memory: 0,
        }
    }

    /// Checks that the wasm stack matches the one a guest was compiled with.
    pub fn check_stack(&self, compiled_with: usize) -> wasmtime::Result<()> {
        if self.max_wasm_stack != compiled_with {
            wasmtime::bail!(
                "the guest was compiled with a wasm stack limit of {} and cannot run with {}: \
                 compile it with the limits it runs with",
                Bytes(compiled_with),
                Bytes(self.max_wasm_stack)
            );
        }
        Ok(())
    }
}

/// Registers an engine with the process-wide epoch ticker (started on first use). The ticker
/// holds only a weak reference: a dropped engine leaves the list at the next tick.
pub fn start_ticker(engine: &wasmtime::Engine) {
    static ENGINES: OnceLock<Mutex<Vec<EngineWeak>>> = OnceLock::new();
    let mut started = false;
    let engines = ENGINES.get_or_init(|| {
        started = true;
        Mutex::new(Vec::new())
    });
    engines
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .push(engine.weak());
    if started {
        std::thread::Builder::new()
            .name("wasm-epoch-ticker".into())
            .spawn(move || {
                loop {
                    std::thread::sleep(TICK);
                    let mut list = engines.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                    list.retain(|weak| match weak.upgrade() {
                        Some(engine) => {
                            engine.increment_epoch();
                            true
                        }
                        None => false,
                    });
                }
            })
            .expect("spawning the epoch ticker thread");
    }
}

/// A [`wasmtime::ResourceLimiter`] that refuses (with a [`Exceeded::Memory`] error, which traps
/// the guest) to grow a linear memory past the limit, and records the largest memory it allowed.
#[derive(Clone, Debug)]
pub struct MemoryLimiter {
    memory_bytes: usize,
    peak_memory: usize,
}

impl MemoryLimiter {
    /// The largest linear memory this store was allowed, in bytes.
    pub fn peak_memory(&self) -> usize {
        self.peak_memory
    }
}

impl wasmtime::ResourceLimiter for MemoryLimiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.memory_bytes {
            return Err(wasmtime::Error::new(Exceeded::Memory {
                limit: self.memory_bytes,
                current,
                desired,
            }));
        }
        self.peak_memory = self.peak_memory.max(desired);
        Ok(true)
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > MAX_TABLE_ELEMENTS {
            return Err(wasmtime::Error::new(Exceeded::Table {
                limit: MAX_TABLE_ELEMENTS,
                current,
                desired,
            }));
        }
        Ok(true)
    }
}

/// A limit a guest ran into. Its text names the limit, its value and what the guest did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Exceeded {
    /// The call ran past its time.
    Time(Duration),
    /// The wasm stack overflowed (deep recursion).
    Stack(usize),
    /// A linear memory would have grown past the limit.
    Memory {
        /// The limit in bytes.
        limit: usize,
        /// The memory's size before.
        current: usize,
        /// The size asked for.
        desired: usize,
    },
    /// A table would have grown past [`MAX_TABLE_ELEMENTS`].
    Table {
        /// The limit in elements.
        limit: usize,
        /// The table's size before.
        current: usize,
        /// The size asked for.
        desired: usize,
    },
    /// A status reason longer than the limit.
    Reason {
        /// The limit in bytes.
        limit: usize,
        /// The reason's length.
        len: usize,
    },
}

impl fmt::Display for Exceeded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Exceeded::Time(t) => write!(f, "guest exceeded its time limit of {}", Time(*t)),
            Exceeded::Stack(s) => write!(
                f,
                "guest exceeded its wasm stack limit of {} (stack overflow, e.g. deep recursion)",
                Bytes(*s)
            ),
            Exceeded::Memory {
                limit,
                current,
                desired,
            } => write!(
                f,
                "guest exceeded its memory limit of {}: growing a linear memory from {} to {}",
                Bytes(*limit),
                Bytes(*current),
                Bytes(*desired)
            ),
            Exceeded::Table {
                limit,
                current,
                desired,
            } => write!(
                f,
                "guest exceeded its table limit of {limit} elements: growing a table from {current} \
                 to {desired}"
            ),
            Exceeded::Reason { limit, len } => write!(
                f,
                "guest exceeded its status reason limit of {}: a reason of {len} bytes",
                Bytes(*limit)
            ),
        }
    }
}

impl std::error::Error for Exceeded {}

/// The limit behind a failed call, if a limit caused it: an epoch interrupt, a stack overflow,
/// or an [`Exceeded`] error raised by the limiter or a host function.
pub fn exceeded(err: &wasmtime::Error, limits: &Limits) -> Option<Exceeded> {
    if let Some(e) = err.downcast_ref::<Exceeded>() {
        return Some(e.clone());
    }
    match err.downcast_ref::<Trap>() {
        Some(Trap::Interrupt) => Some(Exceeded::Time(limits.time_per_call)),
        Some(Trap::StackOverflow) => Some(Exceeded::Stack(limits.max_wasm_stack)),
        _ => None,
    }
}

/// A byte count for messages: `512 KiB`, `1 GiB`, `3 bytes`; exact (never rounded).
#[derive(Clone, Copy, Debug)]
pub struct Bytes(pub usize);

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0;
        for (shift, unit) in [(30, "GiB"), (20, "MiB"), (10, "KiB")] {
            if n >= 1 << shift && n.is_multiple_of(1 << shift) {
                return write!(f, "{} {unit}", n >> shift);
            }
        }
        write!(f, "{n} bytes")
    }
}

/// A duration for messages: `60 s`, `250 ms`, `1.5 s`.
#[derive(Clone, Copy, Debug)]
pub struct Time(pub Duration);

impl fmt::Display for Time {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = self.0.as_millis();
        if ms == 0 && !self.0.is_zero() {
            write!(f, "{} µs", self.0.as_micros())
        } else if ms.is_multiple_of(1000) {
            write!(f, "{} s", ms / 1000)
        } else if ms < 1000 {
            write!(f, "{ms} ms")
        } else {
            write!(f, "{} s", self.0.as_secs_f64())
        }
    }
}

/// Splits a CLI quantity such as `256MiB` or `500ms` into its leading digits and the rest.
fn number_and_unit(text: &str) -> (&str, &str) {
    let t = text.trim();
    t.split_at(t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len()))
}

/// Parses a byte count for the CLI: a number with an optional unit `B`, `KiB`, `MiB`, `GiB`
/// (also `K`, `M`, `G`, binary). Errors name the text.
pub fn parse_bytes(text: &str) -> Result<usize, String> {
    let (number, unit) = number_and_unit(text);
    let number: usize = number
        .parse()
        .map_err(|_| format!("{text:?}: expected a number of bytes, e.g. 256MiB"))?;
    let shift = match unit.trim() {
        "" | "B" => 0,
        "K" | "KiB" => 10,
        "M" | "MiB" => 20,
        "G" | "GiB" => 30,
        other => {
            return Err(format!(
                "{text:?}: unknown unit {other:?} (use B, KiB, MiB or GiB)"
            ));
        }
    };
    number
        .checked_mul(1 << shift)
        .ok_or_else(|| format!("{text:?}: too large"))
}

/// Parses a duration for the CLI: a number with a unit `ms`, `s` or `m` (`500ms`, `2s`, `1m`).
pub fn parse_time(text: &str) -> Result<Duration, String> {
    let (number, unit) = number_and_unit(text);
    let number: u64 = number
        .parse()
        .map_err(|_| format!("{text:?}: expected a duration, e.g. 500ms, 2s or 1m"))?;
    match unit.trim() {
        "ms" => Ok(Duration::from_millis(number)),
        "s" => Ok(Duration::from_secs(number)),
        "m" => number
            .checked_mul(60)
            .map(Duration::from_secs)
            .ok_or_else(|| format!("{text:?}: too large")),
        "" => Err(format!("{text:?}: give a unit (ms, s or m)")),
        other => Err(format!("{text:?}: unknown unit {other:?} (use ms, s or m)")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deadlines_round_up_and_leave_a_tick_of_slack() {
        let with = |time| Limits {
            time_per_call: time,
            ..Limits::default()
        };
        assert_eq!(
            with(Duration::ZERO).deadline_ticks(),
            0,
            "zero interrupts at once"
        );
        assert_eq!(with(Duration::from_millis(1)).deadline_ticks(), 2);
        assert_eq!(with(TICK).deadline_ticks(), 2);
        assert_eq!(with(TICK * 3 + Duration::from_nanos(1)).deadline_ticks(), 5);
        // Either side of the 64-bit nanosecond range (the two division paths) round alike.
        let tick = u128::from(TICK.as_nanos() as u64);
        for nanos in [
            u128::from(u64::MAX) - 1,
            u128::from(u64::MAX),
            u128::from(u64::MAX) + 1,
        ] {
            let time = Duration::from_nanos(u64::MAX) + Duration::from_nanos(1)
                - Duration::from_nanos((u128::from(u64::MAX) + 1 - nanos) as u64);
            let expected = nanos.div_ceil(tick) + 1;
            assert_eq!(u128::from(with(time).deadline_ticks()), expected, "{nanos} ns");
        }
        assert_eq!(
            with(Duration::MAX).deadline_ticks(),
            MAX_DEADLINE_TICKS,
            "no overflow when wasmtime adds the current epoch"
        );
    }

    #[test]
    fn sizes_and_times_parse_and_print() {
        assert_eq!(parse_bytes("256MiB"), Ok(256 << 20));
        assert_eq!(parse_bytes("1G"), Ok(1 << 30));
        assert_eq!(parse_bytes("4096"), Ok(4096));
        assert!(parse_bytes("12 TiB").unwrap_err().contains("unknown unit"));
        assert!(parse_bytes("lots").unwrap_err().contains("expected a number"));
        assert_eq!(parse_time("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_time("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_time("1m"), Ok(Duration::from_secs(60)));
        assert!(parse_time("5").unwrap_err().contains("give a unit"));
        assert_eq!(Bytes(512 << 10).to_string(), "512 KiB");
        assert_eq!(Bytes(1 << 30).to_string(), "1 GiB");
        assert_eq!(Bytes(1000).to_string(), "1000 bytes");
        assert_eq!(Time(Duration::from_secs(60)).to_string(), "60 s");
        assert_eq!(Time(Duration::from_millis(250)).to_string(), "250 ms");
        assert_eq!(Time(Duration::from_millis(1500)).to_string(), "1.5 s");
        assert_eq!(Time(Duration::ZERO).to_string(), "0 s");
    }

    #[test]
    fn the_limiter_refuses_growth_past_the_limit_with_an_error_naming_it() {
        use wasmtime::ResourceLimiter;
        let mut limiter = Limits {
            memory_bytes: 1 << 20,
            ..Limits::default()
        }
        .limiter();
        assert!(limiter.memory_growing(0, 1 << 20, None).unwrap());
        let err = limiter.memory_growing(1 << 20, 2 << 20, None).unwrap_err();
        assert_eq!(
            err.to_string(),
            "guest exceeded its memory limit of 1 MiB: growing a linear memory from 1 MiB to 2 MiB"
        );
        assert_eq!(limiter.peak_memory(), 1 << 20);
        assert!(limiter.table_growing(0, MAX_TABLE_ELEMENTS + 1, None).is_err());
    }

    #[test]
    fn a_different_stack_than_compiled_is_refused() {
        let limits = Limits::default();
        assert!(limits.check_stack(DEFAULT_MAX_WASM_STACK).is_ok());
        let err = limits.check_stack(1 << 20).unwrap_err().to_string();
        assert!(err.contains("1 MiB") && err.contains("512 KiB"), "{err}");
    }
}
