//! Failure texts as the Go host prints them: `decorateError`, wazero's trap names and stack
//! traces, host-function panics and `proc_exit`.
//!
//! wazero formats a trap as `wasm error: <name>\nwasm stack trace:\n\t<frame>...`, each frame
//! `<module>.<function>(<params>) <results>` with names from the module's name section (`$<index>`
//! when a function has none). wasmtime's backtrace gives the function indexes; names and types come
//! from [`DebugInfo`], parsed once per module, so the frames read as wazero's do.

use std::collections::HashMap;
use std::fmt;

use wasmparser::{KnownCustom, Name, Parser, Payload, TypeRef};
use wasmtime::{Trap, WasmBacktrace};

use crate::limits::{Exceeded, Limits, exceeded};

/// A Go host function panicked (upstream `panic(...)` in `host.go`); wazero reports it as
/// `<message> (recovered by wazero)` followed by the stack, host function first.
#[derive(Debug)]
pub struct HostPanic {
    /// The panic value's text.
    pub message: String,
    /// The host function's frame text, e.g. `k8s.io/scheduler.currentPod(i32,i32) i32`.
    pub frame: String,
}

impl fmt::Display for HostPanic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for HostPanic {}

/// WASI `proc_exit(code)`: the instance is closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcExit(pub u32);

impl fmt::Display for ProcExit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "module closed with exit_code({})", self.0)
    }
}

impl std::error::Error for ProcExit {}

/// Function names and signatures of a module, for stack traces.
#[derive(Clone, Debug, Default)]
pub struct DebugInfo {
    module_name: String,
    names: HashMap<u32, String>,
    signatures: Vec<String>,
}

fn val_name(t: &wasmparser::ValType) -> &'static str {
    match t {
        wasmparser::ValType::I32 => "i32",
        wasmparser::ValType::I64 => "i64",
        wasmparser::ValType::F32 => "f32",
        wasmparser::ValType::F64 => "f64",
        wasmparser::ValType::V128 => "v128",
        wasmparser::ValType::Ref(r) if r.is_extern_ref() => "externref",
        wasmparser::ValType::Ref(_) => "funcref",
    }
}

fn signature_text(ty: &wasmparser::FuncType) -> String {
    let params: Vec<&str> = ty.params().iter().map(val_name).collect();
    let results: Vec<&str> = ty.results().iter().map(val_name).collect();
    let mut s = format!("({})", params.join(","));
    match results.len() {
        0 => {}
        1 => {
            s.push(' ');
            s.push_str(results[0]);
        }
        _ => s.push_str(&format!(" ({})", results.join(","))),
    }
    s
}

impl DebugInfo {
    /// Parses the type, import, function and name sections. The module has already been
    /// validated by wasmtime; anything unreadable just leaves frames less descriptive.
    pub fn parse(wasm: &[u8]) -> DebugInfo {
        let mut info = DebugInfo::default();
        let mut types = Vec::new();
        for payload in Parser::new(0).parse_all(wasm) {
            let Ok(payload) = payload else { break };
            match payload {
                Payload::TypeSection(reader) => {
                    types = reader
                        .into_iter_err_on_gc_types()
                        .filter_map(Result::ok)
                        .map(|t| signature_text(&t))
                        .collect();
                }
                Payload::ImportSection(reader) => {
                    for import in reader.into_imports().filter_map(Result::ok) {
                        if let TypeRef::Func(t) | TypeRef::FuncExact(t) = import.ty {
                            info.signatures
                                .push(types.get(t as usize).cloned().unwrap_or_default());
                        }
                    }
                }
                Payload::FunctionSection(reader) => {
                    for t in reader.into_iter().filter_map(Result::ok) {
                        info.signatures
                            .push(types.get(t as usize).cloned().unwrap_or_default());
                    }
                }
                Payload::CustomSection(reader) => {
                    if let KnownCustom::Name(names) = reader.as_known() {
                        for name in names.into_iter().filter_map(Result::ok) {
                            match name {
                                Name::Module { name, .. } => info.module_name = name.to_string(),
                                Name::Function(map) => {
                                    for n in map.into_iter().filter_map(Result::ok) {
                                        info.names.insert(n.index, n.name.to_string());
                                    }
                                }
                                _ => {}
                            }
                        }
                    }
                }
                _ => {}
            }
        }
        info
    }

    /// `<module>.<function>(<params>) <results>` for a function index.
    pub fn frame(&self, index: u32) -> String {
        let name = self
            .names
            .get(&index)
            .cloned()
            .unwrap_or_else(|| format!("${index}"));
        let sig = self
            .signatures
            .get(index as usize)
            .map(String::as_str)
            .unwrap_or("()");
        format!("{}.{}{}", self.module_name, name, sig)
    }

    fn stack(&self, err: &wasmtime::Error) -> Vec<String> {
        err.downcast_ref::<WasmBacktrace>()
            .map(|bt| bt.frames().iter().map(|f| self.frame(f.func_index())).collect())
            .unwrap_or_default()
    }

    /// The error text wazero would give for a failed call: a trap, a host panic or an exit.
    pub fn describe(&self, err: &wasmtime::Error) -> String {
        if let Some(exit) = err.downcast_ref::<ProcExit>() {
            return exit.to_string();
        }
        if let Some(panic) = err.downcast_ref::<HostPanic>() {
            let mut lines = vec![panic.frame.clone()];
            lines.extend(self.stack(err));
            return format!(
                "{} (recovered by wazero)\nwasm stack trace:\n\t{}",
                panic.message,
                lines.join("\n\t")
            );
        }
        if let Some(limit) = err.downcast_ref::<Exceeded>() {
            return format!("{limit}\nwasm stack trace:\n\t{}", self.stack(err).join("\n\t"));
        }
        if let Some(trap) = err.downcast_ref::<Trap>() {
            return format!(
                "wasm error: {}\nwasm stack trace:\n\t{}",
                trap_name(trap),
                self.stack(err).join("\n\t")
            );
        }
        format!("{err:#}")
    }
}

impl DebugInfo {
    /// As [`DebugInfo::describe`], led by the limit the guest ran into when a limit ended the call
    /// (`guest exceeded its time limit of 60 s: wasm error: interrupt ...`).
    pub fn describe_limited(&self, err: &wasmtime::Error, limits: &Limits) -> String {
        let described = self.describe(err);
        match exceeded(err, limits) {
            Some(limit) if err.downcast_ref::<Exceeded>().is_none() => format!("{limit}: {described}"),
            _ => described,
        }
    }
}

/// wazero's name of a trap (`wasmruntime` errors).
pub fn trap_name(trap: &Trap) -> String {
    match trap {
        Trap::UnreachableCodeReached => "unreachable".into(),
        Trap::MemoryOutOfBounds => "out of bounds memory access".into(),
        Trap::IntegerDivisionByZero => "integer divide by zero".into(),
        Trap::IntegerOverflow => "integer overflow".into(),
        Trap::BadConversionToInteger => "invalid conversion to integer".into(),
        Trap::BadSignature => "indirect call type mismatch".into(),
        Trap::TableOutOfBounds | Trap::IndirectCallToNull => "invalid table access".into(),
        Trap::StackOverflow => "stack overflow".into(),
        Trap::HeapMisaligned => "unaligned atomic".into(),
        other => other.to_string(),
    }
}

/// `decorateError`: `wasm: <fn> error: <captured output>\n<err>`, or without the output part when
/// the guest printed nothing.
pub fn decorate(out: &[u8], export: &str, err: &str) -> String {
    if out.is_empty() {
        format!("wasm: {export} error: {err}")
    } else {
        format!("wasm: {export} error: {}\n{err}", String::from_utf8_lossy(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decorate_matches_upstream_format() {
        assert_eq!(decorate(b"", "filter", "boom"), "wasm: filter error: boom");
        assert_eq!(
            decorate(b"panic!", "filter", "boom"),
            "wasm: filter error: panic!\nboom"
        );
    }

    #[test]
    fn frames_use_name_section_and_signatures() {
        let wasm = wat::parse_str(
            r#"(module $m (import "env" "f" (func (param i32 i64)))
                 (func (result i32) i32.const 0) (func $named (param i32) (result i32 i64) unreachable))"#,
        )
        .unwrap();
        let info = DebugInfo::parse(&wasm);
        assert_eq!(info.frame(0), "m.$0(i32,i64)", "imports count in the index space");
        assert_eq!(info.frame(1), "m.$1() i32");
        assert_eq!(info.frame(2), "m.named(i32) (i32,i64)");
    }
}
