//! ALTER DEFAULT PRIVILEGES: the privileges a role's new tables, sequences and schemas get.
//! `ALTER DEFAULT PRIVILEGES [FOR ROLE r, ...] [IN SCHEMA s, ...] GRANT | REVOKE ... ON TABLES |
//! SEQUENCES | SCHEMAS ...`, kept per role, schema and kind (`catalog_privileges::DefaultAcl`,
//! pg_default_acl) and applied when the role creates an object (`grant::own_created`). An entry
//! for no schema replaces the built-in default; a schema's entry adds to it, as in PostgreSQL.
//! sqlparser reads none of it: `parse` hands the text over, the clauses before GRANT or REVOKE
//! are read here, and the GRANT or REVOKE itself by sqlparser with its object list replaced.

use datafusion::sql::sqlparser::ast;
use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer};
use shoal_storage::catalog::Oid;
use shoal_storage::catalog_privileges::{builtin_default_acl, DefaultAcl, DefaultAclKind};

use super::acting_role;
use super::grant::{add, grantee_oids, privileges_named, remove, Target};
use crate::error::{code, SqlError, SqlResult};
use crate::session::{Session, StatementResult};

/// The name the GRANT or REVOKE's object list is replaced with, for sqlparser.
const PLACEHOLDER: &str = "shoal_default_privileges";

pub fn alter_default_privileges(session: &Session, text: &str) -> SqlResult<StatementResult> {
    let syntax = || SqlError::new(code::SYNTAX_ERROR, format!("syntax error in \"{text}\""));
    let tokens: Vec<Token> = Tokenizer::new(&PostgreSqlDialect {}, text)
        .tokenize()
        .map_err(|e| SqlError::new(code::SYNTAX_ERROR, e.to_string()))?
        .into_iter()
        .filter(|t| !matches!(t, Token::Whitespace(_) | Token::SemiColon | Token::EOF))
        .collect();
    let is = |i: usize, k: &str| matches!(tokens.get(i), Some(Token::Word(w)) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case(k));
    if !(is(0, "alter") && is(1, "default") && is(2, "privileges")) {
        return Err(syntax());
    }
    // [FOR ROLE | USER names] [IN SCHEMA names], in either order.
    let mut at = 3;
    let mut roles: Vec<String> = Vec::new();
    let mut schemas: Vec<String> = Vec::new();
    let names = |at: &mut usize| -> Vec<String> {
        let mut out = Vec::new();
        while let Some(Token::Word(w)) = tokens.get(*at) {
            out.push(match w.quote_style {
                Some(_) => w.value.clone(),
                None => w.value.to_lowercase(),
            });
            *at += 1;
            if !matches!(tokens.get(*at), Some(Token::Comma)) {
                break;
            }
            *at += 1;
        }
        out
    };
    loop {
        if is(at, "for") && (is(at + 1, "role") || is(at + 1, "user")) {
            at += 2;
            roles = names(&mut at);
        } else if is(at, "in") && is(at + 1, "schema") {
            at += 2;
            schemas = names(&mut at);
        } else {
            break;
        }
    }
    let granting = is(at, "grant");
    if !granting && !is(at, "revoke") {
        return Err(syntax());
    }
    // The GRANT or REVOKE, with `ON TABLES` (...) made `ON TABLE placeholder`.
    let on = (at..tokens.len())
        .find(|&i| is(i, "on"))
        .ok_or_else(syntax)?;
    let kind = match tokens.get(on + 1) {
        Some(Token::Word(w)) => match w.value.to_ascii_lowercase().as_str() {
            "tables" => DefaultAclKind::Tables,
            "sequences" => DefaultAclKind::Sequences,
            "schemas" => DefaultAclKind::Schemas,
            "functions" | "routines" | "types" => {
                return Err(SqlError::unsupported(format!(
                    "ALTER DEFAULT PRIVILEGES ON {}",
                    w.value.to_uppercase()
                )))
            }
            _ => return Err(syntax()),
        },
        _ => return Err(syntax()),
    };
    if kind == DefaultAclKind::Schemas && !schemas.is_empty() {
        return Err(SqlError::new(
            "0LP01",
            "cannot use IN SCHEMA clause when using GRANT/REVOKE ON SCHEMAS",
        ));
    }
    let mut statement: Vec<String> = tokens[at..on].iter().map(Token::to_string).collect();
    statement.push(format!("ON TABLE {PLACEHOLDER}"));
    statement.extend(tokens[on + 2..].iter().map(Token::to_string));
    let mut option_only = false;
    if !granting && is(at + 1, "grant") && is(at + 2, "option") && is(at + 3, "for") {
        option_only = true;
        statement.drain(1..4);
    }
    let parsed = crate::parse::parse_statements(&statement.join(" "))
        .map_err(|e| SqlError::new(code::SYNTAX_ERROR, e.to_string()))?;
    let (privileges, grantees, with_grant_option) = match parsed.as_slice() {
        [ast::Statement::Grant(g)] => (&g.privileges, &g.grantees, g.with_grant_option),
        [ast::Statement::Revoke(r)] => (&r.privileges, &r.grantees, false),
        _ => return Err(syntax()),
    };
    let (class, relation_kind) = kind.object_kind();
    let named = privileges_named(
        privileges,
        &Target {
            object: (class, 0),
            kind: relation_kind,
            name: PLACEHOLDER.to_string(),
        },
    )?;
    if !named.columns.is_empty() {
        return Err(syntax());
    }
    let wanted = named.object;
    let grantees = grantee_oids(session, grantees)?;

    let actor = acting_role(session)?;
    let mut catalog = session.engine.catalog.write();
    let role_oids: Vec<Oid> = match roles.is_empty() {
        true => vec![actor.oid],
        false => roles
            .iter()
            .map(|name| {
                catalog.role_named(name).map(|r| r.oid).ok_or_else(|| {
                    SqlError::new(
                        code::UNDEFINED_OBJECT,
                        format!("role \"{name}\" does not exist"),
                    )
                })
            })
            .collect::<SqlResult<_>>()?,
    };
    for &role in &role_oids {
        if !actor.superuser && !catalog.is_member_of(actor.oid, role) {
            return Err(SqlError::new(
                code::INSUFFICIENT_PRIVILEGE,
                "permission denied to change default privileges",
            ));
        }
    }
    let schema_oids: Vec<Option<Oid>> = match schemas.is_empty() {
        true => vec![None],
        false => schemas
            .iter()
            .map(|name| {
                catalog
                    .schemas
                    .get(name)
                    .map(|s| Some(s.oid))
                    .ok_or_else(|| {
                        SqlError::new(
                            code::INVALID_SCHEMA_NAME,
                            format!("schema \"{name}\" does not exist"),
                        )
                    })
            })
            .collect::<SqlResult<_>>()?,
    };
    for &role in &role_oids {
        for &schema in &schema_oids {
            let entry = catalog
                .default_acls
                .iter()
                .position(|d| d.role == role && d.schema == schema && d.kind == kind);
            let builtin = builtin_default_acl(role, kind);
            let mut acl = match (entry, schema) {
                (Some(i), _) => catalog.default_acls[i].acl.clone(),
                (None, None) => builtin.clone(),
                (None, Some(_)) => Vec::new(),
            };
            for &grantee in &grantees {
                if granting {
                    add(&mut acl, grantee, role, wanted, with_grant_option);
                } else {
                    remove(&mut acl, grantee, role, wanted, option_only, true, &catalog)?;
                }
            }
            let unneeded = match schema {
                None => acl == builtin,
                Some(_) => acl.is_empty(),
            };
            match (entry, unneeded) {
                (Some(i), true) => {
                    catalog.default_acls.remove(i);
                }
                (Some(i), false) => catalog.default_acls[i].acl = acl,
                (None, true) => {}
                (None, false) => catalog.default_acls.push(DefaultAcl {
                    role,
                    schema,
                    kind,
                    acl,
                }),
            }
        }
    }
    catalog.version += 1;
    Ok(StatementResult::command("ALTER DEFAULT PRIVILEGES"))
}
