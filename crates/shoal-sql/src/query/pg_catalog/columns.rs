//! The catalog tables of columns: pg_attribute (the columns of tables, and the key columns of
//! indexes) and pg_attrdef (column defaults).

use std::sync::Arc;

use datafusion::datasource::TableProvider;
use shoal_storage::catalog::Catalog;

use super::{b, i16v, i32v, null_text, o, s, TableBuilder, BOOL, I16, I32, OID, T};
use crate::types::{oid, pg_type_of};

pub(super) fn pg_attribute(catalog: &Catalog) -> Arc<dyn TableProvider> {
    let mut t = TableBuilder::new(&[
        ("attrelid", OID),
        ("attname", T),
        ("atttypid", OID),
        ("attstattarget", I32),
        ("attlen", I16),
        ("attnum", I16),
        ("attndims", I32),
        ("atttypmod", I32),
        ("attnotnull", BOOL),
        ("atthasdef", BOOL),
        ("atthasmissing", BOOL),
        ("attidentity", T),
        ("attgenerated", T),
        ("attisdropped", BOOL),
        ("attislocal", BOOL),
        ("attinhcount", I32),
        ("attcollation", OID),
        ("attcompression", T),
        ("attstorage", T),
        ("attalign", T),
        ("attacl", T),
        ("attoptions", T),
    ]);
    for table in catalog.tables.values() {
        for (i, c) in table.columns.iter().enumerate() {
            let (type_oid, typmod) = pg_type_of(&c.data_type);
            let identity = match &c.identity {
                Some(id) if id.always => "a",
                Some(_) => "d",
                None => "",
            };
            let collation = if matches!(type_oid, oid::TEXT | oid::VARCHAR | oid::BPCHAR) {
                100
            } else {
                0
            };
            t.row(vec![
                o(table.oid),
                s(&c.name),
                o(type_oid),
                i32v(-1),
                i16v(-1),
                i16v(i as i16 + 1),
                i32v(0),
                i32v(typmod),
                b(c.not_null),
                b(c.default_sql.is_some()),
                b(false),
                s(identity),
                s(""),
                b(false),
                b(true),
                i32v(0),
                o(collation),
                s(""),
                s("p"),
                s("i"),
                null_text(),
                null_text(),
            ]);
        }
    }
    for index in catalog.indexes.values() {
        if let Some(table) = catalog.tables.get(&index.table) {
            for (i, col) in index.columns.iter().enumerate() {
                let c = &table.columns[*col];
                let (type_oid, typmod) = pg_type_of(&c.data_type);
                t.row(vec![
                    o(index.oid),
                    s(&c.name),
                    o(type_oid),
                    i32v(-1),
                    i16v(-1),
                    i16v(i as i16 + 1),
                    i32v(0),
                    i32v(typmod),
                    b(false),
                    b(false),
                    b(false),
                    s(""),
                    s(""),
                    b(false),
                    b(true),
                    i32v(0),
                    o(0),
                    s(""),
                    s("p"),
                    s("i"),
                    null_text(),
                    null_text(),
                ]);
            }
        }
    }
    t.build()
}

pub(super) fn pg_attrdef(catalog: &Catalog) -> Arc<dyn TableProvider> {
    let mut t = TableBuilder::new(&[("oid", OID), ("adrelid", OID), ("adnum", I16), ("adbin", T)]);
    for table in catalog.tables.values() {
        for (i, c) in table.columns.iter().enumerate() {
            if let Some(d) = &c.default_sql {
                t.row(vec![
                    o(table.oid * 1000 + i as u32),
                    o(table.oid),
                    i16v(i as i16 + 1),
                    s(d),
                ]);
            }
        }
    }
    t.build()
}
