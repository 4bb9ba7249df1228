//! The catalog tables of the server rather than of a schema: pg_database (Shoal's one
//! database), pg_roles with pg_user and pg_authid (its one role), pg_am (the table and index
//! access methods), pg_settings (the session's settings), pg_prepared_statements (its
//! PREPAREd statements) and pg_stat_activity (the server's backends).

use std::sync::Arc;

use datafusion::common::ScalarValue;
use datafusion::datasource::TableProvider;

use datafusion::arrow::datatypes::DataType as ArrowType;

use super::{
    b, i32v, i64v, null_text, o, s, TableBuilder, BOOL, BTREE_AM_OID, COLUMNAR_AM_OID,
    DATABASE_OID, HEAP_AM_OID, I32, I64, OID, SUPERUSER_OID, T,
};
use crate::query::scope::PlanScope;
use shoal_storage::catalog::Catalog;

const DATABASE_OBJECT: shoal_storage::catalog_privileges::ObjectRef = (
    shoal_storage::catalog_privileges::ObjectClass::Database,
    shoal_storage::catalog_privileges::DATABASE_OID,
);

pub(super) fn pg_database(catalog: &Catalog) -> Arc<dyn TableProvider> {
    let mut t = TableBuilder::new(&[
        ("oid", OID),
        ("datname", T),
        ("datdba", OID),
        ("encoding", I32),
        ("datlocprovider", T),
        ("datistemplate", BOOL),
        ("datallowconn", BOOL),
        ("datconnlimit", I32),
        ("datcollate", T),
        ("datctype", T),
        ("daticulocale", T),
        ("datcollversion", T),
        ("datacl", T),
        ("dattablespace", OID),
        ("datfrozenxid", OID),
        ("datminmxid", OID),
    ]);
    t.row(vec![
        o(DATABASE_OID),
        s("postgres"),
        o(catalog.owner_of(DATABASE_OBJECT)),
        i32v(6),
        s("c"),
        b(false),
        b(true),
        i32v(-1),
        s("C.UTF-8"),
        s("C.UTF-8"),
        null_text(),
        null_text(),
        super::relations::acl(catalog, DATABASE_OBJECT),
        o(1663),
        o(716),
        o(1),
    ]);
    t.build()
}

/// pg_roles, pg_user and pg_authid over the catalog's roles (one table with the columns of
/// all three). Only pg_authid shows the password verifier; pg_user lists the roles that can log
/// in.
pub(super) fn pg_roles(name: &str, catalog: &Catalog) -> Arc<dyn TableProvider> {
    let name_col = if name == "pg_user" {
        "usename"
    } else {
        "rolname"
    };
    let timestamptz = ArrowType::Timestamp(
        datafusion::arrow::datatypes::TimeUnit::Microsecond,
        Some("UTC".into()),
    );
    let mut t = TableBuilder::new(&[
        ("oid", OID),
        (name_col, T),
        ("rolsuper", BOOL),
        ("rolinherit", BOOL),
        ("rolcreaterole", BOOL),
        ("rolcreatedb", BOOL),
        ("rolcanlogin", BOOL),
        ("rolreplication", BOOL),
        ("rolconnlimit", I32),
        ("rolpassword", T),
        ("rolvaliduntil", timestamptz.clone()),
        ("rolbypassrls", BOOL),
        ("rolconfig", T),
        ("usesysid", OID),
        ("usesuper", BOOL),
        ("usecreatedb", BOOL),
        ("userepl", BOOL),
        ("usebypassrls", BOOL),
        ("passwd", T),
        ("valuntil", timestamptz),
        ("useconfig", T),
    ]);
    let at = |v: Option<i64>| ScalarValue::TimestampMicrosecond(v, Some("UTC".into()));
    for role in catalog.roles.values() {
        if name == "pg_user" && !role.login {
            continue;
        }
        let password = match (name, &role.password) {
            (_, None) => null_text(),
            ("pg_authid", Some(verifier)) => s(verifier),
            (_, Some(_)) => s("********"),
        };
        t.row(vec![
            o(role.oid),
            s(&role.name),
            b(role.superuser),
            b(role.inherit),
            b(role.create_role),
            b(role.create_db),
            b(role.login),
            b(role.replication),
            i32v(role.connection_limit),
            password.clone(),
            at(role.valid_until),
            b(role.bypass_rls),
            null_text(),
            o(role.oid),
            b(role.superuser),
            b(role.create_db),
            b(role.replication),
            b(role.bypass_rls),
            password,
            at(role.valid_until),
            null_text(),
        ]);
    }
    t.build()
}

/// pg_auth_members: who is a member of which role.
pub(super) fn pg_auth_members(catalog: &Catalog) -> Arc<dyn TableProvider> {
    let mut t = TableBuilder::new(&[
        ("oid", OID),
        ("roleid", OID),
        ("member", OID),
        ("grantor", OID),
        ("admin_option", BOOL),
    ]);
    for (i, m) in catalog.role_members.iter().enumerate() {
        t.row(vec![
            o(i as u32 + 1),
            o(m.role),
            o(m.member),
            o(SUPERUSER_OID),
            b(m.admin_option),
        ]);
    }
    t.build()
}

pub(super) fn pg_am() -> Arc<dyn TableProvider> {
    let mut t = TableBuilder::new(&[("oid", OID), ("amname", T), ("amhandler", T), ("amtype", T)]);
    t.row(vec![
        o(HEAP_AM_OID),
        s("heap"),
        s("heap_tableam_handler"),
        s("t"),
    ]);
    t.row(vec![o(BTREE_AM_OID), s("btree"), s("bthandler"), s("i")]);
    t.row(vec![
        o(COLUMNAR_AM_OID),
        s("columnar"),
        s("columnar_tableam_handler"),
        s("t"),
    ]);
    t.build()
}

/// The built-in languages (no procedural language is installed: nothing has `lanispl`).
pub(super) fn pg_language() -> Arc<dyn TableProvider> {
    let mut t = TableBuilder::new(&[
        ("oid", OID),
        ("lanname", T),
        ("lanowner", OID),
        ("lanispl", BOOL),
        ("lanpltrusted", BOOL),
        ("lanplcallfoid", OID),
        ("laninline", OID),
        ("lanvalidator", OID),
        ("lanacl", T),
    ])
    .with_pg_type("lanname", crate::types::oid::NAME);
    for (oid, name, trusted, validator) in [
        (12, "internal", false, 2246),
        (13, "c", false, 2247),
        (14, "sql", true, 2248),
        (super::routines::PLPGSQL_LANGUAGE_OID, "plpgsql", true, 0),
    ] {
        t.row(vec![
            o(oid),
            s(name),
            o(SUPERUSER_OID),
            b(name == "plpgsql"),
            b(trusted),
            o(0),
            o(0),
            o(validator),
            null_text(),
        ]);
    }
    t.build()
}

pub(super) fn pg_settings(scope: &Arc<PlanScope>) -> Arc<dyn TableProvider> {
    let mut t = TableBuilder::new(&[
        ("name", T),
        ("setting", T),
        ("unit", T),
        ("category", T),
        ("short_desc", T),
        ("extra_desc", T),
        ("context", T),
        ("vartype", T),
        ("source", T),
        ("min_val", T),
        ("max_val", T),
        ("enumvals", T),
        ("boot_val", T),
        ("reset_val", T),
        ("sourcefile", T),
        ("sourceline", I32),
        ("pending_restart", BOOL),
    ]);
    let settings = scope.settings.lock();
    let config = scope.engine.config.read();
    let mut names: Vec<&String> = settings.keys().collect();
    names.sort();
    for name in names {
        // Settings PostgreSQL hides from pg_settings; custom `a.b` ones are shown as strings.
        let info = crate::config::catalog::info(name);
        if info.is_none() && crate::settings::is_known(name) {
            continue;
        }
        let v = &settings[name];
        let boot = crate::settings::builtin_default(name).unwrap_or(v);
        // Where the value comes from: the server's files or command line while the session
        // has the value they give, else the built-in default, else the session's own.
        let server = config.values().get(name.as_str());
        let (source, file, reset) = match server {
            Some(c) if c.value == *v => (c.source.name(), c.file.clone(), c.value.as_str()),
            Some(c) => ("session", None, c.value.as_str()),
            None if boot == v => ("default", None, boot),
            None => ("session", None, boot),
        };
        let in_unit = |value: &str| match info {
            Some(i) => crate::config::catalog::in_unit(i, value),
            None => value.to_string(),
        };
        let optional = |value: Option<&str>| value.map_or_else(null_text, s);
        t.row(vec![
            s(info.map_or(name.as_str(), |i| i.name)),
            s(&in_unit(v)),
            optional(info.and_then(|i| i.unit)),
            s(info.map_or("Customized Options", |i| i.category)),
            s(info.map_or("", |i| i.short_desc)),
            null_text(),
            s(info.map_or("user", |i| i.context)),
            s(info.map_or("string", |i| i.vartype)),
            s(source),
            optional(info.and_then(|i| i.min_val)),
            optional(info.and_then(|i| i.max_val)),
            optional(info.and_then(|i| i.enumvals).map(enum_array).as_deref()),
            s(&in_unit(boot)),
            s(&in_unit(reset)),
            file.as_ref()
                .map_or_else(null_text, |(f, _)| s(&f.display().to_string())),
            ScalarValue::Int32(file.map(|(_, line)| line as i32)),
            b(config.is_pending_restart(name)),
        ]);
    }
    t.build()
}

/// An enum's choices as text[]'s text form (`{on,off,"read committed"}`).
fn enum_array(choices: &str) -> String {
    let items: Vec<String> = choices
        .split(',')
        .map(|c| match c.contains(' ') {
            true => format!("\"{c}\""),
            false => c.to_string(),
        })
        .collect();
    format!("{{{}}}", items.join(","))
}

/// pg_prepared_statements: the session's SQL-level prepared statements (PREPARE).
pub(super) fn pg_prepared_statements(scope: &Arc<PlanScope>) -> Arc<dyn TableProvider> {
    let timestamptz = ArrowType::Timestamp(
        datafusion::arrow::datatypes::TimeUnit::Microsecond,
        Some("UTC".into()),
    );
    let type_names = ArrowType::List(Arc::new(
        datafusion::arrow::datatypes::Field::new_list_field(T, true),
    ));
    let mut t = TableBuilder::new(&[
        ("name", T),
        ("statement", T),
        ("prepare_time", timestamptz),
        ("parameter_types", type_names),
        ("from_sql", BOOL),
        ("generic_plans", I64),
        ("custom_plans", I64),
    ]);
    let sql_level = scope.prepared_statements.lock().clone();
    let protocol = scope.protocol_statements.lock().clone();
    let all = sql_level
        .iter()
        .map(|(name, p)| (name, p, true))
        .chain(protocol.iter().map(|(name, p)| (name, p, false)));
    for (name, p, from_sql) in all {
        let types: Vec<ScalarValue> = p
            .prepared
            .param_oids
            .iter()
            .map(|oid| s(&super::format_type_oid(*oid, -1).unwrap_or_else(|| oid.to_string())))
            .collect();
        t.row(vec![
            s(name),
            s(&p.text),
            ScalarValue::TimestampMicrosecond(Some(p.prepared_at_micros), Some("UTC".into())),
            ScalarValue::List(ScalarValue::new_list_nullable(&types, &T)),
            b(from_sql),
            i64v(0),
            i64v(0),
        ]);
    }
    t.build()
}

/// pg_cursors: the session's open SQL cursors (DECLARE).
pub(super) fn pg_cursors(scope: &Arc<PlanScope>) -> Arc<dyn TableProvider> {
    let timestamptz = ArrowType::Timestamp(
        datafusion::arrow::datatypes::TimeUnit::Microsecond,
        Some("UTC".into()),
    );
    let mut t = TableBuilder::new(&[
        ("name", T),
        ("statement", T),
        ("is_holdable", BOOL),
        ("is_binary", BOOL),
        ("is_scrollable", BOOL),
        ("creation_time", timestamptz),
    ]);
    for (name, c) in scope.cursors.lock().iter() {
        t.row(vec![
            s(name),
            s(&c.text),
            b(c.holdable),
            b(false),
            b(c.scrollable),
            ScalarValue::TimestampMicrosecond(Some(c.declared_at_micros), Some("UTC".into())),
        ]);
    }
    t.build()
}

/// pg_stat_activity: one row per backend (see `crate::backends`). Shoal has no wait events
/// and no transaction ids to show; `client_addr` is text, as Shoal has no inet type.
pub(super) fn pg_stat_activity(scope: &Arc<PlanScope>) -> Arc<dyn TableProvider> {
    let timestamptz = ArrowType::Timestamp(
        datafusion::arrow::datatypes::TimeUnit::Microsecond,
        Some("UTC".into()),
    );
    let mut t = TableBuilder::new(&[
        ("datid", OID),
        ("datname", T),
        ("pid", I32),
        ("leader_pid", I32),
        ("usesysid", OID),
        ("usename", T),
        ("application_name", T),
        ("client_addr", T),
        ("client_hostname", T),
        ("client_port", I32),
        ("backend_start", timestamptz.clone()),
        ("xact_start", timestamptz.clone()),
        ("query_start", timestamptz.clone()),
        ("state_change", timestamptz),
        ("wait_event_type", T),
        ("wait_event", T),
        ("state", T),
        ("backend_xid", T),
        ("backend_xmin", T),
        ("query_id", I64),
        ("query", T),
        ("backend_type", T),
    ]);
    let at = |v: Option<chrono::DateTime<chrono::Utc>>| {
        ScalarValue::TimestampMicrosecond(v.map(|t| t.timestamp_micros()), Some("UTC".into()))
    };
    for backend in scope.engine.backends.all() {
        let a = backend.activity();
        t.row(vec![
            o(DATABASE_OID),
            s(&a.database),
            i32v(backend.pid),
            ScalarValue::Int32(None),
            o(SUPERUSER_OID),
            s(&a.user),
            s(&a.application_name),
            a.client.map_or_else(null_text, |c| s(&c.ip().to_string())),
            null_text(),
            i32v(a.client.map_or(-1, |c| i32::from(c.port()))),
            at(Some(backend.started_at)),
            at(a.xact_start),
            at(a.query_start),
            at(Some(a.state_change)),
            null_text(),
            null_text(),
            s(a.state.name()),
            null_text(),
            null_text(),
            ScalarValue::Int64(None),
            s(&a.query),
            s("client backend"),
        ]);
    }
    t.build()
}

/// pg_locks: the advisory locks held and waited for. Shoal's other locks (row locks, which
/// live in the rows, and the catalog's) are not listed.
pub(super) fn pg_locks(scope: &Arc<PlanScope>) -> Arc<dyn TableProvider> {
    let timestamptz = ArrowType::Timestamp(
        datafusion::arrow::datatypes::TimeUnit::Microsecond,
        Some("UTC".into()),
    );
    let mut t = TableBuilder::new(&[
        ("locktype", T),
        ("database", OID),
        ("relation", OID),
        ("page", I32),
        ("tuple", ArrowType::Int16),
        ("virtualxid", T),
        ("transactionid", T),
        ("classid", OID),
        ("objid", OID),
        ("objsubid", ArrowType::Int16),
        ("virtualtransaction", T),
        ("pid", I32),
        ("mode", T),
        ("granted", BOOL),
        ("fastpath", BOOL),
        ("waitstart", timestamptz),
    ]);
    let no_oid = ScalarValue::UInt32(None);
    for lock in scope.engine.advisory_locks.entries() {
        // PostgreSQL's encoding of the key: a bigint's high and low halves with objsubid 1,
        // or the two integers with objsubid 2.
        let (classid, objid, objsubid) = match lock.key {
            crate::advisory::LockKey::Single(k) => ((k >> 32) as u32, k as u32, 1),
            crate::advisory::LockKey::Pair(a, b) => (a as u32, b as u32, 2),
        };
        t.row(vec![
            s("advisory"),
            o(DATABASE_OID),
            no_oid.clone(),
            ScalarValue::Int32(None),
            ScalarValue::Int16(None),
            null_text(),
            null_text(),
            o(classid),
            o(objid),
            ScalarValue::Int16(Some(objsubid)),
            s(&format!("{}/1", lock.pid)),
            i32v(lock.pid),
            s(match lock.mode {
                crate::advisory::Mode::Exclusive => "ExclusiveLock",
                crate::advisory::Mode::Shared => "ShareLock",
            }),
            b(lock.granted),
            b(false),
            ScalarValue::TimestampMicrosecond(None, Some("UTC".into())),
        ]);
    }
    // Row locks show as PostgreSQL shows them: a wait for a row is a wait for the transaction
    // that wrote or locked it.
    for lock in crate::lock_waits::transaction_locks(&scope.engine) {
        t.row(vec![
            s("transactionid"),
            no_oid.clone(),
            no_oid.clone(),
            ScalarValue::Int32(None),
            ScalarValue::Int16(None),
            null_text(),
            s(&lock.txn.to_string()),
            no_oid.clone(),
            no_oid.clone(),
            ScalarValue::Int16(None),
            s(&format!("{}/1", lock.pid)),
            i32v(lock.pid),
            s(match lock.granted {
                true => "ExclusiveLock",
                false => "ShareLock",
            }),
            b(lock.granted),
            b(false),
            ScalarValue::TimestampMicrosecond(None, Some("UTC".into())),
        ]);
    }
    t.build()
}

/// pg_hba_file_rules: the rules file as it reads now, a row per line that holds a rule, with
/// the error of a line that could not be read.
pub(super) fn pg_hba_file_rules(scope: &Arc<PlanScope>) -> Arc<dyn TableProvider> {
    let list = ArrowType::List(Arc::new(
        datafusion::arrow::datatypes::Field::new_list_field(T, true),
    ));
    let mut t = TableBuilder::new(&[
        ("line_number", I32),
        ("type", T),
        ("database", list.clone()),
        ("user_name", list.clone()),
        ("address", T),
        ("netmask", T),
        ("auth_method", T),
        ("options", list.clone()),
        ("error", T),
    ]);
    let texts = |items: Vec<String>| {
        let values: Vec<ScalarValue> = items.iter().map(|i| s(i)).collect();
        ScalarValue::List(ScalarValue::new_list_nullable(&values, &T))
    };
    let no_list = || ScalarValue::try_from(&list).expect("a NULL list");
    let file = scope.engine.hba.current();
    let mut rows: Vec<(usize, Vec<ScalarValue>)> = Vec::new();
    for rule in &file.rules {
        let (address, netmask) = rule
            .addresses
            .as_ref()
            .map(|a| a.address_and_mask())
            .unwrap_or((None, None));
        let opt = |v: Option<String>| v.map_or_else(null_text, |v| s(&v));
        rows.push((
            rule.line,
            vec![
                i32v(rule.line as i32),
                s(rule.connection.name()),
                texts(rule.databases.iter().map(|d| d.text()).collect()),
                texts(rule.users.iter().map(|u| u.text()).collect()),
                opt(address),
                opt(netmask),
                s(rule.method.name()),
                if rule.options.is_empty() {
                    no_list()
                } else {
                    texts(
                        rule.options
                            .iter()
                            .map(|(k, v)| format!("{k}={v}"))
                            .collect(),
                    )
                },
                null_text(),
            ],
        ));
    }
    for e in &file.errors {
        rows.push((
            e.line,
            vec![
                i32v(e.line as i32),
                null_text(),
                no_list(),
                no_list(),
                null_text(),
                null_text(),
                null_text(),
                no_list(),
                s(&e.message),
            ],
        ));
    }
    rows.sort_by_key(|(line, _)| *line);
    for (_, row) in rows {
        t.row(row);
    }
    t.build()
}
