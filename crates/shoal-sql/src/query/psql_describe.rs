//! A few of psql 15's describe queries (`\d TABLE`, `\d+`, `\l`) use features Shoal's planner
//! lacks, on catalogs Shoal keeps empty: LATERAL table functions over publications and
//! triggers, array literals compared with policies' role arrays, TOAST options, ACL arrays. Those queries, recognised by their exact text, are
//! answered by simpler SQL with the same columns and, on Shoal's catalogs, the same rows: no
//! publications, no partitions (so no trigger has a parent), no TOAST tables, no ACLs. Everything else in psql's queries runs
//! as sent (see `tests/psql.rs`).

use std::borrow::Cow;

/// Fragments of psql's SQL and what replaces them.
const REPLACEMENTS: &[(&str, &str)] = &[
    // \d+ TABLE: Options. Shoal has no TOAST tables and keeps reloptions as array text.
    (
        "pg_catalog.array_to_string(c.reloptions || array(select 'toast.' || x from pg_catalog.unnest(tc.reloptions) x), ', ')",
        "pg_catalog.replace(pg_catalog.btrim(c.reloptions, '{}'), ',', ', ')",
    ),
    // \l and \dp (\z): access privileges. Shoal keeps acls as aclitem[]'s text
    // (`{a=r/b,c=w/b}`, NULL for the defaults): one item per line, as psql shows them.
    (
        "pg_catalog.array_to_string(d.datacl, E'\\n')",
        "pg_catalog.replace(pg_catalog.btrim(d.datacl, '{}'), ',', E'\\n')",
    ),
    (
        "pg_catalog.array_to_string(c.relacl, E'\\n')",
        "pg_catalog.replace(pg_catalog.btrim(c.relacl, '{}'), ',', E'\\n')",
    ),
    // \ddp.
    (
        "pg_catalog.array_to_string(d.defaclacl, E'\\n')",
        "pg_catalog.replace(pg_catalog.btrim(d.defaclacl, '{}'), ',', E'\\n')",
    ),
];

/// Stretches of psql's SQL, from the first fragment to the end of the second, and what
/// replaces them: \dp's column privileges (attacl is text here, not aclitem[]) and policies,
/// which Shoal has none of (PostgreSQL shows an empty string then).
const SPANS: &[(&str, &str, &str)] = &[
    (
        "pg_catalog.array_to_string(ARRAY(\n    SELECT attname || E':\\n  '",
        "attacl IS NOT NULL\n  ), E'\\n')",
        "COALESCE((SELECT pg_catalog.string_agg(attname || E':\\n  ' || \
         pg_catalog.replace(pg_catalog.btrim(attacl, '{}'), ',', E'\\n  '), E'\\n' \
         ORDER BY attnum) FROM pg_catalog.pg_attribute a \
         WHERE attrelid = c.oid AND attacl IS NOT NULL), '')",
    ),
    (
        "pg_catalog.array_to_string(ARRAY(\n    SELECT polname",
        "WHERE polrelid = c.oid), E'\\n')",
        "''",
    ),
];

/// Whole queries over catalogs Shoal keeps empty, by a fragment only they contain, and the
/// empty result with their columns.
const EMPTY_RESULTS: &[(&str, &str)] = &[
    // \d TABLE: "Publications:".
    (
        "FROM pg_catalog.pg_publication p\n     JOIN pg_catalog.pg_publication_namespace pn",
        "SELECT NULL::text AS pubname, NULL::text, NULL::text WHERE false",
    ),
    // \d TABLE: "Policies:" (compares oid[] with an array literal).
    (
        "FROM pg_catalog.pg_policy pol\nWHERE pol.polrelid",
        "SELECT NULL::text AS polname, NULL::boolean AS polpermissive, NULL::text, NULL::text, \
         NULL::text, NULL::text AS cmd WHERE false",
    ),
];

/// \d TABLE: "Triggers:". psql's query looks for partition parents with a LATERAL table
/// function; Shoal has no partitions, so no trigger has a parent.
const TRIGGERS_FRAGMENT: &str =
    "pg_catalog.pg_get_triggerdef(t.oid, true), t.tgenabled, t.tgisinternal";

fn triggers_query(sql: &str) -> Option<String> {
    let at = sql.find("t.tgrelid = '")? + "t.tgrelid = '".len();
    let oid: u32 = sql[at..].split('\'').next()?.parse().ok()?;
    Some(format!(
        "SELECT t.tgname::text AS tgname, pg_catalog.pg_get_triggerdef(t.oid, true), \
         t.tgenabled, t.tgisinternal, NULL::text AS parent FROM pg_catalog.pg_trigger t \
         WHERE t.tgrelid = '{oid}' AND NOT t.tgisinternal ORDER BY 1"
    ))
}

/// The SQL to run for `sql`: itself, unless it is one of psql's queries above.
pub fn rewrite(sql: &str) -> Cow<'_, str> {
    // Cheap test first: every query above is long and names pg_catalog. Then only one SELECT,
    // as psql sends them: never a statement that merely quotes a fragment.
    if sql.len() < 200 || !sql.contains("pg_catalog.") {
        return Cow::Borrowed(sql);
    }
    let body = sql.trim().trim_end_matches(';');
    if !body.starts_with("SELECT ") || body.contains(';') {
        return Cow::Borrowed(sql);
    }
    for (fragment, empty) in EMPTY_RESULTS {
        if sql.contains(fragment) {
            return Cow::Owned((*empty).to_string());
        }
    }
    if sql.contains(TRIGGERS_FRAGMENT) {
        if let Some(query) = triggers_query(sql) {
            return Cow::Owned(query);
        }
    }
    let mut out = Cow::Borrowed(sql);
    for (start, end, replacement) in SPANS {
        if let Some(from) = out.find(start) {
            if let Some(length) = out[from..].find(end) {
                let to = from + length + end.len();
                out = Cow::Owned(format!("{}{replacement}{}", &out[..from], &out[to..]));
            }
        }
    }
    for (fragment, replacement) in REPLACEMENTS {
        if out.contains(fragment) {
            out = Cow::Owned(out.replace(fragment, replacement));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_psql_fragments_change() {
        let quoted = format!(
            "DELETE FROM notes WHERE t <> '{}' AND id > 0{}",
            TRIGGERS_FRAGMENT,
            " ".repeat(200)
        );
        assert!(
            matches!(rewrite(&quoted), Cow::Borrowed(_)),
            "only psql's SELECTs"
        );
        let plain = "SELECT * FROM pg_catalog.pg_class WHERE relname = 'x' AND relkind = 'r' \
                     AND relnamespace = 2200 AND reltuples >= 0 AND relpages >= 0 \
                     AND relhasindex IN (true, false) ORDER BY relname, relkind";
        assert!(matches!(rewrite(plain), Cow::Borrowed(_)));
        let options = format!("SELECT c.relchecks, {} FROM pg_catalog.pg_class c LEFT JOIN pg_catalog.pg_class tc ON (c.reltoastrelid = tc.oid) WHERE c.oid = '1'", REPLACEMENTS[0].0);
        let rewritten = rewrite(&options);
        assert!(rewritten.contains("btrim(c.reloptions"));
        assert!(!rewritten.contains("unnest"));
        for (fragment, empty) in EMPTY_RESULTS {
            let query = format!(
                "SELECT t.tgname, {fragment} FROM pg_catalog.pg_trigger t \
                 WHERE t.tgrelid = '16384' AND NOT t.tgisinternal ORDER BY 1{}",
                " ".repeat(200)
            );
            assert_eq!(rewrite(&query), *empty);
        }
        let triggers = format!(
            "SELECT t.tgname, {TRIGGERS_FRAGMENT} FROM pg_catalog.pg_trigger t \
             WHERE t.tgrelid = '16384' AND NOT t.tgisinternal ORDER BY 1{}",
            " ".repeat(200)
        );
        assert!(rewrite(&triggers).contains("WHERE t.tgrelid = '16384' AND NOT t.tgisinternal"));
    }
}
