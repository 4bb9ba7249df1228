//! Session settings (PostgreSQL's GUCs) for SET, SHOW, RESET and SET LOCAL: the parameters
//! clients set and read, with PostgreSQL's defaults and spellings. Settings that PostgreSQL
//! reports to the client when they change (GUC_REPORT) are returned to the protocol layer so it
//! can send ParameterStatus.

use std::collections::HashMap;

use crate::error::{code, SqlError, SqlResult};
use crate::timezone::TimeZone;

/// (name, default value, reported to the client on change)
pub(crate) const KNOWN_SETTINGS: &[(&str, &str, bool)] = &[
    ("application_name", "", true),
    ("client_encoding", "UTF8", true),
    ("client_min_messages", "notice", false),
    ("datestyle", "ISO, MDY", true),
    ("default_transaction_isolation", "read committed", false),
    ("default_transaction_read_only", "off", true),
    ("extra_float_digits", "1", false),
    ("integer_datetimes", "on", true),
    ("intervalstyle", "postgres", true),
    ("is_superuser", "on", true),
    ("lc_messages", "C", false),
    ("lc_monetary", "C", false),
    ("lc_numeric", "C", false),
    ("lc_time", "C", false),
    ("lock_timeout", "0", false),
    ("idle_in_transaction_session_timeout", "0", false),
    ("idle_session_timeout", "0", false),
    ("max_connections", "1000", false),
    ("max_identifier_length", "63", false),
    ("search_path", "\"$user\", public", false),
    ("server_encoding", "UTF8", true),
    ("server_version", crate::engine::SERVER_VERSION, true),
    ("server_version_num", "150000", false),
    ("session_authorization", "postgres", true),
    // SET ROLE's role; `none`: the session user.
    ("role", "none", false),
    ("standard_conforming_strings", "on", true),
    ("statement_timeout", "0", false),
    ("synchronous_commit", "on", false),
    ("synchronous_standby_names", "", false),
    ("timezone", "UTC", true),
    ("transaction_isolation", "read committed", false),
    ("transaction_read_only", "off", false),
    ("transaction_deferrable", "off", false),
    ("default_transaction_deferrable", "off", false),
    ("bytea_output", "hex", false),
    ("enable_seqscan", "on", false),
    ("jit", "off", false),
    ("work_mem", "4MB", false),
    ("maintenance_work_mem", "64MB", false),
    ("row_security", "on", false),
    ("xmloption", "content", false),
    // Read by pg_dump's scripts; Shoal has no function bodies to check, no tablespaces but
    // the default, and no synchronized scans, so only their values are kept.
    ("check_function_bodies", "on", false),
    ("default_tablespace", "", false),
    ("synchronize_seqscans", "on", false),
    // Statements that run at least this long are logged with their duration (-1: none).
    ("log_min_duration_statement", "-1", false),
    // The server log's format: text lines, or (jsonlog) JSON lines. PostgreSQL's name for the
    // default is kept, though Shoal writes its log to standard output.
    ("log_destination", "stderr", false),
    // Archiving of completed log segments, and archive recovery (`durability::archive`).
    ("archive_mode", "off", false),
    ("archive_command", "", false),
    ("restore_command", "", false),
    ("recovery_target_time", "", false),
    // pg_stat_statements: which statements are counted (top: those clients send; Shoal runs
    // no nested statements, so all counts the same), and whether utility statements are.
    ("pg_stat_statements.track", "top", false),
    ("pg_stat_statements.track_utility", "on", false),
    ("default_table_access_method", "heap", false),
    ("escape_string_warning", "on", false),
    ("in_hot_standby", "off", true),
    ("ssl", "off", false),
    ("superuser_reserved_connections", "3", false),
    ("authentication_timeout", "1min", false),
    (
        crate::memory_limit::SETTING,
        crate::memory_limit::DEFAULT,
        false,
    ),
];

/// A setting's built-in default (pg_settings.boot_val).
pub fn builtin_default(name: &str) -> Option<&'static str> {
    KNOWN_SETTINGS
        .iter()
        .find(|(n, _, _)| *n == name)
        .map(|(_, v, _)| *v)
}

/// Whether `name` (lower case) is one of the settings Shoal knows.
pub fn is_known(name: &str) -> bool {
    KNOWN_SETTINGS.iter().any(|(n, _, _)| *n == name)
}

/// Canonical (ParameterStatus) spelling of reported settings.
pub fn reported_name(name: &str) -> &str {
    match name {
        "datestyle" => "DateStyle",
        "timezone" => "TimeZone",
        "intervalstyle" => "IntervalStyle",
        other => other,
    }
}

#[derive(Debug)]
pub struct Settings {
    values: HashMap<String, String>,
    /// The settings changed inside the current transaction block, for its end.
    txn_changes: HashMap<String, TxnChange>,
    /// Bumped by every change to `values`, so the session copies them to its plan scope only
    /// when they moved (copying on every statement cost a quarter of a point select).
    generation: u64,
    /// `statement_timeout` and `lock_timeout` in milliseconds (0: none), kept parsed because
    /// every statement reads them.
    statement_timeout_ms: u64,
    lock_timeout_ms: u64,
    /// `timezone`, kept parsed for the same reason.
    time_zone: TimeZone,
    /// Values the client's startup packet gave: RESET returns to these, as in PostgreSQL.
    startup_values: HashMap<String, String>,
    /// The server-wide values (postgresql.conf, ALTER SYSTEM, `-c`) the session took.
    server_values: std::collections::BTreeMap<String, String>,
    /// The names the client's startup packet set (a server-wide value does not replace them).
    client_names: std::collections::HashSet<String>,
}

/// How a setting changed inside a transaction block: the value it had before the block (what
/// ROLLBACK restores, and what COMMIT restores after only SET LOCAL), and the value of the last
/// plain SET, which COMMIT keeps.
#[derive(Debug)]
struct TxnChange {
    before: String,
    kept_on_commit: Option<String>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            values: KNOWN_SETTINGS
                .iter()
                .map(|(n, v, _)| (n.to_string(), v.to_string()))
                .collect(),
            txn_changes: HashMap::new(),
            generation: 0,
            statement_timeout_ms: 0,
            lock_timeout_ms: 0,
            time_zone: TimeZone::utc(),
            startup_values: HashMap::new(),
            server_values: Default::default(),
            client_names: Default::default(),
        }
    }
}

impl Settings {
    pub fn get(&self, name: &str) -> Option<&str> {
        let value = if name.bytes().any(|b| b.is_ascii_uppercase()) {
            self.values.get(&name.to_lowercase())
        } else {
            self.values.get(name) // the common case, without allocating
        };
        value.map(|s| s.as_str())
    }

    pub fn all(&self) -> &HashMap<String, String> {
        &self.values
    }

    /// Changes whenever any value changes.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    pub fn statement_timeout_ms(&self) -> u64 {
        self.statement_timeout_ms
    }

    pub fn lock_timeout_ms(&self) -> u64 {
        self.lock_timeout_ms
    }

    /// `idle_in_transaction_session_timeout` and `idle_session_timeout` in milliseconds (0:
    /// none): how long a client may leave its session idle inside, and outside, a
    /// transaction block before the server closes it.
    pub fn idle_timeouts_ms(&self) -> (u64, u64) {
        let ms = |name: &str| {
            self.values
                .get(name)
                .and_then(|v| parse_duration_ms(v))
                .unwrap_or(0)
        };
        (
            ms("idle_in_transaction_session_timeout"),
            ms("idle_session_timeout"),
        )
    }

    pub fn time_zone(&self) -> &TimeZone {
        &self.time_zone
    }

    /// Stores a value; bumps the generation only when it differs from the current one.
    fn put(&mut self, name: String, value: String) {
        if self.values.get(&name) == Some(&value) {
            return;
        }
        // Values reach here normalized, so they parse.
        let ms = || parse_duration_ms(&value).unwrap_or(0);
        match name.as_str() {
            "statement_timeout" => self.statement_timeout_ms = ms(),
            "lock_timeout" => self.lock_timeout_ms = ms(),
            "timezone" => self.time_zone = TimeZone::from_setting(&value).unwrap_or_default(),
            _ => {}
        }
        self.values.insert(name, value);
        self.generation += 1;
    }

    /// The settings PostgreSQL reports to the client (ParameterStatus), by their reported names,
    /// with this session's values: what a new connection is told after authentication.
    pub fn reported(&self) -> Vec<(String, String)> {
        KNOWN_SETTINGS
            .iter()
            .filter(|(_, _, reported)| *reported)
            .map(|(n, _, _)| {
                let value = self.get(n).unwrap_or_default().to_string();
                (reported_name(n).to_string(), value)
            })
            .collect()
    }

    pub fn is_reported(name: &str) -> bool {
        KNOWN_SETTINGS.iter().any(|(n, _, r)| *n == name && *r)
    }

    fn default_of(name: &str) -> Option<&'static str> {
        builtin_default(name)
    }

    /// Sets a parameter; returns the canonical name. `local` values (SET LOCAL) revert at the
    /// end of the transaction block.
    pub fn set(&mut self, name: &str, value: &str, local: bool) -> SqlResult<String> {
        let old = self.values.get(&name.to_lowercase()).cloned();
        let name = self.assign(name, value)?;
        if local {
            self.record_txn_change(&name, old, None);
        }
        Ok(name)
    }

    /// A plain SET inside a transaction block: it lasts beyond a COMMIT, and ROLLBACK undoes it.
    pub fn set_in_block(&mut self, name: &str, value: &str) -> SqlResult<String> {
        let old = self.values.get(&name.to_lowercase()).cloned();
        let name = self.assign(name, value)?;
        let new = self.values.get(&name).cloned();
        self.record_txn_change(&name, old, new);
        Ok(name)
    }

    fn record_txn_change(&mut self, name: &str, old: Option<String>, kept: Option<String>) {
        let change = self
            .txn_changes
            .entry(name.to_string())
            .or_insert_with(|| TxnChange {
                before: old.unwrap_or_default(),
                kept_on_commit: None,
            });
        if kept.is_some() {
            change.kept_on_commit = kept;
        }
    }

    fn assign(&mut self, name: &str, value: &str) -> SqlResult<String> {
        let (name, value) = checked_assignment(name, value, |n| self.values.contains_key(n))?;
        // Settings of the whole server: postgresql.conf, ALTER SYSTEM and -c give them.
        match crate::config::catalog::info(&name).map(|i| i.context) {
            Some("sighup") => {
                return Err(SqlError::new(
                    "55P02",
                    format!("parameter \"{name}\" cannot be changed now"),
                ))
            }
            Some("postmaster") => {
                return Err(SqlError::new(
                    "55P02",
                    format!("parameter \"{name}\" cannot be changed without restarting the server"),
                ))
            }
            _ => {}
        }
        self.put(name.clone(), value);
        Ok(name)
    }

    /// Sets a parameter from the startup packet: it becomes the value RESET returns to.
    pub fn set_startup(&mut self, name: &str, value: &str) -> SqlResult<String> {
        let name = self.assign(name, value)?;
        self.client_names.insert(name.clone());
        let assigned = self.values.get(&name).cloned().unwrap_or_default();
        self.startup_values.insert(name.clone(), assigned);
        Ok(name)
    }

    /// Takes the server-wide values (postgresql.conf, ALTER SYSTEM, `-c`): at the session's
    /// start, and again after they were reloaded. As in PostgreSQL, a setting the session
    /// changed itself, or the client's startup packet gave, keeps its value; the others take
    /// the new one, and RESET returns to it. Returns the names whose value changed.
    pub fn apply_server_values(
        &mut self,
        new: &std::collections::BTreeMap<String, String>,
    ) -> Vec<String> {
        let names: std::collections::BTreeSet<String> = self
            .server_values
            .keys()
            .chain(new.keys())
            .cloned()
            .collect();
        let mut changed = Vec::new();
        for name in names {
            let default_of = |values: &std::collections::BTreeMap<String, String>| {
                values
                    .get(&name)
                    .cloned()
                    .or_else(|| builtin_default(&name).map(str::to_string))
            };
            let (old, value) = (default_of(&self.server_values), default_of(new));
            if old == value || self.client_names.contains(&name) {
                continue;
            }
            let untouched =
                self.values.get(&name) == old.as_ref() && !self.txn_changes.contains_key(&name);
            match &value {
                Some(v) => {
                    self.startup_values.insert(name.clone(), v.clone());
                    if untouched {
                        self.put(name.clone(), v.clone());
                        changed.push(name);
                    }
                }
                None => {
                    self.startup_values.remove(&name);
                    if untouched && self.values.remove(&name).is_some() {
                        self.generation += 1;
                        changed.push(name);
                    }
                }
            }
        }
        self.server_values = new.clone();
        changed
    }

    /// A parameter the server decides, not the client (the logged-in role's
    /// `session_authorization` and `is_superuser`): no checks, and RESET keeps it.
    pub fn set_by_server(&mut self, name: &str, value: &str) {
        self.put(name.to_string(), value.to_string());
        self.startup_values
            .insert(name.to_string(), value.to_string());
    }

    /// The value RESET returns to: the startup packet's, else the built-in default.
    fn reset_value(&self, name: &str) -> Option<String> {
        self.startup_values
            .get(name)
            .cloned()
            .or_else(|| Self::default_of(name).map(str::to_string))
    }

    pub fn reset(&mut self, name: &str) -> SqlResult<String> {
        let name = name.to_lowercase();
        match self.reset_value(&name) {
            Some(v) => {
                self.put(name.clone(), v);
                Ok(name)
            }
            None if self.values.remove(&name).is_some() => {
                self.generation += 1;
                Ok(name)
            }
            None => Err(SqlError::new(
                code::UNDEFINED_OBJECT,
                format!("unrecognized configuration parameter \"{name}\""),
            )),
        }
    }

    /// RESET inside a transaction block: COMMIT keeps it, ROLLBACK undoes it, as a plain SET.
    pub fn reset_in_block(&mut self, name: &str) -> SqlResult<String> {
        let old = self.values.get(&name.to_lowercase()).cloned();
        let name = self.reset(name)?;
        let new = self.values.get(&name).cloned();
        self.record_txn_change(&name, old, new);
        Ok(name)
    }

    /// RESET ALL inside a transaction block (see `reset_in_block`).
    pub fn reset_all_in_block(&mut self) -> Vec<String> {
        let before: Vec<(String, Option<String>)> = KNOWN_SETTINGS
            .iter()
            .map(|(n, _, _)| (n.to_string(), self.values.get(*n).cloned()))
            .collect();
        let changed = self.reset_all();
        for (name, old) in before {
            if changed.contains(&name) {
                let new = self.values.get(&name).cloned();
                self.record_txn_change(&name, old, new);
            }
        }
        changed
    }

    pub fn reset_all(&mut self) -> Vec<String> {
        let mut changed = Vec::new();
        for (n, _, _) in KNOWN_SETTINGS {
            let v = self.reset_value(n).expect("a known setting has a default");
            if self.values.get(*n) != Some(&v) {
                changed.push(n.to_string());
                self.put(n.to_string(), v);
            }
        }
        changed
    }

    /// Ends the transaction block's settings: COMMIT keeps plain SETs and undoes SET LOCAL,
    /// ROLLBACK undoes both. Returns the names whose value changed.
    pub fn end_transaction(&mut self, committed: bool) -> Vec<String> {
        let mut changed = Vec::new();
        for (name, change) in std::mem::take(&mut self.txn_changes) {
            let value = match change.kept_on_commit {
                Some(kept) if committed => kept,
                _ => change.before,
            };
            if self.values.get(&name) != Some(&value) {
                self.put(name.clone(), value);
                changed.push(name);
            }
        }
        changed
    }

    pub fn search_path(&self) -> Vec<String> {
        parse_search_path(self.get("search_path").unwrap_or("public"))
    }
}

/// The canonical name and normalized value of `SET name = value`, or why it is refused:
/// an unknown parameter (custom `a.b` names are accepted, as in PostgreSQL), a read-only one,
/// or a bad value. `exists` says whether the session knows `name` (lowercased).
pub fn checked_assignment(
    name: &str,
    value: &str,
    exists: impl Fn(&str) -> bool,
) -> SqlResult<(String, String)> {
    let name = name.to_lowercase();
    let value = normalize(&name, value)?;
    if !exists(&name) && !name.contains('.') {
        return Err(SqlError::new(
            code::UNDEFINED_OBJECT,
            format!("unrecognized configuration parameter \"{name}\""),
        ));
    }
    if matches!(
        name.as_str(),
        "server_version"
            | "server_encoding"
            | "integer_datetimes"
            | "server_version_num"
            | "max_identifier_length"
            | "is_superuser"
            | "ssl"
            | "max_connections"
            | "authentication_timeout"
    ) {
        return Err(SqlError::new(
            "55P02",
            format!("parameter \"{name}\" cannot be changed"),
        ));
    }
    Ok((name, value))
}

/// The settings in a startup packet's `options` parameter (libpq's PGOPTIONS), read as
/// PostgreSQL reads it: words split at white space that no backslash escapes, and each
/// `-c name=value`, `-cname=value` or `--name=value` one setting, dashes in the name read as
/// underscores. Other server switches are refused.
pub fn startup_options(options: &str) -> SqlResult<Vec<(String, String)>> {
    let mut words: Vec<String> = Vec::new();
    let mut word = String::new();
    let mut chars = options.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => word.extend(chars.next()),
            c if c.is_whitespace() => {
                if !word.is_empty() {
                    words.push(std::mem::take(&mut word));
                }
            }
            c => word.push(c),
        }
    }
    if !word.is_empty() {
        words.push(word);
    }
    let invalid = |arg: &str| {
        SqlError::new(
            code::SYNTAX_ERROR,
            format!("invalid command-line argument for server process: {arg}"),
        )
        .with_hint("Try \"postgres --help\" for more information.")
    };
    let mut settings = Vec::new();
    let mut words = words.into_iter();
    while let Some(w) = words.next() {
        let assignment = if w == "-c" {
            words.next().ok_or_else(|| invalid(&w))?
        } else if let Some(rest) = w.strip_prefix("-c").or_else(|| w.strip_prefix("--")) {
            rest.to_string()
        } else {
            return Err(invalid(&w));
        };
        let Some((name, value)) = assignment.split_once('=') else {
            return Err(SqlError::new(
                code::SYNTAX_ERROR,
                format!("-c {assignment} requires a value"),
            ));
        };
        settings.push((name.replace('-', "_"), value.to_string()));
    }
    Ok(settings)
}

pub fn parse_search_path(v: &str) -> Vec<String> {
    v.split(',')
        .map(|s| s.trim())
        .filter(|s| !s.is_empty())
        .map(|s| {
            if s.starts_with('"') {
                s.trim_matches('"').to_string()
            } else {
                s.to_lowercase()
            }
        })
        .filter(|s| s != "$user")
        .collect()
}

fn normalize(name: &str, value: &str) -> SqlResult<String> {
    let bad = || {
        SqlError::new(
            code::INVALID_PARAMETER_VALUE,
            format!("invalid value for parameter \"{name}\": \"{value}\""),
        )
    };
    Ok(match name {
        "timezone" => {
            let v = value.trim();
            if v.eq_ignore_ascii_case("local") || v.eq_ignore_ascii_case("default") {
                return Ok("UTC".to_string());
            }
            match TimeZone::from_setting(v) {
                Some(zone) => zone.name().to_string(),
                None => {
                    return Err(SqlError::new(
                        code::INVALID_PARAMETER_VALUE,
                        format!("invalid value for parameter \"TimeZone\": \"{v}\""),
                    ))
                }
            }
        }
        "client_encoding" => match value.to_uppercase().replace(['-', '_'], "").as_str() {
            "UTF8" | "UNICODE" => "UTF8".to_string(),
            "SQLASCII" => "SQL_ASCII".to_string(),
            _ => {
                return Err(SqlError::new(
                    code::FEATURE_NOT_SUPPORTED,
                    format!("conversion to encoding \"{value}\" is not supported"),
                ))
            }
        },
        "datestyle" => normalize_date_style(value)?,
        "intervalstyle" => match value.trim().to_ascii_lowercase().as_str() {
            "postgres" => "postgres".to_string(),
            "postgres_verbose" | "sql_standard" | "iso_8601" => {
                return Err(output_style_unsupported("IntervalStyle", value))
            }
            _ => return Err(bad()),
        },
        "transaction_isolation" | "default_transaction_isolation" => {
            let v = value.to_lowercase();
            match v.as_str() {
                // READ UNCOMMITTED runs as READ COMMITTED, as in PostgreSQL, which still
                // shows the level asked for.
                "read committed" => "read committed".to_string(),
                "read uncommitted" => "read uncommitted".to_string(),
                "repeatable read" => "repeatable read".to_string(),
                "serializable" => "serializable".to_string(),
                _ => return Err(bad()),
            }
        }
        "extra_float_digits" => {
            let n: i32 = value.trim().parse().map_err(|_| bad())?;
            if !(-15..=3).contains(&n) {
                return Err(bad());
            }
            // 1 to 3 all mean the shortest exact digits in PostgreSQL 12 and later, which
            // is what Shoal prints; 0 and below round to fewer digits, which it does not.
            if n <= 0 {
                return Err(output_style_unsupported("extra_float_digits", value));
            }
            n.to_string()
        }
        "synchronous_commit" => match value.to_lowercase().as_str() {
            "on" | "off" | "local" | "remote_write" | "remote_apply" | "true" | "false" | "yes"
            | "no" | "1" | "0" => value.to_lowercase(),
            _ => return Err(bad()),
        },
        "synchronous_standby_names" => {
            crate::durability::sync_standbys::parse(value).map_err(|detail| {
                let mut e = bad();
                e.detail = Some(detail);
                e
            })?;
            value.trim().to_string()
        }
        crate::memory_limit::SETTING => crate::memory_limit::normalize(value).ok_or_else(bad)?,
        "log_min_duration_statement" => match value.trim() {
            "-1" => "-1".to_string(),
            v => format_duration_ms(parse_duration_ms(v).ok_or_else(bad)?),
        },
        "log_destination" => match value.trim().to_ascii_lowercase().as_str() {
            "stderr" => "stderr".to_string(),
            "jsonlog" => "jsonlog".to_string(),
            "csvlog" | "syslog" | "eventlog" => {
                return Err(SqlError::new(
                    code::FEATURE_NOT_SUPPORTED,
                    format!("log_destination \"{value}\" is not supported"),
                )
                .with_hint("Shoal logs to stderr, as text (stderr) or JSON lines (jsonlog)."))
            }
            _ => return Err(bad()),
        },
        "archive_mode" => match value.trim().to_ascii_lowercase().as_str() {
            "on" | "true" | "yes" | "1" => "on".to_string(),
            "off" | "false" | "no" | "0" => "off".to_string(),
            "always" => "always".to_string(),
            _ => return Err(bad()),
        },
        "pg_stat_statements.track" => match value.trim().to_ascii_lowercase().as_str() {
            v @ ("none" | "top" | "all") => v.to_string(),
            _ => return Err(bad()),
        },
        "default_tablespace" => match value.trim() {
            "" | "pg_default" => value.trim().to_string(),
            other => {
                return Err(bad().with_detail(format!("Tablespace \"{other}\" does not exist.")))
            }
        },
        "statement_timeout"
        | "lock_timeout"
        | "idle_in_transaction_session_timeout"
        | "idle_session_timeout" => format_duration_ms(parse_duration_ms(value).ok_or_else(bad)?),
        _ => value.to_string(),
    })
}

/// DateStyle as PostgreSQL spells it back. Shoal prints dates only in the ISO style and reads
/// ambiguous numeric dates only in MDY order, so other styles and orders are refused rather
/// than accepted and ignored.
fn normalize_date_style(value: &str) -> SqlResult<String> {
    let mut iso_mdy = true;
    for word in value.split(',').map(|w| w.trim().to_ascii_lowercase()) {
        match word.as_str() {
            "iso" | "mdy" | "us" | "noneuropean" | "default" => {}
            "postgres" | "sql" | "german" | "dmy" | "ymd" | "euro" | "european" => iso_mdy = false,
            _ => {
                return Err(SqlError::new(
                    code::INVALID_PARAMETER_VALUE,
                    format!("invalid value for parameter \"DateStyle\": \"{value}\""),
                )
                .with_detail(format!("Unrecognized key word: \"{word}\".")))
            }
        }
    }
    if !iso_mdy {
        return Err(output_style_unsupported("DateStyle", value));
    }
    Ok("ISO, MDY".to_string())
}

fn output_style_unsupported(setting: &str, value: &str) -> SqlError {
    SqlError::new(
        code::FEATURE_NOT_SUPPORTED,
        format!("{setting} \"{value}\" is not supported"),
    )
    .with_hint(format!(
        "Shoal prints dates, times, intervals and floats as PostgreSQL does by default; reset {setting} to its default."
    ))
}

/// A time setting as SHOW prints it: in the largest unit that divides it evenly ("5s",
/// "1min", "1500ms"), or "0" when disabled.
pub fn format_duration_ms(ms: u64) -> String {
    const UNITS: [(u64, &str); 4] = [
        (86_400_000, "d"),
        (3_600_000, "h"),
        (60_000, "min"),
        (1000, "s"),
    ];
    if ms == 0 {
        return "0".to_string();
    }
    for (unit_ms, unit) in UNITS {
        if ms % unit_ms == 0 {
            return format!("{}{unit}", ms / unit_ms);
        }
    }
    format!("{ms}ms")
}

/// Parses PostgreSQL time settings: "0", "500", "5s", "2min", "100ms" → milliseconds.
pub fn parse_duration_ms(v: &str) -> Option<u64> {
    let v = v.trim().trim_matches('\'');
    let digits_end = v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len());
    let n: u64 = v[..digits_end].parse().ok()?;
    let unit = v[digits_end..].trim();
    Some(match unit {
        "" | "ms" => n,
        "s" => n * 1000,
        "min" => n * 60_000,
        "h" => n * 3_600_000,
        "d" => n * 86_400_000,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reloaded_server_values_reach_what_the_session_did_not_set() {
        let map = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(n, v)| (n.to_string(), v.to_string()))
                .collect::<std::collections::BTreeMap<_, _>>()
        };
        let mut s = Settings::default();
        s.apply_server_values(&map(&[("lock_timeout", "1s"), ("work_mem", "8MB")]));
        s.set_startup("application_name", "app").unwrap();
        s.set("work_mem", "16MB", false).unwrap();
        assert_eq!(s.get("lock_timeout"), Some("1s"));
        let changed = s.apply_server_values(&map(&[
            ("lock_timeout", "2s"),
            ("work_mem", "32MB"),
            ("application_name", "other"),
        ]));
        assert_eq!(changed, ["lock_timeout"]);
        assert_eq!(
            s.get("work_mem"),
            Some("16MB"),
            "the session's own SET stays"
        );
        assert_eq!(
            s.get("application_name"),
            Some("app"),
            "the client's value stays"
        );
        s.reset("work_mem").unwrap();
        assert_eq!(
            s.get("work_mem"),
            Some("32MB"),
            "RESET goes to the server's value"
        );
        // A value taken out of the files returns to the built-in default.
        assert_eq!(
            s.apply_server_values(&map(&[])),
            ["lock_timeout", "work_mem"]
        );
        assert_eq!(s.get("lock_timeout"), Some("0"));
    }

    #[test]
    fn startup_options_read_as_postgresql_does() {
        let got = startup_options(
            "-c search_path=a,b  -cstatement_timeout=5s --lock-timeout=1s -c application_name=my\\ app",
        )
        .unwrap();
        let want = [
            ("search_path", "a,b"),
            ("statement_timeout", "5s"),
            ("lock_timeout", "1s"),
            ("application_name", "my app"),
        ];
        assert_eq!(
            got,
            want.map(|(n, v)| (n.to_string(), v.to_string())).to_vec()
        );
        assert!(startup_options("").unwrap().is_empty());
        assert_eq!(startup_options("-B 100").unwrap_err().code, "42601");
        assert_eq!(startup_options("-c").unwrap_err().code, "42601");
        assert_eq!(startup_options("-c name").unwrap_err().code, "42601");
    }
}
