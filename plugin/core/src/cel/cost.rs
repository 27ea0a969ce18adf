//! Runtime cost metering: a sound bound on the work one evaluation may do.
//!
//! Kubernetes evaluates DRA selectors with a runtime cost limit of 1,000,000
//! (`CELSelectorExpressionMaxCost`), counted by cel-go's cost tracker. cel-rust 0.15 has no cost
//! tracking and no evaluation hook, so [`super::compile`] instruments the parsed expression
//! instead, and every evaluation carries a [`Meter`]:
//!
//! - **Static part.** Each node has a fixed cost, following cel-go's constants: identifiers,
//!   field selections, index and function calls 1; literals, `&&`, `||` and `?:` 0; list
//!   literals 10 and map literals 30 (plus their elements). The nodes outside any loop body are
//!   charged once when the evaluation starts.
//! - **Loops.** A comprehension body (`all`, `exists`, `exists_one`, `map`, `filter`) is charged
//!   its static cost (at least 1) on every iteration, by an `@cost` call wrapped around the loop
//!   condition (or, for `map`/`filter`, around the element or the filter predicate, keeping the
//!   shape cel-rust evaluates in place).
//! - **Sizes.** Work proportional to the size of values is charged from the runtime size by
//!   `@size`/`@size2` wrappers around the operands, with cel-go's and Kubernetes' factors:
//!   string traversal 0.1 per byte (`+`, comparisons, `startsWith`, `endsWith`, `lowerAscii`,
//!   `upperAscii`, `trim`, `substring`, `quantity`, `semver`, conversions), 0.2 for `split`,
//!   `replace` and `join`, products for `contains`, `indexOf` and `matches` (regex size × 0.25),
//!   list size for `in`. cel-rust copies values where cel-go shares them, so copies are charged
//!   as well: list/map literal elements, comprehension ranges and `cel.bind` values, at 0.1 per
//!   unit of deep size (device maps are shared, so binding one costs 1). Sizes are deep:
//!   strings count bytes, lists and maps the sizes of their elements (at least 1 each).
//!
//! Once the limit is passed every further charge fails, which stops all loops at their next
//! iteration, and the evaluation reports the budget error even where CEL would otherwise absorb
//! an error (`error || true`). Because every node's work is either constant, charged per
//! iteration, or charged by the size of the values it touches (themselves built by charged
//! operations), no expression can do unbounded work or allocate unbounded memory within the
//! limit. Costs are close to, but not identical with, cel-go's: comparisons of two non-literal
//! values and size-dependent calls can cost up to about twice as much.

use std::any::Any;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use cel::common::types::{
    CelBool, CelBytes, CelInt, CelList, CelMap, CelNull, CelString, DYN_TYPE, INT_TYPE, Type,
};
use cel::common::value::{CowVal, StaticVal, Val};
use cel::{DeclarationError, Env, ExecutionError};

use super::values::StrMap;

/// Variable holding the evaluation's [`Meter`]; `@` keeps it out of reach of expressions.
pub(crate) const METER_VAR: &str = "@meter";
/// `@cost(value, k, meter)`: charges `k`, returns `value`.
pub(crate) const COST_FN: &str = "@cost";
/// `@size(value, milli_factor, mode, meter)`: charges `ceil(size(value) * factor)`.
pub(crate) const SIZE_FN: &str = "@size";
/// `@size2(x, milli_fx, y, milli_fy, meter)`: charges `ceil(size(x) * fx) * ceil(size(y) * fy)`.
pub(crate) const SIZE2_FN: &str = "@size2";
/// `@result(value, meter)`: keeps `value` as the evaluation's result (see [`Meter::take_result`]).
pub(crate) const RESULT_FN: &str = "@result";

/// How [`SIZE_FN`] measures its value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Work that walks the whole value (comparison, concatenation, string functions).
    Traverse = 0,
    /// Work that copies the value: like `Traverse`, but shared device maps count 1.
    Copy = 1,
    /// `x in list`: the deep size of a list; anything else (maps) is a lookup and costs 0.
    List = 2,
}

impl Mode {
    fn from_i64(v: i64) -> Result<Mode, ExecutionError> {
        match v {
            0 => Ok(Mode::Traverse),
            1 => Ok(Mode::Copy),
            2 => Ok(Mode::List),
            _ => Err(ExecutionError::function_error(
                SIZE_FN,
                format!("unknown mode {v}"),
            )),
        }
    }
}

static METER_TYPE: Type = Type::new_unspecified_type("@meter");

/// The state of one evaluation: the cost used so far, against its limit, and the result that
/// [`RESULT_FN`] kept.
#[derive(Debug)]
pub(crate) struct Meter {
    used: AtomicU64,
    limit: u64,
    result: Mutex<Option<Outcome>>,
}

impl Meter {
    pub(crate) fn new(limit: u64) -> Meter {
        Meter {
            used: AtomicU64::new(0),
            limit,
            result: Mutex::new(None),
        }
    }

    /// The value [`RESULT_FN`] kept, if the evaluation reached it.
    pub(crate) fn take_result(&self) -> Option<Outcome> {
        self.result.lock().map_or(None, |mut r| r.take())
    }

    /// Adds `n`; fails once the total is above the limit.
    pub(crate) fn charge(&self, n: u64) -> Result<(), ExecutionError> {
        let total = self.used.load(Ordering::Relaxed).saturating_add(n);
        self.used.store(total, Ordering::Relaxed);
        if total > self.limit {
            return Err(ExecutionError::function_error(
                "cost",
                format!("cost budget of {} exceeded", self.limit),
            ));
        }
        Ok(())
    }

    pub(crate) fn used(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }

    pub(crate) fn exceeded(&self) -> bool {
        self.used() > self.limit
    }

    /// The largest size worth measuring when charging `milli_factor` per unit: anything larger
    /// exceeds the budget anyway.
    fn size_cap(&self, milli_factor: u64) -> u64 {
        let remaining = self.limit.saturating_sub(self.used()) as u128;
        let cap = remaining * 1000 / milli_factor.max(1) as u128 + 1;
        u64::try_from(cap).unwrap_or(u64::MAX)
    }
}

impl Val for Meter {
    fn get_type(&self) -> &Type {
        &METER_TYPE
    }
    fn cel_type() -> &'static Type {
        &METER_TYPE
    }
    fn clone_as_boxed<'v>(&self) -> Box<dyn Val + 'v> {
        Box::new(Meter {
            used: AtomicU64::new(self.used()),
            limit: self.limit,
            result: Mutex::new(None),
        })
    }
    fn as_any(&self) -> Option<&dyn Any> {
        Some(self)
    }
}
impl StaticVal for Meter {}

/// Registers the metering functions on `env`.
pub(crate) fn register(env: &mut Env) -> Result<(), DeclarationError> {
    env.add_overload(COST_FN, COST_FN, vec![DYN_TYPE, INT_TYPE, DYN_TYPE], cost_fn)?;
    env.add_overload(
        SIZE_FN,
        SIZE_FN,
        vec![DYN_TYPE, INT_TYPE, INT_TYPE, DYN_TYPE],
        size_fn,
    )?;
    env.add_overload(
        SIZE2_FN,
        SIZE2_FN,
        vec![DYN_TYPE, INT_TYPE, DYN_TYPE, INT_TYPE, DYN_TYPE],
        size2_fn,
    )?;
    env.add_overload(RESULT_FN, RESULT_FN, vec![DYN_TYPE, DYN_TYPE], result_fn)?;
    Ok(())
}

/// Deep size of `value`, stopping once `cap` is reached.
pub(crate) fn measure(value: &dyn Val, mode: Mode, cap: u64) -> u64 {
    let mut total = 0;
    match mode {
        Mode::List if value.downcast_ref::<CelList>().is_none() => 0,
        Mode::List => {
            add_size(value, Mode::Traverse, cap, &mut total);
            total
        }
        _ => {
            add_size(value, mode, cap, &mut total);
            total
        }
    }
}

/// Adds the size of `value` to `total`; each element of a container counts at least 1.
fn add_size(value: &dyn Val, mode: Mode, cap: u64, total: &mut u64) {
    if *total >= cap {
        return;
    }
    let element = |v: &dyn Val, total: &mut u64| {
        let before = *total;
        add_size(v, mode, cap, total);
        *total = (*total).max(before.saturating_add(1));
    };
    if let Some(s) = value.downcast_ref::<CelString>() {
        *total = total.saturating_add(s.inner().len() as u64);
    } else if let Some(b) = value.downcast_ref::<CelBytes>() {
        *total = total.saturating_add(b.inner().len() as u64);
    } else if let Some(list) = value.downcast_ref::<CelList>() {
        for item in list.inner() {
            if *total >= cap {
                return;
            }
            element(item.as_ref(), total);
        }
    } else if let Some(map) = value.downcast_ref::<CelMap>() {
        for (k, v) in map.inner() {
            if *total >= cap {
                return;
            }
            element(k.inner(), total);
            element(v.as_ref(), total);
        }
    } else if let Some(map) = value.downcast_ref::<StrMap>() {
        if mode == Mode::Copy {
            *total = total.saturating_add(1);
            return;
        }
        for (k, v) in map.entries() {
            if *total >= cap {
                return;
            }
            element(k, total);
            element(v, total);
        }
    } else {
        *total = total.saturating_add(1);
    }
}

fn int_arg(function: &str, args: &[CowVal<'_, '_>], i: usize) -> Result<i64, ExecutionError> {
    args.get(i)
        .and_then(|v| v.as_ref().downcast_ref::<CelInt>().map(|i| *i.inner()))
        .ok_or_else(|| ExecutionError::function_error(function, format!("argument {i} must be an int")))
}

fn meter_arg<'a>(function: &str, args: &'a [CowVal<'_, '_>]) -> Result<&'a Meter, ExecutionError> {
    args.last()
        .and_then(|v| v.as_ref().downcast_ref::<Meter>())
        .ok_or_else(|| ExecutionError::function_error(function, "missing cost meter"))
}

/// `ceil(size * milli / 1000)`.
fn scaled(size: u64, milli: u64) -> u64 {
    let n = (size as u128 * milli as u128).div_ceil(1000);
    u64::try_from(n).unwrap_or(u64::MAX)
}

fn first<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    args.into_iter()
        .next()
        .ok_or_else(|| ExecutionError::invalid_argument_count(1, 0))
}

fn cost_fn<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let k = int_arg(COST_FN, &args, 1)?;
    meter_arg(COST_FN, &args)?.charge(k.unsigned_abs())?;
    first(args)
}

/// What an evaluation gave, as the programs' callers read it: selectors want a bool, extractors a
/// string; of anything else only the type is kept, for the error.
#[derive(Debug, PartialEq)]
pub(crate) enum Outcome {
    Bool(bool),
    String(String),
    Other { type_name: String },
}

impl Outcome {
    fn of(value: &dyn Val) -> Outcome {
        if let Some(b) = value.downcast_ref::<CelBool>() {
            Outcome::Bool(*b.inner())
        } else if let Some(s) = value.downcast_ref::<CelString>() {
            Outcome::String(s.inner().to_owned())
        } else {
            Outcome::Other {
                type_name: value.get_type().name().to_owned(),
            }
        }
    }

    /// The CEL type's name.
    pub(crate) fn type_name(&self) -> &str {
        match self {
            Outcome::Bool(_) => "bool",
            Outcome::String(_) => "string",
            Outcome::Other { type_name } => type_name,
        }
    }
}

/// Keeps the value's [`Outcome`] in the meter and returns `null`: the program's value is read from
/// the meter, so that `cel` never converts it to its `Value`, which has no form for the library's
/// own types (such as `quantity`).
fn result_fn<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let meter = meter_arg(RESULT_FN, &args)?;
    let value = args
        .first()
        .ok_or_else(|| ExecutionError::invalid_argument_count(2, 0))?;
    let mut slot = meter
        .result
        .lock()
        .map_err(|_| ExecutionError::function_error(RESULT_FN, "result slot poisoned"))?;
    *slot = Some(Outcome::of(value.as_ref()));
    Ok(CowVal::Owned(Box::new(CelNull)))
}

fn size_fn<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let milli = int_arg(SIZE_FN, &args, 1)?.unsigned_abs();
    let mode = Mode::from_i64(int_arg(SIZE_FN, &args, 2)?)?;
    let meter = meter_arg(SIZE_FN, &args)?;
    let size = measure(args[0].as_ref(), mode, meter.size_cap(milli));
    meter.charge(scaled(size, milli))?;
    first(args)
}

fn size2_fn<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let fx = int_arg(SIZE2_FN, &args, 1)?.unsigned_abs();
    let fy = int_arg(SIZE2_FN, &args, 3)?.unsigned_abs();
    let meter = meter_arg(SIZE2_FN, &args)?;
    let sx = measure(args[0].as_ref(), Mode::Traverse, meter.size_cap(fx));
    let sy = measure(args[2].as_ref(), Mode::Traverse, meter.size_cap(fy));
    meter.charge(scaled(sx.max(1), fx).saturating_mul(scaled(sy, fy).max(1)))?;
    first(args)
}

#[cfg(test)]
mod tests {
    use super::*;
    use cel::common::types::CelBool;

    fn boxed(items: Vec<Box<dyn Val>>) -> CelList<'static> {
        CelList::from(items)
    }

    #[test]
    fn measures_deep_sizes() {
        let s = |t: &str| Box::new(CelString::from(t.to_owned())) as Box<dyn Val>;
        let int = || Box::new(CelInt::from(7)) as Box<dyn Val>;
        let nested = boxed(vec![Box::new(boxed(vec![s("abcd"), s("")])), int()]);
        let shared = StrMap::new(vec![("key".to_owned(), s("value"))], None);
        let cases: &[(&dyn Val, Mode, u64, &str)] = &[
            (
                &CelString::from("hello"),
                Mode::Traverse,
                5,
                "string counts bytes",
            ),
            (&CelInt::from(1), Mode::Traverse, 1, "scalar counts 1"),
            (&CelBool::from(true), Mode::Copy, 1, "scalar counts 1 when copied"),
            (
                &nested,
                Mode::Traverse,
                6,
                "nested list: 4 + 1 (empty string) + 1",
            ),
            (&nested, Mode::List, 6, "in on a list measures it"),
            (
                &shared,
                Mode::Traverse,
                8,
                "shared map traversed: key 3 + value 5",
            ),
            (&shared, Mode::Copy, 1, "shared map copied by pointer"),
            (&shared, Mode::List, 0, "in on a map is a lookup"),
        ];
        for (value, mode, want, msg) in cases {
            assert_eq!(measure(*value, *mode, u64::MAX), *want, "{msg}");
        }
        assert_eq!(
            measure(&nested, Mode::Traverse, 3),
            4,
            "measuring stops past the cap"
        );
    }

    #[test]
    fn meter_fails_past_the_limit_and_stays_failed() {
        let meter = Meter::new(10);
        assert!(meter.charge(10).is_ok(), "up to the limit is fine");
        assert!(!meter.exceeded());
        assert!(meter.charge(1).is_err(), "one more is over");
        assert!(meter.exceeded());
        assert!(meter.charge(0).is_err(), "every later charge fails too");
        assert_eq!(
            Meter::new(u64::MAX).charge(u64::MAX).map(|_| ()),
            Ok(()),
            "saturates"
        );
    }
}
