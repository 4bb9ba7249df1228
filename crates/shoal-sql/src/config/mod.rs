//! Server-wide settings, read as PostgreSQL reads them: `DATA_DIR/postgresql.conf` (written
//! with a short header on first start), then `DATA_DIR/postgresql.auto.conf` (what ALTER
//! SYSTEM writes), then `shoal serve -c name=value`, each overriding the one before. They are
//! the values each new session starts from, and RESET returns to. `pg_reload_conf()` and SIGHUP
//! read the files again, and every session takes the new values at its next statement, except
//! those it SET itself or its client gave at connection (`Settings::apply_server_values`).
//!
//! The settings are the session settings (`crate::settings`). What the server fixes at start
//! (the listening address, TLS files, max_connections, authentication_timeout) comes from
//! `shoal serve`'s flags, and a file that sets one is refused with the flag's name.

pub mod alter_system;
pub mod catalog;
pub mod file;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The file of settings an administrator edits.
pub const CONFIG_FILE: &str = "postgresql.conf";
/// The file ALTER SYSTEM writes, read after `CONFIG_FILE`.
pub const AUTO_CONFIG_FILE: &str = "postgresql.auto.conf";

/// Where a server-wide value comes from (pg_settings.source).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    ConfigurationFile,
    CommandLine,
}

impl Source {
    pub fn name(self) -> &'static str {
        match self {
            Source::ConfigurationFile => "configuration file",
            Source::CommandLine => "command line",
        }
    }
}

/// A server-wide value and where it was set.
#[derive(Clone, Debug, PartialEq)]
pub struct ConfigValue {
    pub value: String,
    pub source: Source,
    /// The file and line (pg_settings.sourcefile, sourceline), for a file's value.
    pub file: Option<(PathBuf, u32)>,
}

/// The server-wide settings (see the module comment).
#[derive(Debug, Default)]
pub struct ServerConfig {
    data_dir: Option<PathBuf>,
    command_line: Vec<(String, String)>,
    values: BTreeMap<String, ConfigValue>,
    /// When the files were last read (pg_conf_load_time).
    loaded_at: Option<chrono::DateTime<chrono::Utc>>,
    /// Settings read at start only (`postmaster` context, such as log_destination) whose files
    /// now say otherwise: they keep the value the server started with (pg_settings'
    /// pending_restart).
    pending_restart: std::collections::BTreeSet<String>,
}

/// Settings that `shoal serve`'s flags give, and the flag.
const FLAG_SETTINGS: &[(&str, &str)] = &[
    ("listen_addresses", "--listen"),
    ("port", "--listen"),
    ("unix_socket_directories", "--unix-socket-dir"),
    ("data_directory", "--data-dir"),
    ("hba_file", "--hba-file"),
    ("ssl", "--tls-cert"),
    ("ssl_cert_file", "--tls-cert"),
    ("ssl_key_file", "--tls-key"),
    ("ssl_ca_file", "--tls-ca"),
    ("max_connections", "--max-connections"),
    ("authentication_timeout", "--authentication-timeout-s"),
];

/// What a new data directory's postgresql.conf says.
const CONFIG_FILE_HEADER: &str = "\
# Shoal's server settings, in PostgreSQL's postgresql.conf format: one `name = value` per
# line, `#` starts a comment. They are the values every session starts from (and RESET
# returns to); `SHOW ALL` lists the settings. `SELECT pg_reload_conf()` or SIGHUP reads this
# file again. ALTER SYSTEM writes postgresql.auto.conf,
# which is read after this file; `shoal serve -c name=value` overrides both.
# The listening address, TLS, max_connections and authentication_timeout are flags of
# `shoal serve` (see `shoal serve --help`).

#statement_timeout = 0
#lock_timeout = 0
#idle_in_transaction_session_timeout = 0
#search_path = '\"$user\", public'
#timezone = 'UTC'
";

impl ServerConfig {
    /// Reads the data directory's files (writing a postgresql.conf first if it has none) and
    /// takes the command line's settings; any error (a line that does not read, an unknown
    /// setting, a bad value) refuses the start, as PostgreSQL does.
    pub fn load(data_dir: &Path, command_line: Vec<(String, String)>) -> Result<Self, String> {
        let path = data_dir.join(CONFIG_FILE);
        if !path.exists() {
            std::fs::write(&path, CONFIG_FILE_HEADER)
                .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        }
        let mut config = ServerConfig {
            data_dir: Some(data_dir.to_path_buf()),
            command_line,
            values: BTreeMap::new(),
            loaded_at: None,
            pending_restart: Default::default(),
        };
        let errors = config.reload();
        match errors.is_empty() {
            true => Ok(config),
            false => Err(errors.join("\n")),
        }
    }

    /// Reads the files again and applies what reads well; returns an error per line or
    /// setting that does not (those keep no value).
    pub fn reload(&mut self) -> Vec<String> {
        let mut values = BTreeMap::new();
        let mut errors = Vec::new();
        if let Some(dir) = &self.data_dir {
            for name in [CONFIG_FILE, AUTO_CONFIG_FILE] {
                let path = dir.join(name);
                let text = match std::fs::read_to_string(&path) {
                    Ok(text) => text,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                    Err(e) => {
                        errors.push(format!("cannot read {}: {e}", path.display()));
                        continue;
                    }
                };
                let (entries, bad_lines) = file::parse(&text);
                for (line, e) in bad_lines {
                    errors.push(format!("{e} in file \"{}\" line {line}", path.display()));
                }
                for entry in entries {
                    match checked(&entry.name, &entry.value).map_err(|e| e.message) {
                        Ok((name, value)) => {
                            let file = Some((path.clone(), entry.line));
                            let source = Source::ConfigurationFile;
                            values.insert(
                                name,
                                ConfigValue {
                                    value,
                                    source,
                                    file,
                                },
                            );
                        }
                        Err(e) => errors.push(format!(
                            "{e} in file \"{}\" line {}",
                            path.display(),
                            entry.line
                        )),
                    }
                }
            }
        }
        for (name, value) in &self.command_line {
            match checked(name, value).map_err(|e| e.message) {
                Ok((name, value)) => {
                    let (source, file) = (Source::CommandLine, None);
                    values.insert(
                        name,
                        ConfigValue {
                            value,
                            source,
                            file,
                        },
                    );
                }
                Err(e) => errors.push(format!("{e} (command line: -c {name}={value})")),
            }
        }
        if self.loaded_at.is_some() {
            self.keep_start_values(&mut values);
        }
        self.values = values;
        self.loaded_at = Some(chrono::Utc::now());
        errors
    }

    /// On a reload: the settings read at start only keep the value they started with, and
    /// are marked pending a restart when the files changed them, as PostgreSQL does.
    fn keep_start_values(&mut self, values: &mut BTreeMap<String, ConfigValue>) {
        let start_only =
            |name: &str| catalog::info(name).is_some_and(|i| i.context == "postmaster");
        let names: std::collections::BTreeSet<String> = values
            .keys()
            .chain(self.values.keys())
            .chain(self.pending_restart.iter())
            .filter(|n| start_only(n))
            .cloned()
            .collect();
        for name in names {
            let old = self.values.get(&name).cloned();
            let changed = values.get(&name).map(|v| &v.value) != old.as_ref().map(|v| &v.value);
            if !changed {
                self.pending_restart.remove(&name);
                continue;
            }
            tracing::warn!(
                "parameter \"{name}\" cannot be changed without restarting the server; it keeps its value"
            );
            self.pending_restart.insert(name.clone());
            match old {
                Some(old) => values.insert(name, old),
                None => values.remove(&name),
            };
        }
    }

    /// Whether the files changed `name` since the start, which only a restart applies.
    pub fn is_pending_restart(&self, name: &str) -> bool {
        self.pending_restart.contains(name)
    }

    /// Every server-wide value by name, without where it came from.
    pub fn value_map(&self) -> BTreeMap<String, String> {
        self.values
            .iter()
            .map(|(n, v)| (n.clone(), v.value.clone()))
            .collect()
    }

    pub fn loaded_at(&self) -> Option<chrono::DateTime<chrono::Utc>> {
        self.loaded_at
    }

    /// Every server-wide value, by setting name.
    pub fn values(&self) -> &BTreeMap<String, ConfigValue> {
        &self.values
    }

    /// Where ALTER SYSTEM writes (None for an engine without a data directory).
    pub fn auto_config_path(&self) -> Option<PathBuf> {
        self.data_dir.as_ref().map(|d| d.join(AUTO_CONFIG_FILE))
    }
}

/// A setting's canonical name and normalized value, or why a file or command line may not set
/// it.
pub fn checked(name: &str, value: &str) -> crate::error::SqlResult<(String, String)> {
    let lower = name.to_ascii_lowercase();
    if let Some((_, flag)) = FLAG_SETTINGS.iter().find(|(n, _)| *n == lower) {
        return Err(crate::error::SqlError::new(
            "55P02",
            format!("parameter \"{lower}\" is set with the flag {flag} of shoal serve"),
        ));
    }
    crate::settings::checked_assignment(name, value, crate::settings::is_known)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_auto_file_overrides_the_file_and_the_command_line_both() {
        let dir = std::env::temp_dir().join(format!("shoal-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join(CONFIG_FILE),
            "statement_timeout = 5s\nlock_timeout = 1s\nwork_mem = 8MB\n",
        )
        .unwrap();
        std::fs::write(dir.join(AUTO_CONFIG_FILE), "lock_timeout = '2s'\n").unwrap();
        let command_line = vec![("work_mem".to_string(), "16MB".to_string())];
        let config = ServerConfig::load(&dir, command_line).unwrap();
        let value = |n: &str| config.values()[n].value.clone();
        assert_eq!(value("statement_timeout"), "5s");
        assert_eq!(value("lock_timeout"), "2s");
        assert_eq!(value("work_mem"), "16MB");
        assert_eq!(config.values()["work_mem"].source, Source::CommandLine);
        let (file, line) = config.values()["statement_timeout"].file.clone().unwrap();
        assert_eq!((file, line), (dir.join(CONFIG_FILE), 1));
        std::fs::write(
            dir.join(CONFIG_FILE),
            "no_such_setting = 1\nmax_connections = 5\n",
        )
        .unwrap();
        let errors = ServerConfig::load(&dir, Vec::new()).unwrap_err();
        assert!(errors.contains("unrecognized configuration parameter \"no_such_setting\""));
        assert!(errors.contains("--max-connections"), "{errors}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_setting_read_at_start_only_waits_for_a_restart() {
        let dir = std::env::temp_dir().join(format!("shoal-config-restart-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join(CONFIG_FILE),
            "work_mem = 8MB
",
        )
        .unwrap();
        let mut config = ServerConfig::load(&dir, Vec::new()).unwrap();
        std::fs::write(
            dir.join(CONFIG_FILE),
            "work_mem = 16MB
log_destination = jsonlog
",
        )
        .unwrap();
        assert!(config.reload().is_empty());
        let values = config.value_map();
        assert_eq!(values["work_mem"], "16MB", "a reload applies the others");
        assert!(
            !values.contains_key("log_destination"),
            "the start's value stays"
        );
        assert!(config.is_pending_restart("log_destination"));
        assert!(!config.is_pending_restart("work_mem"));
        std::fs::write(
            dir.join(CONFIG_FILE),
            "work_mem = 16MB
",
        )
        .unwrap();
        assert!(config.reload().is_empty());
        assert!(
            !config.is_pending_restart("log_destination"),
            "changed back"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
