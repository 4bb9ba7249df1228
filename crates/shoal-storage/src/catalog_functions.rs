//! CREATE FUNCTION and CREATE PROCEDURE: the routines kept in the catalog, as pg_proc lists
//! them. A routine is kept as its definition (signature, language, options) and its body's
//! text; the SQL layer parses and runs the body. Routines are keyed by OID: several may share
//! a name in a schema (overloading) as long as their argument types differ.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::catalog::{Catalog, Oid};
use crate::types::DataType;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum RoutineKind {
    Function,
    Procedure,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ArgMode {
    In,
    Out,
    InOut,
    Variadic,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoutineArg {
    pub name: Option<String>,
    pub mode: ArgMode,
    pub data_type: DataType,
    /// The default's SQL text, for arguments that have one.
    pub default_sql: Option<String>,
}

/// What a routine returns.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum RoutineReturn {
    /// `void`, and procedures.
    Void,
    Scalar(DataType),
    SetOf(DataType),
    /// `RETURNS TABLE (name type, ...)`.
    Table(Vec<(String, DataType)>),
    /// `RETURNS trigger`.
    Trigger,
    /// One row of the OUT (and INOUT) parameters, for a function with more than one.
    Record(Vec<(String, DataType)>),
}

/// PostgreSQL's provolatile.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Volatility {
    Immutable,
    Stable,
    Volatile,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoutineDef {
    pub oid: Oid,
    pub schema: String,
    pub name: String,
    pub kind: RoutineKind,
    pub args: Vec<RoutineArg>,
    pub returns: RoutineReturn,
    /// `sql` or `plpgsql`.
    pub language: String,
    pub body: String,
    pub volatility: Volatility,
    /// STRICT (RETURNS NULL ON NULL INPUT).
    pub strict: bool,
    pub security_definer: bool,
    /// `SET name = value` clauses, applied while the routine runs.
    pub config: Vec<(String, String)>,
}

impl RoutineDef {
    /// The types of the arguments a call passes (IN, INOUT and VARIADIC ones), which tell
    /// overloads apart.
    pub fn input_types(&self) -> Vec<&DataType> {
        self.args
            .iter()
            .filter(|a| a.mode != ArgMode::Out)
            .map(|a| &a.data_type)
            .collect()
    }
}

impl Catalog {
    /// The routines named `name` in `schema`, every overload.
    pub fn routines_named<'a>(
        &'a self,
        schema: &'a str,
        name: &'a str,
    ) -> impl Iterator<Item = &'a Arc<RoutineDef>> + 'a {
        self.routines
            .values()
            .filter(move |r| r.schema == schema && r.name == name)
    }

    /// Adds a routine, or replaces the one with its OID (CREATE OR REPLACE keeps the OID).
    pub fn put_routine(&mut self, routine: RoutineDef) {
        self.routines.insert(routine.oid, Arc::new(routine));
        self.version += 1;
    }

    pub fn remove_routine(&mut self, oid: Oid) -> Option<Arc<RoutineDef>> {
        let removed = self.routines.remove(&oid);
        if removed.is_some() {
            self.version += 1;
        }
        removed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn routine(oid: Oid, arg: DataType) -> RoutineDef {
        RoutineDef {
            oid,
            schema: "public".into(),
            name: "add_one".into(),
            kind: RoutineKind::Function,
            args: vec![RoutineArg {
                name: Some("x".into()),
                mode: ArgMode::In,
                data_type: arg.clone(),
                default_sql: None,
            }],
            returns: RoutineReturn::Scalar(arg),
            language: "sql".into(),
            body: "SELECT x + 1".into(),
            volatility: Volatility::Immutable,
            strict: true,
            security_definer: false,
            config: Vec::new(),
        }
    }

    #[test]
    fn overloads_share_a_name_and_survive_the_image() {
        let mut c = Catalog::default();
        let (a, b) = (c.allocate_oid(), c.allocate_oid());
        c.put_routine(routine(a, DataType::Int32));
        c.put_routine(routine(b, DataType::Int64));
        assert_eq!(c.routines_named("public", "add_one").count(), 2);
        let back = Catalog::from_image(&c.to_image()).unwrap();
        assert_eq!(
            back.routines.get(&b).map(|r| r.as_ref()),
            c.routines.get(&b).map(|r| r.as_ref())
        );
        let mut back = back;
        assert!(back.remove_routine(a).is_some());
        assert_eq!(back.routines_named("public", "add_one").count(), 1);
    }

    #[test]
    fn ddl_on_a_routine_is_undone() {
        let mut c = Catalog::default();
        let before = c.clone();
        let oid = c.allocate_oid();
        c.put_routine(routine(oid, DataType::Int32));
        let changes = c.changes_since(&before);
        assert_eq!(changes.len(), 1);
        c.restore(&changes);
        assert!(c.routines.is_empty());
    }
}
