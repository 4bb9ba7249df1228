//! A few of pg_dump 15's catalog queries use features Shoal's planner lacks (table functions
//! over a column, `generate_series` bounded by a column, oid[] compared with an array literal)
//! on catalogs Shoal keeps empty: foreign-data options, row security policies, publications.
//! Those queries, recognised by fragments only they contain, are answered by simpler SQL with
//! the same columns and, on Shoal's catalogs, the same rows. Everything else pg_dump sends
//! runs as sent (see `tests/dump.rs`).

use std::borrow::Cow;

/// Stretches of pg_dump's SQL, from the first fragment to the end of the second, and what
/// replaces them: the options of foreign-data wrappers, servers and columns, which no Shoal
/// object has (`array_to_string` of no options is the empty string).
const SPANS: &[(&str, &str, &str)] = &[
    (
        "array_to_string(ARRAY(SELECT quote_ident(option_name) || ' ' || quote_literal(option_value) FROM pg_options_to_table(",
        "') AS ",
        "'' AS ",
    ),
    (
        "pg_catalog.array_to_string(ARRAY(SELECT pg_catalog.quote_ident(option_name) || ' ' || pg_catalog.quote_literal(option_value) FROM pg_catalog.pg_options_to_table(",
        "') AS ",
        "'' AS ",
    ),
];

/// Fragments of pg_dump's SQL and what replaces them.
const REPLACEMENTS: &[(&str, &str)] = &[
    // Tables: Shoal keeps reloptions as aclitem[]-style text, and no view has a check option.
    (
        "array_remove(array_remove(c.reloptions,'check_option=local'),'check_option=cascaded') AS reloptions",
        "c.reloptions AS reloptions",
    ),
    (
        "CASE WHEN 'check_option=local' = ANY (c.reloptions) THEN 'LOCAL'::text WHEN 'check_option=cascaded' = ANY (c.reloptions) THEN 'CASCADED'::text ELSE NULL END AS checkoption",
        "NULL::text AS checkoption",
    ),
    // Types: the first character of a name (a name subscripted is its "char").
    ("typname[0] = '_'", "substr(typname, 1, 1) = '_'"),
];

/// Whole queries over catalogs Shoal keeps empty, by a fragment only they contain, and the
/// empty result with their columns (pg_dump finds its columns by name).
const EMPTY_RESULTS: &[(&str, &str)] = &[
    (
        "JOIN pg_catalog.pg_policy pol ON (src.tbloid = pol.polrelid)",
        "SELECT NULL::oid AS oid, NULL::oid AS tableoid, NULL::oid AS polrelid, \
         NULL::text AS polname, NULL::text AS polcmd, NULL::boolean AS polpermissive, \
         NULL::text AS polroles, NULL::text AS polqual, NULL::text AS polwithcheck WHERE false",
    ),
    (
        "FROM pg_catalog.pg_publication_rel pr",
        "SELECT NULL::oid AS tableoid, NULL::oid AS oid, NULL::oid AS prpubid, \
         NULL::oid AS prrelid, NULL::text AS prrelqual, NULL::text AS prattrs WHERE false",
    ),
];

/// The SQL to run for `sql`: itself, unless it is one of pg_dump's queries above.
pub fn rewrite(sql: &str) -> Cow<'_, str> {
    // Cheap tests first: only one SELECT, as pg_dump sends them, never a statement that merely
    // quotes a fragment.
    let select = sql
        .strip_prefix("SELECT")
        .is_some_and(|rest| rest.starts_with(char::is_whitespace));
    if sql.len() < 100 || !select || sql.contains(';') {
        return Cow::Borrowed(sql);
    }
    for (fragment, empty) in EMPTY_RESULTS {
        if sql.contains(fragment) {
            return Cow::Owned((*empty).to_string());
        }
    }
    let mut out = Cow::Borrowed(sql);
    for (fragment, replacement) in REPLACEMENTS {
        if out.contains(fragment) {
            out = Cow::Owned(out.replace(fragment, replacement));
        }
    }
    for (start, end, replacement) in SPANS {
        while let Some(from) = out.find(start) {
            let Some(length) = out[from..].find(end) else {
                break;
            };
            let to = from + length + end.len();
            out = Cow::Owned(format!("{}{replacement}{}", &out[..from], &out[to..]));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_become_empty_strings() {
        let fdw = "SELECT tableoid, oid, fdwname, array_to_string(ARRAY(SELECT quote_ident(option_name) || ' ' || quote_literal(option_value) FROM pg_options_to_table(fdwoptions) ORDER BY option_name), E',\n    ') AS fdwoptions FROM pg_foreign_data_wrapper";
        assert_eq!(
            rewrite(fdw),
            "SELECT tableoid, oid, fdwname, '' AS fdwoptions FROM pg_foreign_data_wrapper"
        );
    }

    #[test]
    fn only_pg_dump_selects_change() {
        let quoted = format!(
            "DELETE FROM notes WHERE t <> '{}' AND id > 0{}",
            EMPTY_RESULTS[0].0,
            " ".repeat(100)
        );
        assert!(matches!(rewrite(&quoted), Cow::Borrowed(_)));
        let policies = format!(
            "SELECT pol.oid FROM unnest('{{1}}'::pg_catalog.oid[]) AS src(tbloid)\n\t{}",
            EMPTY_RESULTS[0].0
        );
        assert_eq!(rewrite(&policies), EMPTY_RESULTS[0].1);
    }
}
