//! Compiling an expression (nesting limits, parse, name checks, cost instrumentation, constant
//! regexes) and evaluating it against a prepared value with a fresh cost meter.

use std::sync::Arc;

use cel::common::ast::{Expr, IdedExpr, LiteralValue};
use cel::common::value::{CowVal, Val};
use cel::context::VariableResolver;
use cel::{Context, Env, Value};

use super::check::Checker;
use super::cost::{METER_VAR, Meter, Outcome};
use super::error::{CelError, compile_error};
use super::instrument::{instrument, keep_result};
use super::macros::try_for_each_child;
use super::parse::{check_nesting, parse};
use super::root::Root;
use super::values::RegexVal;

/// A checked, instrumented expression.
#[derive(Debug)]
pub(crate) struct Program {
    expr: IdedExpr,
    /// Cost of the nodes outside loop bodies, charged when an evaluation starts.
    static_cost: u64,
    root: Root,
    /// Constant `matches()` patterns, bound as `@re0`, `@re1`...
    regexes: Vec<RegexVal>,
}

pub(crate) fn compile(env: &Arc<Env>, source: &str, root: Root) -> Result<Program, CelError> {
    check_nesting(source)?;
    let parsed = parse(source)?;
    Checker::new(env, root).check(&parsed)?;
    let (expr, static_cost) = instrument(parsed);
    let mut expr = keep_result(expr);
    let mut regexes = Vec::new();
    precompile_regexes(&mut expr, &mut regexes)?;
    Ok(Program {
        expr,
        static_cost,
        root,
        regexes,
    })
}

/// Variable prefix of precompiled patterns.
const REGEX_VAR: &str = "@re";

/// Replaces the constant pattern of each `matches()` call by a variable bound to the compiled
/// regex: cel-rust's `matches` compiles its pattern on every call (~10 µs). An invalid constant
/// pattern is a compile error.
fn precompile_regexes(expr: &mut IdedExpr, regexes: &mut Vec<RegexVal>) -> Result<(), CelError> {
    try_for_each_child(&mut expr.expr, &mut |child| precompile_regexes(child, regexes))?;
    let Expr::Call(call) = &mut expr.expr else {
        return Ok(());
    };
    let pattern = match (call.func_name.as_str(), call.target.is_some()) {
        ("matches", true) => call.args.get_mut(0),
        ("matches", false) => call.args.get_mut(1),
        _ => None,
    };
    if let Some(pattern) = pattern
        && let Expr::Literal(LiteralValue::String(text)) = &pattern.expr
    {
        let regex = super::re2::compile(text.inner())
            .map_err(|e| compile_error(format!("invalid regular expression {:?}: {e}", text.inner())))?;
        pattern.expr = Expr::Ident(format!("{REGEX_VAR}{}", regexes.len()));
        regexes.push(RegexVal(Arc::new(regex)));
    }
    Ok(())
}

/// Variables of one evaluation: the root value and the cost meter.
struct Vars<'a> {
    root: &'static str,
    value: &'a dyn Val,
    meter: Meter,
    regexes: &'a [RegexVal],
}

impl VariableResolver for Vars<'_> {
    fn resolve<'b>(&'b self, variable: &str) -> Option<CowVal<'b, 'b>> {
        if variable == self.root {
            Some(CowVal::Borrowed(self.value))
        } else if variable == METER_VAR {
            Some(CowVal::Borrowed(&self.meter))
        } else {
            let index: usize = variable.strip_prefix(REGEX_VAR)?.parse().ok()?;
            Some(CowVal::Borrowed(self.regexes.get(index)?))
        }
    }
}

impl Program {
    /// Evaluates against `value` and converts the result, within `limit` cost units.
    pub(crate) fn eval<T>(
        &self,
        env: &Arc<Env>,
        value: &dyn Val,
        limit: u64,
        convert: impl FnOnce(Outcome) -> Result<T, CelError>,
    ) -> Result<T, CelError> {
        let vars = Vars {
            root: self.root.name(),
            value,
            meter: Meter::new(limit),
            regexes: &self.regexes,
        };
        let over_budget = || {
            CelError::Runtime(format!(
                "cost budget exceeded: evaluation would cost more than {limit} \
                 (Kubernetes CEL runtime cost units)"
            ))
        };
        if vars.meter.charge(self.static_cost).is_err() {
            return Err(over_budget());
        }
        let mut ctx = Context::with_env(Arc::clone(env));
        ctx.set_variable_resolver(&vars);
        // `Value::resolve`, not the `#[inline(always)]` `resolve_val`: the core then carries no
        // copy of `cel`'s interpreter of its own (35 KB of each guest). The value comes from the
        // meter, where the program's outermost `@result` call put it (see `compile`).
        let result = Value::resolve(&self.expr, &ctx);
        if vars.meter.exceeded() {
            return Err(over_budget());
        }
        match (result, vars.meter.take_result()) {
            (Ok(_), Some(outcome)) => convert(outcome),
            (Ok(v), None) => Err(CelError::Runtime(format!(
                "internal error: the program ended with {v:?} and kept no result"
            ))),
            (Err(e), _) => Err(CelError::Runtime(e.to_string())),
        }
    }

    /// The cost charged up front (for tests).
    #[cfg(test)]
    pub(crate) fn static_cost(&self) -> u64 {
        self.static_cost
    }
}

#[cfg(test)]
mod tests {
    use super::super::cost::COST_FN;
    use super::super::instrument::append_shape;
    use super::*;
    use cel::common::ast::ComprehensionExpr;

    fn comprehension(expr: &IdedExpr) -> &ComprehensionExpr {
        match &expr.expr {
            Expr::Comprehension(c) => c,
            Expr::Call(call) => call
                .args
                .iter()
                .chain(call.target.as_deref())
                .find_map(|e| match &e.expr {
                    Expr::Comprehension(_) | Expr::Call(_) => Some(comprehension(e)),
                    _ => None,
                })
                .expect("a comprehension"),
            other => panic!("no comprehension in {other:?}"),
        }
    }

    fn is_call(e: &IdedExpr, name: &str) -> bool {
        matches!(&e.expr, Expr::Call(c) if c.func_name == name)
    }

    #[test]
    fn instrumentation_keeps_the_in_place_shapes() {
        let env = super::super::library::environment();
        let compiled = |source: &str| compile(&env, source, Root::Device).unwrap().expr;

        let map = compiled("[1, 2].map(x, x * 2)");
        let c = comprehension(&map);
        assert!(append_shape(c), "map keeps the shape cel-rust appends in place");
        let Expr::Call(add) = &c.loop_step.expr else {
            panic!("{:?}", c.loop_step)
        };
        let Expr::List(items) = &add.args[1].expr else {
            panic!("{add:?}")
        };
        assert!(is_call(&items.elements[0], COST_FN), "the element is charged");

        let filter = compiled("[1, 2].filter(x, x > 1)");
        let c = comprehension(&filter);
        assert!(append_shape(c), "filter keeps the shape");
        let Expr::Call(cond) = &c.loop_step.expr else {
            panic!("{:?}", c.loop_step)
        };
        assert!(is_call(&cond.args[0], COST_FN), "the predicate is charged");

        let all = compiled("[1, 2].all(x, x > 1)");
        let c = comprehension(&all);
        assert!(
            is_call(&c.loop_cond, COST_FN),
            "other loops charge their condition"
        );

        let program = compile(
            &env,
            r#"device.driver.matches("^dra") || matches(device.driver, "x")"#,
            Root::Device,
        )
        .unwrap();
        assert_eq!(program.regexes.len(), 2, "constant patterns are compiled once");
        let bind = compiled("cel.bind(x, 1, x > 0)");
        let c = comprehension(&bind);
        assert!(
            !is_call(&c.loop_cond, COST_FN),
            "cel.bind never loops: nothing to charge"
        );
    }
}
