//! Cost instrumentation: rewrites an expression so that evaluating it charges the [`Meter`]
//! (see the `cost` module for the model).
//!
//! [`Meter`]: super::cost::Meter

use cel::common::ast::{
    CallExpr, ComprehensionExpr, EntryExpr, Expr, IdedExpr, ListExpr, LiteralValue, operators,
};
use cel::common::types::CelInt;

use super::cost::{COST_FN, METER_VAR, Mode, RESULT_FN, SIZE_FN, SIZE2_FN};

/// Traversal cost factor, in thousandths: 0.1 per byte.
const TRAVERSE: i64 = 100;

fn node(id: u64, expr: Expr) -> IdedExpr {
    IdedExpr { id, expr }
}

fn int(id: u64, v: i64) -> IdedExpr {
    node(id, Expr::Literal(LiteralValue::Int(CelInt::from(v))))
}

fn call(id: u64, name: &str, args: Vec<IdedExpr>) -> IdedExpr {
    node(
        id,
        Expr::Call(CallExpr {
            func_name: name.to_owned(),
            target: None,
            args,
        }),
    )
}

fn meter(id: u64) -> IdedExpr {
    node(id, Expr::Ident(METER_VAR.to_owned()))
}

/// `@cost(e, k)`.
fn charge(e: IdedExpr, k: u64) -> IdedExpr {
    let id = e.id;
    let k = i64::try_from(k).unwrap_or(i64::MAX);
    call(id, COST_FN, vec![e, int(id, k), meter(id)])
}

fn literal_size(literal: &LiteralValue) -> u64 {
    match literal {
        LiteralValue::String(s) => s.inner().len() as u64,
        LiteralValue::Bytes(b) => b.inner().len() as u64,
        _ => 1,
    }
}

/// `ceil(size * milli / 1000)`.
fn scaled(size: u64, milli: i64) -> u64 {
    (size as u128 * milli.unsigned_abs() as u128)
        .div_ceil(1000)
        .try_into()
        .unwrap_or(u64::MAX)
}

/// Charges `milli`/1000 per unit of `e`'s size: statically for a literal, at run time otherwise.
/// Returns the expression and the static part.
fn sized(e: IdedExpr, milli: i64, mode: Mode) -> (IdedExpr, u64) {
    match &e.expr {
        Expr::Literal(l) => {
            let size = if mode == Mode::List { 0 } else { literal_size(l) };
            (e, scaled(size, milli))
        }
        _ => {
            let id = e.id;
            (
                call(
                    id,
                    SIZE_FN,
                    vec![e, int(id, milli), int(id, mode as i64), meter(id)],
                ),
                0,
            )
        }
    }
}

/// Charges `ceil(size(x) * fx) * ceil(size(y) * fy)`; `y` is only measured (it stays in its own
/// place too, so a non-literal `y` is evaluated twice and its static cost counted twice).
fn sized_pair(x: IdedExpr, fx: i64, y: &IdedExpr, y_cost: u64, fy: i64) -> (IdedExpr, u64) {
    if let Expr::Literal(l) = &y.expr {
        let factor = scaled(literal_size(l), fy).max(1);
        let milli = (fx as u64).saturating_mul(factor).min(i64::MAX as u64) as i64;
        return sized(x, milli, Mode::Traverse);
    }
    let id = x.id;
    (
        call(
            id,
            SIZE2_FN,
            vec![x, int(id, fx), y.clone(), int(id, fy), meter(id)],
        ),
        y_cost,
    )
}

fn is_value_literal(e: &IdedExpr) -> bool {
    matches!(e.expr, Expr::Literal(_) | Expr::List(_) | Expr::Map(_))
}

/// `@result(e)`: the program's outermost call, which keeps the value of `e` in the meter (see
/// `Program::eval`). Costs nothing.
pub(super) fn keep_result(e: IdedExpr) -> IdedExpr {
    let id = e.id;
    call(id, RESULT_FN, vec![e, meter(id)])
}

/// Rewrites `expr` with cost charges; returns it and the static cost of its nodes outside loop
/// bodies.
pub(super) fn instrument(expr: IdedExpr) -> (IdedExpr, u64) {
    let id = expr.id;
    match expr.expr {
        Expr::Literal(_) | Expr::Unspecified => (expr, 0),
        Expr::Ident(_) => (expr, 1),
        Expr::Select(mut select) => {
            let (operand, cost) = instrument(*select.operand);
            select.operand = Box::new(operand);
            (node(id, Expr::Select(select)), cost + 1)
        }
        Expr::List(list) => {
            let (list, cost) = instrument_list(list);
            (node(id, Expr::List(list)), cost)
        }
        Expr::Map(mut map) => {
            let mut cost = 30;
            for entry in &mut map.entries {
                if let EntryExpr::MapEntry(e) = &mut entry.expr {
                    for part in [&mut e.key, &mut e.value] {
                        let (rewritten, c) = copied(std::mem::take(part));
                        *part = rewritten;
                        cost += c;
                    }
                }
            }
            (node(id, Expr::Map(map)), cost)
        }
        Expr::Struct(_) => (expr, 40),
        Expr::Comprehension(c) => {
            let (c, cost) = instrument_comprehension(*c);
            (node(id, Expr::Comprehension(Box::new(c))), cost)
        }
        Expr::Call(call) => instrument_call(id, call),
    }
}

/// A value that the interpreter copies: instrumented, then charged by its deep size.
fn copied(e: IdedExpr) -> (IdedExpr, u64) {
    let literal = is_value_literal(&e);
    let (e, cost) = instrument(e);
    if literal {
        (e, cost)
    } else {
        let (e, extra) = sized(e, TRAVERSE, Mode::Copy);
        (e, cost + extra)
    }
}

fn instrument_list(mut list: ListExpr) -> (ListExpr, u64) {
    let mut cost = 10;
    for element in &mut list.elements {
        let (rewritten, c) = copied(std::mem::take(element));
        *element = rewritten;
        cost += c;
    }
    (list, cost)
}

/// The `map`/`filter` step cel-rust evaluates in place: `accu + [e]` or `g ? accu + [e] : accu`,
/// with a literal loop condition and `accu` as the result. Keeping this shape keeps `map` linear.
pub(super) fn append_shape(c: &ComprehensionExpr) -> bool {
    let is_accu = |e: &IdedExpr| matches!(&e.expr, Expr::Ident(n) if *n == c.accu_var);
    let is_append = |e: &IdedExpr| match &e.expr {
        Expr::Call(call) if call.func_name == operators::ADD && call.target.is_none() => {
            matches!(call.args.as_slice(), [lhs, rhs] if is_accu(lhs) && matches!(rhs.expr, Expr::List(_)))
        }
        _ => false,
    };
    if !is_accu(&c.result) || !matches!(c.loop_cond.expr, Expr::Literal(_)) {
        return false;
    }
    match &c.loop_step.expr {
        Expr::Call(call) if call.func_name == operators::CONDITIONAL && call.target.is_none() => {
            matches!(call.args.as_slice(), [_, step, otherwise] if is_append(step) && is_accu(otherwise))
        }
        _ => is_append(&c.loop_step),
    }
}

/// Instruments `accu + [elements]` without charging the accumulator, which is appended to in
/// place; returns the step and its per-iteration cost.
fn instrument_append(step: IdedExpr) -> (IdedExpr, u64) {
    let id = step.id;
    let Expr::Call(mut add) = step.expr else {
        return instrument(step);
    };
    let mut cost = 1;
    if let Some(rhs) = add.args.get_mut(1) {
        let rhs_id = rhs.id;
        if let Expr::List(list) = std::mem::take(&mut rhs.expr) {
            let (list, c) = instrument_list(list);
            *rhs = node(rhs_id, Expr::List(list));
            cost += c;
        }
    }
    (node(id, Expr::Call(add)), cost)
}

fn instrument_comprehension(mut c: ComprehensionExpr) -> (ComprehensionExpr, u64) {
    let is_bind = matches!(&c.iter_range.expr, Expr::List(l) if l.elements.is_empty());
    let append = append_shape(&c);
    let (iter_range, c1) = copied(std::mem::take(&mut c.iter_range));
    let (accu_init, c2) = copied(std::mem::take(&mut c.accu_init));
    let (result, c3) = instrument(std::mem::take(&mut c.result));
    c.iter_range = iter_range;
    c.accu_init = accu_init;
    c.result = result;
    let fixed = c1 + c2 + c3;
    if is_bind {
        // `cel.bind`: the loop never runs.
        return (c, fixed);
    }
    let (loop_cond, k1) = instrument(std::mem::take(&mut c.loop_cond));
    let step = std::mem::take(&mut c.loop_step);
    if !append {
        // Charge the whole body once per iteration, when the condition is evaluated.
        let (loop_step, k2) = instrument(step);
        c.loop_cond = charge(loop_cond, (k1 + k2).max(1));
        c.loop_step = loop_step;
        return (c, fixed);
    }
    // map / filter keep their shape (the condition stays a literal): charge the filter
    // predicate, or else the appended element, which are evaluated once per iteration.
    c.loop_cond = loop_cond;
    let step_id = step.id;
    c.loop_step = match step.expr {
        Expr::Call(mut cond) if cond.func_name == operators::CONDITIONAL => {
            let (guard, g) = instrument(std::mem::take(&mut cond.args[0]));
            let (append_step, a) = instrument_append(std::mem::take(&mut cond.args[1]));
            cond.args[0] = charge(guard, (k1 + g + a).max(1));
            cond.args[1] = append_step;
            node(step_id, Expr::Call(cond))
        }
        other => {
            let (mut append_step, a) = instrument_append(node(step_id, other));
            if let Expr::Call(add) = &mut append_step.expr
                && let Some(Expr::List(list)) = add.args.get_mut(1).map(|r| &mut r.expr)
                && let Some(first) = list.elements.first_mut()
            {
                *first = charge(std::mem::take(first), (k1 + a).max(1));
            }
            append_step
        }
    };
    (c, fixed)
}

/// Where size-dependent work is charged. Positions index the call's operands: for a member
/// call the target first, then the arguments.
enum Plan {
    None,
    /// Charge the operands at these positions by their size.
    Size(&'static [usize], i64, Mode),
    /// Charge `ceil(size(x) * fx) * ceil(size(y) * fy)` on operand `x`.
    Pair(usize, i64, usize, i64),
    /// Comparisons: a literal operand bounds the work statically, otherwise both sides.
    Compare,
}

fn plan(name: &str, member: bool, namespaced: bool, args: usize) -> Plan {
    const T: i64 = TRAVERSE;
    match name {
        operators::ADD => Plan::Size(&[0, 1], T, Mode::Traverse),
        operators::EQUALS
        | operators::NOT_EQUALS
        | operators::LESS
        | operators::LESS_EQUALS
        | operators::GREATER
        | operators::GREATER_EQUALS => Plan::Compare,
        operators::IN => Plan::Size(&[1], 1000, Mode::List),
        // `x.includes(y)` is `y in x` for a list target (upstream estimates it so).
        "includes" if member => Plan::Size(&[0], 1000, Mode::List),
        "quote" if namespaced => Plan::Size(&[0], T, Mode::Traverse),
        "startsWith" | "endsWith" | "lowerAscii" | "upperAscii" | "trim" | "substring" | "charAt"
        | "reverse"
            if member =>
        {
            Plan::Size(&[0], T, Mode::Traverse)
        }
        "format" if member => Plan::Size(&[0, 1], T, Mode::Traverse),
        "split" if member => Plan::Size(&[0], 2 * T, Mode::Traverse),
        "join" if member && args == 1 => Plan::Pair(0, 2 * T, 1, 1000),
        "join" if member => Plan::Size(&[0], 2 * T, Mode::Traverse),
        "replace" if member && args >= 2 => Plan::Pair(0, 2 * T, 2, 1000),
        "contains" if member => Plan::Pair(0, T, 1, T),
        "indexOf" | "lastIndexOf" if member => Plan::Pair(0, T, 1, 1000),
        "matches" => Plan::Pair(0, T, 1, 250),
        "quantity" | "isQuantity" | "semver" | "isSemver" | "string" | "bytes" | "int" | "uint"
        | "double" | "bool"
            if !member =>
        {
            Plan::Size(&[0], T, Mode::Traverse)
        }
        _ => Plan::None,
    }
}

fn instrument_call(id: u64, mut call: CallExpr) -> (IdedExpr, u64) {
    let mut cost: u64 = match call.func_name.as_str() {
        operators::LOGICAL_AND
        | operators::LOGICAL_OR
        | operators::CONDITIONAL
        | operators::NOT_STRICTLY_FALSE => 0,
        _ => 1,
    };
    // `strings.quote(x)` names a function through its target, which is not an operand.
    let namespaced = matches!(
        call.target.as_deref().map(|t| &t.expr),
        Some(Expr::Ident(ns)) if ns == "strings"
    );
    let member = call.target.is_some() && !namespaced;
    let plan = plan(&call.func_name, member, namespaced, call.args.len());
    let mut operands: Vec<IdedExpr> = Vec::with_capacity(call.args.len() + 1);
    if member {
        operands.extend(call.target.take().map(|t| *t));
    }
    operands.append(&mut call.args);
    let mut costs = Vec::with_capacity(operands.len());
    for operand in &mut operands {
        let (e, c) = instrument(std::mem::take(operand));
        *operand = e;
        cost += c;
        costs.push(c);
    }
    match plan {
        Plan::None => {}
        Plan::Size(positions, milli, mode) => {
            for &pos in positions {
                let Some(operand) = operands.get_mut(pos) else {
                    continue;
                };
                match &operand.expr {
                    // Literal lists and maps were charged when built; `in` a literal list
                    // costs its length.
                    Expr::List(l) => {
                        if mode == Mode::List {
                            cost += l.elements.len() as u64;
                        }
                    }
                    Expr::Map(_) => {}
                    _ => {
                        let (e, extra) = sized(std::mem::take(operand), milli, mode);
                        *operand = e;
                        cost += extra;
                    }
                }
            }
        }
        Plan::Pair(x, fx, y, fy) => {
            if x < operands.len() && y < operands.len() {
                let e = std::mem::take(&mut operands[x]);
                let (e, extra) = sized_pair(e, fx, &operands[y], costs[y], fy);
                operands[x] = e;
                cost += extra;
            }
        }
        Plan::Compare => {
            let literal = operands.iter().find_map(|e| match &e.expr {
                Expr::Literal(l) => Some(literal_size(l)),
                _ => None,
            });
            match literal {
                Some(size) => cost += scaled(size, TRAVERSE).saturating_sub(1),
                None => {
                    for operand in &mut operands {
                        let (e, extra) = sized(std::mem::take(operand), TRAVERSE, Mode::Traverse);
                        *operand = e;
                        cost += extra;
                    }
                }
            }
        }
    }
    let mut operands = operands.into_iter();
    if member {
        call.target = operands.next().map(Box::new);
    }
    call.args = operands.collect();
    (node(id, Expr::Call(call)), cost)
}
