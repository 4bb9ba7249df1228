//! Access control as PostgreSQL 15 checks it. Before a statement runs, `required` lists what it
//! needs (`Need`): privileges on the relations it reads and writes, ownership of the objects
//! its DDL changes, CREATE on the schema it creates in; `check` compares that with the acting
//! role's privileges (`Catalog::privileges_of`) and refuses with 42501 and PostgreSQL's
//! message. Every way a statement runs goes through here: the simple and the extended
//! protocol, the fast path and kept plans (prepared statements keep their needs per catalog
//! version, see `Session::check_prepared_privileges`), COPY. Superusers skip the walk.
//!
//! A view's query runs with its owner's privileges: reading a view needs SELECT on the view,
//! and its owner needs SELECT on what the view reads.

mod columns;
pub mod defaults;
pub mod grant;
mod required;

use shoal_storage::catalog::{Catalog, Oid, RelationKind};
use shoal_storage::catalog_privileges::{ObjectClass, ObjectRef, Privileges};
use shoal_storage::catalog_roles::RoleDef;

use crate::error::{code, SqlError, SqlResult};
use crate::session::Session;

pub use required::required;

/// One thing a statement needs.
#[derive(Clone, Debug, PartialEq)]
pub struct Need {
    pub object: ObjectRef,
    pub kind: Option<RelationKind>,
    pub what: Wanted,
    /// The object's name, for the error.
    pub name: String,
    /// Whose privileges count: None, the acting role's; Some, another's (a view's owner).
    pub on_behalf_of: Option<Oid>,
    /// The columns the privilege is needed on, which column privileges may give instead of
    /// the relation's.
    pub columns: Columns,
}

/// Which columns of a relation a need concerns.
#[derive(Clone, Debug, PartialEq)]
pub enum Columns {
    /// Not tracked (or not a relation): only the relation's own privileges count.
    Relation,
    /// Any one column with the privilege will do (a statement that names none, such as
    /// `SELECT count(*) FROM t`).
    Any,
    /// Every one of these.
    Each(Vec<String>),
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Wanted {
    /// Every one of these privileges.
    All(Privileges),
    /// At least one of these (nextval: USAGE or UPDATE).
    Any(Privileges),
    /// To own the object (or be a member of its owner).
    Owner,
}

/// The role statements run as, from the catalog.
pub fn acting_role(session: &Session) -> SqlResult<RoleDef> {
    let name = session.scope.current_role();
    session
        .engine
        .catalog
        .read()
        .role_named(&name)
        .cloned()
        .ok_or_else(|| {
            SqlError::new(
                code::UNDEFINED_OBJECT,
                format!("role \"{name}\" does not exist"),
            )
        })
}

/// The acting role's OID and whether it is a superuser, without copying its definition (every
/// statement asks).
pub fn acting_role_oid(session: &Session) -> SqlResult<(Oid, bool)> {
    let name = session.scope.current_role();
    session
        .engine
        .catalog
        .read()
        .role_named(&name)
        .map(|r| (r.oid, r.superuser))
        .ok_or_else(|| {
            SqlError::new(
                code::UNDEFINED_OBJECT,
                format!("role \"{name}\" does not exist"),
            )
        })
}

/// Refuses the first need `role` does not meet, with PostgreSQL's error.
pub fn check(catalog: &Catalog, role: Oid, needs: &[Need]) -> SqlResult<()> {
    for need in needs {
        let who = need.on_behalf_of.unwrap_or(role);
        let met = match need.what {
            Wanted::Owner => catalog.has_privileges_of_role(who, catalog.owner_of(need.object)),
            Wanted::All(p) => {
                let held = catalog.privileges_of(who, need.object, need.kind);
                held.contains(p) || granted_on_columns(catalog, who, need, p.without(held))
            }
            Wanted::Any(p) => catalog.privileges_of(who, need.object, need.kind).0 & p.0 != 0,
        };
        if !met {
            return Err(denied(need));
        }
    }
    Ok(())
}

/// Whether column privileges give `role` the `missing` privileges on every column `need`
/// concerns (PostgreSQL checks a relation's privileges first, then its columns').
fn granted_on_columns(catalog: &Catalog, role: Oid, need: &Need, missing: Privileges) -> bool {
    if need.object.0 != ObjectClass::Relation || !Privileges::COLUMN.contains(missing) {
        return false;
    }
    let relation = need.object.1;
    match &need.columns {
        Columns::Relation => false,
        Columns::Any => (0..16)
            .map(|bit| Privileges(1 << bit))
            .filter(|p| missing.contains(*p))
            .all(|p| catalog.any_column_has(role, relation, p)),
        Columns::Each(columns) => columns.iter().all(|c| {
            catalog
                .column_privileges_of(role, relation, c)
                .contains(missing)
        }),
    }
}

/// The 42501 error for an unmet need, worded as PostgreSQL's.
fn denied(need: &Need) -> SqlError {
    let kind = object_kind_name(need.object.0, need.kind);
    let message = match need.what {
        Wanted::Owner => format!("must be owner of {kind} {}", need.name),
        Wanted::All(_) | Wanted::Any(_) => format!("permission denied for {kind} {}", need.name),
    };
    SqlError::new(code::INSUFFICIENT_PRIVILEGE, message)
}

/// How PostgreSQL's messages name an object's kind.
pub fn object_kind_name(class: ObjectClass, kind: Option<RelationKind>) -> &'static str {
    match (class, kind) {
        (ObjectClass::Relation, Some(RelationKind::View)) => "view",
        (ObjectClass::Relation, Some(RelationKind::Sequence)) => "sequence",
        (ObjectClass::Relation, Some(RelationKind::Index)) => "index",
        (ObjectClass::Relation, _) => "table",
        (ObjectClass::Schema, _) => "schema",
        (ObjectClass::Database, _) => "database",
        (ObjectClass::Function, _) => "function",
    }
}

/// Refuses a sequence function unless the acting role holds one of `any` on the sequence:
/// nextval needs USAGE or UPDATE, currval SELECT or USAGE, setval UPDATE (so an INSERT whose
/// serial column takes nextval needs USAGE on its sequence, as in PostgreSQL).
pub fn check_sequence(
    scope: &crate::query::scope::PlanScope,
    sequence: Oid,
    name: &str,
    any: Privileges,
) -> SqlResult<()> {
    let role = scope.current_role();
    let catalog = scope.engine.catalog.read();
    let Some(role) = catalog.role_named(&role) else {
        return Err(SqlError::new(
            code::UNDEFINED_OBJECT,
            format!("role \"{role}\" does not exist"),
        ));
    };
    if role.superuser {
        return Ok(());
    }
    let object = (ObjectClass::Relation, sequence);
    let held = catalog.privileges_of(role.oid, object, Some(RelationKind::Sequence));
    if held.0 & any.0 == 0 {
        return Err(SqlError::new(
            code::INSUFFICIENT_PRIVILEGE,
            format!("permission denied for sequence {name}"),
        ));
    }
    Ok(())
}

impl Session {
    /// Refuses `stmt` when the acting role lacks what it needs. Superusers need nothing.
    pub(crate) fn check_privileges(
        &self,
        stmt: &datafusion::sql::sqlparser::ast::Statement,
    ) -> SqlResult<()> {
        let (role, superuser) = acting_role_oid(self)?;
        if superuser {
            return Ok(());
        }
        let needs = required(self, stmt)?;
        check(&self.engine.catalog.read(), role, &needs)
    }
}
