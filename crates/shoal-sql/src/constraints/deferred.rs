//! Deferred foreign keys. A key declared `DEFERRABLE INITIALLY DEFERRED` (Django declares every
//! key so), or deferred with `SET CONSTRAINTS`, is not checked after each row: the key value is
//! kept, and checked when the transaction commits or when `SET CONSTRAINTS ... IMMEDIATE` makes
//! the key immediate again. A failed check fails the COMMIT (23503), and the transaction is
//! rolled back, as in PostgreSQL.
//!
//! What is kept is a key value and the side that touched it, not the row: at the check, a key
//! is a violation only if some row of the referencing table still holds it (a row inserted and
//! deleted again, or rolled back to a savepoint, leaves nothing to check) and no referenced row
//! has it. So ROLLBACK TO SAVEPOINT needs no bookkeeping here. Only NO ACTION keys on the
//! referenced side wait; RESTRICT is never deferred, and the other actions act at once.

use std::collections::HashMap;

use shoal_storage::catalog::{ConstraintDef, ConstraintKind, Oid, TableDef};
use shoal_storage::types::Value;
use shoal_storage::Transaction;

use super::foreign_key::{check_reference, key_present, still_referenced};
use crate::error::{code, SqlError, SqlResult};
use crate::session::Session;

/// A transaction's deferred keys and its SET CONSTRAINTS choices.
#[derive(Default)]
pub struct DeferredConstraints {
    /// SET CONSTRAINTS ALL: Some(true) deferred, Some(false) immediate; None: as declared.
    all: Option<bool>,
    /// SET CONSTRAINTS name: deferred or not, by constraint OID (after the last ALL).
    named: HashMap<Oid, bool>,
    /// Keys to check, in the order they were written.
    pending: Vec<PendingKey>,
}

/// One key value a deferred foreign key must find when it is checked.
#[derive(Clone, Debug)]
pub struct PendingKey {
    /// The referencing table and its foreign key.
    table: Oid,
    constraint: Oid,
    /// The key's values, in the foreign key's column order.
    key: Vec<Value>,
    /// Whether a referencing row was written with the key (else a referenced row with it was
    /// deleted or re-keyed); the values have that side's column types.
    referencing: bool,
}

impl DeferredConstraints {
    /// Whether foreign key `c` is checked at commit (or SET CONSTRAINTS IMMEDIATE) now.
    pub fn is_deferred(&self, c: &ConstraintDef) -> bool {
        let ConstraintKind::ForeignKey { timing, .. } = &c.kind else {
            return false;
        };
        if !timing.deferrable() {
            return false;
        }
        self.named
            .get(&c.oid)
            .copied()
            .or(self.all)
            .unwrap_or(*timing == shoal_storage::catalog::ConstraintTiming::Deferred)
    }

    /// Keeps the key `row` (a row of `table`) holds in foreign key `c` for the deferred check,
    /// if `c` is deferred now; false if it must be checked at once.
    pub fn defer_reference(&mut self, table: Oid, c: &ConstraintDef, row: &[Value]) -> bool {
        let ConstraintKind::ForeignKey { columns, .. } = &c.kind else {
            return false;
        };
        if !self.is_deferred(c) {
            return false;
        }
        self.pending.push(PendingKey {
            table,
            constraint: c.oid,
            key: columns.iter().map(|&i| row[i].clone()).collect(),
            referencing: true,
        });
        true
    }

    /// Keeps the key the referenced row `old` had in foreign key `c` of `child`, if `c` is
    /// deferred now; false if it must be checked at once.
    pub fn defer_referenced(&mut self, child: Oid, c: &ConstraintDef, old: &[Value]) -> bool {
        let ConstraintKind::ForeignKey { ref_columns, .. } = &c.kind else {
            return false;
        };
        if !self.is_deferred(c) {
            return false;
        }
        self.pending.push(PendingKey {
            table: child,
            constraint: c.oid,
            key: ref_columns.iter().map(|&i| old[i].clone()).collect(),
            referencing: false,
        });
        true
    }

    /// SET CONSTRAINTS: `names` None for ALL. Returns the keys that are now immediate, for the
    /// caller to check at once (PostgreSQL checks them when the statement runs).
    fn set(&mut self, names: Option<Vec<Oid>>, deferred: bool) -> Vec<PendingKey> {
        match names {
            None => {
                self.all = Some(deferred);
                self.named.clear();
            }
            Some(oids) => {
                for oid in oids {
                    self.named.insert(oid, deferred);
                }
            }
        }
        if deferred {
            return Vec::new();
        }
        let (due, kept) = std::mem::take(&mut self.pending)
            .into_iter()
            .partition(|p| self.named.get(&p.constraint).copied().or(self.all) == Some(false));
        self.pending = kept;
        due
    }

    /// The keys to check at commit; the SET CONSTRAINTS choices end with the transaction.
    pub fn take_all(&mut self) -> Vec<PendingKey> {
        self.all = None;
        self.named.clear();
        std::mem::take(&mut self.pending)
    }
}

/// Checks deferred keys, failing with the first violation. A referencing key found is locked
/// FOR KEY SHARE, as an immediate check locks it.
pub async fn check_pending(
    session: &Session,
    txn: &mut Transaction,
    due: Vec<PendingKey>,
) -> SqlResult<()> {
    for p in due {
        let child = session.engine.catalog.read().tables.get(&p.table).cloned();
        let Some(child) = child else { continue };
        // A key dropped since (or its table) is checked no more.
        let Some(constraint) = child.constraints.iter().find(|c| c.oid == p.constraint) else {
            continue;
        };
        let ConstraintKind::ForeignKey {
            columns,
            ref_table,
            ref_columns,
            ..
        } = &constraint.kind
        else {
            continue;
        };
        let target = session.engine.catalog.read().tables.get(ref_table).cloned();
        let Some(target) = target else { continue };
        if p.key.iter().any(Value::is_null) {
            continue;
        }
        if p.referencing {
            let mut row = vec![Value::Null; child.columns.len()];
            for (&c, v) in columns.iter().zip(&p.key) {
                row[c] = v.clone();
            }
            let checked = check_reference(
                session,
                txn,
                (&child, &constraint.name, columns),
                (&target, ref_columns),
                &row,
            )
            .await;
            match checked {
                Err(e) if e.code == code::FOREIGN_KEY_VIOLATION => {
                    let key = |i: usize| &p.key[i];
                    if key_present(session, txn, (&child, columns), (&child, columns), key).await? {
                        return Err(e);
                    }
                }
                other => other?,
            }
        } else {
            let key = |i: usize| &p.key[i];
            let referenced =
                key_present(session, txn, (&child, columns), (&target, ref_columns), key).await?;
            if !referenced {
                continue;
            }
            let key = |i: usize| &p.key[i];
            let replaced = key_present(
                session,
                txn,
                (&target, ref_columns),
                (&target, ref_columns),
                key,
            )
            .await?;
            if !replaced {
                let mut old = vec![Value::Null; target.columns.len()];
                for (&c, v) in ref_columns.iter().zip(&p.key) {
                    old[c] = v.clone();
                }
                return Err(still_referenced(
                    session,
                    &target,
                    &child,
                    &constraint.name,
                    ref_columns,
                    &old,
                ));
            }
        }
    }
    Ok(())
}

/// `SET CONSTRAINTS {ALL | name [, ...]} {DEFERRED | IMMEDIATE}` (`text`: what follows
/// CONSTRAINTS). Outside a transaction block it only warns, as PostgreSQL does.
pub async fn set_constraints(
    session: &Session,
    txn: &mut Transaction,
    text: &str,
    in_block: bool,
) -> SqlResult<()> {
    let words: Vec<&str> = text.split_whitespace().collect();
    let Some((mode, targets)) = words.split_last() else {
        return Err(SqlError::new(
            code::SYNTAX_ERROR,
            "syntax error at end of input",
        ));
    };
    let deferred = match mode.to_ascii_lowercase().as_str() {
        "deferred" => true,
        "immediate" => false,
        _ => {
            return Err(SqlError::new(
                code::SYNTAX_ERROR,
                format!("syntax error at or near \"{mode}\""),
            ))
        }
    };
    let names = match targets {
        [all] if all.eq_ignore_ascii_case("all") => None,
        _ => Some(constraint_oids(session, &targets.join(" "))?),
    };
    if !in_block {
        session.scope.warning(
            code::NO_ACTIVE_SQL_TRANSACTION,
            "SET CONSTRAINTS can only be used in transaction blocks".into(),
        );
        return Ok(());
    }
    let due = session
        .scope
        .deferred_constraints
        .lock()
        .set(names, deferred);
    check_pending(session, txn, due).await
}

/// The foreign keys `list` names (`name [, ...]`, each name possibly schema-qualified): every
/// constraint of that name in the schemas searched (PostgreSQL sets them all), or 42704.
fn constraint_oids(session: &Session, list: &str) -> SqlResult<Vec<Oid>> {
    let mut oids = Vec::new();
    for item in list.split(',') {
        let item = item.trim();
        let parts: Vec<String> = item
            .split('.')
            .map(|p| crate::ddl::ident_of(p.trim()))
            .collect();
        let (schema, name) = match parts.as_slice() {
            [name] => (None, name.clone()),
            [schema, name] => (Some(schema.clone()), name.clone()),
            _ => {
                return Err(SqlError::new(
                    code::SYNTAX_ERROR,
                    format!("syntax error at or near \"{item}\""),
                ))
            }
        };
        let schemas = match schema {
            Some(s) => vec![s],
            None => session.scope.search_path.lock().clone(),
        };
        let catalog = session.engine.catalog.read();
        let found: Vec<(&TableDef, &ConstraintDef)> = catalog
            .tables
            .values()
            .filter(|t| schemas.contains(&t.schema))
            .flat_map(|t| t.constraints.iter().map(move |c| (&**t, c)))
            .filter(|(_, c)| c.name == name)
            .collect();
        if found.is_empty() {
            return Err(SqlError::new(
                code::UNDEFINED_OBJECT,
                format!("constraint \"{name}\" does not exist"),
            ));
        }
        for (_, c) in found {
            let deferrable = matches!(&c.kind,
                ConstraintKind::ForeignKey { timing, .. } if timing.deferrable());
            if !deferrable {
                return Err(SqlError::new(
                    code::WRONG_OBJECT_TYPE,
                    format!("constraint \"{name}\" is not deferrable"),
                ));
            }
            oids.push(c.oid);
        }
    }
    Ok(oids)
}
