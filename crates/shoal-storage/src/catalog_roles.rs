//! Roles (PostgreSQL's pg_authid) and role membership (pg_auth_members), kept in the catalog,
//! so that they are logged and recovered as every catalog change is. A role's password is only
//! ever a SCRAM verifier (see `shoal-auth`). Every catalog has the bootstrap superuser,
//! `postgres`, with OID 10 as in PostgreSQL.

use serde::{Deserialize, Serialize};

use crate::catalog::{Catalog, CatalogError, Oid};

/// The bootstrap superuser's OID (PostgreSQL's BOOTSTRAP_SUPERUSERID).
pub const BOOTSTRAP_SUPERUSER_OID: Oid = 10;
/// The bootstrap superuser's name.
pub const BOOTSTRAP_SUPERUSER: &str = "postgres";

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoleDef {
    pub oid: Oid,
    pub name: String,
    pub superuser: bool,
    pub inherit: bool,
    pub create_role: bool,
    pub create_db: bool,
    pub login: bool,
    pub replication: bool,
    pub bypass_rls: bool,
    /// -1: no limit.
    pub connection_limit: i32,
    /// A SCRAM-SHA-256 verifier; None: no password (password logins fail).
    pub password: Option<String>,
    /// After this instant (microseconds since 1970) the password no longer logs in.
    pub valid_until: Option<i64>,
}

impl RoleDef {
    /// Whether the role's password logs in now: it has one, and its VALID UNTIL has not passed.
    pub fn password_valid_now(&self) -> bool {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as i64);
        self.password.is_some() && self.valid_until.is_none_or(|until| now < until)
    }

    /// A role as CREATE ROLE makes it without options: NOLOGIN, INHERIT, no limit.
    pub fn new(oid: Oid, name: &str) -> RoleDef {
        RoleDef {
            oid,
            name: name.to_string(),
            superuser: false,
            inherit: true,
            create_role: false,
            create_db: false,
            login: false,
            replication: false,
            bypass_rls: false,
            connection_limit: -1,
            password: None,
            valid_until: None,
        }
    }

    /// The bootstrap superuser, as initdb makes it.
    pub fn bootstrap() -> RoleDef {
        RoleDef {
            superuser: true,
            create_role: true,
            create_db: true,
            login: true,
            replication: true,
            bypass_rls: true,
            ..RoleDef::new(BOOTSTRAP_SUPERUSER_OID, BOOTSTRAP_SUPERUSER)
        }
    }
}

/// `member` is a member of `role` (GRANT role TO member).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoleMembership {
    pub role: Oid,
    pub member: Oid,
    pub admin_option: bool,
}

impl Catalog {
    pub fn role_named(&self, name: &str) -> Option<&RoleDef> {
        self.roles.values().find(|r| r.name == name)
    }

    pub fn create_role(&mut self, role: RoleDef) -> Result<(), CatalogError> {
        if self.role_named(&role.name).is_some() {
            return Err(CatalogError::DuplicateRole(role.name));
        }
        self.roles.insert(role.oid, role);
        self.version += 1;
        Ok(())
    }

    /// Replaces the role of the same OID (ALTER ROLE, a password change, a rename).
    pub fn replace_role(&mut self, role: RoleDef) -> Result<(), CatalogError> {
        if self
            .role_named(&role.name)
            .is_some_and(|other| other.oid != role.oid)
        {
            return Err(CatalogError::DuplicateRole(role.name));
        }
        if !self.roles.contains_key(&role.oid) {
            return Err(CatalogError::UndefinedRole(role.name));
        }
        self.roles.insert(role.oid, role);
        self.version += 1;
        Ok(())
    }

    /// Drops a role and its memberships (in both directions).
    pub fn drop_role(&mut self, oid: Oid) -> Option<RoleDef> {
        let role = self.roles.remove(&oid)?;
        self.role_members
            .retain(|m| m.role != oid && m.member != oid);
        self.version += 1;
        Some(role)
    }

    /// Whether `member` is `role` or a member of it, directly or through other roles.
    pub fn is_member_of(&self, member: Oid, role: Oid) -> bool {
        let mut seen = vec![member];
        let mut at = 0;
        while at < seen.len() {
            if seen[at] == role {
                return true;
            }
            let current = seen[at];
            for m in self.role_members.iter().filter(|m| m.member == current) {
                if !seen.contains(&m.role) {
                    seen.push(m.role);
                }
            }
            at += 1;
        }
        false
    }

    /// The bootstrap superuser, put back into a catalog recovered from an image written before
    /// roles were kept.
    pub(crate) fn ensure_bootstrap_role(&mut self) {
        if !self.roles.contains_key(&BOOTSTRAP_SUPERUSER_OID) {
            self.roles
                .insert(BOOTSTRAP_SUPERUSER_OID, RoleDef::bootstrap());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_survive_the_image_and_membership_is_transitive() {
        let mut c = Catalog::default();
        assert!(c
            .role_named(BOOTSTRAP_SUPERUSER)
            .is_some_and(|r| r.superuser));
        let a = c.allocate_oid();
        let b = c.allocate_oid();
        let mut alice = RoleDef::new(a, "alice");
        alice.login = true;
        alice.password = Some("SCRAM-SHA-256$4096:x$y:z".into());
        c.create_role(alice.clone()).unwrap();
        c.create_role(RoleDef::new(b, "staff")).unwrap();
        assert_eq!(
            c.create_role(RoleDef::new(b + 1, "alice")),
            Err(CatalogError::DuplicateRole("alice".into()))
        );
        c.role_members.push(RoleMembership {
            role: b,
            member: a,
            admin_option: false,
        });
        let back = Catalog::from_image(&c.to_image()).unwrap();
        assert_eq!(back.role_named("alice"), Some(&alice));
        assert!(back.is_member_of(a, b));
        assert!(!back.is_member_of(b, a));
        let mut dropped = back.clone();
        dropped.drop_role(b);
        assert!(dropped.role_members.is_empty());
    }
}
