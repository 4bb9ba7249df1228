//! What pg_settings says about each setting besides its value: PostgreSQL 15's unit,
//! category, description, context, type, bounds and choices (taken from PostgreSQL 15's own
//! pg_settings, so tools that read them find what they expect). Settings PostgreSQL hides from
//! SHOW ALL and pg_settings (`role`, `session_authorization`, `is_superuser`) have no entry.

/// One setting's description.
#[derive(Debug)]
pub struct SettingInfo {
    /// The name, spelled as PostgreSQL shows it (`DateStyle`).
    pub name: &'static str,
    /// The unit of `setting` (`ms`, `s`, `kB`), for integer settings that have one.
    pub unit: Option<&'static str>,
    pub category: &'static str,
    pub short_desc: &'static str,
    /// Who may change it, and when: `user`, `superuser`, `sighup`, `postmaster`, `internal`.
    pub context: &'static str,
    /// `bool`, `integer`, `real`, `string` or `enum`.
    pub vartype: &'static str,
    pub min_val: Option<&'static str>,
    pub max_val: Option<&'static str>,
    /// The choices of an enum, comma-separated.
    pub enumvals: Option<&'static str>,
}

/// Every setting pg_settings lists, by lower-case name, in name order.
const SETTINGS: &[(&str, SettingInfo)] = &[
    (
        "application_name",
        SettingInfo {
            name: "application_name",
            unit: None,
            category: "Reporting and Logging / What to Log",
            short_desc: "Sets the application name to be reported in statistics and logs.",
            context: "user",
            vartype: "string",
            min_val: None,
            max_val: None,
            enumvals: None,
        },
    ),
    (
        "archive_command",
        SettingInfo {
            name: "archive_command",
            unit: None,
            category: "Write-Ahead Log / Archiving",
            short_desc: "Sets the shell command that will be called to archive a WAL file.",
            context: "sighup",
            vartype: "string",
            min_val: None,
            max_val: None,
            enumvals: None,
        },
    ),
    (
        "archive_mode",
        SettingInfo {
            name: "archive_mode",
            unit: None,
            category: "Write-Ahead Log / Archiving",
            short_desc: "Allows archiving of WAL files using archive_command.",
            context: "postmaster",
            vartype: "enum",
            min_val: None,
            max_val: None,
            enumvals: Some("always,on,off"),
        },
    ),
    (
        "authentication_timeout",
        SettingInfo {
            name: "authentication_timeout",
            unit: Some("s"),
            category: "Connections and Authentication / Authentication",
            short_desc: "Sets the maximum allowed time to complete client authentication.",
            context: "sighup",
            vartype: "integer",
            min_val: Some("1"),
            max_val: Some("600"),
            enumvals: None,
        },
    ),
    (
        "bytea_output",
        SettingInfo {
            name: "bytea_output",
            unit: None,
            category: "Client Connection Defaults / Statement Behavior",
            short_desc: "Sets the output format for bytea.",
            context: "user",
            vartype: "enum",
            min_val: None,
            max_val: None,
            enumvals: Some("escape,hex"),
        },
    ),
    (
        "check_function_bodies",
        SettingInfo {
            name: "check_function_bodies",
            unit: None,
            category: "Client Connection Defaults / Statement Behavior",
            short_desc: "Check routine bodies during CREATE FUNCTION and CREATE PROCEDURE.",
            context: "user",
            vartype: "bool",
            min_val: None,
            max_val: None,
            enumvals: None,
        },
    ),
    (
        "client_encoding",
        SettingInfo {
            name: "client_encoding",
            unit: None,
            category: "Client Connection Defaults / Locale and Formatting",
            short_desc: "Sets the client's character set encoding.",
            context: "user",
            vartype: "string",
            min_val: None,
            max_val: None,
            enumvals: None,
        },
    ),
    (
        "client_min_messages",
        SettingInfo {
            name: "client_min_messages",
            unit: None,
            category: "Client Connection Defaults / Statement Behavior",
            short_desc: "Sets the message levels that are sent to the client.",
            context: "user",
            vartype: "enum",
            min_val: None,
            max_val: None,
            enumvals: Some("debug5,debug4,debug3,debug2,debug1,log,notice,warning,error"),
        },
    ),
    (
        "datestyle",
        SettingInfo {
            name: "DateStyle",
            unit: None,
            category: "Client Connection Defaults / Locale and Formatting",
            short_desc: "Sets the display format for date and time values.",
            context: "user",
            vartype: "string",
            min_val: None,
            max_val: None,
            enumvals: None,
        },
    ),
    (
        "default_table_access_method",
        SettingInfo {
            name: "default_table_access_method",
            unit: None,
            category: "Client Connection Defaults / Statement Behavior",
            short_desc: "Sets the default table access method for new tables.",
            context: "user",
            vartype: "string",
            min_val: None,
            max_val: None,
            enumvals: None,
        },
    ),
    (
        "default_tablespace",
        SettingInfo {
            name: "default_tablespace",
            unit: None,
            category: "Client Connection Defaults / Statement Behavior",
            short_desc: "Sets the default tablespace to create tables and indexes in.",
            context: "user",
            vartype: "string",
            min_val: None,
            max_val: None,
            enumvals: None,
        },
    ),
    (
        "default_transaction_deferrable",
        SettingInfo {
            name: "default_transaction_deferrable",
            unit: None,
            category: "Client Connection Defaults / Statement Behavior",
            short_desc: "Sets the default deferrable status of new transactions.",
            context: "user",
            vartype: "bool",
            min_val: None,
            max_val: None,
            enumvals: None,
        },
    ),
    (
        "default_transaction_isolation",
        SettingInfo {
            name: "default_transaction_isolation",
            unit: None,
            category: "Client Connection Defaults / Statement Behavior",
            short_desc: "Sets the transaction isolation level of each new transaction.",
            context: "user",
            vartype: "enum",
            min_val: None,
            max_val: None,
            enumvals: Some("serializable,repeatable read,read committed,read uncommitted"),
        },
    ),
    (
        "default_transaction_read_only",
        SettingInfo {
            name: "default_transaction_read_only",
            unit: None,
            category: "Client Connection Defaults / Statement Behavior",
            short_desc: "Sets the default read-only status of new transactions.",
            context: "user",
            vartype: "bool",
            min_val: None,
            max_val: None,
            enumvals: None,
        },
    ),
    (
        "enable_seqscan",
        SettingInfo {
            name: "enable_seqscan",
            unit: None,
            category: "Query Tuning / Planner Method Configuration",
            short_desc: "Enables the planner's use of sequential-scan plans.",
            context: "user",
            vartype: "bool",
            min_val: None,
            max_val: None,
            enumvals: None,
        },
    ),
    (
        "escape_string_warning",
        SettingInfo {
            name: "escape_string_warning",
            unit: None,
            category: "Version and Platform Compatibility / Previous PostgreSQL Versions",
            short_desc: "Warn about backslash escapes in ordinary string literals.",
            context: "user",
            vartype: "bool",
            min_val: None,
            max_val: None,
            enumvals: None,
        },
    ),
    (
        "extra_float_digits",
        SettingInfo {
            name: "extra_float_digits",
            unit: None,
            category: "Client Connection Defaults / Locale and Formatting",
            short_desc: "Sets the number of digits displayed for floating-point values.",
            context: "user",
            vartype: "integer",
            min_val: Some("-15"),
            max_val: Some("3"),
            enumvals: None,
        },
    ),
    (
        "idle_in_transaction_session_timeout",
        SettingInfo {
            name: "idle_in_transaction_session_timeout",
            unit: Some("ms"),
            category: "Client Connection Defaults / Statement Behavior",
            short_desc: "Sets the maximum allowed idle time between queries, when in a transaction.",
            context: "user",
            vartype: "integer",
            min_val: Some("0"),
            max_val: Some("2147483647"),
            enumvals: None,
        },
    ),
    (
        "idle_session_timeout",
        SettingInfo {
            name: "idle_session_timeout",
            unit: Some("ms"),
            category: "Client Connection Defaults / Statement Behavior",
            short_desc: "Sets the maximum allowed idle time between queries, when not in a transaction.",
            context: "user",
            vartype: "integer",
            min_val: Some("0"),
            max_val: Some("2147483647"),
            enumvals: None,
        },
    ),
    (
        "in_hot_standby",
        SettingInfo {
            name: "in_hot_standby",
            unit: None,
            category: "Preset Options",
            short_desc: "Shows whether hot standby is currently active.",
            context: "internal",
            vartype: "bool",
            min_val: None,
            max_val: None,
            enumvals: None,
        },
    ),
    (
        "integer_datetimes",
        SettingInfo {
            name: "integer_datetimes",
            unit: None,
            category: "Preset Options",
            short_desc: "Shows whether datetimes are integer based.",
            context: "internal",
            vartype: "bool",
            min_val: None,
            max_val: None,
            enumvals: None,
        },
    ),
    (
        "intervalstyle",
        SettingInfo {
            name: "IntervalStyle",
            unit: None,
            category: "Client Connection Defaults / Locale and Formatting",
            short_desc: "Sets the display format for interval values.",
            context: "user",
            vartype: "enum",
            min_val: None,
            max_val: None,
            enumvals: Some("postgres,postgres_verbose,sql_standard,iso_8601"),
        },
    ),
    (
        "jit",
        SettingInfo {
            name: "jit",
            unit: None,
            category: "Query Tuning / Other Planner Options",
            short_desc: "Allow JIT compilation.",
            context: "user",
            vartype: "bool",
            min_val: None,
            max_val: None,
            enumvals: None,
        },
    ),
    (
        "lc_messages",
        SettingInfo {
            name: "lc_messages",
            unit: None,
            category: "Client Connection Defaults / Locale and Formatting",
            short_desc: "Sets the language in which messages are displayed.",
            context: "superuser",
            vartype: "string",
            min_val: None,
            max_val: None,
            enumvals: None,
        },
    ),
    (
        "lc_monetary",
        SettingInfo {
            name: "lc_monetary",
            unit: None,
            category: "Client Connection Defaults / Locale and Formatting",
            short_desc: "Sets the locale for formatting monetary amounts.",
            context: "user",
            vartype: "string",
            min_val: None,
            max_val: None,
            enumvals: None,
        },
    ),
    (
        "lc_numeric",
        SettingInfo {
            name: "lc_numeric",
            unit: None,
            category: "Client Connection Defaults / Locale and Formatting",
            short_desc: "Sets the locale for formatting numbers.",
            context: "user",
            vartype: "string",
            min_val: None,
            max_val: None,
            enumvals: None,
        },
    ),
    (
        "lc_time",
        SettingInfo {
            name: "lc_time",
            unit: None,
            category: "Client Connection Defaults / Locale and Formatting",
            short_desc: "Sets the locale for formatting date and time values.",
            context: "user",
            vartype: "string",
            min_val: None,
            max_val: None,
            enumvals: None,
        },
    ),
    (
        "lock_timeout",
        SettingInfo {
            name: "lock_timeout",
            unit: Some("ms"),
            category: "Client Connection Defaults / Statement Behavior",
            short_desc: "Sets the maximum allowed duration of any wait for a lock.",
            context: "user",
            vartype: "integer",
            min_val: Some("0"),
            max_val: Some("2147483647"),
            enumvals: None,
        },
    ),
    (
        "log_destination",
        SettingInfo {
            name: "log_destination",
            unit: None,
            category: "Reporting and Logging / Where to Log",
            short_desc: "Sets the destination for server log output.",
            context: "postmaster",
            vartype: "string",
            min_val: None,
            max_val: None,
            enumvals: None,
        },
    ),
    (
        "log_min_duration_statement",
        SettingInfo {
            name: "log_min_duration_statement",
            unit: Some("ms"),
            category: "Reporting and Logging / When to Log",
            short_desc: "Sets the minimum execution time above which all statements will be logged.",
            context: "superuser",
            vartype: "integer",
            min_val: Some("-1"),
            max_val: Some("2147483647"),
            enumvals: None,
        },
    ),
    (
        "maintenance_work_mem",
        SettingInfo {
            name: "maintenance_work_mem",
            unit: Some("kB"),
            category: "Resource Usage / Memory",
            short_desc: "Sets the maximum memory to be used for maintenance operations.",
            context: "user",
            vartype: "integer",
            min_val: Some("1024"),
            max_val: Some("2147483647"),
            enumvals: None,
        },
    ),
    (
        "max_connections",
        SettingInfo {
            name: "max_connections",
            unit: None,
            category: "Connections and Authentication / Connection Settings",
            short_desc: "Sets the maximum number of concurrent connections.",
            context: "postmaster",
            vartype: "integer",
            min_val: Some("1"),
            max_val: Some("262143"),
            enumvals: None,
        },
    ),
    (
        "max_identifier_length",
        SettingInfo {
            name: "max_identifier_length",
            unit: None,
            category: "Preset Options",
            short_desc: "Shows the maximum identifier length.",
            context: "internal",
            vartype: "integer",
            min_val: Some("63"),
            max_val: Some("63"),
            enumvals: None,
        },
    ),
    (
        "pg_stat_statements.track",
        SettingInfo {
            name: "pg_stat_statements.track",
            unit: None,
            category: "Customized Options",
            short_desc: "Selects which statements are tracked by pg_stat_statements.",
            context: "superuser",
            vartype: "enum",
            min_val: None,
            max_val: None,
            enumvals: Some("none,top,all"),
        },
    ),
    (
        "pg_stat_statements.track_utility",
        SettingInfo {
            name: "pg_stat_statements.track_utility",
            unit: None,
            category: "Customized Options",
            short_desc: "Selects whether utility commands are tracked by pg_stat_statements.",
            context: "superuser",
            vartype: "bool",
            min_val: None,
            max_val: None,
            enumvals: None,
        },
    ),
    (
        "recovery_target_time",
        SettingInfo {
            name: "recovery_target_time",
            unit: None,
            category: "Write-Ahead Log / Recovery Target",
            short_desc: "Sets the time stamp up to which recovery will proceed.",
            context: "postmaster",
            vartype: "string",
            min_val: None,
            max_val: None,
            enumvals: None,
        },
    ),
    (
        "restore_command",
        SettingInfo {
            name: "restore_command",
            unit: None,
            category: "Write-Ahead Log / Archive Recovery",
            short_desc: "Sets the shell command that will be called to retrieve an archived WAL file.",
            context: "postmaster",
            vartype: "string",
            min_val: None,
            max_val: None,
            enumvals: None,
        },
    ),
    (
        "row_security",
        SettingInfo {
            name: "row_security",
            unit: None,
            category: "Client Connection Defaults / Statement Behavior",
            short_desc: "Enable row security.",
            context: "user",
            vartype: "bool",
            min_val: None,
            max_val: None,
            enumvals: None,
        },
    ),
    (
        "search_path",
        SettingInfo {
            name: "search_path",
            unit: None,
            category: "Client Connection Defaults / Statement Behavior",
            short_desc: "Sets the schema search order for names that are not schema-qualified.",
            context: "user",
            vartype: "string",
            min_val: None,
            max_val: None,
            enumvals: None,
        },
    ),
    (
        "server_encoding",
        SettingInfo {
            name: "server_encoding",
            unit: None,
            category: "Preset Options",
            short_desc: "Shows the server (database) character set encoding.",
            context: "internal",
            vartype: "string",
            min_val: None,
            max_val: None,
            enumvals: None,
        },
    ),
    (
        "server_version",
        SettingInfo {
            name: "server_version",
            unit: None,
            category: "Preset Options",
            short_desc: "Shows the server version.",
            context: "internal",
            vartype: "string",
            min_val: None,
            max_val: None,
            enumvals: None,
        },
    ),
    (
        "server_version_num",
        SettingInfo {
            name: "server_version_num",
            unit: None,
            category: "Preset Options",
            short_desc: "Shows the server version as an integer.",
            context: "internal",
            vartype: "integer",
            min_val: Some("150020"),
            max_val: Some("150020"),
            enumvals: None,
        },
    ),
    (
        "shoal.max_memory",
        SettingInfo {
            name: "shoal.max_memory",
            unit: None,
            category: "Resource Usage / Memory",
            short_desc: "Sets the memory at which writes that add rows fail with out of memory (a size, or a share of the machine's memory).",
            context: "sighup",
            vartype: "string",
            min_val: None,
            max_val: None,
            enumvals: None,
        },
    ),
    (
        "ssl",
        SettingInfo {
            name: "ssl",
            unit: None,
            category: "Connections and Authentication / SSL",
            short_desc: "Enables SSL connections.",
            context: "sighup",
            vartype: "bool",
            min_val: None,
            max_val: None,
            enumvals: None,
        },
    ),
    (
        "standard_conforming_strings",
        SettingInfo {
            name: "standard_conforming_strings",
            unit: None,
            category: "Version and Platform Compatibility / Previous PostgreSQL Versions",
            short_desc: "Causes '...' strings to treat backslashes literally.",
            context: "user",
            vartype: "bool",
            min_val: None,
            max_val: None,
            enumvals: None,
        },
    ),
    (
        "statement_timeout",
        SettingInfo {
            name: "statement_timeout",
            unit: Some("ms"),
            category: "Client Connection Defaults / Statement Behavior",
            short_desc: "Sets the maximum allowed duration of any statement.",
            context: "user",
            vartype: "integer",
            min_val: Some("0"),
            max_val: Some("2147483647"),
            enumvals: None,
        },
    ),
    (
        "superuser_reserved_connections",
        SettingInfo {
            name: "superuser_reserved_connections",
            unit: None,
            category: "Connections and Authentication / Connection Settings",
            short_desc: "Sets the number of connection slots reserved for superusers.",
            context: "postmaster",
            vartype: "integer",
            min_val: Some("0"),
            max_val: Some("262143"),
            enumvals: None,
        },
    ),
    (
        "synchronize_seqscans",
        SettingInfo {
            name: "synchronize_seqscans",
            unit: None,
            category: "Version and Platform Compatibility / Previous PostgreSQL Versions",
            short_desc: "Enable synchronized sequential scans.",
            context: "user",
            vartype: "bool",
            min_val: None,
            max_val: None,
            enumvals: None,
        },
    ),
    (
        "synchronous_commit",
        SettingInfo {
            name: "synchronous_commit",
            unit: None,
            category: "Write-Ahead Log / Settings",
            short_desc: "Sets the current transaction's synchronization level.",
            context: "user",
            vartype: "enum",
            min_val: None,
            max_val: None,
            enumvals: Some("local,remote_write,remote_apply,on,off"),
        },
    ),
    (
        "synchronous_standby_names",
        SettingInfo {
            name: "synchronous_standby_names",
            unit: None,
            category: "Replication / Primary Server",
            short_desc: "Number of synchronous standbys and list of names of potential synchronous ones.",
            context: "sighup",
            vartype: "string",
            min_val: None,
            max_val: None,
            enumvals: None,
        },
    ),
    (
        "timezone",
        SettingInfo {
            name: "TimeZone",
            unit: None,
            category: "Client Connection Defaults / Locale and Formatting",
            short_desc: "Sets the time zone for displaying and interpreting time stamps.",
            context: "user",
            vartype: "string",
            min_val: None,
            max_val: None,
            enumvals: None,
        },
    ),
    (
        "transaction_deferrable",
        SettingInfo {
            name: "transaction_deferrable",
            unit: None,
            category: "Client Connection Defaults / Statement Behavior",
            short_desc: "Whether to defer a read-only serializable transaction until it can be executed with no possible serialization failures.",
            context: "user",
            vartype: "bool",
            min_val: None,
            max_val: None,
            enumvals: None,
        },
    ),
    (
        "transaction_isolation",
        SettingInfo {
            name: "transaction_isolation",
            unit: None,
            category: "Client Connection Defaults / Statement Behavior",
            short_desc: "Sets the current transaction's isolation level.",
            context: "user",
            vartype: "enum",
            min_val: None,
            max_val: None,
            enumvals: Some("serializable,repeatable read,read committed,read uncommitted"),
        },
    ),
    (
        "transaction_read_only",
        SettingInfo {
            name: "transaction_read_only",
            unit: None,
            category: "Client Connection Defaults / Statement Behavior",
            short_desc: "Sets the current transaction's read-only status.",
            context: "user",
            vartype: "bool",
            min_val: None,
            max_val: None,
            enumvals: None,
        },
    ),
    (
        "work_mem",
        SettingInfo {
            name: "work_mem",
            unit: Some("kB"),
            category: "Resource Usage / Memory",
            short_desc: "Sets the maximum memory to be used for query workspaces.",
            context: "user",
            vartype: "integer",
            min_val: Some("64"),
            max_val: Some("2147483647"),
            enumvals: None,
        },
    ),
    (
        "xmloption",
        SettingInfo {
            name: "xmloption",
            unit: None,
            category: "Client Connection Defaults / Statement Behavior",
            short_desc: "Sets whether XML data in implicit parsing and serialization operations is to be considered as documents or content fragments.",
            context: "user",
            vartype: "enum",
            min_val: None,
            max_val: None,
            enumvals: Some("content,document"),
        },
    ),
];

/// The description of the setting `name` (lower case); None for a setting pg_settings hides.
pub fn info(name: &str) -> Option<&'static SettingInfo> {
    SETTINGS
        .binary_search_by(|(n, _)| (*n).cmp(name))
        .ok()
        .map(|at| &SETTINGS[at].1)
}

/// A value as pg_settings' `setting` column gives it: an integer setting with a unit in that
/// unit (`5s` of a setting in ms is `5000`, `4MB` of one in kB is `4096`), anything else as is.
pub fn in_unit(info: &SettingInfo, value: &str) -> String {
    let converted = match info.unit {
        Some("ms") => crate::settings::parse_duration_ms(value),
        Some("s") => crate::settings::parse_duration_ms(value).map(|ms| ms / 1000),
        Some("kB") => kilobytes(value),
        _ => None,
    };
    converted.map_or_else(|| value.to_string(), |n| n.to_string())
}

/// A memory size (`4MB`, `64kB`, `1GB`, a bare number of kB) in kB.
fn kilobytes(value: &str) -> Option<u64> {
    let value = value.trim();
    let digits = value
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(value.len());
    let n: u64 = value[..digits].parse().ok()?;
    let factor = match value[digits..].trim() {
        "" | "kB" => 1,
        "MB" => 1024,
        "GB" => 1024 * 1024,
        "TB" => 1024 * 1024 * 1024,
        _ => return None,
    };
    Some(n * factor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptions_are_found_and_values_given_in_their_unit() {
        assert!(
            SETTINGS.windows(2).all(|w| w[0].0 < w[1].0),
            "sorted by name"
        );
        let timeout = info("statement_timeout").unwrap();
        assert_eq!((timeout.unit, timeout.vartype), (Some("ms"), "integer"));
        assert_eq!(in_unit(timeout, "5s"), "5000");
        assert_eq!(in_unit(info("work_mem").unwrap(), "4MB"), "4096");
        assert_eq!(
            in_unit(info("authentication_timeout").unwrap(), "1min"),
            "60"
        );
        assert_eq!(info("datestyle").unwrap().name, "DateStyle");
        assert_eq!(in_unit(info("search_path").unwrap(), "a, b"), "a, b");
        assert!(info("role").is_none());
        for (name, _, _) in crate::settings::KNOWN_SETTINGS {
            let hidden = ["role", "session_authorization", "is_superuser"].contains(name);
            assert_eq!(info(name).is_none(), hidden, "{name}");
        }
    }
}
