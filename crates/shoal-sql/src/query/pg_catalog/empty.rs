//! The catalogs of features Shoal does not have (text search, foreign data, publications,
//! operator families, event triggers, large objects, ...): empty, with PostgreSQL 15's
//! columns, so that tools which read every catalog (pg_dump reads them all) find nothing to
//! add rather than an error. Each is declared as PostgreSQL's `\d` lists it.

use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType as ArrowType, Field};
use datafusion::datasource::TableProvider;

use super::{TableBuilder, BOOL, I16, I32, OID, T};
use crate::types::oid;

/// (catalog, its columns as `name type, ...`), types spelled as `format_type` spells them.
const EMPTY_CATALOGS: &[(&str, &str)] = &[
    ("pg_amop", "oid oid, amopfamily oid, amoplefttype oid, amoprighttype oid, amopstrategy smallint, amoppurpose \"char\", amopopr oid, amopmethod oid, amopsortfamily oid"),
    ("pg_amproc", "oid oid, amprocfamily oid, amproclefttype oid, amprocrighttype oid, amprocnum smallint, amproc regproc"),
    ("pg_cast", "oid oid, castsource oid, casttarget oid, castfunc oid, castcontext \"char\", castmethod \"char\""),
    ("pg_collation", "oid oid, collname name, collnamespace oid, collowner oid, collprovider \"char\", collisdeterministic boolean, collencoding integer, collcollate text, collctype text, colliculocale text, collversion text"),
    ("pg_conversion", "oid oid, conname name, connamespace oid, conowner oid, conforencoding integer, contoencoding integer, conproc regproc, condefault boolean"),
    ("pg_db_role_setting", "setdatabase oid, setrole oid, setconfig text[]"),
    ("pg_event_trigger", "oid oid, evtname name, evtevent name, evtowner oid, evtfoid oid, evtenabled \"char\", evttags text[]"),
    ("pg_foreign_data_wrapper", "oid oid, fdwname name, fdwowner oid, fdwhandler oid, fdwvalidator oid, fdwacl aclitem[], fdwoptions text[]"),
    ("pg_foreign_server", "oid oid, srvname name, srvowner oid, srvfdw oid, srvtype text, srvversion text, srvacl aclitem[], srvoptions text[]"),
    ("pg_foreign_table", "ftrelid oid, ftserver oid, ftoptions text[]"),
    ("pg_inherits", "inhrelid oid, inhparent oid, inhseqno integer, inhdetachpending boolean"),
    ("pg_init_privs", "objoid oid, classoid oid, objsubid integer, privtype \"char\", initprivs aclitem[]"),
    ("pg_largeobject_metadata", "oid oid, lomowner oid, lomacl aclitem[]"),
    ("pg_opclass", "oid oid, opcmethod oid, opcname name, opcnamespace oid, opcowner oid, opcfamily oid, opcintype oid, opcdefault boolean, opckeytype oid"),
    ("pg_opfamily", "oid oid, opfmethod oid, opfname name, opfnamespace oid, opfowner oid"),
    ("pg_partitioned_table", "partrelid oid, partstrat \"char\", partnatts smallint, partdefid oid, partattrs int2vector, partclass oidvector, partcollation oidvector, partexprs pg_node_tree"),
    ("pg_policy", "oid oid, polname name, polrelid oid, polcmd \"char\", polpermissive boolean, polroles oid[], polqual pg_node_tree, polwithcheck pg_node_tree"),
    ("pg_publication", "oid oid, pubname name, pubowner oid, puballtables boolean, pubinsert boolean, pubupdate boolean, pubdelete boolean, pubtruncate boolean, pubviaroot boolean"),
    ("pg_publication_namespace", "oid oid, pnpubid oid, pnnspid oid"),
    ("pg_publication_rel", "oid oid, prpubid oid, prrelid oid, prqual pg_node_tree, prattrs int2vector"),
    ("pg_range", "rngtypid oid, rngsubtype oid, rngmultitypid oid, rngcollation oid, rngsubopc oid, rngcanonical regproc, rngsubdiff regproc"),
    ("pg_seclabel", "objoid oid, classoid oid, objsubid integer, provider text, label text"),
    ("pg_seclabels", "objoid oid, classoid oid, objsubid integer, objtype text, objnamespace oid, objname text, provider text, label text"),
    ("pg_shseclabel", "objoid oid, classoid oid, provider text, label text"),
    ("pg_statistic_ext", "oid oid, stxrelid oid, stxname name, stxnamespace oid, stxowner oid, stxstattarget integer, stxkeys int2vector, stxkind \"char\"[], stxexprs pg_node_tree"),
    ("pg_subscription", "oid oid, subdbid oid, subskiplsn pg_lsn, subname name, subowner oid, subenabled boolean, subbinary boolean, substream boolean, subtwophasestate \"char\", subdisableonerr boolean, subconninfo text, subslotname name, subsynccommit text, subpublications text[]"),
    ("pg_transform", "oid oid, trftype oid, trflang oid, trffromsql regproc, trftosql regproc"),
    ("pg_trigger", "oid oid, tgrelid oid, tgparentid oid, tgname name, tgfoid oid, tgtype smallint, tgenabled \"char\", tgisinternal boolean, tgconstrrelid oid, tgconstrindid oid, tgconstraint oid, tgdeferrable boolean, tginitdeferred boolean, tgnargs smallint, tgattr int2vector, tgargs bytea, tgqual pg_node_tree, tgoldtable name, tgnewtable name"),
    ("pg_ts_config", "oid oid, cfgname name, cfgnamespace oid, cfgowner oid, cfgparser oid"),
    ("pg_ts_dict", "oid oid, dictname name, dictnamespace oid, dictowner oid, dicttemplate oid, dictinitoption text"),
    ("pg_ts_parser", "oid oid, prsname name, prsnamespace oid, prsstart regproc, prstoken regproc, prsend regproc, prsheadline regproc, prslextype regproc"),
    ("pg_ts_template", "oid oid, tmplname name, tmplnamespace oid, tmplinit regproc, tmpllexize regproc"),
];

/// The empty catalog `name`, if it is one of them.
pub(super) fn empty_catalog(name: &str) -> Option<Arc<dyn TableProvider>> {
    let (_, columns) = EMPTY_CATALOGS.iter().find(|(n, _)| *n == name)?;
    Some(declared_table(columns).build())
}

/// A catalog table of `columns` (`name type, ...`, types as `format_type` spells them).
/// The columns of a catalog listed here, as `name type, ...`.
pub(super) fn columns_of(name: &str) -> Option<&'static str> {
    EMPTY_CATALOGS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, c)| *c)
}

pub(super) fn declared_table(columns: &str) -> TableBuilder {
    let columns: Vec<(&str, &str)> = columns
        .split(", ")
        .map(|c| c.split_once(' ').expect("`name type` column"))
        .collect();
    let arrow: Vec<(&str, ArrowType)> = columns
        .iter()
        .map(|(name, pg_type)| (*name, arrow_type(pg_type)))
        .collect();
    let mut table = TableBuilder::new(&arrow);
    for (name, pg_type) in &columns {
        if let Some(type_oid) = declared_oid(pg_type) {
            table = table.with_pg_type(name, type_oid);
        }
    }
    table
}

fn list(of: ArrowType) -> ArrowType {
    ArrowType::List(Arc::new(Field::new_list_field(of, true)))
}

fn arrow_type(pg_type: &str) -> ArrowType {
    match pg_type {
        "oid" | "regproc" => OID,
        "boolean" => BOOL,
        "smallint" => I16,
        "integer" => I32,
        "oid[]" | "oidvector" => list(OID),
        "int2vector" => list(I16),
        "text[]" | "\"char\"[]" => list(T),
        "bytea" => ArrowType::Binary,
        // Shoal's acls are aclitem[]'s text, in every catalog.
        "aclitem[]" | "name" | "text" | "\"char\"" | "pg_node_tree" | "pg_lsn" => T,
        other => unreachable!("catalog column type {other} has an Arrow type"),
    }
}

/// The PostgreSQL type a column declares when its Arrow type alone would say another.
fn declared_oid(pg_type: &str) -> Option<u32> {
    match pg_type {
        "name" => Some(oid::NAME),
        "\"char\"" => Some(oid::CHAR),
        "int2vector" => Some(oid::INT2VECTOR),
        "oidvector" => Some(oid::OIDVECTOR),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_empty_catalog_builds_with_its_columns() {
        for (name, columns) in EMPTY_CATALOGS {
            let table = empty_catalog(name).expect("listed catalog");
            assert_eq!(table.schema().fields().len(), columns.split(", ").count());
        }
        assert!(empty_catalog("pg_class").is_none());
    }
}
