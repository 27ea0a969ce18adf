//! The macros that the parser leaves as plain calls, expanded after parsing.
//!
//! Expressions are parsed by cel-rust's Pratt parser (see `parse`), which expands only CEL's
//! standard macros (`has`, `all`, `exists`, `exists_one`, `map`, `filter`) and has no way to be
//! given more. Kubernetes CEL has three more, expanded here, bottom-up, into the same trees a
//! parser builds when it expands them while parsing:
//!
//! - `cel.bind(var, init, result)` (cel-go's `ext.Bindings`): `result` with `var` bound to
//!   `init`, a comprehension over an empty list whose accumulator is `var`;
//! - `t.optMap(var, e)`: `t.hasValue() ? optional.of(cel.bind(var, t.value(), e)) :
//!   optional.none()`, and `t.optFlatMap(var, e)`, the same without `optional.of` (cel-go's
//!   optional library). A target that is not an identifier is bound to `@target` first, so that
//!   it is evaluated once.
//!
//! The expansions are checked against cel-rust's ANTLR parser, which expands them while parsing,
//! by the tests in `cel::parse_tests`.

use cel::common::ast::{
    CallExpr, ComprehensionExpr, EntryExpr, Expr, IdedExpr, ListExpr, LiteralValue, MapExpr, StructExpr,
    operators,
};
use cel::common::types::CelBool;

use super::error::{CelError, compile_error};

/// Calls `f` on each direct sub-expression of `expr`, in source order (a comprehension's parts in
/// the order range, init, condition, step, result), and stops at the first error.
pub(super) fn try_for_each_child(
    expr: &mut Expr,
    f: &mut dyn FnMut(&mut IdedExpr) -> Result<(), CelError>,
) -> Result<(), CelError> {
    match expr {
        Expr::Call(call) => {
            if let Some(target) = call.target.as_deref_mut() {
                f(target)?;
            }
            call.args.iter_mut().try_for_each(f)
        }
        Expr::Select(select) => f(&mut select.operand),
        Expr::List(list) => list.elements.iter_mut().try_for_each(f),
        Expr::Map(MapExpr { entries }) | Expr::Struct(StructExpr { entries, .. }) => {
            entries.iter_mut().try_for_each(|entry| match &mut entry.expr {
                EntryExpr::MapEntry(e) => {
                    f(&mut e.key)?;
                    f(&mut e.value)
                }
                EntryExpr::StructField(field) => f(&mut field.value),
            })
        }
        Expr::Comprehension(c) => [
            &mut c.iter_range,
            &mut c.accu_init,
            &mut c.loop_cond,
            &mut c.loop_step,
            &mut c.result,
        ]
        .into_iter()
        .try_for_each(f),
        Expr::Literal(_) | Expr::Ident(_) | Expr::Unspecified => Ok(()),
    }
}

/// Expands `cel.bind`, `optMap` and `optFlatMap` in a parsed expression. New nodes get ids above
/// every id the parser gave.
pub(super) fn expand(mut expr: IdedExpr) -> Result<IdedExpr, CelError> {
    let mut ids = Ids(max_id(&mut expr)?);
    expand_in(&mut expr, &mut ids)?;
    Ok(expr)
}

fn max_id(expr: &mut IdedExpr) -> Result<u64, CelError> {
    let mut max = expr.id;
    try_for_each_child(&mut expr.expr, &mut |child| {
        max = max.max(max_id(child)?);
        Ok(())
    })?;
    Ok(max)
}

/// Fresh node ids.
pub(super) struct Ids(pub(super) u64);

impl Ids {
    fn node(&mut self, expr: Expr) -> IdedExpr {
        self.0 += 1;
        IdedExpr { id: self.0, expr }
    }
}

fn expand_in(expr: &mut IdedExpr, ids: &mut Ids) -> Result<(), CelError> {
    try_for_each_child(&mut expr.expr, &mut |child| expand_in(child, ids))?;
    let Expr::Call(call) = &mut expr.expr else {
        return Ok(());
    };
    let wrap = match (call.func_name.as_str(), call.target.as_deref(), call.args.len()) {
        (
            "bind",
            Some(IdedExpr {
                expr: Expr::Ident(ns),
                ..
            }),
            3,
        ) if ns == "cel" => None,
        ("optMap", Some(_), 2) => Some(true),
        ("optFlatMap", Some(_), 2) => Some(false),
        _ => return Ok(()),
    };
    let call = std::mem::take(call);
    *expr = match wrap {
        None => {
            let [var, init, result] = three(call.args);
            bind(ids, &variable(&call.func_name, var)?, init, result)
        }
        Some(wrap) => {
            let target = *call.target.expect("matched with a target");
            let [var, mapping] = two(call.args);
            opt_map(ids, target, &variable(&call.func_name, var)?, mapping, wrap)
        }
    };
    Ok(())
}

fn three(args: Vec<IdedExpr>) -> [IdedExpr; 3] {
    args.try_into()
        .unwrap_or_else(|_| unreachable!("matched three arguments"))
}

fn two(args: Vec<IdedExpr>) -> [IdedExpr; 2] {
    args.try_into()
        .unwrap_or_else(|_| unreachable!("matched two arguments"))
}

/// The name a macro binds: its argument must be a plain identifier.
fn variable(function: &str, arg: IdedExpr) -> Result<String, CelError> {
    match arg.expr {
        Expr::Ident(name) => Ok(name),
        _ => {
            let function = if function == "bind" { "cel.bind" } else { function };
            Err(compile_error(format!(
                "{function}() variable name must be a simple identifier"
            )))
        }
    }
}

/// `result` with `var` bound to `init`: a comprehension over no elements whose accumulator is
/// `var`, so `init` is evaluated once and the loop never runs.
pub(super) fn bind(ids: &mut Ids, var: &str, init: IdedExpr, result: IdedExpr) -> IdedExpr {
    let iter_range = ids.node(Expr::List(ListExpr::new(Vec::new())));
    let loop_cond = ids.node(Expr::Literal(LiteralValue::Boolean(CelBool::from(false))));
    let loop_step = ids.node(Expr::Ident(var.to_owned()));
    ids.node(Expr::Comprehension(Box::new(ComprehensionExpr {
        iter_range,
        iter_var: "#unused".to_owned(),
        iter_var2: None,
        accu_var: var.to_owned(),
        accu_init: init,
        loop_cond,
        loop_step,
        result,
    })))
}

/// The name `optMap` and `optFlatMap` bind a target that is not an identifier to.
const TARGET: &str = "@target";

fn opt_map(ids: &mut Ids, target: IdedExpr, var: &str, mapping: IdedExpr, wrap: bool) -> IdedExpr {
    let (name, bound) = match &target.expr {
        Expr::Ident(name) => (name.clone(), None),
        _ => (TARGET.to_owned(), Some(target)),
    };
    let receiver = ids.node(Expr::Ident(name.clone()));
    let has_value = call(ids, Some(receiver), "hasValue", Vec::new());
    let receiver = ids.node(Expr::Ident(name));
    let value = call(ids, Some(receiver), "value", Vec::new());
    let mapped = bind(ids, var, value, mapping);
    let some = if wrap {
        let namespace = ids.node(Expr::Ident("optional".to_owned()));
        call(ids, Some(namespace), "of", vec![mapped])
    } else {
        mapped
    };
    let namespace = ids.node(Expr::Ident("optional".to_owned()));
    let none = call(ids, Some(namespace), "none", Vec::new());
    let choice = call(ids, None, operators::CONDITIONAL, vec![has_value, some, none]);
    match bound {
        Some(target) => bind(ids, TARGET, target, choice),
        None => choice,
    }
}

fn call(ids: &mut Ids, target: Option<IdedExpr>, func_name: &str, args: Vec<IdedExpr>) -> IdedExpr {
    ids.node(Expr::Call(CallExpr {
        func_name: func_name.to_owned(),
        target: target.map(Box::new),
        args,
    }))
}
