//! GRANT and REVOKE of privileges on tables, views, sequences, schemas and the database, and
//! `ALTER ... OWNER TO`, as PostgreSQL 15 does them. A grant is recorded under its grantor: the
//! object's owner when the owner or a superuser grants, else the granting role, which may give
//! only what it holds WITH GRANT OPTION. REVOKE takes back what the revoker granted; grants
//! that depended on a revoked grant option go too with CASCADE, and refuse it without.

use datafusion::sql::sqlparser::ast;
use shoal_storage::catalog::{Catalog, Oid, RelationKind};
use shoal_storage::catalog_privileges::{
    AclItem, ObjectClass, ObjectRef, Ownership, Privileges, DATABASE_OID, PUBLIC,
};
use shoal_storage::catalog_roles::BOOTSTRAP_SUPERUSER_OID;

use super::{acting_role, object_kind_name};
use crate::ddl::{ident, split_name};
use crate::error::{code, SqlError, SqlResult};
use crate::session::{Session, StatementResult};

/// An object a GRANT or REVOKE names, resolved.
pub(super) struct Target {
    pub(super) object: ObjectRef,
    pub(super) kind: Option<RelationKind>,
    pub(super) name: String,
}

pub fn grant(session: &Session, g: &ast::Grant) -> SqlResult<StatementResult> {
    let objects = g
        .objects
        .as_ref()
        .ok_or_else(|| SqlError::unsupported("GRANT without ON"))?;
    let change = Change {
        privileges: &g.privileges,
        grantees: grantee_oids(session, &g.grantees)?,
        grant_option: g.with_grant_option,
        cascade: false,
    };
    for target in targets(session, objects)? {
        apply(session, &target, &change, true)?;
    }
    Ok(StatementResult::command("GRANT"))
}

pub fn revoke(session: &Session, r: &ast::Revoke) -> SqlResult<StatementResult> {
    revoke_privileges(session, r, false)
}

/// REVOKE GRANT OPTION FOR: the grantees keep the privileges, not the right to grant them.
pub fn revoke_grant_option(session: &Session, r: &ast::Revoke) -> SqlResult<StatementResult> {
    revoke_privileges(session, r, true)
}

fn revoke_privileges(
    session: &Session,
    r: &ast::Revoke,
    option_only: bool,
) -> SqlResult<StatementResult> {
    let objects = r
        .objects
        .as_ref()
        .ok_or_else(|| SqlError::unsupported("REVOKE without ON"))?;
    let change = Change {
        privileges: &r.privileges,
        grantees: grantee_oids(session, &r.grantees)?,
        grant_option: option_only,
        cascade: matches!(r.cascade, Some(ast::CascadeOption::Cascade)),
    };
    for target in targets(session, objects)? {
        apply(session, &target, &change, false)?;
    }
    Ok(StatementResult::command("REVOKE"))
}

struct Change<'a> {
    privileges: &'a ast::Privileges,
    grantees: Vec<Oid>,
    /// GRANT: WITH GRANT OPTION; REVOKE: GRANT OPTION FOR (only the option goes).
    grant_option: bool,
    cascade: bool,
}

impl Change<'_> {
    /// Grants `given` to (or revokes it from) every grantee in one acl, under `grantor`.
    fn apply_to(
        &self,
        acl: &mut Vec<AclItem>,
        grantor: Oid,
        given: Privileges,
        granting: bool,
        catalog: &Catalog,
    ) -> SqlResult<()> {
        for &grantee in &self.grantees {
            if granting {
                add(acl, grantee, grantor, given, self.grant_option);
            } else {
                remove(
                    acl,
                    grantee,
                    grantor,
                    given,
                    self.grant_option,
                    self.cascade,
                    catalog,
                )?;
            }
        }
        Ok(())
    }
}

fn apply(session: &Session, target: &Target, change: &Change, granting: bool) -> SqlResult<()> {
    let actor = acting_role(session)?;
    let mut catalog = session.engine.catalog.write();
    let named = privileges_named(change.privileges, target)?;
    let mut ownership = catalog.ownership(target.object);
    let owner_acts = actor.superuser || catalog.has_privileges_of_role(actor.oid, ownership.owner);
    let all = Privileges::all_for(target.object.0, target.kind);
    let object_acl = catalog.effective_acl(target.object, target.kind);
    // What the actor may grant on the object (and, below, on each column): everything for
    // the owner, who records the grant under the owner's name; its grant options for others.
    let options_in = |acl: &[AclItem]| {
        acl.iter()
            .filter(|i| i.grantee == actor.oid)
            .fold(Privileges::NONE, |p, i| p | i.grant_options)
    };
    let (grantor, grantable) = match owner_acts {
        true => (ownership.owner, all),
        false => (actor.oid, options_in(&object_acl)),
    };
    let held = catalog.privileges_of(actor.oid, target.object, target.kind);
    let verb = if granting { "granted" } else { "revoked" };
    let warning_code = if granting { "01007" } else { "01006" };

    if !named.object.is_empty() {
        if !owner_acts && grantable.is_empty() && held.is_empty() {
            return Err(denied_on(target));
        }
        let given = Privileges(named.object.0 & grantable.0);
        if given != named.object {
            let message = if given.is_empty() {
                format!("no privileges were {verb} for \"{}\"", target.name)
            } else {
                format!("not all privileges were {verb} for \"{}\"", target.name)
            };
            session.scope.warning(warning_code, message);
        }
        let mut acl = object_acl;
        change.apply_to(&mut acl, grantor, given, granting, &catalog)?;
        if !granting {
            // Revoking a privilege on a table revokes it on each of its columns too.
            let on_columns = Privileges(given.0 & Privileges::COLUMN.0);
            for column_acl in ownership.columns.values_mut() {
                change.apply_to(column_acl, grantor, on_columns, false, &catalog)?;
            }
        }
        ownership.acl = Some(acl);
    }

    for (column, wanted) in &named.columns {
        if !catalog
            .relation_column_names(target.object.1)
            .contains(column)
        {
            return Err(SqlError::new(
                code::UNDEFINED_COLUMN,
                format!(
                    "column \"{column}\" of relation \"{}\" does not exist",
                    target.name
                ),
            ));
        }
        let mut acl = ownership.columns.get(column).cloned().unwrap_or_default();
        let grantable = match owner_acts {
            true => grantable,
            false => {
                let held = held | catalog.column_privileges_of(actor.oid, target.object.1, column);
                if grantable.is_empty() && options_in(&acl).is_empty() && held.is_empty() {
                    return Err(SqlError::new(
                        code::INSUFFICIENT_PRIVILEGE,
                        format!(
                            "permission denied for column \"{column}\" of relation \"{}\"",
                            target.name
                        ),
                    ));
                }
                grantable | options_in(&acl)
            }
        };
        let given = Privileges(wanted.0 & grantable.0);
        if given != *wanted {
            let amount = if given.is_empty() { "no" } else { "not all" };
            session.scope.warning(
                warning_code,
                format!(
                    "{amount} privileges were {verb} for column \"{column}\" of relation \"{}\"",
                    target.name
                ),
            );
        }
        change.apply_to(&mut acl, grantor, given, granting, &catalog)?;
        match acl.is_empty() {
            true => ownership.columns.remove(column),
            false => ownership.columns.insert(column.clone(), acl),
        };
    }
    catalog.set_ownership(target.object, ownership);
    Ok(())
}

/// The 42501 error for acting on an object the actor holds nothing on.
fn denied_on(target: &Target) -> SqlError {
    SqlError::new(
        code::INSUFFICIENT_PRIVILEGE,
        format!(
            "permission denied for {} {}",
            object_kind_name(target.object.0, target.kind),
            target.name
        ),
    )
}

pub(super) fn add(
    acl: &mut Vec<AclItem>,
    grantee: Oid,
    grantor: Oid,
    given: Privileges,
    option: bool,
) {
    if given.is_empty() {
        return;
    }
    let options = if option { given } else { Privileges::NONE };
    match acl
        .iter_mut()
        .find(|i| i.grantee == grantee && i.grantor == grantor)
    {
        Some(item) => {
            item.privileges = item.privileges | given;
            item.grant_options = item.grant_options | options;
        }
        None => acl.push(AclItem {
            grantee,
            grantor,
            privileges: given,
            grant_options: options,
        }),
    }
}

/// Takes `taken` from what `grantor` gave `grantee` (only the grant option when
/// `option_only`). Grants the grantee made with an option it loses depend on it: they go too
/// with CASCADE; without, the revoke fails with 2BP01.
pub(super) fn remove(
    acl: &mut Vec<AclItem>,
    grantee: Oid,
    grantor: Oid,
    taken: Privileges,
    option_only: bool,
    cascade: bool,
    catalog: &Catalog,
) -> SqlResult<()> {
    let Some(at) = acl
        .iter()
        .position(|i| i.grantee == grantee && i.grantor == grantor)
    else {
        return Ok(());
    };
    let lost_options = Privileges(acl[at].grant_options.0 & taken.0);
    {
        let item = &mut acl[at];
        if !option_only {
            item.privileges = item.privileges.without(taken);
        }
        item.grant_options = item.grant_options.without(taken);
    }
    if !lost_options.is_empty() && grantee != PUBLIC {
        // What the grantee still holds with the option through other grantors keeps its
        // grants alive.
        let still = acl
            .iter()
            .filter(|i| i.grantee == grantee)
            .fold(Privileges::NONE, |p, i| p | i.grant_options);
        let gone = lost_options.without(still);
        let dependents: Vec<Oid> = acl
            .iter()
            .filter(|i| i.grantor == grantee && i.privileges.0 & gone.0 != 0)
            .map(|i| i.grantee)
            .collect();
        if !dependents.is_empty() && !cascade {
            return Err(SqlError::new(
                code::DEPENDENT_OBJECTS_STILL_EXIST,
                "dependent privileges exist",
            )
            .with_hint("Use CASCADE to revoke them too."));
        }
        for dependent in dependents {
            remove(acl, dependent, grantee, gone, false, true, catalog)?;
        }
    }
    acl.retain(|i| !i.privileges.is_empty());
    Ok(())
}

/// What a GRANT or REVOKE names: privileges on the object, and on single columns
/// (`SELECT (a, b)`).
pub(super) struct Named {
    pub(super) object: Privileges,
    pub(super) columns: Vec<(String, Privileges)>,
}

/// The privileges a GRANT or REVOKE names, checked against the object's kind.
pub(super) fn privileges_named(privileges: &ast::Privileges, target: &Target) -> SqlResult<Named> {
    let valid = Privileges::all_for(target.object.0, target.kind);
    let mut named = Named {
        object: Privileges::NONE,
        columns: Vec::new(),
    };
    let actions = match privileges {
        ast::Privileges::All { .. } => {
            named.object = valid;
            return Ok(named);
        }
        ast::Privileges::Actions(actions) => actions,
    };
    for action in actions {
        let (p, columns) = match action {
            ast::Action::Select { columns } => (Privileges::SELECT, columns.as_ref()),
            ast::Action::Insert { columns } => (Privileges::INSERT, columns.as_ref()),
            ast::Action::Update { columns } => (Privileges::UPDATE, columns.as_ref()),
            ast::Action::References { columns } => (Privileges::REFERENCES, columns.as_ref()),
            ast::Action::Delete => (Privileges::DELETE, None),
            ast::Action::Truncate => (Privileges::TRUNCATE, None),
            ast::Action::Trigger => (Privileges::TRIGGER, None),
            ast::Action::Usage => (Privileges::USAGE, None),
            ast::Action::Create { obj_type: None } => (Privileges::CREATE, None),
            ast::Action::Connect => (Privileges::CONNECT, None),
            ast::Action::Temporary => (Privileges::TEMPORARY, None),
            ast::Action::Execute { .. } => (Privileges::EXECUTE, None),
            other => {
                return Err(SqlError::new(
                    code::SYNTAX_ERROR,
                    format!("unrecognized privilege type \"{other}\""),
                ))
            }
        };
        let columnar = matches!(
            (target.object.0, target.kind),
            (
                ObjectClass::Relation,
                Some(RelationKind::Table) | Some(RelationKind::View)
            )
        );
        if let Some(columns) = columns {
            if !columnar {
                return Err(SqlError::new(
                    "0LP01",
                    "column privileges are only valid for relations",
                ));
            }
            for column in columns {
                let column = ident(column);
                match named.columns.iter_mut().find(|(c, _)| *c == column) {
                    Some((_, held)) => *held = *held | p,
                    None => named.columns.push((column, p)),
                }
            }
            continue;
        }
        if !valid.contains(p) {
            // PostgreSQL: a sequence named by GRANT ... ON TABLE takes what applies, with a
            // warning; elsewhere an inapplicable privilege is an error.
            if target.kind == Some(RelationKind::Sequence) {
                continue;
            }
            return Err(SqlError::new(
                "0LP01",
                format!(
                    "invalid privilege type {} for {}",
                    first_word(action),
                    object_kind_name(target.object.0, target.kind).replace("view", "table")
                ),
            ));
        }
        named.object = named.object | p;
    }
    Ok(named)
}

/// A privilege's keyword, as PostgreSQL's messages print it (`SELECT` of `SELECT (a)`).
fn first_word(action: &ast::Action) -> String {
    let text = action.to_string().to_uppercase();
    text.split([' ', '('])
        .next()
        .unwrap_or_default()
        .to_string()
}

/// The objects an ON clause names.
fn targets(session: &Session, objects: &ast::GrantObjects) -> SqlResult<Vec<Target>> {
    if let Some(routines) = routine_targets(session, objects)? {
        return Ok(routines);
    }
    let catalog = session.engine.catalog.read();
    let mut out = Vec::new();
    match objects {
        ast::GrantObjects::Tables(names) | ast::GrantObjects::Views(names) => {
            for name in names {
                out.push(relation(session, name, None)?);
            }
        }
        ast::GrantObjects::Sequences(names) => {
            for name in names {
                out.push(relation(session, name, Some(RelationKind::Sequence))?);
            }
        }
        ast::GrantObjects::Schemas(names) => {
            for name in names {
                let schema = crate::ddl::ident_of(&name.to_string());
                let def = catalog.schemas.get(&schema).ok_or_else(|| {
                    SqlError::new(
                        code::INVALID_SCHEMA_NAME,
                        format!("schema \"{schema}\" does not exist"),
                    )
                })?;
                out.push(Target {
                    object: (ObjectClass::Schema, def.oid),
                    kind: None,
                    name: schema,
                });
            }
        }
        ast::GrantObjects::Databases(names) => {
            for name in names {
                let database = crate::ddl::ident_of(&name.to_string());
                if database != crate::query::schema::DATABASE_NAME {
                    return Err(SqlError::new(
                        "3D000",
                        format!("database \"{database}\" does not exist"),
                    ));
                }
                out.push(Target {
                    object: (ObjectClass::Database, DATABASE_OID),
                    kind: None,
                    name: database,
                });
            }
        }
        ast::GrantObjects::AllTablesInSchema { schemas }
        | ast::GrantObjects::AllSequencesInSchema { schemas } => {
            let sequences = matches!(objects, ast::GrantObjects::AllSequencesInSchema { .. });
            for name in schemas {
                let schema = crate::ddl::ident_of(&name.to_string());
                if !catalog.schemas.contains_key(&schema) {
                    return Err(SqlError::new(
                        code::INVALID_SCHEMA_NAME,
                        format!("schema \"{schema}\" does not exist"),
                    ));
                }
                if sequences {
                    for s in catalog.sequences.values().filter(|s| s.schema == schema) {
                        out.push(Target {
                            object: (ObjectClass::Relation, s.oid),
                            kind: Some(RelationKind::Sequence),
                            name: s.name.clone(),
                        });
                    }
                } else {
                    for t in catalog.tables.values().filter(|t| t.schema == schema) {
                        out.push(Target {
                            object: (ObjectClass::Relation, t.oid),
                            kind: Some(RelationKind::Table),
                            name: t.name.clone(),
                        });
                    }
                    for v in catalog.views.values().filter(|v| v.schema == schema) {
                        out.push(Target {
                            object: (ObjectClass::Relation, v.oid),
                            kind: Some(RelationKind::View),
                            name: v.name.clone(),
                        });
                    }
                }
            }
        }
        other => {
            return Err(SqlError::unsupported(format!(
                "GRANT ON {}",
                crate::ddl::first_words(&other.to_string())
            )))
        }
    }
    Ok(out)
}

/// The functions and procedures an ON clause names (`FUNCTION f(integer)`, `PROCEDURE p`,
/// `ALL FUNCTIONS IN SCHEMA s`); None for other objects.
fn routine_targets(
    session: &Session,
    objects: &ast::GrantObjects,
) -> SqlResult<Option<Vec<Target>>> {
    use shoal_storage::catalog_functions::RoutineKind;
    let target = |r: &shoal_storage::catalog_functions::RoutineDef| Target {
        object: (ObjectClass::Function, r.oid),
        kind: None,
        name: r.name.clone(),
    };
    let (name, arg_types, kind) = match objects {
        ast::GrantObjects::Function { name, arg_types } => (name, arg_types, RoutineKind::Function),
        ast::GrantObjects::Procedure { name, arg_types } => {
            (name, arg_types, RoutineKind::Procedure)
        }
        ast::GrantObjects::AllFunctionsInSchema { schemas } => {
            let catalog = session.engine.catalog.read();
            let mut out = Vec::new();
            for name in schemas {
                let schema = crate::ddl::ident_of(&name.to_string());
                if !catalog.schemas.contains_key(&schema) {
                    return Err(SqlError::new(
                        code::INVALID_SCHEMA_NAME,
                        format!("schema \"{schema}\" does not exist"),
                    ));
                }
                out.extend(
                    catalog
                        .routines
                        .values()
                        .filter(|r| r.schema == schema && r.kind == RoutineKind::Function)
                        .map(|r| target(r)),
                );
            }
            return Ok(Some(out));
        }
        _ => return Ok(None),
    };
    use crate::routines::{find_by_signature, Named};
    // Types are read before the catalog is locked (reading one takes its lock).
    let types = arg_types
        .iter()
        .map(|t| crate::ddl::column_type(session, t))
        .collect::<SqlResult<Vec<_>>>()?;
    let search_path = session.scope.lookup_schemas();
    let catalog = session.engine.catalog.read();
    let found = match find_by_signature(&catalog, &search_path, name, kind, Some(&types))? {
        // sqlparser does not tell `f()` from a bare `f`: without a routine of no arguments,
        // the name alone picks one.
        Named::Missing(_) if types.is_empty() => {
            find_by_signature(&catalog, &search_path, name, kind, None)?
        }
        found => found,
    };
    match found {
        Named::Found(r) => Ok(Some(vec![target(&r)])),
        Named::Missing(e) => Err(e),
    }
}

/// The relation `name` resolves to; `must_be`: the kind the statement asked for.
fn relation(
    session: &Session,
    name: &ast::ObjectName,
    must_be: Option<RelationKind>,
) -> SqlResult<Target> {
    let (schema, rel) = split_name(name);
    let (_, kind, oid) = session
        .scope
        .resolve_relation(schema.as_deref(), &rel)
        .ok_or_else(|| SqlError::undefined_table(&rel))?;
    if kind == RelationKind::Index || must_be.is_some_and(|k| k != kind) {
        return Err(SqlError::new(
            code::WRONG_OBJECT_TYPE,
            format!("\"{rel}\" is not a sequence"),
        ));
    }
    Ok(Target {
        object: (ObjectClass::Relation, oid),
        kind: Some(kind),
        name: rel,
    })
}

/// The grantees' OIDs (PUBLIC is 0).
pub(super) fn grantee_oids(session: &Session, grantees: &[ast::Grantee]) -> SqlResult<Vec<Oid>> {
    let catalog = session.engine.catalog.read();
    let mut out = Vec::new();
    for g in grantees {
        if matches!(g.grantee_type, ast::GranteesType::Public) {
            out.push(PUBLIC);
            continue;
        }
        let Some(ast::GranteeName::ObjectName(name)) = &g.name else {
            return Err(SqlError::unsupported("this kind of grantee"));
        };
        let raw = name.to_string();
        if raw.eq_ignore_ascii_case("public") {
            out.push(PUBLIC);
            continue;
        }
        let role = role_named(session, &catalog, &raw)?;
        out.push(role);
    }
    Ok(out)
}

/// A role by the name a statement gives it (CURRENT_USER, SESSION_USER and CURRENT_ROLE
/// included).
fn role_named(session: &Session, catalog: &Catalog, raw: &str) -> SqlResult<Oid> {
    let name = match raw.to_ascii_lowercase().as_str() {
        "current_user" | "current_role" => session.scope.current_role(),
        "session_user" => session.scope.session_user(),
        _ => crate::ddl::ident_of(raw),
    };
    catalog.role_named(&name).map(|r| r.oid).ok_or_else(|| {
        SqlError::new(
            code::UNDEFINED_OBJECT,
            format!("role \"{name}\" does not exist"),
        )
    })
}

/// `ALTER TABLE | VIEW | SEQUENCE name OWNER TO role` and `ALTER SCHEMA name OWNER TO role`:
/// the owner (or a superuser) may give the object to a role it is a member of, that has
/// CREATE on the object's schema; the grants the old owner made become the new owner's.
pub fn alter_owner(
    session: &Session,
    object: ObjectRef,
    kind: Option<RelationKind>,
    name: &str,
    schema: Option<&str>,
    new_owner: &ast::Owner,
) -> SqlResult<StatementResult> {
    let actor = acting_role(session)?;
    let mut catalog = session.engine.catalog.write();
    let new_owner = match new_owner {
        ast::Owner::Ident(i) => role_named(session, &catalog, &format!("\"{}\"", ident(i)))?,
        ast::Owner::CurrentRole | ast::Owner::CurrentUser => {
            role_named(session, &catalog, "current_user")?
        }
        ast::Owner::SessionUser => role_named(session, &catalog, "session_user")?,
    };
    let ownership = catalog.ownership(object);
    if ownership.owner == new_owner {
        return Ok(StatementResult::command(command_tag(object.0, kind)));
    }
    if !actor.superuser {
        let what = object_kind_name(object.0, kind);
        if !catalog.has_privileges_of_role(actor.oid, ownership.owner) {
            return Err(SqlError::new(
                code::INSUFFICIENT_PRIVILEGE,
                format!("must be owner of {what} {name}"),
            ));
        }
        if !catalog.is_member_of(actor.oid, new_owner) {
            let role = catalog
                .roles
                .get(&new_owner)
                .map_or(String::new(), |r| r.name.clone());
            return Err(SqlError::new(
                code::INSUFFICIENT_PRIVILEGE,
                format!("must be able to SET ROLE \"{role}\""),
            ));
        }
        let schema_oid = match object.0 {
            ObjectClass::Relation | ObjectClass::Function => {
                schema.and_then(|s| catalog.schemas.get(s)).map(|s| s.oid)
            }
            ObjectClass::Schema | ObjectClass::Database => None,
        };
        let (create_on, create_name) = match object.0 {
            ObjectClass::Schema => ((ObjectClass::Database, DATABASE_OID), "database postgres"),
            _ => ((ObjectClass::Schema, schema_oid.unwrap_or(0)), "schema"),
        };
        let can_create = catalog
            .privileges_of(new_owner, create_on, None)
            .contains(Privileges::CREATE);
        if !can_create {
            let target = match object.0 {
                ObjectClass::Schema => create_name.to_string(),
                _ => format!("schema {}", schema.unwrap_or("")),
            };
            return Err(SqlError::new(
                code::INSUFFICIENT_PRIVILEGE,
                format!("permission denied for {target}"),
            ));
        }
    }
    let mut ownership = ownership;
    ownership.transfer(new_owner);
    catalog.set_ownership(object, ownership);
    Ok(StatementResult::command(command_tag(object.0, kind)))
}

fn command_tag(class: ObjectClass, kind: Option<RelationKind>) -> &'static str {
    match (class, kind) {
        (ObjectClass::Schema, _) => "ALTER SCHEMA",
        (ObjectClass::Function, _) => "ALTER FUNCTION",
        (ObjectClass::Relation, Some(RelationKind::View)) => "ALTER VIEW",
        (ObjectClass::Relation, Some(RelationKind::Sequence)) => "ALTER SEQUENCE",
        _ => "ALTER TABLE",
    }
}

/// Records `owner` as the owner of objects a statement created, with the acl its default
/// privileges give them (ALTER DEFAULT PRIVILEGES). The bootstrap superuser owns everything
/// without an entry, so its objects need one only for a default acl.
pub fn own_created(catalog: &mut Catalog, owner: Oid, created: &[ObjectRef]) {
    use shoal_storage::catalog_privileges::DefaultAclKind;
    for object in created {
        let schema_oid = |name: &str| catalog.schemas.get(name).map(|s| s.oid);
        let (kind, schema) = match object.0 {
            ObjectClass::Relation => {
                if let Some(t) = catalog.tables.get(&object.1) {
                    (DefaultAclKind::Tables, schema_oid(&t.schema))
                } else if let Some(v) = catalog.views.get(&object.1) {
                    (DefaultAclKind::Tables, schema_oid(&v.schema))
                } else if let Some(q) = catalog.sequences.get(&object.1) {
                    (DefaultAclKind::Sequences, schema_oid(&q.schema))
                } else {
                    continue;
                }
            }
            ObjectClass::Schema => (DefaultAclKind::Schemas, None),
            // Functions take the default acl (EXECUTE for PUBLIC); ALTER DEFAULT PRIVILEGES
            // does not reach them.
            ObjectClass::Function => {
                if catalog.ownership(*object).owner == BOOTSTRAP_SUPERUSER_OID
                    && owner != BOOTSTRAP_SUPERUSER_OID
                {
                    catalog.set_ownership(*object, Ownership::new(owner, None));
                }
                continue;
            }
            ObjectClass::Database => continue,
        };
        let acl = catalog.new_object_acl(owner, schema, kind);
        let unowned = catalog.ownership(*object).owner == BOOTSTRAP_SUPERUSER_OID;
        if unowned && (owner != BOOTSTRAP_SUPERUSER_OID || acl.is_some()) {
            catalog.set_ownership(*object, Ownership::new(owner, acl));
        }
    }
}
