//! CREATE ROLE / USER, ALTER ROLE / USER and DROP ROLE / USER, as PostgreSQL 15 runs them:
//! the role attributes (LOGIN, SUPERUSER, CREATEDB, CREATEROLE, INHERIT, REPLICATION,
//! BYPASSRLS, CONNECTION LIMIT, VALID UNTIL), passwords kept only as SCRAM-SHA-256 verifiers
//! (a verifier given as the password is kept as it is, as psql's `\password` sends one), and
//! memberships from IN ROLE, ROLE and ADMIN. Who may do what: superusers anything; roles with
//! CREATEROLE anything on roles that are not superusers; any role its own password.

use datafusion::sql::sqlparser::ast;
use shoal_auth::scram::{is_hashed, Verifier};
use shoal_storage::catalog::Oid;
use shoal_storage::catalog_roles::{RoleDef, RoleMembership, BOOTSTRAP_SUPERUSER_OID};

use crate::error::{code, SqlError, SqlResult};
use crate::privileges::acting_role;
use crate::session::{Session, StatementResult};

fn role_name(name: &ast::ObjectName) -> String {
    super::ident_of(&name.to_string())
}

fn ident(i: &ast::Ident) -> String {
    super::ident_of(&i.to_string())
}

fn permission_denied(message: impl Into<String>) -> SqlError {
    SqlError::new(code::INSUFFICIENT_PRIVILEGE, message)
}

/// The options CREATE ROLE and ALTER ROLE share, applied to `role`.
struct Attributes<'a> {
    login: Option<bool>,
    inherit: Option<bool>,
    bypass_rls: Option<bool>,
    password: Option<&'a ast::Password>,
    superuser: Option<bool>,
    create_db: Option<bool>,
    create_role: Option<bool>,
    replication: Option<bool>,
    connection_limit: Option<&'a ast::Expr>,
    valid_until: Option<&'a ast::Expr>,
}

impl Attributes<'_> {
    fn of_options(options: &[ast::RoleOption]) -> Attributes<'_> {
        let mut a = Attributes {
            login: None,
            inherit: None,
            bypass_rls: None,
            password: None,
            superuser: None,
            create_db: None,
            create_role: None,
            replication: None,
            connection_limit: None,
            valid_until: None,
        };
        for option in options {
            match option {
                ast::RoleOption::BypassRLS(v) => a.bypass_rls = Some(*v),
                ast::RoleOption::ConnectionLimit(e) => a.connection_limit = Some(e),
                ast::RoleOption::CreateDB(v) => a.create_db = Some(*v),
                ast::RoleOption::CreateRole(v) => a.create_role = Some(*v),
                ast::RoleOption::Inherit(v) => a.inherit = Some(*v),
                ast::RoleOption::Login(v) => a.login = Some(*v),
                ast::RoleOption::Password(p) => a.password = Some(p),
                ast::RoleOption::Replication(v) => a.replication = Some(*v),
                ast::RoleOption::SuperUser(v) => a.superuser = Some(*v),
                ast::RoleOption::ValidUntil(e) => a.valid_until = Some(e),
            }
        }
        a
    }

    /// Whether only a superuser may set these (superuser, replication and bypassrls).
    fn need_superuser(&self) -> bool {
        self.superuser.is_some() || self.replication.is_some() || self.bypass_rls.is_some()
    }

    fn apply(&self, session: &Session, role: &mut RoleDef) -> SqlResult<()> {
        if let Some(v) = self.login {
            role.login = v;
        }
        if let Some(v) = self.inherit {
            role.inherit = v;
        }
        if let Some(v) = self.bypass_rls {
            role.bypass_rls = v;
        }
        if let Some(v) = self.superuser {
            role.superuser = v;
        }
        if let Some(v) = self.create_db {
            role.create_db = v;
        }
        if let Some(v) = self.create_role {
            role.create_role = v;
        }
        if let Some(v) = self.replication {
            role.replication = v;
        }
        if let Some(e) = self.connection_limit {
            let limit = integer(e)?;
            if limit < -1 {
                return Err(SqlError::new(
                    code::INVALID_PARAMETER_VALUE,
                    format!("invalid connection limit: {limit}"),
                ));
            }
            role.connection_limit = limit;
        }
        if let Some(e) = self.valid_until {
            role.valid_until = Some(valid_until(session, e)?);
        }
        if let Some(p) = self.password {
            role.password = password(session, p)?;
        }
        Ok(())
    }
}

fn integer(e: &ast::Expr) -> SqlResult<i32> {
    let text = e.to_string();
    text.parse()
        .map_err(|_| SqlError::syntax(format!("syntax error at or near \"{text}\"")))
}

/// VALID UNTIL's timestamp, in the session's time zone; `infinity` is the latest instant.
fn valid_until(session: &Session, e: &ast::Expr) -> SqlResult<i64> {
    let ast::Expr::Value(v) = e else {
        return Err(SqlError::syntax(format!("syntax error at or near \"{e}\"")));
    };
    let ast::Value::SingleQuotedString(text) = &v.value else {
        return Err(SqlError::syntax(format!("syntax error at or near \"{e}\"")));
    };
    crate::pgtext::parse_timestamptz(text, session.settings.time_zone())
}

/// The verifier to keep for `PASSWORD '...'` (None for NULL or an empty string, as
/// PostgreSQL clears the password then).
fn password(session: &Session, p: &ast::Password) -> SqlResult<Option<String>> {
    let ast::Password::Password(e) = p else {
        return Ok(None);
    };
    let text = match e {
        ast::Expr::Value(v) => match &v.value {
            ast::Value::SingleQuotedString(s) | ast::Value::EscapedStringLiteral(s) => s.clone(),
            _ => return Err(SqlError::syntax(format!("syntax error at or near \"{e}\""))),
        },
        _ => return Err(SqlError::syntax(format!("syntax error at or near \"{e}\""))),
    };
    if text.is_empty() {
        session.scope.notice(
            code::SUCCESSFUL_COMPLETION,
            "empty string is not a valid password, clearing password".into(),
        );
        return Ok(None);
    }
    if is_hashed(&text) {
        return match Verifier::parse(&text) {
            Some(v) => Ok(Some(v.text())),
            None => Err(SqlError::unsupported(
                "MD5 password hashes (Shoal keeps SCRAM-SHA-256 verifiers only: give the \
                 password, or its SCRAM-SHA-256 verifier)",
            )),
        };
    }
    Ok(Some(Verifier::of_password(&text).text()))
}

/// Role names as CREATE ROLE's IN ROLE / ROLE / ADMIN name them, as OIDs.
fn role_oids(session: &Session, names: &[ast::Ident]) -> SqlResult<Vec<Oid>> {
    let catalog = session.engine.catalog.read();
    names
        .iter()
        .map(|n| {
            let name = ident(n);
            catalog.role_named(&name).map(|r| r.oid).ok_or_else(|| {
                SqlError::new(
                    code::UNDEFINED_OBJECT,
                    format!("role \"{name}\" does not exist"),
                )
            })
        })
        .collect()
}

pub fn create_role(session: &Session, c: &ast::CreateRole) -> SqlResult<StatementResult> {
    let actor = acting_role(session)?;
    let attributes = Attributes {
        login: c.login,
        inherit: c.inherit,
        bypass_rls: c.bypassrls,
        password: c.password.as_ref(),
        superuser: c.superuser,
        create_db: c.create_db,
        create_role: c.create_role,
        replication: c.replication,
        connection_limit: c.connection_limit.as_ref(),
        valid_until: c.valid_until.as_ref(),
    };
    if !actor.superuser {
        if !actor.create_role {
            return Err(permission_denied("permission denied to create role"));
        }
        if attributes.need_superuser() {
            return Err(permission_denied(
                "must be superuser to create superusers, replication users or roles that bypass row-level security",
            ));
        }
    }
    let [name] = c.names.as_slice() else {
        return Err(SqlError::syntax("CREATE ROLE takes one name"));
    };
    let name = role_name(name);
    if name == "public" || name == "none" || name.starts_with("pg_") {
        return Err(SqlError::new(
            code::RESERVED_NAME,
            format!("role name \"{name}\" is reserved"),
        ));
    }
    if session.engine.catalog.read().role_named(&name).is_some() {
        if c.if_not_exists {
            session.scope.notice(
                code::DUPLICATE_OBJECT,
                format!("role \"{name}\" already exists, skipping"),
            );
            return Ok(StatementResult::command("CREATE ROLE"));
        }
        return Err(SqlError::new(
            code::DUPLICATE_OBJECT,
            format!("role \"{name}\" already exists"),
        ));
    }
    let in_roles = role_oids(session, &[c.in_role.clone(), c.in_group.clone()].concat())?;
    let members = role_oids(session, &[c.role.clone(), c.user.clone()].concat())?;
    let admins = role_oids(session, &c.admin)?;
    let mut catalog = session.engine.catalog.write();
    let oid = catalog.allocate_oid();
    let mut role = RoleDef::new(oid, &name);
    drop(catalog);
    attributes.apply(session, &mut role)?;
    let mut catalog = session.engine.catalog.write();
    catalog.create_role(role)?;
    for r in in_roles {
        catalog.role_members.push(RoleMembership {
            role: r,
            member: oid,
            admin_option: false,
        });
    }
    for (m, admin) in members
        .into_iter()
        .map(|m| (m, false))
        .chain(admins.into_iter().map(|m| (m, true)))
    {
        catalog.role_members.push(RoleMembership {
            role: oid,
            member: m,
            admin_option: admin,
        });
    }
    catalog.version += 1;
    Ok(StatementResult::command("CREATE ROLE"))
}

pub fn alter_role(
    session: &Session,
    name: &ast::Ident,
    operation: &ast::AlterRoleOperation,
) -> SqlResult<StatementResult> {
    let actor = acting_role(session)?;
    let name = ident(name);
    let Some(mut role) = session.engine.catalog.read().role_named(&name).cloned() else {
        return Err(SqlError::new(
            code::UNDEFINED_OBJECT,
            format!("role \"{name}\" does not exist"),
        ));
    };
    match operation {
        ast::AlterRoleOperation::WithOptions { options } => {
            let attributes = Attributes::of_options(options);
            let only_own_password = role.oid == actor.oid
                && options
                    .iter()
                    .all(|o| matches!(o, ast::RoleOption::Password(_)));
            if !actor.superuser && !only_own_password {
                if role.superuser || attributes.need_superuser() {
                    return Err(permission_denied(
                        "must be superuser to alter superuser roles or change superuser attribute",
                    ));
                }
                if !actor.create_role {
                    return Err(permission_denied(format!(
                        "permission denied to alter role \"{name}\""
                    )));
                }
            }
            if role.oid == BOOTSTRAP_SUPERUSER_OID && attributes.superuser == Some(false) {
                return Err(permission_denied(
                    "permission denied: bootstrap user must be superuser",
                ));
            }
            attributes.apply(session, &mut role)?;
            session.engine.catalog.write().replace_role(role)?;
        }
        ast::AlterRoleOperation::RenameRole { role_name: new } => {
            if !actor.superuser && (role.superuser || !actor.create_role) {
                return Err(permission_denied("permission denied to rename role"));
            }
            if role.oid == actor.oid {
                return Err(SqlError::new(
                    code::FEATURE_NOT_SUPPORTED,
                    "session user cannot be renamed",
                ));
            }
            role.name = ident(new);
            session.engine.catalog.write().replace_role(role)?;
        }
        other => {
            return Err(SqlError::unsupported(format!("ALTER ROLE {other}")));
        }
    }
    Ok(StatementResult::command("ALTER ROLE"))
}

pub fn drop_roles(
    session: &Session,
    names: &[ast::ObjectName],
    if_exists: bool,
) -> SqlResult<StatementResult> {
    let actor = acting_role(session)?;
    for name in names {
        let name = role_name(name);
        let role = session.engine.catalog.read().role_named(&name).cloned();
        let Some(role) = role else {
            if if_exists {
                session.scope.notice(
                    code::SUCCESSFUL_COMPLETION,
                    format!("role \"{name}\" does not exist, skipping"),
                );
                continue;
            }
            return Err(SqlError::new(
                code::UNDEFINED_OBJECT,
                format!("role \"{name}\" does not exist"),
            ));
        };
        if !actor.superuser && (role.superuser || !actor.create_role) {
            return Err(permission_denied(format!(
                "permission denied to drop role \"{name}\""
            )));
        }
        if role.oid == BOOTSTRAP_SUPERUSER_OID {
            return Err(SqlError::new(
                code::DEPENDENT_OBJECTS_STILL_EXIST,
                format!("cannot drop role {name} because it is required by the database system"),
            ));
        }
        if role.name == session.scope.current_role() || role.name == session.scope.session_user() {
            return Err(SqlError::new(
                code::OBJECT_IN_USE,
                if role.name == session.scope.session_user() {
                    "session user cannot be dropped"
                } else {
                    "current user cannot be dropped"
                },
            ));
        }
        let dependents = dependent_objects(&session.engine.catalog.read(), role.oid);
        if !dependents.is_empty() {
            return Err(SqlError::new(
                code::DEPENDENT_OBJECTS_STILL_EXIST,
                format!("role \"{name}\" cannot be dropped because some objects depend on it"),
            )
            .with_detail(dependents.join("\n")));
        }
        session.engine.catalog.write().drop_role(role.oid);
    }
    Ok(StatementResult::command("DROP ROLE"))
}

/// What ties a role to objects, as PostgreSQL's DETAIL lists it: `owner of table t`,
/// `privileges for schema s`.
fn dependent_objects(catalog: &shoal_storage::catalog::Catalog, role: Oid) -> Vec<String> {
    use shoal_storage::catalog_privileges::ObjectClass;
    let mut lines = Vec::new();
    for object in catalog.objects_of_role(role) {
        let (kind, name) = match object.0 {
            ObjectClass::Relation => {
                if let Some(t) = catalog.tables.get(&object.1) {
                    ("table", t.name.clone())
                } else if let Some(v) = catalog.views.get(&object.1) {
                    ("view", v.name.clone())
                } else if let Some(q) = catalog.sequences.get(&object.1) {
                    ("sequence", q.name.clone())
                } else {
                    continue;
                }
            }
            ObjectClass::Schema => match catalog.schemas.values().find(|s| s.oid == object.1) {
                Some(s) => ("schema", s.name.clone()),
                None => continue,
            },
            ObjectClass::Database => ("database", crate::query::schema::DATABASE_NAME.into()),
            ObjectClass::Function => match catalog.routines.get(&object.1) {
                Some(r) => (
                    crate::routines::define::routine_word(r),
                    crate::routines::describe::signature(r),
                ),
                None => continue,
            },
        };
        if catalog.owner_of(object) == role {
            lines.push(format!("owner of {kind} {name}"));
        } else {
            lines.push(format!("privileges for {kind} {name}"));
        }
    }
    for d in &catalog.default_acls {
        if d.role != role && !d.acl.iter().any(|i| i.grantee == role) {
            continue;
        }
        let what = match d.kind {
            shoal_storage::catalog_privileges::DefaultAclKind::Tables => "new relations",
            shoal_storage::catalog_privileges::DefaultAclKind::Sequences => "new sequences",
            shoal_storage::catalog_privileges::DefaultAclKind::Schemas => "new schemas",
        };
        let owner = shoal_storage::catalog_privileges::role_name(catalog, d.role);
        let schema = d
            .schema
            .and_then(|oid| catalog.schemas.values().find(|s| s.oid == oid))
            .map_or(String::new(), |s| format!(" in schema {}", s.name));
        let relation = if d.role == role {
            "owner of"
        } else {
            "privileges for"
        };
        lines.push(format!(
            "{relation} default privileges on {what} belonging to role {owner}{schema}"
        ));
    }
    lines
}
