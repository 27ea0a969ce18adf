//! Load-time checks in upstream order (`plugin.go` `NewFromConfig`, `guest.go`, `mask.go`):
//! compile → `memory` export → export signatures (`detectInterfaces`) → first instance (import
//! resolution and `_start`, in [`super::guest`]) → supported combination (`maskInterfaces`).
//! The error strings are upstream's.

use wasmtime::{Engine, ExternType, Module, ValType};

use super::abi::{EXPORT_MEMORY, Export, Ret};

/// Interface bits, as `mask.go` numbers them.
pub mod bits {
    /// `enqueue`.
    pub const ENQUEUE: u32 = 1 << 0;
    /// `addpod`/`removepod`.
    pub const PRE_FILTER_EXTENSIONS: u32 = 1 << 1;
    /// `prefilter`.
    pub const PRE_FILTER: u32 = 1 << 2;
    /// `filter`.
    pub const FILTER: u32 = 1 << 3;
    /// `postfilter`.
    pub const POST_FILTER: u32 = 1 << 4;
    /// `prescore`.
    pub const PRE_SCORE: u32 = 1 << 5;
    /// `normalizescore`.
    pub const SCORE_EXTENSIONS: u32 = 1 << 6;
    /// `score`.
    pub const SCORE: u32 = 1 << 7;
    /// `reserve` or `unreserve`.
    pub const RESERVE: u32 = 1 << 8;
    /// `permit`.
    pub const PERMIT: u32 = 1 << 9;
    /// `prebind`.
    pub const PRE_BIND: u32 = 1 << 10;
    /// `bind`.
    pub const BIND: u32 = 1 << 11;
    /// `postbind`.
    pub const POST_BIND: u32 = 1 << 12;
    /// Bits that `maskInterfaces` removes before matching the combination.
    pub const COUPLED: u32 = ENQUEUE
        | PRE_FILTER_EXTENSIONS
        | PRE_FILTER
        | POST_FILTER
        | PRE_SCORE
        | SCORE_EXTENSIONS
        | PRE_BIND
        | POST_BIND;
}

/// The bit an export sets.
pub fn bit(export: Export) -> u32 {
    match export {
        Export::Enqueue => bits::ENQUEUE,
        Export::PreFilter => bits::PRE_FILTER,
        Export::Filter => bits::FILTER,
        Export::PostFilter => bits::POST_FILTER,
        Export::PreScore => bits::PRE_SCORE,
        Export::Score => bits::SCORE,
        Export::NormalizeScore => bits::SCORE_EXTENSIONS,
        Export::Reserve | Export::Unreserve => bits::RESERVE,
        Export::Permit => bits::PERMIT,
        Export::PreBind => bits::PRE_BIND,
        Export::Bind => bits::BIND,
        Export::PostBind => bits::POST_BIND,
        Export::AddPod | Export::RemovePod => bits::PRE_FILTER_EXTENSIONS,
    }
}

/// Which framework interfaces the masked plugin implements (`mask.go:233-265`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Mask {
    /// The raw interface bits detected from the exports.
    pub interfaces: u32,
    /// PreFilterExtensions, PreFilter, Filter, PostFilter.
    pub filter: bool,
    /// PreScore, ScoreExtensions, Score.
    pub score: bool,
    /// Reserve (Reserve and Unreserve).
    pub reserve: bool,
    /// Permit.
    pub permit: bool,
    /// PreBind, Bind, PostBind.
    pub bind: bool,
}

impl Mask {
    /// Whether the guest exports something with this bit.
    pub fn has(&self, bit: u32) -> bool {
        self.interfaces & bit != 0
    }
}

/// Step 1: compile (`wasm: error compiling guest: ...`) and check for `memory`.
pub fn compile(engine: &Engine, wasm: &[u8]) -> Result<Module, String> {
    let module = Module::new(engine, wasm).map_err(|e| format!("wasm: error compiling guest: {e:#}"))?;
    let has_memory = module
        .exports()
        .any(|e| e.name() == EXPORT_MEMORY && matches!(e.ty(), ExternType::Memory(_)));
    if !has_memory {
        return Err(format!("wasm: guest doesn't export memory[{EXPORT_MEMORY}]"));
    }
    Ok(module)
}

/// Step 2: `detectInterfaces`. Upstream ranges over a Go map, so with several wrong signatures the
/// one reported is random; here it is the first in export order.
pub fn detect_interfaces(module: &Module) -> Result<u32, String> {
    let mut interfaces = 0;
    for export in module.exports() {
        let (Some(e), ExternType::Func(ft)) = (Export::from_name(export.name()), export.ty()) else {
            continue;
        };
        let results: Vec<ValType> = ft.results().collect();
        let ok = ft.params().len() == 0
            && match e.ret() {
                Ret::Unit => results.is_empty(),
                Ret::I32 => matches!(results.as_slice(), [ValType::I32]),
                Ret::I64 => matches!(results.as_slice(), [ValType::I64]),
            };
        if !ok {
            return Err(format!(
                "wasm: guest exports the wrong signature for func[{}]. should be {}",
                e.name(),
                e.signature_text()
            ));
        }
        interfaces |= bit(e);
    }
    if interfaces == 0 {
        return Err("wasm: guest does not export any plugin functions".into());
    }
    Ok(interfaces)
}

/// Step 4: `maskInterfaces`: the combination of filter/score/reserve/permit/bind must be one the
/// Go plugin has a type for, or the guest must export only `prefilter`.
pub fn mask(interfaces: u32) -> Result<Mask, String> {
    use bits::{BIND as B, FILTER as F, PERMIT as P, RESERVE as R, SCORE as S};
    const SUPPORTED: [u32; 23] = [
        F,
        F | S,
        F | S | B,
        R,
        P,
        B,
        F | R,
        F | P,
        F | B,
        S,
        S | R,
        S | P,
        S | B,
        R | B,
        P | B,
        F | S | R,
        F | S | P,
        F | S | B | R,
        F | S | B | P,
        S | R | B,
        S | P | B,
        R | P | B,
        F | S | R | B | P,
    ];
    let main = interfaces & !bits::COUPLED;
    if SUPPORTED.contains(&main) {
        return Ok(Mask {
            interfaces,
            filter: main & F != 0,
            score: main & S != 0,
            reserve: main & R != 0,
            permit: main & P != 0,
            bind: main & B != 0,
        });
    }
    if interfaces == bits::PRE_FILTER {
        return Ok(Mask {
            interfaces,
            ..Mask::default()
        });
    }
    Err("wasm: filter, score, reserve, permit or bind must be exported".into())
}

#[cfg(test)]
mod tests {
    use super::bits::*;
    use super::*;

    #[test]
    fn mask_accepts_documented_combinations_and_rejects_the_rest() {
        let (f, s, r, p, b) = (FILTER, SCORE, RESERVE, PERMIT, BIND);
        let unsupported = [
            r | p,
            f | r | p,
            f | r | b,
            f | p | b,
            s | r | p,
            f | s | r | p,
            f | r | p | b,
            s | r | p | b,
        ];
        for combo in unsupported {
            assert!(mask(combo).is_err(), "{combo:#b} must be rejected");
        }
        for (interfaces, msg) in [
            (PRE_SCORE, "prescore without score"),
            (SCORE_EXTENSIONS, "normalizescore without score"),
            (POST_FILTER, "postfilter without filter"),
            (PRE_BIND, "prebind without bind"),
            (ENQUEUE, "enqueue only"),
        ] {
            assert_eq!(
                mask(interfaces).unwrap_err(),
                "wasm: filter, score, reserve, permit or bind must be exported",
                "{msg}"
            );
        }
        let m = mask(PRE_FILTER).unwrap();
        assert!(!m.filter && !m.score, "prefilter-only is the special case");
        let m = mask(PRE_FILTER | f | s | r | PRE_BIND).unwrap();
        assert!(
            m.filter && m.score && m.reserve && !m.bind,
            "prebind without bind is masked out"
        );
        let m = mask(f | s | r | b | PRE_BIND | POST_BIND).unwrap();
        assert!(m.bind && m.has(PRE_BIND));
        // Every combination of the five main bits is classified; 23 of the 31 non-empty ones pass.
        let passing = (1u32..32)
            .filter(|i| {
                let combo = [f, s, r, p, b]
                    .iter()
                    .enumerate()
                    .filter(|(k, _)| i & (1 << k) != 0)
                    .fold(0, |a, (_, v)| a | v);
                mask(combo).is_ok()
            })
            .count();
        assert_eq!(passing, 23);
    }
}
