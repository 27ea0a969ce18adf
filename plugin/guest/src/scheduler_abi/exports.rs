//! The KSWE exports (`kswe-abi.md` §2.1): each exported function takes the guest state, calls the
//! adapter, sends the reason and packs the result. On `wasm32` they are the module's exported
//! symbols (`#[unsafe(no_mangle)]`, the only `unsafe` outside `imports.rs`: an attribute, no unsafe
//! code); natively they are plain functions the tests call.
//!
//! The state is created in `_start` (reading `get_config`); a configuration the core rejects is
//! logged through klog and traps, so the scheduler fails to create the plugin, as upstream does for
//! a failing `_start`.
//!
//! Traps: the guest is built with `panic = "abort"`, and upstream keeps calling an instance after
//! one of its calls trapped. So each call takes the state out of its slot and puts it back only
//! when it returns; a trap leaves the slot empty, and the next call on the instance builds a fresh
//! state (reading `get_config`, the feed from the start at the next PreFilter) and goes on. The
//! cycle and reservations held before the trap are gone: a hook for them answers `Error`.

use std::cell::RefCell;

use sharing_affinity_core::Plugin;

use super::adapter::{Backend, GuestState, Reply, log_error};
use super::imports;

thread_local! {
    static STATE: RefCell<Option<GuestState<Plugin>>> = const { RefCell::new(None) };
}

/// Framework code Skip: Bind leaves binding to the default binder.
const SKIP: i32 = 5;

/// `framework.ModeNoop`: PostFilter's result nominates no node.
const NOMINATE_NOOP: i32 = 0;

fn with_state(f: impl FnOnce(&mut GuestState<Plugin>) -> Reply) -> Reply {
    STATE.with(|slot| with_slot(slot, f))
}

/// Runs `f` on the state taken out of `slot` (created first when the slot is empty) and puts it
/// back afterwards. No borrow of `slot` is held while `f` runs.
pub fn with_slot<B: Backend>(
    slot: &RefCell<Option<GuestState<B>>>,
    f: impl FnOnce(&mut GuestState<B>) -> Reply,
) -> Reply {
    let taken = slot.borrow_mut().take();
    let mut state = match taken {
        Some(state) => state,
        None => match GuestState::start() {
            Ok(state) => state,
            Err(reason) => return Reply { code: 1, reason },
        },
    };
    let reply = f(&mut state);
    *slot.borrow_mut() = Some(state);
    reply
}

fn answer(reply: Reply) -> i32 {
    if !reply.reason.is_empty() {
        imports::set_status_reason(&reply.reason);
    }
    reply.code
}

/// `(hi << 32) | lo` with both halves as 32-bit words.
pub fn pack(hi: i32, lo: i32) -> i64 {
    (((hi as u32 as u64) << 32) | (lo as u32 as u64)) as i64
}

/// `_start`: creates the state; traps on a bad configuration after logging why.
// SAFETY: the KSWE ABI's export name; nothing else in the module defines this symbol.
#[cfg_attr(target_arch = "wasm32", unsafe(no_mangle))]
pub extern "C" fn _start() {
    STATE.with(|cell| match GuestState::start() {
        Ok(state) => *cell.borrow_mut() = Some(state),
        Err(e) => {
            log_error("sharing-affinity: cannot start", &[("error", &e)]);
            panic!("sharing-affinity: cannot start: {e}");
        }
    });
}

/// `prefilter() -> i32`.
// SAFETY: the KSWE ABI's export name; nothing else in the module defines this symbol.
#[cfg_attr(target_arch = "wasm32", unsafe(no_mangle))]
pub extern "C" fn prefilter() -> i32 {
    answer(with_state(GuestState::prefilter))
}

/// `filter() -> i32`.
// SAFETY: the KSWE ABI's export name; nothing else in the module defines this symbol.
#[cfg_attr(target_arch = "wasm32", unsafe(no_mangle))]
pub extern "C" fn filter() -> i32 {
    answer(with_state(GuestState::filter))
}

/// `prescore() -> i32`: the feasible nodes Score normalises over.
// SAFETY: the KSWE ABI's export name; nothing else in the module defines this symbol.
#[cfg_attr(target_arch = "wasm32", unsafe(no_mangle))]
pub extern "C" fn prescore() -> i32 {
    answer(with_state(GuestState::prescore))
}

/// `score() -> i64`: high word the score, low word the code.
// SAFETY: the KSWE ABI's export name; nothing else in the module defines this symbol.
#[cfg_attr(target_arch = "wasm32", unsafe(no_mangle))]
pub extern "C" fn score() -> i64 {
    let mut score = 0;
    let code = answer(with_state(|s| {
        let (value, reply) = s.score();
        score = value;
        reply
    }));
    pack(score as i32, code)
}

/// `postfilter() -> i64`: high word the nominating mode (always Noop: the plugin nominates no
/// node), low word the code.
// SAFETY: the KSWE ABI's export name; nothing else in the module defines this symbol.
#[cfg_attr(target_arch = "wasm32", unsafe(no_mangle))]
pub extern "C" fn postfilter() -> i64 {
    pack(NOMINATE_NOOP, answer(with_state(GuestState::postfilter)))
}

/// `reserve() -> i32`.
// SAFETY: the KSWE ABI's export name; nothing else in the module defines this symbol.
#[cfg_attr(target_arch = "wasm32", unsafe(no_mangle))]
pub extern "C" fn reserve() -> i32 {
    answer(with_state(GuestState::reserve))
}

/// `unreserve()`.
// SAFETY: the KSWE ABI's export name; nothing else in the module defines this symbol.
#[cfg_attr(target_arch = "wasm32", unsafe(no_mangle))]
pub extern "C" fn unreserve() {
    with_state(|s| {
        s.unreserve();
        Reply {
            code: 0,
            reason: String::new(),
        }
    });
}

/// `permit() -> i64`: high word the code, low word the timeout in milliseconds (0: no wait).
// SAFETY: the KSWE ABI's export name; nothing else in the module defines this symbol.
#[cfg_attr(target_arch = "wasm32", unsafe(no_mangle))]
pub extern "C" fn permit() -> i64 {
    pack(answer(with_state(GuestState::permit)), 0)
}

/// `prebind() -> i32`.
// SAFETY: the KSWE ABI's export name; nothing else in the module defines this symbol.
#[cfg_attr(target_arch = "wasm32", unsafe(no_mangle))]
pub extern "C" fn prebind() -> i32 {
    answer(with_state(GuestState::prebind))
}

/// `bind() -> i32`: Skip. The guest exports `bind` only because upstream's `maskInterfaces`
/// gives the plugin PreBind only together with Bind; binding itself stays with the default binder.
// SAFETY: the KSWE ABI's export name; nothing else in the module defines this symbol.
#[cfg_attr(target_arch = "wasm32", unsafe(no_mangle))]
pub extern "C" fn bind() -> i32 {
    SKIP
}

/// `postbind()`: nothing to do. Exported so that upstream frees the binding instance.
// SAFETY: the KSWE ABI's export name; nothing else in the module defines this symbol.
#[cfg_attr(target_arch = "wasm32", unsafe(no_mangle))]
pub extern "C" fn postbind() {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packing_puts_the_first_value_in_the_high_word() {
        for (hi, lo) in [(100, 0), (0, 3), (i32::MIN, i32::MAX), (-1, 1)] {
            let v = pack(hi, lo);
            assert_eq!(((v >> 32) as i32, v as i32), (hi, lo));
        }
    }

    #[test]
    fn bind_skips_to_the_default_binder() {
        assert_eq!(bind(), SKIP);
    }
}
