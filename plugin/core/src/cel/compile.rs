//! Compiling an expression: parse, check names, instrument for cost, and evaluate.
//!
//! cel-rust parses without type-checking, so names are checked here instead: every identifier
//! must be the expression's variable (`device` or `object`), a comprehension or `cel.bind`
//! variable, or a type name; `device.<field>` must be one of the DRA device fields; every
//! function must be declared in the environment for the way it is called (global or member).
//! Type errors (`device.driver == 1`, `quantity(1)`) surface at evaluation.

use std::collections::HashSet;
use std::sync::Arc;

use cel::common::ast::{
    CallExpr, ComprehensionExpr, EntryExpr, Expr, IdedExpr, ListExpr, LiteralValue, operators,
};
use cel::common::types::CelInt;
use cel::common::value::{CowVal, Val};
use cel::context::VariableResolver;
use cel::{Context, Env, ExecutionError, Value};

use super::CelError;
use super::cost::{COST_FN, METER_VAR, Meter, Mode, SIZE_FN, SIZE2_FN};

/// The variable an expression is evaluated against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Root {
    /// Device selectors: `device`.
    Device,
    /// Sharing-affinity extractors: `object`.
    Object,
}

/// The fields of the `device` variable.
pub(crate) const DEVICE_FIELDS: [&str; 4] = ["driver", "attributes", "capacity", "allowMultipleAllocations"];

impl Root {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Root::Device => "device",
            Root::Object => "object",
        }
    }

    fn fields(self) -> Option<&'static [&'static str]> {
        match self {
            Root::Device => Some(&DEVICE_FIELDS),
            Root::Object => None,
        }
    }
}

/// A checked, instrumented expression.
#[derive(Debug)]
pub(crate) struct Program {
    expr: IdedExpr,
    /// Cost of the nodes outside loop bodies, charged when an evaluation starts.
    static_cost: u64,
    root: Root,
}

pub(crate) fn compile(env: &Arc<Env>, source: &str, root: Root) -> Result<Program, CelError> {
    check_nesting(source)?;
    let parsed = env
        .parser()
        .max_recursion_depth((MAX_NESTING + 8) as u16)
        .parse(source)
        .map_err(|e| CelError::Compile(e.to_string()))?;
    let mut checker = Checker {
        env,
        root,
        scopes: Vec::new(),
        declared: HashSet::new(),
    };
    checker.check(&parsed)?;
    let (expr, static_cost) = instrument(parsed);
    Ok(Program {
        expr,
        static_cost,
        root,
    })
}

/// Variables of one evaluation: the root value and the cost meter.
struct Vars<'a> {
    root: &'static str,
    value: &'a dyn Val,
    meter: Meter,
}

impl VariableResolver for Vars<'_> {
    fn resolve<'b>(&'b self, variable: &str) -> Option<CowVal<'b, 'b>> {
        if variable == self.root {
            Some(CowVal::Borrowed(self.value))
        } else if variable == METER_VAR {
            Some(CowVal::Borrowed(&self.meter))
        } else {
            None
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
        convert: impl FnOnce(&dyn Val) -> Result<T, CelError>,
    ) -> Result<T, CelError> {
        let vars = Vars {
            root: self.root.name(),
            value,
            meter: Meter::new(limit),
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
        let result = Value::resolve_val(&self.expr, &ctx);
        if vars.meter.exceeded() {
            return Err(over_budget());
        }
        match result {
            Ok(v) => convert(v.as_ref()),
            Err(e) => Err(CelError::Runtime(e.to_string())),
        }
    }

    /// The cost charged up front (for tests).
    #[cfg(test)]
    pub(crate) fn static_cost(&self) -> u64 {
        self.static_cost
    }
}

// ---------------------------------------------------------------------------------------------
// Nesting limits
// ---------------------------------------------------------------------------------------------

/// Deepest bracket nesting accepted (also the parser's recursion limit).
pub(crate) const MAX_NESTING: usize = 24;
/// Deepest recursion a chain of operators, selections, calls and indexes may create.
pub(crate) const MAX_CHAIN: usize = 64;

/// Recursion depth of one bracket level (or the whole expression), as the parser builds it.
#[derive(Default)]
struct Level {
    /// Binary operators in the current chain: a left-deep chain nests each under the next.
    ops: usize,
    /// Depth of the current operand: selections, calls, indexes and what their brackets hold.
    operand: usize,
    /// Deepest operand of the current chain.
    max_operand: usize,
    /// Deepest finished chain of this level (`,`, `&&`, `||`, `?`, `:` end a chain).
    best: usize,
}

impl Level {
    fn depth(&self) -> usize {
        self.best.max(self.ops + self.max_operand.max(self.operand))
    }
    fn end_chain(&mut self) {
        *self = Level {
            best: self.depth(),
            ..Level::default()
        };
    }
    fn end_operand(&mut self) {
        self.ops += 1;
        self.max_operand = self.max_operand.max(self.operand);
        self.operand = 0;
    }
}

/// Rejects expressions that would nest too deeply for a fixed-size stack, before parsing.
///
/// cel-rust's parser, checker and interpreter recurse over the expression: a chain like
/// `1 + 1 + ... + 1` (left-deep) or `[[[[...]]]]` needs stack in proportion to its length, and
/// the growable stacks that let Kubernetes accept such expressions do not exist here (a wasm
/// guest has a few hundred KiB). A lexical scan bounds that depth: brackets may nest
/// [`MAX_NESTING`] deep, and the recursion depth a left-deep chain of binary operators,
/// selections, calls and indexes creates may not exceed [`MAX_CHAIN`] (`&&`, `||`, `?:` and `,`
/// start new chains, as the parser keeps those flat or balanced).
fn check_nesting(source: &str) -> Result<(), CelError> {
    let bytes = source.as_bytes();
    let mut levels: Vec<Level> = vec![Level::default()];
    let is_ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        let level = levels.len() - 1;
        match b {
            b'"' | b'\'' => {
                let raw = i >= 1
                    && matches!(bytes[i - 1], b'r' | b'R')
                    && (i < 2 || !is_ident(bytes[i - 2]) || matches!(bytes[i - 2], b'b' | b'B'));
                i = skip_string(bytes, i, raw);
                continue;
            }
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            b'(' | b'[' | b'{' => {
                levels[level].operand += 1;
                levels.push(Level::default());
                if levels.len() > MAX_NESTING + 1 {
                    return Err(compile_error(format!(
                        "expression nests brackets more than {MAX_NESTING} deep"
                    )));
                }
            }
            b')' | b']' | b'}' if level > 0 => {
                let inner = levels.pop().map_or(0, |l| l.depth());
                levels[level - 1].operand += inner;
            }
            b',' | b'?' | b':' => levels[level].end_chain(),
            b'&' | b'|' if bytes.get(i + 1) == Some(&b) => {
                levels[level].end_chain();
                i += 1;
            }
            b'+' | b'-' | b'*' | b'/' | b'%' | b'<' | b'>' | b'!' | b'=' => {
                levels[level].end_operand();
                if bytes.get(i + 1) == Some(&b'=') {
                    i += 1;
                }
            }
            // A selection, not the point of a number.
            b'.' if !(i > 0 && bytes[i - 1].is_ascii_digit() && !ident_before_digits(bytes, i)) => {
                levels[level].operand += 1;
            }
            _ if is_ident(b) => {
                let start = i;
                while i < bytes.len() && is_ident(bytes[i]) {
                    i += 1;
                }
                if &bytes[start..i] == b"in" {
                    levels[level].end_operand();
                }
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    while levels.len() > 1 {
        let inner = levels.pop().map_or(0, |l| l.depth());
        if let Some(parent) = levels.last_mut() {
            parent.operand += inner;
        }
    }
    let depth = levels[0].depth();
    if depth > MAX_CHAIN {
        return Err(compile_error(format!(
            "expression nests {depth} operators, selections, calls or indexes inside each \
             other; at most {MAX_CHAIN} are supported"
        )));
    }
    Ok(())
}

/// Whether the digits ending at `dot` belong to an identifier (`a1.b`) rather than a number.
fn ident_before_digits(bytes: &[u8], dot: usize) -> bool {
    let mut j = dot;
    while j > 0 && bytes[j - 1].is_ascii_digit() {
        j -= 1;
    }
    j > 0 && (bytes[j - 1].is_ascii_alphabetic() || bytes[j - 1] == b'_')
}

/// The index just past the string literal opening at `start` (single, double or triple quotes).
fn skip_string(bytes: &[u8], start: usize, raw: bool) -> usize {
    let quote = bytes[start];
    let triple = bytes.get(start + 1) == Some(&quote) && bytes.get(start + 2) == Some(&quote);
    let mut i = start + if triple { 3 } else { 1 };
    while i < bytes.len() {
        if bytes[i] == b'\\' && !raw {
            i += 2;
            continue;
        }
        if bytes[i] == quote {
            if !triple {
                return i + 1;
            }
            if bytes.get(i + 1) == Some(&quote) && bytes.get(i + 2) == Some(&quote) {
                return i + 3;
            }
        }
        i += 1;
    }
    bytes.len()
}

// ---------------------------------------------------------------------------------------------
// Name checks
// ---------------------------------------------------------------------------------------------

struct Checker<'a> {
    env: &'a Arc<Env>,
    root: Root,
    /// Comprehension and `cel.bind` variables in scope.
    scopes: Vec<String>,
    /// Functions already found declared, as `(name, member)`.
    declared: HashSet<(String, bool)>,
}

fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// `a.b.c` as `["a", "b", "c"]`, when the expression is only identifiers and field selections.
fn qualified_name(expr: &IdedExpr) -> Option<Vec<&str>> {
    match &expr.expr {
        Expr::Ident(name) => Some(vec![name.as_str()]),
        Expr::Select(select) if !select.test => {
            let mut segments = qualified_name(&select.operand)?;
            segments.push(select.field.as_str());
            Some(segments)
        }
        _ => None,
    }
}

fn compile_error(msg: impl Into<String>) -> CelError {
    CelError::Compile(msg.into())
}

impl Checker<'_> {
    fn is_variable(&self, name: &str) -> bool {
        name == self.root.name() || self.scopes.iter().any(|s| s == name)
    }

    fn check(&mut self, expr: &IdedExpr) -> Result<(), CelError> {
        match &expr.expr {
            Expr::Unspecified => Err(compile_error("incomplete expression")),
            Expr::Literal(_) => Ok(()),
            Expr::Ident(name) => self.check_name(&[name.as_str()]),
            Expr::Select(select) => {
                if let Some(segments) = qualified_name(expr) {
                    return self.check_name(&segments);
                }
                match (select.test, qualified_name(&select.operand)) {
                    (true, Some(mut segments)) => {
                        segments.push(select.field.as_str());
                        self.check_name(&segments)
                    }
                    _ => self.check(&select.operand),
                }
            }
            Expr::Call(call) => self.check_call(call),
            Expr::List(list) => list.elements.iter().try_for_each(|e| self.check(e)),
            Expr::Map(map) => map.entries.iter().try_for_each(|entry| match &entry.expr {
                EntryExpr::MapEntry(e) => {
                    self.check(&e.key)?;
                    self.check(&e.value)
                }
                EntryExpr::StructField(f) => {
                    Err(compile_error(format!("unexpected struct field {}", f.field)))
                }
            }),
            Expr::Struct(s) => Err(compile_error(format!(
                "unknown type {}: message construction is not supported",
                s.type_name
            ))),
            Expr::Comprehension(c) => {
                self.check(&c.iter_range)?;
                self.check(&c.accu_init)?;
                let depth = self.scopes.len();
                self.scopes.push(c.iter_var.clone());
                self.scopes.extend(c.iter_var2.clone());
                self.scopes.push(c.accu_var.clone());
                let body = [&c.loop_cond, &c.loop_step, &c.result]
                    .into_iter()
                    .try_for_each(|e| self.check(e));
                self.scopes.truncate(depth);
                body
            }
        }
    }

    /// An identifier, possibly followed by field selections.
    fn check_name(&self, segments: &[&str]) -> Result<(), CelError> {
        let first = segments[0];
        if self.is_variable(first) {
            // The root variable (unless a comprehension or `cel.bind` shadows it) has fixed fields.
            if first == self.root.name()
                && !self.scopes.iter().any(|s| s == first)
                && let (Some(fields), Some(field)) = (self.root.fields(), segments.get(1))
                && !fields.contains(field)
            {
                return Err(compile_error(format!(
                    "undefined field '{field}' of '{first}' (it has {})",
                    fields.join(", ")
                )));
            }
            return Ok(());
        }
        for len in (1..=segments.len()).rev() {
            let name = segments[..len].join(".");
            if self.env.types().find_type(&name).is_some() {
                return if len == segments.len() {
                    Ok(())
                } else {
                    Err(compile_error(format!(
                        "type {name} has no field '{}'",
                        segments[len]
                    )))
                };
            }
        }
        Err(compile_error(format!(
            "undeclared reference to '{first}' (the expression's variable is '{}')",
            self.root.name()
        )))
    }

    fn check_call(&mut self, call: &CallExpr) -> Result<(), CelError> {
        for arg in &call.args {
            self.check(arg)?;
        }
        if !is_identifier(&call.func_name) {
            // An operator, evaluated by the interpreter itself.
            return match &call.target {
                Some(target) => self.check(target),
                None => Ok(()),
            };
        }
        match &call.target {
            None => self.require_function(&call.func_name, false),
            Some(target) => {
                // `strings.quote(x)`: a namespaced global function.
                if let Some(segments) = qualified_name(target)
                    && !self.is_variable(segments[0])
                    && self.declared(&format!("{}.{}", segments.join("."), call.func_name), false)
                {
                    return Ok(());
                }
                self.check(target)?;
                self.require_function(&call.func_name, true)
            }
        }
    }

    fn require_function(&mut self, name: &str, member: bool) -> Result<(), CelError> {
        if self.declared(name, member) {
            return Ok(());
        }
        Err(compile_error(if member {
            format!("undeclared reference to member function '{name}'")
        } else {
            format!("undeclared reference to function '{name}'")
        }))
    }

    /// Whether the environment declares `name`, called globally or as a member. cel-rust has no
    /// declaration lookup, so a call without arguments is evaluated: only an undeclared function
    /// reports an undeclared reference.
    fn declared(&mut self, name: &str, member: bool) -> bool {
        if self.declared.contains(&(name.to_owned(), member)) {
            return true;
        }
        let probe = IdedExpr {
            id: 0,
            expr: Expr::Call(CallExpr {
                func_name: name.to_owned(),
                target: member.then(|| {
                    Box::new(IdedExpr {
                        id: 0,
                        expr: Expr::Literal(LiteralValue::Null),
                    })
                }),
                args: Vec::new(),
            }),
        };
        let ctx = Context::with_env(Arc::clone(self.env));
        let found = !matches!(
            Value::resolve_val(&probe, &ctx),
            Err(ExecutionError::UndeclaredReference(_))
        );
        if found {
            self.declared.insert((name.to_owned(), member));
        }
        found
    }
}

// ---------------------------------------------------------------------------------------------
// Cost instrumentation (see `cost` for the model)
// ---------------------------------------------------------------------------------------------

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

/// Rewrites `expr` with cost charges; returns it and the static cost of its nodes outside loop
/// bodies.
fn instrument(expr: IdedExpr) -> (IdedExpr, u64) {
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
fn append_shape(c: &ComprehensionExpr) -> bool {
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
        "quote" if namespaced => Plan::Size(&[0], T, Mode::Traverse),
        "startsWith" | "endsWith" | "lowerAscii" | "upperAscii" | "trim" | "substring" | "charAt"
        | "reverse" | "format"
            if member =>
        {
            Plan::Size(&[0], T, Mode::Traverse)
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifies_operators_and_functions() {
        for (name, ident) in [
            ("size", true),
            ("_+_", false),
            ("@in", false),
            ("!_", false),
            ("isGreaterThan", true),
            ("", false),
            ("9a", false),
        ] {
            assert_eq!(is_identifier(name), ident, "{name}");
        }
    }

    #[test]
    fn bounds_nesting_before_parsing() {
        let chain = |n: usize, op: &str| vec!["x"; n + 1].join(op);
        let nested = |n: usize| format!("{}1{}", "[".repeat(n), "]".repeat(n));
        let selects = |n: usize| format!("x{}", ".f".repeat(n));
        let cases: Vec<(String, Option<&str>, &str)> = vec![
            ("1 + 1".into(), None, "trivial"),
            (chain(MAX_CHAIN, " + "), None, "longest accepted operator chain"),
            (
                chain(MAX_CHAIN + 1, " + "),
                Some("at most 64"),
                "operator chain too long",
            ),
            (
                chain(MAX_CHAIN + 1, " <= "),
                Some("at most 64"),
                "comparison chain too long",
            ),
            (chain(2000, " && "), None, "&& chains are balanced by the parser"),
            (chain(2000, ", "), None, "comma-separated items are siblings"),
            (format!("[{}]", chain(2000, ", ")), None, "a long list literal"),
            (nested(MAX_NESTING), None, "deepest accepted brackets"),
            (
                nested(MAX_NESTING + 1),
                Some("more than 24 deep"),
                "brackets too deep",
            ),
            (selects(MAX_CHAIN), None, "longest accepted selection chain"),
            (
                selects(MAX_CHAIN + 1),
                Some("at most 64"),
                "selection chain too long",
            ),
            (
                format!("f({}) + 1", chain(MAX_CHAIN, " + ")),
                Some("at most 64"),
                "a chain inside a call adds to the call's chain",
            ),
            (
                format!("\"{}\" == x", "(+".repeat(100)),
                None,
                "string contents do not count",
            ),
            (
                format!("'{}' == x", "[".repeat(100)),
                None,
                "single-quoted string contents",
            ),
            (
                format!("\"\"\"{}\"\"\" == x", "(\"".repeat(50)),
                None,
                "triple-quoted string contents",
            ),
            (
                format!("r\"\\\" == {}", chain(MAX_CHAIN, " + ")),
                Some("at most 64"),
                "a raw string ends at its first quote",
            ),
            (
                format!("\"\\\" == {}\" == x", chain(MAX_CHAIN, " + ")),
                None,
                "an escaped quote does not end a string",
            ),
            (
                format!("x // {}\n == 1", "(".repeat(100)),
                None,
                "comments do not count",
            ),
            (
                format!("{} == 1.5", chain(MAX_CHAIN - 1, " + ")),
                None,
                "a decimal point is not a selection",
            ),
        ];
        for (source, error, msg) in cases {
            match (check_nesting(&source), error) {
                (Ok(()), None) => {}
                (Err(CelError::Compile(e)), Some(want)) => assert!(e.contains(want), "{msg}: {e}"),
                (got, _) => panic!("{msg}: {got:?}"),
            }
        }
    }
}
