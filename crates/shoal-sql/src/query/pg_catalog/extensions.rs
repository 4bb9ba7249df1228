//! pg_extension (the extensions CREATE EXTENSION installed) and pg_available_extensions
//! (those Shoal provides, see `ddl::extension`).

use std::sync::Arc;

use datafusion::common::ScalarValue;
use datafusion::datasource::TableProvider;
use shoal_storage::catalog::Catalog;

use super::empty::declared_table;
use super::{b, namespace_oid, null_text, o, s};
use crate::ddl::AVAILABLE_EXTENSIONS;

pub(super) fn pg_extension(catalog: &Catalog) -> Arc<dyn TableProvider> {
    let mut t = declared_table(
        "oid oid, extname name, extowner oid, extnamespace oid, extrelocatable boolean, \
         extversion text, extconfig oid[], extcondition text[]",
    );
    for e in catalog.extensions.values() {
        t.row(vec![
            o(e.oid),
            s(&e.name),
            o(e.owner),
            o(namespace_oid(catalog, &e.schema)),
            b(true),
            s(&e.version),
            ScalarValue::Null,
            ScalarValue::Null,
        ]);
    }
    t.build()
}

pub(super) fn pg_available_extensions(catalog: &Catalog) -> Arc<dyn TableProvider> {
    let mut t =
        declared_table("name name, default_version text, installed_version text, comment text");
    for (name, version, description) in AVAILABLE_EXTENSIONS {
        t.row(vec![
            s(name),
            s(version),
            catalog
                .extension(name)
                .map_or_else(null_text, |e| s(&e.version)),
            s(description),
        ]);
    }
    t.build()
}

/// The descriptions of installed extensions, as pg_description holds them:
/// (objoid, description).
pub(super) fn extension_descriptions(catalog: &Catalog) -> Vec<(u32, &'static str)> {
    catalog
        .extensions
        .values()
        .filter_map(|e| {
            AVAILABLE_EXTENSIONS
                .iter()
                .find(|(n, _, _)| *n == e.name)
                .map(|(_, _, d)| (e.oid, *d))
        })
        .collect()
}
