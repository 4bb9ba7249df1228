//! Owners and access privileges of catalog objects (PostgreSQL's relowner/relacl, nspowner/
//! nspacl, datdba/datacl). An object without an entry is owned by the bootstrap superuser and
//! has its kind's default privileges, so catalogs written before privileges were kept read the
//! same. An entry's `acl` is None until the first GRANT or REVOKE, as PostgreSQL's NULL acl:
//! the owner holds every privilege of the kind, PUBLIC what the kind gives it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::catalog::{
    Catalog, Oid, RelationKind, INFORMATION_SCHEMA_NAMESPACE_OID, PG_CATALOG_NAMESPACE_OID,
    PUBLIC_NAMESPACE_OID,
};
use crate::catalog_roles::BOOTSTRAP_SUPERUSER_OID;

/// The OID of the database (there is one) and the grantee OID PostgreSQL uses for PUBLIC.
pub const DATABASE_OID: Oid = 5;
pub const PUBLIC: Oid = 0;

/// What an ACL belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum ObjectClass {
    /// Tables, views, sequences (their defaults differ; see `Privileges::default_for`).
    Relation,
    Schema,
    Database,
    /// Functions and procedures (pg_proc).
    Function,
}

/// A set of privileges, one bit each in PostgreSQL's order (ACL_INSERT is bit 0).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Privileges(pub u16);

impl Privileges {
    pub const INSERT: Privileges = Privileges(1 << 0);
    pub const SELECT: Privileges = Privileges(1 << 1);
    pub const UPDATE: Privileges = Privileges(1 << 2);
    pub const DELETE: Privileges = Privileges(1 << 3);
    pub const TRUNCATE: Privileges = Privileges(1 << 4);
    pub const REFERENCES: Privileges = Privileges(1 << 5);
    pub const TRIGGER: Privileges = Privileges(1 << 6);
    pub const EXECUTE: Privileges = Privileges(1 << 7);
    pub const USAGE: Privileges = Privileges(1 << 8);
    pub const CREATE: Privileges = Privileges(1 << 9);
    pub const TEMPORARY: Privileges = Privileges(1 << 10);
    pub const CONNECT: Privileges = Privileges(1 << 11);
    pub const NONE: Privileges = Privileges(0);
    /// What may be granted on single columns.
    pub const COLUMN: Privileges =
        Privileges(Self::INSERT.0 | Self::SELECT.0 | Self::UPDATE.0 | Self::REFERENCES.0);

    /// The letters of aclitem's text form, in bit order.
    const LETTERS: &'static [u8] = b"arwdDxtXUCTc";

    /// Every privilege an object of the kind can have (what `ALL` grants).
    pub fn all_for(class: ObjectClass, kind: Option<RelationKind>) -> Privileges {
        match (class, kind) {
            (ObjectClass::Relation, Some(RelationKind::Sequence)) => {
                Self::SELECT | Self::UPDATE | Self::USAGE
            }
            (ObjectClass::Relation, _) => {
                Self::INSERT
                    | Self::SELECT
                    | Self::UPDATE
                    | Self::DELETE
                    | Self::TRUNCATE
                    | Self::REFERENCES
                    | Self::TRIGGER
            }
            (ObjectClass::Schema, _) => Self::USAGE | Self::CREATE,
            (ObjectClass::Database, _) => Self::CREATE | Self::TEMPORARY | Self::CONNECT,
            (ObjectClass::Function, _) => Self::EXECUTE,
        }
    }

    /// What PUBLIC holds on an object of the kind whose acl is the default.
    fn public_default(class: ObjectClass) -> Privileges {
        match class {
            ObjectClass::Database => Self::TEMPORARY | Self::CONNECT,
            // Everyone may call a function until EXECUTE is revoked from PUBLIC.
            ObjectClass::Function => Self::EXECUTE,
            ObjectClass::Relation | ObjectClass::Schema => Self::NONE,
        }
    }

    pub fn contains(self, other: Privileges) -> bool {
        self.0 & other.0 == other.0
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    pub fn without(self, other: Privileges) -> Privileges {
        Privileges(self.0 & !other.0)
    }

    /// The privileges' letters (aclitem's text form), `*` after each one held with the grant
    /// option.
    pub fn letters(self, grant_options: Privileges) -> String {
        let mut s = String::new();
        for (bit, letter) in Self::LETTERS.iter().enumerate() {
            let p = Privileges(1 << bit);
            if self.contains(p) {
                s.push(*letter as char);
                if grant_options.contains(p) {
                    s.push('*');
                }
            }
        }
        s
    }
}

impl std::ops::BitOr for Privileges {
    type Output = Privileges;
    fn bitor(self, other: Privileges) -> Privileges {
        Privileges(self.0 | other.0)
    }
}

/// One grantee's privileges on an object, from one grantor (PostgreSQL's aclitem).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AclItem {
    /// `PUBLIC` (0) for everyone.
    pub grantee: Oid,
    pub grantor: Oid,
    pub privileges: Privileges,
    /// The subset the grantee may grant on.
    pub grant_options: Privileges,
}

/// An object's owner and, once changed from the default, its access list.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ownership {
    pub owner: Oid,
    pub acl: Option<Vec<AclItem>>,
    /// A table's or view's column privileges (pg_attribute.attacl) by column name: SELECT,
    /// INSERT, UPDATE and REFERENCES granted on single columns, on top of what the table's
    /// acl gives. A column without an entry has none of its own.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub columns: BTreeMap<String, Vec<AclItem>>,
}

impl Ownership {
    /// An entry with no column privileges.
    pub fn new(owner: Oid, acl: Option<Vec<AclItem>>) -> Ownership {
        Ownership {
            owner,
            acl,
            columns: BTreeMap::new(),
        }
    }

    /// Every acl item of the entry: the object's, then its columns'.
    pub fn all_items(&self) -> impl Iterator<Item = &AclItem> {
        self.acl
            .iter()
            .flatten()
            .chain(self.columns.values().flatten())
    }

    /// Gives the object to `new_owner`: the old owner's grants, and grants to it, become
    /// the new owner's (PostgreSQL's aclnewowner), on the object and on its columns.
    pub fn transfer(&mut self, new_owner: Oid) {
        let old = self.owner;
        self.owner = new_owner;
        let rewrite = |acl: &mut Vec<AclItem>| {
            let mut merged = Vec::new();
            for mut item in acl.drain(..) {
                if item.grantor == old {
                    item.grantor = new_owner;
                }
                if item.grantee == old {
                    item.grantee = new_owner;
                }
                merge_item(&mut merged, item);
            }
            *acl = merged;
        };
        if let Some(acl) = self.acl.as_mut() {
            rewrite(acl);
        }
        for acl in self.columns.values_mut() {
            rewrite(acl);
        }
    }
}

/// Adds `item` to `acl`, into the entry of the same grantee and grantor when there is one.
pub fn merge_item(acl: &mut Vec<AclItem>, item: AclItem) {
    match acl
        .iter_mut()
        .find(|i| i.grantee == item.grantee && i.grantor == item.grantor)
    {
        Some(existing) => {
            existing.privileges = existing.privileges | item.privileges;
            existing.grant_options = existing.grant_options | item.grant_options;
        }
        None => acl.push(item),
    }
}

/// Where an object's ownership entry is kept.
pub type ObjectRef = (ObjectClass, Oid);

/// What kind of new object a default acl applies to (pg_default_acl.defaclobjtype).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum DefaultAclKind {
    /// Tables and views ('r').
    Tables,
    /// 'S'.
    Sequences,
    /// 'n'.
    Schemas,
}

impl DefaultAclKind {
    /// pg_default_acl.defaclobjtype.
    pub fn letter(self) -> &'static str {
        match self {
            DefaultAclKind::Tables => "r",
            DefaultAclKind::Sequences => "S",
            DefaultAclKind::Schemas => "n",
        }
    }

    /// The class and relation kind whose privileges apply.
    pub fn object_kind(self) -> (ObjectClass, Option<RelationKind>) {
        match self {
            DefaultAclKind::Tables => (ObjectClass::Relation, Some(RelationKind::Table)),
            DefaultAclKind::Sequences => (ObjectClass::Relation, Some(RelationKind::Sequence)),
            DefaultAclKind::Schemas => (ObjectClass::Schema, None),
        }
    }
}

/// ALTER DEFAULT PRIVILEGES: the acl that `role`'s new objects of `kind` get, in `schema` (or,
/// for None, in every schema, where it replaces the built-in default; a schema's entry adds to
/// that).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DefaultAcl {
    pub role: Oid,
    pub schema: Option<Oid>,
    pub kind: DefaultAclKind,
    pub acl: Vec<AclItem>,
}

impl Catalog {
    /// The acl a new object of `kind` that `owner` creates in `schema` gets: the built-in
    /// default, or the role's global default acl, plus what its entry for the schema adds.
    /// None when that is the built-in default (NULL in the catalogs).
    pub fn new_object_acl(
        &self,
        owner: Oid,
        schema: Option<Oid>,
        kind: DefaultAclKind,
    ) -> Option<Vec<AclItem>> {
        let find = |s: Option<Oid>| {
            self.default_acls
                .iter()
                .find(|d| d.role == owner && d.schema == s && d.kind == kind)
        };
        let global = find(None);
        let in_schema = schema.and_then(|s| find(Some(s)));
        if global.is_none() && in_schema.is_none() {
            return None;
        }
        let mut acl = match global {
            Some(d) => d.acl.clone(),
            None => builtin_default_acl(owner, kind),
        };
        for item in in_schema.map(|d| d.acl.as_slice()).unwrap_or_default() {
            merge_item(&mut acl, item.clone());
        }
        // PostgreSQL sorts the merged acl (aclitemsort: by grantee, grantor, privileges).
        acl.sort_by_key(|i| (i.grantee, i.grantor, i.privileges.0));
        (acl != builtin_default_acl(owner, kind)).then_some(acl)
    }
}

/// The acl PostgreSQL's acldefault gives an object of `kind` owned by `owner`.
pub fn builtin_default_acl(owner: Oid, kind: DefaultAclKind) -> Vec<AclItem> {
    let (class, relation_kind) = kind.object_kind();
    let mut scratch = Catalog::default();
    scratch
        .ownership
        .insert((class, 0), Ownership::new(owner, None));
    scratch.effective_acl((class, 0), relation_kind)
}

impl Catalog {
    /// The object's owner and acl (the defaults when it has no entry).
    pub fn ownership(&self, object: ObjectRef) -> Ownership {
        self.ownership
            .get(&object)
            .cloned()
            .unwrap_or(Ownership::new(BOOTSTRAP_SUPERUSER_OID, None))
    }

    pub fn owner_of(&self, object: ObjectRef) -> Oid {
        self.ownership
            .get(&object)
            .map_or(BOOTSTRAP_SUPERUSER_OID, |o| o.owner)
    }

    /// Records the object's owner and acl (a new object's, an ALTER ... OWNER TO, a GRANT).
    pub fn set_ownership(&mut self, object: ObjectRef, ownership: Ownership) {
        if ownership.owner == BOOTSTRAP_SUPERUSER_OID
            && ownership.acl.is_none()
            && ownership.columns.is_empty()
        {
            self.ownership.remove(&object);
        } else {
            self.ownership.insert(object, ownership);
        }
        self.version += 1;
    }

    /// Forgets a dropped object's entry.
    pub fn drop_ownership(&mut self, object: ObjectRef) {
        if self.ownership.remove(&object).is_some() {
            self.version += 1;
        }
    }

    /// The object's access list with the defaults spelled out, as GRANT and REVOKE start from
    /// (PostgreSQL's acldefault).
    pub fn effective_acl(&self, object: ObjectRef, kind: Option<RelationKind>) -> Vec<AclItem> {
        let ownership = self.ownership(object);
        if let Some(acl) = ownership.acl {
            return acl;
        }
        let all = Privileges::all_for(object.0, kind);
        // The owner may always grant; PostgreSQL's default entry shows no grant options.
        let owner = AclItem {
            grantee: ownership.owner,
            grantor: ownership.owner,
            privileges: all,
            grant_options: Privileges::NONE,
        };
        let public = |privileges| AclItem {
            grantee: PUBLIC,
            grantor: ownership.owner,
            privileges,
            grant_options: Privileges::NONE,
        };
        // As initdb leaves them: everyone may use the schemas that come with the database
        // (PUBLIC has no CREATE on public since PostgreSQL 15); their acl lists the owner
        // first.
        let builtin_schema = object.0 == ObjectClass::Schema
            && [
                PUBLIC_NAMESPACE_OID,
                PG_CATALOG_NAMESPACE_OID,
                INFORMATION_SCHEMA_NAMESPACE_OID,
            ]
            .contains(&object.1);
        if builtin_schema {
            return vec![owner, public(Privileges::USAGE)];
        }
        // PostgreSQL's acldefault: PUBLIC's entry (when it has one) first, then the owner's.
        let mut acl = Vec::new();
        let world = Privileges::public_default(object.0);
        if !world.is_empty() {
            acl.push(public(world));
        }
        acl.push(owner);
        acl
    }

    /// The privileges `role` holds on the object: a superuser's are all; otherwise those the
    /// acl gives PUBLIC, the role, and the roles whose privileges it inherits.
    pub fn privileges_of(
        &self,
        role: Oid,
        object: ObjectRef,
        kind: Option<RelationKind>,
    ) -> Privileges {
        if self.roles.get(&role).is_some_and(|r| r.superuser) {
            return Privileges::all_for(object.0, kind);
        }
        let mut held = Privileges::NONE;
        for item in self.effective_acl(object, kind) {
            if item.grantee == PUBLIC || self.has_privileges_of_role(role, item.grantee) {
                held = held | item.privileges;
            }
        }
        held
    }

    /// The privileges `role` holds on one column of a table or view through the column's own
    /// acl (what the table's acl gives comes on top: see `privileges_of`).
    pub fn column_privileges_of(&self, role: Oid, relation: Oid, column: &str) -> Privileges {
        let Some(acl) = self
            .ownership
            .get(&(ObjectClass::Relation, relation))
            .and_then(|o| o.columns.get(column))
        else {
            return Privileges::NONE;
        };
        acl.iter()
            .filter(|i| i.grantee == PUBLIC || self.has_privileges_of_role(role, i.grantee))
            .fold(Privileges::NONE, |held, i| held | i.privileges)
    }

    /// The column names of a table or view (what column privileges can name).
    pub fn relation_column_names(&self, relation: Oid) -> Vec<String> {
        if let Some(t) = self.tables.get(&relation) {
            t.columns.iter().map(|c| c.name.clone()).collect()
        } else if let Some(v) = self.views.get(&relation) {
            v.column_names.clone()
        } else {
            Vec::new()
        }
    }

    /// Whether some column of the relation gives `role` the privilege `p` (a statement that
    /// names no column of a table, `SELECT count(*)`, needs that much).
    pub fn any_column_has(&self, role: Oid, relation: Oid, p: Privileges) -> bool {
        self.ownership
            .get(&(ObjectClass::Relation, relation))
            .is_some_and(|o| {
                o.columns
                    .keys()
                    .any(|c| self.column_privileges_of(role, relation, c).contains(p))
            })
    }

    /// ALTER TABLE ... RENAME COLUMN: the column's privileges follow it.
    pub fn rename_column_privileges(&mut self, relation: Oid, old: &str, new: &str) {
        let object = (ObjectClass::Relation, relation);
        if let Some(mut ownership) = self.ownership.get(&object).cloned() {
            if let Some(acl) = ownership.columns.remove(old) {
                ownership.columns.insert(new.to_string(), acl);
                self.set_ownership(object, ownership);
            }
        }
    }

    /// ALTER TABLE ... DROP COLUMN: the column's privileges go with it.
    pub fn drop_column_privileges(&mut self, relation: Oid, column: &str) {
        let object = (ObjectClass::Relation, relation);
        if let Some(mut ownership) = self.ownership.get(&object).cloned() {
            if ownership.columns.remove(column).is_some() {
                self.set_ownership(object, ownership);
            }
        }
    }

    /// Whether `role` acts with `other`'s privileges: it is `other`, or a member of it through
    /// roles that inherit (PostgreSQL's has_privs_of_role).
    pub fn has_privileges_of_role(&self, role: Oid, other: Oid) -> bool {
        if role == other || self.roles.get(&role).is_some_and(|r| r.superuser) {
            return true;
        }
        let mut seen = vec![role];
        let mut at = 0;
        while at < seen.len() {
            let current = seen[at];
            at += 1;
            // A role without INHERIT uses its memberships only through SET ROLE.
            if !self.roles.get(&current).is_some_and(|r| r.inherit) {
                continue;
            }
            for m in self.role_members.iter().filter(|m| m.member == current) {
                if m.role == other {
                    return true;
                }
                if !seen.contains(&m.role) {
                    seen.push(m.role);
                }
            }
        }
        false
    }

    /// Whether the object still exists (entries of dropped objects are left behind: OIDs are
    /// never reused, so they name nothing).
    pub fn object_exists(&self, (class, oid): ObjectRef) -> bool {
        match class {
            ObjectClass::Relation => {
                self.tables.contains_key(&oid)
                    || self.views.contains_key(&oid)
                    || self.sequences.contains_key(&oid)
            }
            ObjectClass::Schema => self.schemas.values().any(|s| s.oid == oid),
            ObjectClass::Database => oid == DATABASE_OID,
            ObjectClass::Function => self.routines.contains_key(&oid),
        }
    }

    /// The objects `role` owns or holds privileges on (what DROP ROLE must not leave behind).
    pub fn objects_of_role(&self, role: Oid) -> Vec<ObjectRef> {
        self.ownership
            .iter()
            .filter(|(object, _)| self.object_exists(**object))
            .filter(|(_, o)| {
                o.owner == role
                    || o.all_items()
                        .any(|i| i.grantee == role || i.grantor == role)
            })
            .map(|(object, _)| *object)
            .collect()
    }
}

/// An object's acl as aclitem[]'s text form (`{a=r/b,=U/b}`), or None while it has the
/// default (NULL in PostgreSQL's catalogs).
pub fn acl_text(catalog: &Catalog, object: ObjectRef) -> Option<String> {
    let acl = catalog.ownership.get(&object)?.acl.as_ref()?;
    Some(acl_items_text(catalog, acl))
}

/// A column's acl as aclitem[]'s text form (pg_attribute.attacl), None when it has none.
pub fn column_acl_text(catalog: &Catalog, relation: Oid, column: &str) -> Option<String> {
    let acl = catalog
        .ownership
        .get(&(ObjectClass::Relation, relation))?
        .columns
        .get(column)?;
    Some(acl_items_text(catalog, acl))
}

/// An acl as aclitem[]'s text form (`{a=r/b,=U/b}`).
pub fn acl_items_text(catalog: &Catalog, acl: &[AclItem]) -> String {
    let items: Vec<String> = acl
        .iter()
        .map(|i| {
            let text = aclitem_text(catalog, i);
            if text.contains(['"', ',', ' ', '{', '}']) {
                format!("\"{}\"", text.replace('\\', "\\\\").replace('"', "\\\""))
            } else {
                text
            }
        })
        .collect();
    format!("{{{}}}", items.join(","))
}

/// The name of the role with `oid` (its OID as text when it is gone).
pub fn role_name(catalog: &Catalog, oid: Oid) -> String {
    catalog
        .roles
        .get(&oid)
        .map_or_else(|| oid.to_string(), |r| r.name.clone())
}

/// An aclitem's text form: `grantee=privileges/grantor`, the grantee empty for PUBLIC.
pub fn aclitem_text(catalog: &Catalog, item: &AclItem) -> String {
    let name = |oid: Oid| match catalog.roles.get(&oid) {
        Some(r) => quote_role(&r.name),
        None => oid.to_string(),
    };
    let grantee = match item.grantee {
        PUBLIC => String::new(),
        oid => name(oid),
    };
    format!(
        "{grantee}={}/{}",
        item.privileges.letters(item.grant_options),
        name(item.grantor)
    )
}

/// A role name as aclitem prints it: in double quotes when it is not a plain lower-case name.
fn quote_role(name: &str) -> String {
    let plain = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if plain {
        name.to_string()
    } else {
        format!("\"{}\"", name.replace('"', "\"\""))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog_roles::{RoleDef, RoleMembership};

    #[test]
    fn grants_reach_members_that_inherit_and_text_reads_as_postgresql() {
        let mut c = Catalog::default();
        let alice = c.allocate_oid();
        let staff = c.allocate_oid();
        let table = c.allocate_oid();
        c.create_role(RoleDef::new(alice, "alice")).unwrap();
        c.create_role(RoleDef::new(staff, "staff")).unwrap();
        let object = (ObjectClass::Relation, table);
        let kind = Some(RelationKind::Table);
        assert!(c.privileges_of(alice, object, kind).is_empty());
        assert_eq!(
            c.privileges_of(BOOTSTRAP_SUPERUSER_OID, object, kind),
            Privileges::all_for(ObjectClass::Relation, kind)
        );
        let mut acl = c.effective_acl(object, kind);
        acl.push(AclItem {
            grantee: staff,
            grantor: BOOTSTRAP_SUPERUSER_OID,
            privileges: Privileges::SELECT | Privileges::INSERT,
            grant_options: Privileges::SELECT,
        });
        c.set_ownership(
            object,
            Ownership::new(BOOTSTRAP_SUPERUSER_OID, Some(acl.clone())),
        );
        assert_eq!(aclitem_text(&c, &acl[0]), "postgres=arwdDxt/postgres");
        assert_eq!(aclitem_text(&c, &acl[1]), "staff=ar*/postgres");
        c.role_members.push(RoleMembership {
            role: staff,
            member: alice,
            admin_option: false,
        });
        assert!(c
            .privileges_of(alice, object, kind)
            .contains(Privileges::SELECT));
        let mut noinherit = c.roles[&alice].clone();
        noinherit.inherit = false;
        c.replace_role(noinherit).unwrap();
        assert!(c.privileges_of(alice, object, kind).is_empty());
        // The table was never created: its entry names nothing a role could own.
        assert!(c.objects_of_role(staff).is_empty());
        let schema = c.create_schema("s").unwrap();
        c.set_ownership((ObjectClass::Schema, schema), Ownership::new(staff, None));
        let back = Catalog::from_image(&c.to_image()).unwrap();
        assert_eq!(back.ownership(object), c.ownership(object));
        assert_eq!(
            back.objects_of_role(staff),
            vec![(ObjectClass::Schema, schema)]
        );
    }
}
