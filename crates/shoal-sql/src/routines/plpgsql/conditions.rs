//! PL/pgSQL's condition names (PostgreSQL's Appendix A) and which errors a handler's
//! `WHEN condition` catches.

use shoal_plpgsql::Condition;

/// Condition names and their SQLSTATEs. A code ending in `000` names a class: it catches
/// every code of the class.
const CONDITIONS: &[(&str, &str)] = &[
    ("successful_completion", "00000"),
    ("warning", "01000"),
    ("no_data", "02000"),
    ("sql_statement_not_yet_complete", "03000"),
    ("connection_exception", "08000"),
    ("feature_not_supported", "0A000"),
    ("invalid_transaction_initiation", "0B000"),
    ("cardinality_violation", "21000"),
    ("data_exception", "22000"),
    ("array_subscript_error", "2202E"),
    ("character_not_in_repertoire", "22021"),
    ("datetime_field_overflow", "22008"),
    ("division_by_zero", "22012"),
    ("invalid_datetime_format", "22007"),
    ("interval_field_overflow", "22015"),
    ("invalid_parameter_value", "22023"),
    ("invalid_text_representation", "22P02"),
    ("invalid_escape_sequence", "22025"),
    ("null_value_not_allowed", "22004"),
    ("numeric_value_out_of_range", "22003"),
    ("string_data_right_truncation", "22001"),
    ("invalid_regular_expression", "2201B"),
    ("invalid_row_count_in_limit_clause", "2201W"),
    ("invalid_argument_for_logarithm", "2201E"),
    ("invalid_argument_for_power_function", "2201F"),
    ("sequence_generator_limit_exceeded", "2200H"),
    ("invalid_json_text", "22032"),
    ("integrity_constraint_violation", "23000"),
    ("restrict_violation", "23001"),
    ("not_null_violation", "23502"),
    ("foreign_key_violation", "23503"),
    ("unique_violation", "23505"),
    ("check_violation", "23514"),
    ("exclusion_violation", "23P01"),
    ("invalid_cursor_state", "24000"),
    ("invalid_transaction_state", "25000"),
    ("active_sql_transaction", "25001"),
    ("read_only_sql_transaction", "25006"),
    ("no_active_sql_transaction", "25P01"),
    ("in_failed_sql_transaction", "25P02"),
    ("invalid_sql_statement_name", "26000"),
    ("triggered_data_change_violation", "27000"),
    ("invalid_authorization_specification", "28000"),
    ("invalid_password", "28P01"),
    ("invalid_transaction_termination", "2D000"),
    ("invalid_cursor_name", "34000"),
    ("invalid_savepoint_specification", "3B001"),
    ("invalid_schema_name", "3F000"),
    ("transaction_rollback", "40000"),
    ("serialization_failure", "40001"),
    ("deadlock_detected", "40P01"),
    ("syntax_error_or_access_rule_violation", "42000"),
    ("syntax_error", "42601"),
    ("insufficient_privilege", "42501"),
    ("undefined_column", "42703"),
    ("undefined_function", "42883"),
    ("undefined_table", "42P01"),
    ("undefined_parameter", "42P02"),
    ("undefined_object", "42704"),
    ("duplicate_column", "42701"),
    ("duplicate_cursor", "42P03"),
    ("duplicate_database", "42P04"),
    ("duplicate_function", "42723"),
    ("duplicate_schema", "42P06"),
    ("duplicate_table", "42P07"),
    ("duplicate_alias", "42712"),
    ("duplicate_object", "42710"),
    ("ambiguous_column", "42702"),
    ("ambiguous_function", "42725"),
    ("datatype_mismatch", "42804"),
    ("wrong_object_type", "42809"),
    ("invalid_function_definition", "42P13"),
    ("invalid_name", "42602"),
    ("program_limit_exceeded", "54000"),
    ("statement_too_complex", "54001"),
    ("object_not_in_prerequisite_state", "55000"),
    ("object_in_use", "55006"),
    ("lock_not_available", "55P03"),
    ("operator_intervention", "57000"),
    ("query_canceled", "57014"),
    ("admin_shutdown", "57P01"),
    ("insufficient_resources", "53000"),
    ("out_of_memory", "53200"),
    ("plpgsql_error", "P0000"),
    ("raise_exception", "P0001"),
    ("no_data_found", "P0002"),
    ("too_many_rows", "P0003"),
    ("assert_failure", "P0004"),
    ("internal_error", "XX000"),
];

/// The SQLSTATE of a condition name, if PostgreSQL knows it.
pub fn sqlstate_of(name: &str) -> Option<&'static str> {
    CONDITIONS.iter().find(|(n, _)| *n == name).map(|(_, c)| *c)
}

/// Whether `condition` is a name PostgreSQL knows (or `others`).
pub fn is_known(condition: &Condition) -> bool {
    match condition {
        Condition::Name(n) => n == "others" || sqlstate_of(n).is_some(),
        Condition::SqlState(_) => true,
    }
}

/// Whether a handler for `condition` catches an error with SQLSTATE `code`.
pub fn catches(condition: &Condition, code: &str) -> bool {
    let wanted = match condition {
        // As PostgreSQL: OTHERS is every error but a cancel and a failed ASSERT.
        Condition::Name(n) if n == "others" => return code != "57014" && code != "P0004",
        Condition::Name(n) => match sqlstate_of(n) {
            Some(c) => c,
            None => return false,
        },
        Condition::SqlState(s) => s.as_str(),
    };
    if wanted.len() == 5 && wanted.ends_with("000") {
        code.starts_with(&wanted[..2])
    } else {
        code == wanted
    }
}

/// A SQLSTATE with a static lifetime, as errors carry it. PostgreSQL's codes come from the
/// table; a user's own (RAISE ... USING ERRCODE = 'U0001') is interned once, so the set
/// stays as small as the number of distinct codes written in functions.
pub fn static_code(code: &str) -> &'static str {
    if let Some((_, c)) = CONDITIONS.iter().find(|(_, c)| *c == code) {
        return c;
    }
    static INTERNED: std::sync::LazyLock<
        parking_lot::Mutex<std::collections::HashSet<&'static str>>,
    > = std::sync::LazyLock::new(Default::default);
    let mut set = INTERNED.lock();
    if let Some(c) = set.get(code) {
        return c;
    }
    let leaked: &'static str = Box::leak(code.to_string().into_boxed_str());
    set.insert(leaked);
    leaked
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_catch_their_codes_and_others_skips_cancel() {
        let class = Condition::Name("integrity_constraint_violation".into());
        assert!(catches(&class, "23505"));
        assert!(!catches(&class, "22012"));
        assert!(catches(
            &Condition::Name("division_by_zero".into()),
            "22012"
        ));
        assert!(catches(&Condition::SqlState("22012".into()), "22012"));
        let others = Condition::Name("others".into());
        assert!(catches(&others, "P0001"));
        assert!(!catches(&others, "57014"));
        // A user's code is interned once: the same text gives the same string.
        assert!(std::ptr::eq(
            static_code("U0001"),
            static_code(&format!("U000{}", 1))
        ));
    }
}
