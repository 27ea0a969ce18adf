//! One guest instance (a wasmtime `Store` + `Instance`) and the factory that creates them the way
//! upstream `newGuest` does: a unique name from a counter, `_start` run once, its output captured,
//! `proc_exit(0)` in `_start` closing the instance silently.

use std::sync::Arc;

use wasmtime::{Engine, Func, Instance, Linker, Module, Store, TypedFunc, Val};

use super::abi::{EXPORT_MEMORY, EXPORT_START, Export, Ret};
use super::context::{CallStack, GuestData, MAX_CAPTURED_OUTPUT, Shared, WasiState};
use super::trap::{DebugInfo, ProcExit, decorate};
use crate::limits::Limits;

/// What a call produced.
#[derive(Debug)]
pub enum Raw {
    /// The export returned: `None` for `() -> ()`, the `i32` sign-extended or the `i64`.
    Value(Option<i64>),
    /// The call failed; the decorated message (`wasm: <fn> error: ...`).
    Failed(String),
}

/// An export with its typed form, checked once at instantiation (`None`: the signature does
/// not match, and the call reports wasmtime's type error as before).
struct Callable {
    func: Func,
    typed: Option<Typed>,
}

#[derive(Clone)]
enum Typed {
    Unit(TypedFunc<(), ()>),
    I32(TypedFunc<(), i32>),
    I64(TypedFunc<(), i64>),
}

impl Callable {
    fn new(store: &Store<GuestData>, export: Export, func: Func) -> Callable {
        let typed = match export.ret() {
            Ret::Unit => func.typed(store).ok().map(Typed::Unit),
            Ret::I32 => func.typed(store).ok().map(Typed::I32),
            Ret::I64 => func.typed(store).ok().map(Typed::I64),
        };
        Callable { func, typed }
    }
}

/// A live guest instance.
pub struct Guest {
    store: Store<GuestData>,
    instance: Instance,
    /// The known exports the instance has, by `Export as usize` (no lookup by name or hash per
    /// call); boxed, as instances move in and out of the host's pool on every call.
    funcs: Box<[Option<Callable>; Export::ALL.len()]>,
    /// Set when the instance exited (`proc_exit`): later calls fail.
    closed: Option<u32>,
}

impl Guest {
    /// Whether the instance exports `export`.
    pub fn has(&self, export: Export) -> bool {
        self.funcs[export as usize].is_some()
    }

    /// The size of the instance's `memory` in bytes (0 without one).
    pub fn memory_bytes(&mut self) -> usize {
        self.instance
            .get_memory(&mut self.store, EXPORT_MEMORY)
            .map_or(0, |m| m.data_size(&self.store))
    }

    /// The instance name (`1`, `2`, ...).
    pub fn name(&self) -> &str {
        &self.store.data().name
    }

    /// Sets an exported mutable `i32` global (upstream tests' `SetGlobals`). Returns false when
    /// there is no such global.
    pub fn set_global(&mut self, name: &str, value: i32) -> bool {
        match self.instance.get_global(&mut self.store, name) {
            Some(g) => g.set(&mut self.store, Val::I32(value)).is_ok(),
            None => false,
        }
    }

    /// Calls an export with the given stack; returns the result and the stack (with the results the
    /// guest set). The captured output is reset after the call, as upstream's `defer g.out.Reset()`.
    /// `limits` gives the call's time limit and names the limits in error messages.
    pub fn call(
        &mut self,
        export: Export,
        stack: CallStack,
        info: &DebugInfo,
        limits: &Limits,
    ) -> (Raw, CallStack) {
        if let Some(code) = self.closed {
            return (
                Raw::Failed(decorate(b"", export.name(), &ProcExit(code).to_string())),
                stack,
            );
        }
        let Some(callable) = &self.funcs[export as usize] else {
            return (
                Raw::Failed(decorate(b"", export.name(), "function not exported")),
                stack,
            );
        };
        self.store.data_mut().stack = Some(stack);
        self.store.set_epoch_deadline(limits.deadline_ticks());
        let func = callable.func;
        let result = match callable.typed.clone() {
            Some(Typed::Unit(f)) => f.call(&mut self.store, ()).map(|()| None),
            Some(Typed::I32(f)) => f.call(&mut self.store, ()).map(|v| Some(i64::from(v))),
            Some(Typed::I64(f)) => f.call(&mut self.store, ()).map(Some),
            None => Self::call_untyped(&mut self.store, export, func),
        };
        let data = self.store.data_mut();
        let stack = data.stack.take().unwrap_or_default();
        let out = take_output(data);
        match result {
            Ok(v) => (Raw::Value(v), stack),
            Err(err) => {
                if let Some(exit) = err.downcast_ref::<ProcExit>() {
                    self.closed = Some(exit.0);
                }
                (
                    Raw::Failed(decorate(
                        &out,
                        export.name(),
                        &info.describe_limited(&err, limits),
                    )),
                    stack,
                )
            }
        }
    }
}

impl Guest {
    /// A call whose export has another signature than `export` needs: wasmtime's type error.
    fn call_untyped(
        store: &mut Store<GuestData>,
        export: Export,
        func: Func,
    ) -> wasmtime::Result<Option<i64>> {
        match export.ret() {
            Ret::Unit => func
                .typed::<(), ()>(&*store)
                .and_then(|f| f.call(&mut *store, ()))
                .map(|()| None),
            Ret::I32 => func
                .typed::<(), i32>(&*store)
                .and_then(|f| f.call(&mut *store, ()))
                .map(|v| Some(i64::from(v))),
            Ret::I64 => func
                .typed::<(), i64>(&*store)
                .and_then(|f| f.call(&mut *store, ()))
                .map(Some),
        }
    }
}

/// Takes the output captured during a call, with a note of how much was dropped past
/// [`MAX_CAPTURED_OUTPUT`].
fn take_output(data: &mut GuestData) -> Vec<u8> {
    let mut out = std::mem::take(&mut data.out);
    let dropped = std::mem::take(&mut data.out_dropped);
    if dropped > 0 {
        out.extend_from_slice(
            format!(
                "\n[{dropped} more bytes of output dropped: the host keeps {MAX_CAPTURED_OUTPUT} per call]"
            )
            .as_bytes(),
        );
    }
    out
}

/// Creates guest instances.
pub struct Factory {
    /// The engine.
    pub engine: Engine,
    /// The compiled guest.
    pub module: Module,
    /// The linker with the host modules the guest imports.
    pub linker: Linker<GuestData>,
    /// Names and signatures for stack traces.
    pub info: Arc<DebugInfo>,
    /// Settings and cluster.
    pub shared: Arc<Shared>,
    /// Instances created so far (the next name is `counter + 1`).
    pub counter: u64,
    /// The limits of new instances and of calls (the time limit may change between calls).
    pub limits: Limits,
}

impl Factory {
    /// `newGuest`: instantiates, runs `_start` with `stack` visible to host functions (upstream
    /// passes the caller's context, so a lazily created instance sees the current call's stack),
    /// and returns the instance with the stack. Errors are `wasm: instantiate error: ...`.
    pub fn new_guest(&mut self, stack: Option<CallStack>) -> (Result<Guest, String>, Option<CallStack>) {
        self.counter += 1;
        let name = self.counter.to_string();
        let limits = self.limits;
        let data = GuestData {
            shared: self.shared.clone(),
            stack,
            out: Vec::new(),
            out_dropped: 0,
            limiter: limits.limiter(),
            wasi: WasiState::default(),
            name: name.clone(),
            memory: None,
        };
        let mut store = Store::new(&self.engine, data);
        store.limiter(|d| &mut d.limiter);
        store.set_epoch_deadline(limits.deadline_ticks());
        let instance = match self.linker.instantiate(&mut store, &self.module) {
            Ok(i) => i,
            Err(err) => {
                let data = store.data_mut();
                let (stack, out) = (data.stack.take(), take_output(data));
                let described = self.info.describe_limited(&err, &limits);
                let msg = if err.downcast_ref::<wasmtime::Trap>().is_some() {
                    format!("start function failed: {described}")
                } else {
                    described
                };
                return (Err(decorate(&out, "instantiate", &msg)), stack);
            }
        };
        store.data_mut().memory = instance.get_memory(&mut store, EXPORT_MEMORY);
        let mut closed = None;
        if let Some(start) = instance.get_func(&mut store, EXPORT_START) {
            let ty = start.ty(&store);
            let result = if ty.params().len() != 0 {
                Err(wasmtime::format_err!(
                    "expected {} params, but passed 0",
                    ty.params().len()
                ))
            } else {
                let mut results = vec![Val::I32(0); ty.results().len()];
                store.set_epoch_deadline(limits.deadline_ticks());
                start.call(&mut store, &[], &mut results)
            };
            if let Err(err) = result {
                let message = match err.downcast_ref::<ProcExit>() {
                    Some(ProcExit(0)) => {
                        // wazero: "Don't err on success"; the instance is closed.
                        closed = Some(0);
                        None
                    }
                    Some(exit) => Some(exit.to_string()),
                    None => Some(format!(
                        "module[{name}] function[{EXPORT_START}] failed: {}",
                        self.info.describe_limited(&err, &limits)
                    )),
                };
                if let Some(message) = message {
                    let data = store.data_mut();
                    let (stack, out) = (data.stack.take(), take_output(data));
                    return (Err(decorate(&out, "instantiate", &message)), stack);
                }
            }
        }
        let data = store.data_mut();
        let stack = data.stack.take();
        data.out.clear();
        data.out_dropped = 0;
        let funcs = Box::new(std::array::from_fn(|i| {
            let e = Export::ALL.into_iter().find(|e| *e as usize == i)?;
            let func = instance.get_func(&mut store, e.name())?;
            Some(Callable::new(&store, e, func))
        }));
        (
            Ok(Guest {
                store,
                instance,
                funcs,
                closed,
            }),
            stack,
        )
    }
}
