//! cel-rust's ANTLR parser, its default, built from cel-go's grammar, as the oracle of the parser
//! the core uses (the Pratt parser after `parse::prepare_source`, then the `macros` expansions).
//!
//! The guests leave the ANTLR parser out (about 0.4 MB, docs/RATIONALE.md). This module is
//! compiled into the core's tests (`parse_tests`) and, with the `parser-oracle` feature, for the
//! fuzz target `cel_parsers` and the replay of its corpus; nothing else calls it.

use std::sync::LazyLock;

use cel::Env;
use cel::common::ast::{Expr, IdedExpr, MapExpr, StructExpr};
use cel::parser::Macro;

use super::error::CelError;
use super::library::build;
use super::macros::{Ids, bind, try_for_each_child};
use super::parse::{MAX_NESTING, check_nesting, parse};

/// The environment's declarations with `cel.bind` as a parse-time macro, the way the ANTLR parser
/// expands macros while parsing.
static ANTLR_ENV: LazyLock<Env> = LazyLock::new(|| {
    let mut env = build().expect("the built-in CEL declarations are consistent");
    env.add_macro(Macro::receiver("bind", 3, |helper, target, args| {
        if !matches!(target.as_ref().map(|t| &t.expr), Some(Expr::Ident(ns)) if ns == "cel") {
            return Ok(None);
        }
        let var = match &args[0].expr {
            Expr::Ident(name) => name.clone(),
            _ => return Err(helper.new_error(args[0].id, "variable name must be a simple identifier")),
        };
        target.take();
        let [_, init, result]: [IdedExpr; 3] = std::mem::take(args).try_into().expect("three arguments");
        Ok(Some(bind(&mut Ids(0), &var, init, result)))
    }))
    .expect("no bind macro yet");
    env
});

fn antlr(source: &str) -> Result<IdedExpr, CelError> {
    check_nesting(source)?;
    ANTLR_ENV
        .parser()
        .max_recursion_depth((MAX_NESTING + 8) as u16)
        .parse(source)
        .map_err(|e| CelError::Compile(e.to_string()))
}

fn pratt(source: &str) -> Result<IdedExpr, CelError> {
    check_nesting(source)?;
    parse(source)
}

/// Every node id set to 0.
fn normalised(mut e: IdedExpr) -> IdedExpr {
    fn clear(e: &mut IdedExpr) -> Result<(), CelError> {
        e.id = 0;
        if let Expr::Map(MapExpr { entries }) | Expr::Struct(StructExpr { entries, .. }) = &mut e.expr {
            entries.iter_mut().for_each(|entry| entry.id = 0);
        }
        try_for_each_child(&mut e.expr, &mut clear)
    }
    clear(&mut e).expect("clearing ids cannot fail");
    e
}

/// Parses `source` with the core's parser and with cel-rust's ANTLR parser, both after the
/// core's nesting limits: whether it parsed (the same tree from both, node ids aside, which
/// number nodes in a different order and which nothing reads) or was rejected by both, or what
/// differs.
///
/// # Errors
///
/// A description of the disagreement: the trees, or which parser accepts and why the other does
/// not.
pub fn compare_parsers(source: &str) -> Result<bool, String> {
    match (antlr(source), pratt(source)) {
        (Ok(a), Ok(p)) => {
            let (a, p) = (normalised(a), normalised(p));
            if a == p {
                Ok(true)
            } else {
                Err(format!(
                    "{source:?}: the parsers build different trees\nANTLR: {a:?}\nPratt: {p:?}"
                ))
            }
        }
        (Err(_), Err(_)) => Ok(false),
        (a, p) => Err(format!(
            "{source:?}: one parser accepts, the other does not\nANTLR: {a:?}\nPratt: {p:?}"
        )),
    }
}
