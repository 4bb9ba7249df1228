//! CREATE EXTENSION: the extensions installed in the database, as pg_extension lists them.
//! An extension here is a record that a capability Shoal has built in is switched on (and
//! where its objects are found): Shoal loads no code. Which extensions exist, and what
//! installing one does, is the SQL layer's business.

use serde::{Deserialize, Serialize};

use crate::catalog::{Catalog, Oid};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExtensionDef {
    pub oid: Oid,
    pub name: String,
    pub version: String,
    /// The schema its objects are in (pg_extension.extnamespace).
    pub schema: String,
    pub owner: Oid,
}

impl Catalog {
    pub fn extension(&self, name: &str) -> Option<&ExtensionDef> {
        self.extensions.get(name)
    }

    pub fn add_extension(&mut self, extension: ExtensionDef) {
        assert!(
            !self.extensions.contains_key(&extension.name),
            "extension {} installed twice",
            extension.name
        );
        self.extensions.insert(extension.name.clone(), extension);
        self.version += 1;
    }

    pub fn remove_extension(&mut self, name: &str) -> Option<ExtensionDef> {
        let removed = self.extensions.remove(name);
        if removed.is_some() {
            self.version += 1;
        }
        removed
    }
}
