//! `REASSIGN OWNED BY old TO new` and `DROP OWNED BY role [CASCADE]`, PostgreSQL's way to
//! clear a role's objects before DROP ROLE. sqlparser reads neither, so `parse` hands them over
//! as text with the role membership statements (`role_membership::run` sends
//! them here). Both need the privileges of every role named (a superuser has them).

use datafusion::sql::sqlparser::ast;
use shoal_storage::catalog::Oid;
use shoal_storage::catalog_privileges::ObjectClass;

use crate::error::{code, SqlError, SqlResult};
use crate::privileges::acting_role;
use crate::session::{Session, StatementResult};

/// REASSIGN OWNED BY `from` TO `to`: every object the `from` roles own becomes `to`'s.
pub fn reassign(session: &Session, from: &[Oid], to: Oid) -> SqlResult<StatementResult> {
    check_may_act_for(session, from.iter().chain([&to]), "reassign objects")?;
    let mut catalog = session.engine.catalog.write();
    let owned: Vec<_> = catalog
        .ownership
        .iter()
        .filter(|(object, o)| from.contains(&o.owner) && catalog.object_exists(**object))
        .map(|(object, o)| (*object, o.clone()))
        .collect();
    for (object, mut ownership) in owned {
        ownership.transfer(to);
        catalog.set_ownership(object, ownership);
    }
    Ok(StatementResult::command("REASSIGN OWNED"))
}

/// DROP OWNED BY `roles`: drops what they own (CASCADE: with what depends on it), revokes
/// what was granted to them, and removes their default privileges.
pub fn drop_owned(
    session: &mut Session,
    roles: &[Oid],
    cascade: bool,
) -> SqlResult<StatementResult> {
    check_may_act_for(session, roles.iter(), "drop objects")?;
    // Relations first (views before tables, as they depend on them), then schemas.
    let (views, tables, sequences, schemas) = {
        let catalog = session.engine.catalog.read();
        let owned = |class: ObjectClass, oid: Oid| roles.contains(&catalog.owner_of((class, oid)));
        let name = |schema: &str, name: &str| {
            ast::ObjectName::from(vec![
                ast::Ident::with_quote('"', schema),
                ast::Ident::with_quote('"', name),
            ])
        };
        let views: Vec<_> = catalog
            .views
            .values()
            .filter(|v| owned(ObjectClass::Relation, v.oid))
            .map(|v| name(&v.schema, &v.name))
            .collect();
        let tables: Vec<_> = catalog
            .tables
            .values()
            .filter(|t| owned(ObjectClass::Relation, t.oid))
            .map(|t| name(&t.schema, &t.name))
            .collect();
        let sequences: Vec<_> = catalog
            .sequences
            .values()
            .filter(|s| owned(ObjectClass::Relation, s.oid) && s.owned_by.is_none())
            .map(|s| name(&s.schema, &s.name))
            .collect();
        let schemas: Vec<_> = catalog
            .schemas
            .values()
            .filter(|s| owned(ObjectClass::Schema, s.oid))
            .map(|s| ast::ObjectName::from(vec![ast::Ident::with_quote('"', &s.name)]))
            .collect();
        (views, tables, sequences, schemas)
    };
    for (object_type, names) in [
        (ast::ObjectType::View, views),
        (ast::ObjectType::Table, tables),
        (ast::ObjectType::Sequence, sequences),
        (ast::ObjectType::Schema, schemas),
    ] {
        if !names.is_empty() {
            super::drop::drop_objects(session, object_type, true, &names, cascade)?;
        }
    }
    let mut catalog = session.engine.catalog.write();
    let granted: Vec<_> = catalog
        .ownership
        .iter()
        .filter(|(_, o)| o.all_items().any(|i| roles.contains(&i.grantee)))
        .map(|(object, o)| (*object, o.clone()))
        .collect();
    for (object, mut ownership) in granted {
        if let Some(acl) = ownership.acl.as_mut() {
            acl.retain(|i| !roles.contains(&i.grantee));
        }
        for acl in ownership.columns.values_mut() {
            acl.retain(|i| !roles.contains(&i.grantee));
        }
        ownership.columns.retain(|_, acl| !acl.is_empty());
        catalog.set_ownership(object, ownership);
    }
    // Their default privileges, and what others' defaults give them.
    catalog.default_acls.retain(|d| !roles.contains(&d.role));
    for d in catalog.default_acls.iter_mut() {
        d.acl.retain(|i| !roles.contains(&i.grantee));
    }
    catalog.default_acls.retain(|d| !d.acl.is_empty());
    catalog.version += 1;
    Ok(StatementResult::command("DROP OWNED"))
}

/// A superuser may act for any role; others only for roles whose privileges they have.
fn check_may_act_for<'a>(
    session: &Session,
    roles: impl Iterator<Item = &'a Oid>,
    what: &str,
) -> SqlResult<()> {
    let actor = acting_role(session)?;
    if actor.superuser {
        return Ok(());
    }
    let catalog = session.engine.catalog.read();
    for &role in roles {
        if !catalog.has_privileges_of_role(actor.oid, role) {
            return Err(SqlError::new(
                code::INSUFFICIENT_PRIVILEGE,
                format!("permission denied to {what}"),
            ));
        }
    }
    Ok(())
}
