//! Name checks after parsing.
//!
//! cel-rust parses without type-checking, so names are checked here instead: every identifier
//! must be the expression's variable (`device` or `object`), a comprehension or `cel.bind`
//! variable, or a type name; `device.<field>` must be one of the DRA device fields; every
//! function must be declared in the environment for the way it is called (global or member).
//! Type errors (`device.driver == 1`, `quantity(1)`) surface at evaluation.

use crate::hashing::FxHashSet as HashSet;
use std::sync::Arc;

use cel::common::ast::{CallExpr, EntryExpr, Expr, IdedExpr, LiteralValue};
use cel::{Context, Env, ExecutionError, Value};

use super::error::{CelError, compile_error};
use super::root::Root;

/// Checks the names of one parsed expression against the environment and its [`Root`].
pub(super) struct Checker<'a> {
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

impl<'a> Checker<'a> {
    pub(super) fn new(env: &'a Arc<Env>, root: Root) -> Self {
        Checker {
            env,
            root,
            scopes: Vec::new(),
            declared: HashSet::default(),
        }
    }
}

impl Checker<'_> {
    fn is_variable(&self, name: &str) -> bool {
        name == self.root.name() || self.scopes.iter().any(|s| s == name)
    }

    pub(super) fn check(&mut self, expr: &IdedExpr) -> Result<(), CelError> {
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
            Value::resolve(&probe, &ctx),
            Err(ExecutionError::UndeclaredReference(_))
        );
        if found {
            self.declared.insert((name.to_owned(), member));
        }
        found
    }
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
}
