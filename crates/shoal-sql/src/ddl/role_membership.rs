//! `GRANT role TO role` and `REVOKE role FROM role`: membership in roles (pg_auth_members).
//! sqlparser reads only the GRANT of privileges ON objects, so `parse` hands these over as the
//! statement's text (`parse::ROLE_COMMAND_VARIABLE`), read here with sqlparser's tokenizer;
//! REASSIGN OWNED and DROP OWNED come the same way and go on to `owned`, ALTER DEFAULT
//! PRIVILEGES to `privileges::defaults`.
//! Who may: a superuser; a role with CREATEROLE for roles that are not superusers; a member
//! WITH ADMIN OPTION of the granted role (PostgreSQL 15's rules).

use datafusion::sql::sqlparser::ast;
use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer};
use shoal_storage::catalog::{Catalog, Oid};
use shoal_storage::catalog_roles::RoleMembership;

use crate::error::{code, SqlError, SqlResult};
use crate::privileges::acting_role;
use crate::session::{Session, StatementResult};

/// One GRANT or REVOKE of role membership, as written.
#[derive(Debug, PartialEq)]
struct MembershipChange {
    grant: bool,
    roles: Vec<String>,
    members: Vec<String>,
    /// GRANT ... WITH ADMIN OPTION, or REVOKE ADMIN OPTION FOR.
    admin_option: bool,
}

/// Runs a statement `parse` handed over as text: a membership GRANT or REVOKE, REASSIGN OWNED
/// or DROP OWNED.
pub fn run(session: &mut Session, text: &str) -> SqlResult<StatementResult> {
    let words = words(text)?;
    if words
        .first()
        .is_some_and(|(w, quoted)| !quoted && w == "alter")
    {
        return crate::privileges::defaults::alter_default_privileges(session, text);
    }
    let keyword = |i: usize, k: &str| words.get(i).is_some_and(|(w, quoted)| !quoted && w == k);
    if keyword(0, "revoke") && keyword(1, "grant") && keyword(2, "option") && keyword(3, "for") {
        // REVOKE GRANT OPTION FOR privileges ON ...: sqlparser reads the REVOKE without the
        // three words; only the grant option is taken.
        let at = text
            .to_ascii_lowercase()
            .find(" for ")
            .expect("the words were found");
        let revoke = format!("REVOKE {}", &text[at + 5..]);
        let statement = crate::parse::parse_statements(&revoke)
            .map_err(|e| SqlError::new(code::SYNTAX_ERROR, e.to_string()))?;
        return match statement.as_slice() {
            [ast::Statement::Revoke(r)] => {
                crate::privileges::grant::revoke_grant_option(session, r)
            }
            _ => Err(SqlError::new(
                code::SYNTAX_ERROR,
                format!("syntax error in \"{text}\""),
            )),
        };
    }
    if keyword(1, "owned") && keyword(2, "by") {
        let names = |from: usize| -> (Vec<String>, usize) {
            let mut names = Vec::new();
            let mut at = from;
            while let Some((w, _)) = words.get(at) {
                names.push(w.clone());
                at += 1;
                if !keyword(at, ",") {
                    break;
                }
                at += 1;
            }
            (names, at)
        };
        let (roles, at) = names(3);
        let oids_of = |names: &[String]| {
            let catalog = session.engine.catalog.read();
            oids(session, &catalog, names)
        };
        if keyword(0, "reassign") && keyword(at, "to") && at + 2 == words.len() {
            let from = oids_of(&roles)?;
            let to = oids_of(&[words[at + 1].0.clone()])?[0];
            return super::owned::reassign(session, &from, to);
        }
        let cascade = keyword(at, "cascade");
        let tail_ok =
            at == words.len() || (at + 1 == words.len() && (cascade || keyword(at, "restrict")));
        if keyword(0, "drop") && tail_ok {
            let roles = oids_of(&roles)?;
            return super::owned::drop_owned(session, &roles, cascade);
        }
        return Err(SqlError::new(
            code::SYNTAX_ERROR,
            format!("syntax error in \"{text}\""),
        ));
    }
    change_membership(session, text)
}

fn change_membership(session: &Session, text: &str) -> SqlResult<StatementResult> {
    let change = parse(text)?;
    let actor = acting_role(session)?;
    let mut catalog = session.engine.catalog.write();
    let roles = oids(session, &catalog, &change.roles)?;
    let members = oids(session, &catalog, &change.members)?;
    for &role in &roles {
        let def = catalog.roles[&role].clone();
        let may = actor.superuser
            || (actor.create_role && !def.superuser)
            || catalog
                .role_members
                .iter()
                .any(|m| m.role == role && m.member == actor.oid && m.admin_option);
        if !may {
            let message = if def.superuser {
                "must be superuser to alter superusers".to_string()
            } else {
                format!("must have admin option on role \"{}\"", def.name)
            };
            return Err(SqlError::new(code::INSUFFICIENT_PRIVILEGE, message));
        }
        for &member in &members {
            let member_name = catalog.roles[&member].name.clone();
            if change.grant {
                grant(
                    session,
                    &mut catalog,
                    role,
                    &def.name,
                    member,
                    &member_name,
                    &change,
                )?;
            } else {
                revoke(
                    session,
                    &mut catalog,
                    role,
                    &def.name,
                    member,
                    &member_name,
                    &change,
                );
            }
        }
    }
    catalog.version += 1;
    Ok(StatementResult::command(if change.grant {
        "GRANT ROLE"
    } else {
        "REVOKE ROLE"
    }))
}

fn grant(
    session: &Session,
    catalog: &mut Catalog,
    role: Oid,
    role_name: &str,
    member: Oid,
    member_name: &str,
    change: &MembershipChange,
) -> SqlResult<()> {
    if role == member || catalog.is_member_of(role, member) {
        return Err(SqlError::new(
            "0LP01",
            format!("role \"{member_name}\" is a member of role \"{role_name}\""),
        ));
    }
    match catalog
        .role_members
        .iter_mut()
        .find(|m| m.role == role && m.member == member)
    {
        Some(existing) if !change.admin_option || existing.admin_option => {
            session.scope.notice(
                code::SUCCESSFUL_COMPLETION,
                format!("role \"{member_name}\" is already a member of role \"{role_name}\""),
            );
        }
        Some(existing) => existing.admin_option = true,
        None => catalog.role_members.push(RoleMembership {
            role,
            member,
            admin_option: change.admin_option,
        }),
    }
    Ok(())
}

fn revoke(
    session: &Session,
    catalog: &mut Catalog,
    role: Oid,
    role_name: &str,
    member: Oid,
    member_name: &str,
    change: &MembershipChange,
) {
    let Some(at) = catalog
        .role_members
        .iter()
        .position(|m| m.role == role && m.member == member)
    else {
        session.scope.warning(
            code::WARNING,
            format!("role \"{member_name}\" is not a member of role \"{role_name}\""),
        );
        return;
    };
    if change.admin_option {
        catalog.role_members[at].admin_option = false;
    } else {
        catalog.role_members.remove(at);
    }
}

fn oids(session: &Session, catalog: &Catalog, names: &[String]) -> SqlResult<Vec<Oid>> {
    names
        .iter()
        .map(|name| {
            let resolved = match name.as_str() {
                "current_user" | "current_role" => session.scope.current_role(),
                "session_user" => session.scope.session_user(),
                _ => name.clone(),
            };
            catalog.role_named(&resolved).map(|r| r.oid).ok_or_else(|| {
                SqlError::new(
                    code::UNDEFINED_OBJECT,
                    format!("role \"{resolved}\" does not exist"),
                )
            })
        })
        .collect()
}

/// Reads `GRANT r [, ...] TO m [, ...] [WITH ADMIN OPTION] [GRANTED BY g]` and
/// `REVOKE [ADMIN OPTION FOR] r [, ...] FROM m [, ...] [GRANTED BY g] [CASCADE | RESTRICT]`.
fn parse(text: &str) -> SqlResult<MembershipChange> {
    let syntax = |what: &str| SqlError::new(code::SYNTAX_ERROR, format!("syntax error {what}"));
    let words = words(text)?;
    let keyword = |i: usize, k: &str| words.get(i).is_some_and(|(w, quoted)| !quoted && w == k);
    let grant = keyword(0, "grant");
    if !grant && !keyword(0, "revoke") {
        return Err(syntax("at or near the start"));
    }
    let mut at = 1;
    let mut admin_option = false;
    if !grant && keyword(1, "admin") && keyword(2, "option") && keyword(3, "for") {
        admin_option = true;
        at = 4;
    }
    let list = |at: &mut usize| -> Vec<String> {
        let mut names = Vec::new();
        while let Some((w, _)) = words.get(*at) {
            names.push(w.clone());
            *at += 1;
            if !keyword(*at, ",") {
                break;
            }
            *at += 1;
        }
        names
    };
    let roles = list(&mut at);
    let preposition = if grant { "to" } else { "from" };
    if roles.is_empty() || !keyword(at, preposition) {
        return Err(syntax(&format!("at or near \"{preposition}\"")));
    }
    at += 1;
    let members = list(&mut at);
    if members.is_empty() {
        return Err(syntax("at end of input"));
    }
    while at < words.len() {
        if grant && keyword(at, "with") && keyword(at + 1, "admin") {
            let value = words.get(at + 2).map(|(w, _)| w.as_str());
            admin_option = matches!(value, Some("option") | Some("true"));
            at += 3;
        } else if keyword(at, "granted") && keyword(at + 1, "by") {
            at += 3;
        } else if !grant && (keyword(at, "cascade") || keyword(at, "restrict")) {
            at += 1;
        } else {
            return Err(syntax(&format!("at or near \"{}\"", words[at].0)));
        }
    }
    Ok(MembershipChange {
        grant,
        roles,
        members,
        admin_option,
    })
}

/// A statement's words (names folded as identifiers are, `true` when quoted) and commas.
fn words(text: &str) -> SqlResult<Vec<(String, bool)>> {
    let tokens = Tokenizer::new(&PostgreSqlDialect {}, text)
        .tokenize()
        .map_err(|e| SqlError::new(code::SYNTAX_ERROR, e.to_string()))?;
    Ok(tokens
        .into_iter()
        .filter_map(|t| match t {
            Token::Word(w) if w.quote_style.is_some() => Some((w.value, true)),
            Token::Word(w) => Some((w.value.to_lowercase(), false)),
            Token::Comma => Some((",".into(), false)),
            Token::Whitespace(_) | Token::SemiColon | Token::EOF => None,
            other => Some((other.to_string(), false)),
        })
        .collect())
}

/// Whether a statement that sqlparser could not read is one of those `run` takes: GRANT or
/// REVOKE with no ON before its TO or FROM, REASSIGN OWNED, DROP OWNED.
pub fn is_role_command(words: &[String]) -> bool {
    let lower = |i: usize| words.get(i).map(|w| w.to_lowercase());
    if lower(0).as_deref() == Some("alter")
        && lower(1).as_deref() == Some("default")
        && lower(2).as_deref() == Some("privileges")
    {
        return true;
    }
    if lower(0).as_deref() == Some("revoke")
        && lower(1).as_deref() == Some("grant")
        && lower(2).as_deref() == Some("option")
    {
        return true;
    }
    if matches!(lower(0).as_deref(), Some("reassign") | Some("drop"))
        && lower(1).as_deref() == Some("owned")
    {
        return true;
    }
    let first = lower(0);
    let grant = match first.as_deref() {
        Some("grant") => true,
        Some("revoke") => false,
        _ => return false,
    };
    let preposition = if grant { "to" } else { "from" };
    for w in &words[1..] {
        let w = w.to_lowercase();
        if w == "on" {
            return false;
        }
        if w == preposition {
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn membership_statements_read_as_postgresql_writes_them() {
        assert_eq!(
            parse("GRANT staff, \"Ops\" TO alice WITH ADMIN OPTION").unwrap(),
            MembershipChange {
                grant: true,
                roles: vec!["staff".into(), "Ops".into()],
                members: vec!["alice".into()],
                admin_option: true,
            }
        );
        assert_eq!(
            parse("revoke admin option for staff from alice, bob cascade").unwrap(),
            MembershipChange {
                grant: false,
                roles: vec!["staff".into()],
                members: vec!["alice".into(), "bob".into()],
                admin_option: true,
            }
        );
        assert!(parse("GRANT staff alice").is_err());
        let words = |s: &str| s.split(' ').map(String::from).collect::<Vec<_>>();
        assert!(is_role_command(&words("GRANT a TO b")));
        assert!(!is_role_command(&words("GRANT SELECT ON t TO b")));
        assert!(is_role_command(&words("REASSIGN OWNED BY a TO b")));
        assert!(is_role_command(&words("DROP OWNED BY a")));
        assert!(!is_role_command(&words("DROP TABLE owned")));
        assert!(is_role_command(&words(
            "ALTER DEFAULT PRIVILEGES GRANT SELECT ON TABLES TO b"
        )));
        assert!(is_role_command(&words(
            "REVOKE GRANT OPTION FOR SELECT ON t FROM b"
        )));
    }
}
