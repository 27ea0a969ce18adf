//! The shared CEL environment: cel-rust's standard library and strings extension, plus the
//! Kubernetes extensions DRA expressions use (quantity and semver libraries, `cel.bind`) and the
//! internal cost-metering functions of [`super::cost`].
//!
//! Kubernetes functions, as in `k8s.io/apiserver/pkg/cel/library` (behaviour, not code):
//! - `quantity(string)`, `isQuantity(string)`; on a quantity: `compareTo`, `isGreaterThan`,
//!   `isLessThan` (quantity argument), `add`/`sub` (quantity or int), `mul(int)`, `sign()` (also
//!   `sign(q)`), `isInteger()`, `asInteger()`, `asApproximateFloat()`.
//! - `semver(string)`, `semver(string, bool)` (normalize), `isSemver(string[, bool])`; on a
//!   version: `major()`, `minor()`, `patch()`, `compareTo`, `isGreaterThan`, `isLessThan`.
//! - `cel.bind(var, init, expr)`, a macro expanded after parsing ([`super::macros`]).
//! - `x.includes(y)`, DRA's function for list-type attributes (KEP-5491): on a list, whether an
//!   element equals `y`; on any other value, whether it equals `y`. A list longer than 48
//!   elements (the most values an attribute holds) is an error, as upstream bounds the cost.
//! - `matches(string, string)` and `string.matches(string)`, as cel-go's `matches` over Go's
//!   `regexp` ([`super::re2`]): a constant pattern is compiled with the expression, a computed one
//!   on each call.

use std::cmp::Ordering;
use std::sync::{Arc, LazyLock};

use cel::common::types::{
    BOOL_TYPE, CelBool, CelDouble, CelInt, CelList, CelString, DYN_TYPE, INT_TYPE, STRING_TYPE,
};
use cel::common::value::{CowVal, FromVal, Val};
use cel::{DeclarationError, Env, ExecutionError};

use super::cost;
use super::semver::Semver;
use super::values::{QUANTITY_TYPE, QuantityVal, REGEX_TYPE, RegexVal, SEMVER_TYPE, SemverVal};
use crate::quantity::{Format, Quantity};

type Res<'b, 'v> = Result<CowVal<'b, 'v>, ExecutionError>;

/// The environment every compiled expression runs in, built once per process.
pub(crate) fn environment() -> Arc<Env> {
    static ENV: LazyLock<Arc<Env>> =
        LazyLock::new(|| Arc::new(build().expect("the built-in CEL declarations are consistent")));
    Arc::clone(&ENV)
}

/// The environment's declarations. `cel.bind` is not one of them: it is a macro, expanded after
/// parsing (see the `macros` module).
pub(super) fn build() -> Result<Env, DeclarationError> {
    let mut env = Env::stdlib();
    env.add_extension(cel::extensions::strings)?;
    env.add_type(QUANTITY_TYPE.to_owned())?;
    env.add_type(SEMVER_TYPE.to_owned())?;
    let (q, s, str_, int, boolean) = (
        || QUANTITY_TYPE.to_owned(),
        || SEMVER_TYPE.to_owned(),
        || STRING_TYPE,
        || INT_TYPE,
        || BOOL_TYPE,
    );

    env.add_overload("quantity", "string_to_quantity", vec![str_()], quantity)?;
    env.add_overload("isQuantity", "is_quantity_string", vec![str_()], is_quantity)?;
    env.add_overload("sign", "quantity_sign", vec![q()], quantity_sign)?;
    env.add_member_overload("sign", "quantity_sign_member", q(), vec![], quantity_sign)?;
    env.add_member_overload("isGreaterThan", "quantity_is_greater_than", q(), vec![q()], q_gt)?;
    env.add_member_overload("isLessThan", "quantity_is_less_than", q(), vec![q()], q_lt)?;
    env.add_member_overload("compareTo", "quantity_compare_to", q(), vec![q()], q_cmp)?;
    env.add_member_overload("asApproximateFloat", "quantity_get_float", q(), vec![], q_float)?;
    env.add_member_overload("asInteger", "quantity_get_int", q(), vec![], q_as_int)?;
    env.add_member_overload("isInteger", "quantity_is_integer", q(), vec![], q_is_int)?;
    env.add_member_overload("add", "quantity_add", q(), vec![q()], q_add)?;
    env.add_member_overload("add", "quantity_add_int", q(), vec![int()], q_add)?;
    env.add_member_overload("sub", "quantity_sub", q(), vec![q()], q_sub)?;
    env.add_member_overload("sub", "quantity_sub_int", q(), vec![int()], q_sub)?;
    env.add_member_overload("mul", "quantity_multiply_int", q(), vec![int()], q_mul)?;

    env.add_overload("semver", "string_to_semver", vec![str_()], semver)?;
    env.add_overload("semver", "string_bool_to_semver", vec![str_(), boolean()], semver)?;
    env.add_overload("isSemver", "is_semver_string", vec![str_()], is_semver)?;
    env.add_overload(
        "isSemver",
        "is_semver_string_bool",
        vec![str_(), boolean()],
        is_semver,
    )?;
    env.add_member_overload("major", "semver_major", s(), vec![], semver_major)?;
    env.add_member_overload("minor", "semver_minor", s(), vec![], semver_minor)?;
    env.add_member_overload("patch", "semver_patch", s(), vec![], semver_patch)?;
    env.add_member_overload("isGreaterThan", "semver_is_greater_than", s(), vec![s()], v_gt)?;
    env.add_member_overload("isLessThan", "semver_is_less_than", s(), vec![s()], v_lt)?;
    env.add_member_overload("compareTo", "semver_compare_to", s(), vec![s()], v_cmp)?;

    env.add_member_overload(
        "includes",
        "dra_includes_dyn_dyn",
        DYN_TYPE,
        vec![DYN_TYPE],
        includes,
    )?;

    // `matches` with a constant pattern, compiled once (see `compile::precompile_regexes`).
    let re = || REGEX_TYPE.to_owned();
    env.add_member_overload("matches", "@matches_regex", str_(), vec![re()], regex_matches)?;
    env.add_overload(
        "matches",
        "@matches_string_regex",
        vec![str_(), re()],
        regex_matches,
    )?;

    // `matches` with a pattern computed at run time, compiled on each call as cel-go does. The
    // crate's own overloads are not built: they read patterns with Unicode Perl classes, and its
    // `regex` feature would pull in regex's `perf` engines, which the guests cannot afford.
    env.add_member_overload("matches", "matches_string", str_(), vec![str_()], text_matches)?;
    env.add_overload("matches", "matches", vec![str_(), str_()], text_matches)?;

    cost::register(&mut env)?;
    Ok(env)
}

/// `ResourceSliceMaxAttributeValuesPerDevice`: the most values a list-type attribute holds, and so
/// the longest list `includes` searches.
const MAX_ATTRIBUTE_VALUES: usize = 48;

/// `target.includes(arg)`: list membership, or equality for a value that is not a list.
fn includes<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Res<'b, 'v> {
    let [target, arg] = args.as_slice() else {
        return Err(ExecutionError::invalid_argument_count(2, args.len()));
    };
    let (target, arg) = (target.as_ref(), arg.as_ref());
    let found = match target.downcast_ref::<CelList>() {
        Some(list) => {
            let items = list.inner();
            if items.len() > MAX_ATTRIBUTE_VALUES {
                return Err(ExecutionError::function_error(
                    "includes",
                    format!(
                        "'includes' function cannot be applied to lists longer than {MAX_ATTRIBUTE_VALUES} values"
                    ),
                ));
            }
            items.iter().any(|item| item.as_ref().equals(arg))
        }
        None => target.equals(arg),
    };
    owned(CelBool::from(found))
}

/// Argument `i`, of the Rust type its overload was declared with.
fn arg<'a, 'b, 'v, T>(function: &str, args: &'a [CowVal<'b, 'v>], i: usize) -> Result<&'a T, ExecutionError>
where
    T: FromVal<'a, 'v> + Val,
{
    let value = args
        .get(i)
        .ok_or_else(|| ExecutionError::invalid_argument_count(i + 1, args.len()))?;
    value
        .as_ref()
        .downcast_ref::<T>()
        .ok_or_else(|| ExecutionError::UnexpectedType {
            got: value.get_type().name().to_owned(),
            want: format!("{} (argument {i} of {function})", T::cel_type().name()),
        })
}

fn owned<'b, 'v>(value: impl Val + 'static) -> Res<'b, 'v> {
    Ok(CowVal::Owned(Box::new(value)))
}

fn ordering(o: Ordering) -> i64 {
    match o {
        Ordering::Less => -1,
        Ordering::Equal => 0,
        Ordering::Greater => 1,
    }
}

fn quantity<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Res<'b, 'v> {
    let text = arg::<CelString>("quantity", &args, 0)?;
    let q: Quantity = text
        .inner()
        .parse()
        .map_err(|e| ExecutionError::function_error("quantity", e))?;
    owned(QuantityVal(q))
}

fn is_quantity<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Res<'b, 'v> {
    let text = arg::<CelString>("isQuantity", &args, 0)?;
    owned(CelBool::from(text.inner().parse::<Quantity>().is_ok()))
}

fn quantity_sign<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Res<'b, 'v> {
    owned(CelInt::from(arg::<QuantityVal>("sign", &args, 0)?.0.sign()))
}

fn quantity_pair<'a>(
    function: &str,
    args: &'a [CowVal<'_, '_>],
) -> Result<(&'a Quantity, &'a Quantity), ExecutionError> {
    Ok((
        &arg::<QuantityVal>(function, args, 0)?.0,
        &arg::<QuantityVal>(function, args, 1)?.0,
    ))
}

fn q_gt<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Res<'b, 'v> {
    let (a, b) = quantity_pair("isGreaterThan", &args)?;
    owned(CelBool::from(a > b))
}

fn q_lt<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Res<'b, 'v> {
    let (a, b) = quantity_pair("isLessThan", &args)?;
    owned(CelBool::from(a < b))
}

fn q_cmp<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Res<'b, 'v> {
    let (a, b) = quantity_pair("compareTo", &args)?;
    owned(CelInt::from(ordering(a.cmp(b))))
}

fn q_float<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Res<'b, 'v> {
    let q = &arg::<QuantityVal>("asApproximateFloat", &args, 0)?.0;
    owned(CelDouble::from(q.as_approximate_f64()))
}

fn q_as_int<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Res<'b, 'v> {
    let q = &arg::<QuantityVal>("asInteger", &args, 0)?.0;
    let i = q.as_i64().ok_or_else(|| {
        ExecutionError::function_error("asInteger", format!("cannot convert value {q} to integer"))
    })?;
    owned(CelInt::from(i))
}

fn q_is_int<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Res<'b, 'v> {
    let q = &arg::<QuantityVal>("isInteger", &args, 0)?.0;
    owned(CelBool::from(q.as_i64().is_some()))
}

/// The right operand of `add`/`sub`: a quantity, or an int taken as a decimal-exponent quantity
/// (Go `NewQuantity(i, DecimalExponent)`).
fn operand(function: &str, args: &[CowVal<'_, '_>]) -> Result<Quantity, ExecutionError> {
    match args.get(1).and_then(|v| v.as_ref().downcast_ref::<CelInt>()) {
        Some(i) => Ok(Quantity::new(*i.inner(), Format::DecimalExponent)),
        None => Ok(arg::<QuantityVal>(function, args, 1)?.0.clone()),
    }
}

fn overflow(function: &str, a: &Quantity, b: impl std::fmt::Display) -> ExecutionError {
    ExecutionError::function_error(function, format!("{a} {function} {b} overflows a quantity"))
}

fn q_add<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Res<'b, 'v> {
    let a = &arg::<QuantityVal>("add", &args, 0)?.0;
    let b = operand("add", &args)?;
    owned(QuantityVal(
        a.checked_add(&b).ok_or_else(|| overflow("add", a, &b))?,
    ))
}

fn q_sub<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Res<'b, 'v> {
    let a = &arg::<QuantityVal>("sub", &args, 0)?.0;
    let b = operand("sub", &args)?;
    owned(QuantityVal(
        a.checked_sub(&b).ok_or_else(|| overflow("sub", a, &b))?,
    ))
}

fn q_mul<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Res<'b, 'v> {
    let a = &arg::<QuantityVal>("mul", &args, 0)?.0;
    let factor = *arg::<CelInt>("mul", &args, 1)?.inner();
    owned(QuantityVal(
        a.checked_mul(factor).ok_or_else(|| overflow("mul", a, factor))?,
    ))
}

fn parse_semver(function: &str, args: &[CowVal<'_, '_>]) -> Result<Result<Semver, String>, ExecutionError> {
    let text = arg::<CelString>(function, args, 0)?.inner();
    let normalize = match args.len() {
        2 => *arg::<CelBool>(function, args, 1)?.inner(),
        _ => false,
    };
    Ok(if normalize {
        Semver::parse_normalized(text)
    } else {
        Semver::parse(text)
    })
}

fn semver<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Res<'b, 'v> {
    let v = parse_semver("semver", &args)?.map_err(|e| ExecutionError::function_error("semver", e))?;
    owned(SemverVal(v))
}

fn is_semver<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Res<'b, 'v> {
    owned(CelBool::from(parse_semver("isSemver", &args)?.is_ok()))
}

/// Go converts the `uint64` components with `types.Int(...)`, wrapping above `i64::MAX`.
fn component(
    function: &str,
    args: &[CowVal<'_, '_>],
    get: fn(&Semver) -> u64,
) -> Result<i64, ExecutionError> {
    Ok(get(&arg::<SemverVal>(function, args, 0)?.0) as i64)
}

fn semver_major<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Res<'b, 'v> {
    owned(CelInt::from(component("major", &args, |v| v.major)?))
}

fn semver_minor<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Res<'b, 'v> {
    owned(CelInt::from(component("minor", &args, |v| v.minor)?))
}

fn semver_patch<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Res<'b, 'v> {
    owned(CelInt::from(component("patch", &args, |v| v.patch)?))
}

fn semver_cmp(function: &str, args: &[CowVal<'_, '_>]) -> Result<Ordering, ExecutionError> {
    let a = &arg::<SemverVal>(function, args, 0)?.0;
    let b = &arg::<SemverVal>(function, args, 1)?.0;
    Ok(a.compare(b))
}

fn v_gt<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Res<'b, 'v> {
    owned(CelBool::from(semver_cmp("isGreaterThan", &args)?.is_gt()))
}

fn v_lt<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Res<'b, 'v> {
    owned(CelBool::from(semver_cmp("isLessThan", &args)?.is_lt()))
}

fn v_cmp<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Res<'b, 'v> {
    owned(CelInt::from(ordering(semver_cmp("compareTo", &args)?)))
}

fn regex_matches<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Res<'b, 'v> {
    let text = arg::<CelString>("matches", &args, 0)?;
    let regex = arg::<RegexVal>("matches", &args, 1)?;
    owned(CelBool::from(regex.0.is_match(text.inner())))
}

fn text_matches<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Res<'b, 'v> {
    let text = arg::<CelString>("matches", &args, 0)?;
    let pattern = arg::<CelString>("matches", &args, 1)?;
    let regex = super::re2::compile(pattern.inner()).map_err(|e| ExecutionError::FunctionError {
        function: "matches".to_owned(),
        message: format!("invalid regular expression {:?}: {e}", pattern.inner()),
    })?;
    owned(CelBool::from(regex.is_match(text.inner())))
}
