//! SET, SHOW, RESET and the other statements that touch only the session, and the bookkeeping
//! behind them: which changed settings the client must be told about, what a transaction's end
//! undoes, and the copy of the settings that DataFusion's catalog functions read from the plan
//! scope. The settings themselves (names, defaults, validation) live in `crate::settings`.

use datafusion::sql::sqlparser::ast::{self, Statement};

use super::transaction::isolation_of;
use super::{columns_of_schema, rows_batch, Session, StatementResult, TxnState};
use crate::error::{code, SqlError, SqlResult};
use crate::settings::Settings;

impl Session {
    /// SET, SHOW, RESET and other statements that touch only the session.
    pub(super) fn session_command(
        &mut self,
        stmt: &Statement,
    ) -> Option<SqlResult<StatementResult>> {
        Some(match stmt {
            // SET CONSTRAINTS checks keys, in the transaction (`route`).
            Statement::Set(_) if set_constraints_text(stmt).is_some() => return None,
            // GRANT / REVOKE of role membership changes the catalog (`ddl`).
            Statement::Set(_) if role_membership_text(stmt).is_some() => return None,
            // ALTER SEQUENCE changes the catalog (`ddl`).
            Statement::Set(_) if alter_sequence_text(stmt).is_some() => return None,
            Statement::Set(_) if alter_system_text(stmt).is_some() => {
                let text = alter_system_text(stmt).expect("matched").to_string();
                self.alter_system(&text)
            }
            Statement::Set(set) => self.set(set),
            Statement::ShowVariable { variable } => self.show(variable),
            Statement::Reset(r) => {
                let in_block = !matches!(self.txn, TxnState::Idle);
                let changed = match &r.reset {
                    ast::Reset::ALL if in_block => self.settings.reset_all_in_block(),
                    ast::Reset::ALL => self.settings.reset_all(),
                    ast::Reset::ConfigurationParameter(name) => {
                        let name = name.to_string();
                        let reset = match in_block {
                            true => self.settings.reset_in_block(&name),
                            false => self.settings.reset(&name),
                        };
                        match reset {
                            Ok(n) => vec![n],
                            Err(e) => return Some(Err(e)),
                        }
                    }
                };
                for n in changed {
                    self.setting_changed(&n);
                }
                self.sync_scope_settings();
                Ok(StatementResult::command("RESET"))
            }
            Statement::Discard { object_type } => self.discard(object_type),
            Statement::Deallocate { .. } => Ok(StatementResult::command("DEALLOCATE")),
            Statement::Lock(lock) => self.lock_table(lock),
            Statement::LISTEN { channel } => self
                .scope
                .notifications
                .listen(&channel_name(channel))
                .map(|()| self.notification_command("LISTEN")),
            Statement::UNLISTEN { channel } => {
                let all = channel.quote_style.is_none() && channel.value == "*";
                let name = channel_name(channel);
                self.scope
                    .notifications
                    .unlisten((!all).then_some(name.as_str()));
                Ok(self.notification_command("UNLISTEN"))
            }
            Statement::NOTIFY { channel, payload } => self
                .scope
                .notifications
                .notify(&channel_name(channel), payload.as_deref().unwrap_or(""))
                .map(|()| self.notification_command("NOTIFY")),
            _ => return None,
        })
    }

    /// LISTEN, UNLISTEN and NOTIFY take effect at commit: now, outside a transaction block.
    fn notification_command(&self, tag: &str) -> StatementResult {
        if matches!(self.txn, TxnState::Idle) {
            self.scope.notifications.end_transaction(true);
        }
        StatementResult::command(tag)
    }

    /// ALTER SYSTEM (`config::alter_system`): not inside a transaction block, as in
    /// PostgreSQL, since the file it writes cannot be rolled back.
    fn alter_system(&mut self, text: &str) -> SqlResult<StatementResult> {
        if !matches!(self.txn, TxnState::Idle) {
            return Err(SqlError::new(
                crate::error::code::ACTIVE_SQL_TRANSACTION,
                "ALTER SYSTEM cannot run inside a transaction block",
            ));
        }
        let (_, superuser) = crate::privileges::acting_role_oid(self)?;
        crate::config::alter_system::run(&self.engine, superuser, text)?;
        Ok(StatementResult::command("ALTER SYSTEM"))
    }

    /// DISCARD ALL puts the session back as it was at connection (what connection pools send
    /// between clients): settings reset, no channel listened to, no advisory lock held, no
    /// SQL-level prepared statement. DISCARD PLANS, SEQUENCES and TEMP have nothing to drop
    /// that a client could see.
    fn discard(&mut self, object: &ast::DiscardObject) -> SqlResult<StatementResult> {
        if !matches!(object, ast::DiscardObject::ALL) {
            return Ok(StatementResult::command(&format!("DISCARD {object}")));
        }
        if !matches!(self.txn, TxnState::Idle) {
            return Err(SqlError::new(
                crate::error::code::ACTIVE_SQL_TRANSACTION,
                "DISCARD ALL cannot run inside a transaction block",
            ));
        }
        for n in self.settings.reset_all() {
            self.setting_changed(&n);
        }
        self.sync_scope_settings();
        self.scope.notifications.unlisten(None);
        self.scope.notifications.end_transaction(true);
        self.scope.advisory_locks.unlock_all();
        self.scope.prepared_statements.lock().clear();
        self.scope.cursors.lock().clear();
        self.scope.sequence_last.lock().clear();
        Ok(StatementResult::command("DISCARD ALL"))
    }

    fn set(&mut self, set: &ast::Set) -> SqlResult<StatementResult> {
        let in_block = !matches!(self.txn, TxnState::Idle);
        match set {
            ast::Set::SingleAssignment {
                scope,
                variable,
                values,
                ..
            } => {
                // The parameter is SET SESSION AUTHORIZATION's, with its check.
                if variable
                    .to_string()
                    .eq_ignore_ascii_case("session_authorization")
                {
                    let user = match values.as_slice() {
                        [ast::Expr::Value(v)] => match &v.value {
                            ast::Value::SingleQuotedString(s) => s.clone(),
                            other => other.to_string(),
                        },
                        [ast::Expr::Identifier(i)] => crate::ddl::ident(i),
                        _ => self.scope.authenticated_user(),
                    };
                    self.set_session_authorization(&user, in_block)?;
                    return Ok(StatementResult::command("SET"));
                }
                let local = matches!(scope, Some(ast::ContextModifier::Local));
                self.set_variable(variable, values, local, in_block)
            }
            ast::Set::SetRole {
                context_modifier,
                role_name,
            } => {
                let role = match role_name {
                    None => "none".to_string(),
                    Some(name) => {
                        let name = crate::ddl::ident_of(&name.to_string());
                        self.check_set_role(&name)?;
                        name
                    }
                };
                let local = matches!(context_modifier, Some(ast::ContextModifier::Local));
                if local && !in_block {
                    return Ok(StatementResult::command("SET"));
                }
                let name = if in_block && !local {
                    self.settings.set_in_block("role", &role)?
                } else {
                    self.settings.set("role", &role, local)?
                };
                self.setting_changed(&name);
                self.sync_scope_settings();
                Ok(StatementResult::command("SET"))
            }
            ast::Set::SetSessionAuthorization(param) => {
                let user = match &param.kind {
                    ast::SetSessionAuthorizationParamKind::Default => {
                        self.scope.authenticated_user()
                    }
                    ast::SetSessionAuthorizationParamKind::User(name) => {
                        crate::ddl::ident_of(&name.to_string())
                    }
                };
                self.set_session_authorization(&user, in_block)?;
                Ok(StatementResult::command("SET"))
            }
            ast::Set::SetTimeZone { local, value } => {
                if *local && !in_block {
                    return Ok(StatementResult::command("SET"));
                }
                let value = setting_value_text(value);
                let name = if in_block && !*local {
                    self.settings.set_in_block("timezone", &value)?
                } else {
                    self.settings.set("timezone", &value, *local)?
                };
                self.setting_changed(&name);
                self.sync_scope_settings();
                Ok(StatementResult::command("SET"))
            }
            ast::Set::SetNames { charset_name, .. } => {
                let name = self
                    .settings
                    .set("client_encoding", &charset_name.value, false)?;
                self.setting_changed(&name);
                Ok(StatementResult::command("SET"))
            }
            ast::Set::SetTransaction { modes, session, .. } => {
                self.set_transaction(modes, *session, in_block)
            }
            _ => Ok(StatementResult::command("SET")),
        }
    }

    /// SET [LOCAL] name = value (or DEFAULT).
    fn set_variable(
        &mut self,
        variable: &ast::ObjectName,
        values: &[ast::Expr],
        local: bool,
        in_block: bool,
    ) -> SqlResult<StatementResult> {
        let name = variable.to_string().to_lowercase();
        // Settings only superusers may change (log_min_duration_statement, lc_messages).
        if crate::config::catalog::info(&name).is_some_and(|i| i.context == "superuser")
            && !crate::privileges::acting_role(self)?.superuser
        {
            return Err(SqlError::new(
                code::INSUFFICIENT_PRIVILEGE,
                format!("permission denied to set parameter \"{name}\""),
            ));
        }
        let value = values
            .iter()
            .map(setting_value_text)
            .collect::<Vec<_>>()
            .join(", ");
        if local && !in_block {
            // PostgreSQL warns that SET LOCAL outside a block has no effect.
            return Ok(StatementResult::command("SET"));
        }
        let value = if value.eq_ignore_ascii_case("default") {
            return self.settings.reset(&name).map(|n| {
                self.setting_changed(&n);
                self.sync_scope_settings();
                StatementResult::command("SET")
            });
        } else {
            value
        };
        if name == "transaction_isolation" && in_block {
            self.set_block_isolation(&value)?;
        }
        let name = if in_block && !local {
            self.settings.set_in_block(&name, &value)?
        } else {
            self.settings.set(&name, &value, local)?
        };
        self.setting_changed(&name);
        self.sync_scope_settings();
        Ok(StatementResult::command("SET"))
    }

    /// SET [SESSION CHARACTERISTICS AS] TRANSACTION: access mode and isolation level.
    fn set_transaction(
        &mut self,
        modes: &[ast::TransactionMode],
        session: bool,
        in_block: bool,
    ) -> SqlResult<StatementResult> {
        for m in modes {
            if let ast::TransactionMode::AccessMode(mode) = m {
                let on = matches!(mode, ast::TransactionAccessMode::ReadOnly);
                let name = if session {
                    "default_transaction_read_only"
                } else {
                    "transaction_read_only"
                };
                if session || in_block {
                    self.settings
                        .set(name, if on { "on" } else { "off" }, false)?;
                }
            }
            if let ast::TransactionMode::IsolationLevel(level) = m {
                let iso = isolation_of(level)?;
                let text = super::transaction::level_name(level, iso);
                if session {
                    self.settings
                        .set("default_transaction_isolation", text, false)?;
                } else if in_block {
                    self.set_block_isolation(text)?;
                    self.settings.set("transaction_isolation", text, false)?;
                }
            }
        }
        self.sync_scope_settings();
        Ok(StatementResult::command("SET"))
    }

    fn show(&mut self, variable: &[ast::Ident]) -> SqlResult<StatementResult> {
        let name = show_name(variable);
        if name == "all" {
            // As PostgreSQL lists them: its spelling of each name, its description, without
            // the settings it hides (`role`, `session_authorization`, `is_superuser`).
            let mut names: Vec<(&String, &String)> = self
                .settings
                .all()
                .iter()
                .filter(|(n, _)| {
                    crate::config::catalog::info(n).is_some() || !crate::settings::is_known(n)
                })
                .collect();
            names.sort();
            let batch = rows_batch(
                &["name", "setting", "description"],
                names
                    .iter()
                    .map(|(n, v)| {
                        let info = crate::config::catalog::info(n);
                        vec![
                            info.map_or(n.as_str(), |i| i.name).to_string(),
                            v.to_string(),
                            info.map_or("", |i| i.short_desc).to_string(),
                        ]
                    })
                    .collect(),
            );
            return Ok(StatementResult::Rows {
                columns: columns_of_schema(&batch.schema()),
                batches: vec![batch],
                tag: "SHOW",
            });
        }
        let value = self
            .settings
            .get(&name)
            .map(|s| s.to_string())
            .ok_or_else(|| {
                SqlError::new(
                    code::UNDEFINED_OBJECT,
                    format!("unrecognized configuration parameter \"{name}\""),
                )
            })?;
        let column = variable
            .iter()
            .map(|i| i.value.to_lowercase())
            .collect::<Vec<_>>()
            .join("_");
        let column = if column == "time_zone" {
            "TimeZone".to_string()
        } else if column == "datestyle" {
            "DateStyle".to_string()
        } else {
            column
        };
        let batch = rows_batch(&[column.as_str()], vec![vec![value]]);
        Ok(StatementResult::Rows {
            columns: columns_of_schema(&batch.schema()),
            batches: vec![batch],
            tag: "SHOW",
        })
    }

    /// Keeps the statement's set_config() changes if it succeeded: like SET (or SET LOCAL when
    /// is_local) inside a block; outside one, a local change ends with the statement.
    pub(super) fn apply_set_config_calls(&mut self, in_block: bool, succeeded: bool) {
        let calls = std::mem::take(&mut *self.scope.set_config_calls.lock());
        if calls.is_empty() {
            return;
        }
        for (name, value, local) in calls.into_iter().filter(|_| succeeded) {
            let set = match (in_block, local) {
                (true, true) => self.settings.set(&name, &value, true),
                (true, false) => self.settings.set_in_block(&name, &value),
                (false, false) => self.settings.set(&name, &value, false),
                (false, true) => continue,
            };
            if set.is_ok() {
                self.setting_changed(&name);
            }
        }
        // set_config wrote into the scope's copy directly: copy the session's back over it.
        self.scope_settings_generation = None;
        self.sync_scope_settings();
    }

    /// The transaction ended (committed or not): its SET LOCALs end, and its LISTEN, UNLISTEN
    /// and notifications take effect or are dropped.
    pub(super) fn end_transaction_state(&mut self, committed: bool) {
        self.engine.backends.stats.transaction_ended(committed);
        self.scope.deferred_constraints.lock().take_all();
        self.scope.notifications.end_transaction(committed);
        self.scope.advisory_locks.end_transaction();
        self.end_transaction_cursors(committed);
        for name in self.settings.end_transaction(committed) {
            self.setting_changed(&name);
        }
        self.reset_to_default("transaction_isolation", "read committed");
        self.reset_to_default("transaction_read_only", "off");
        self.reset_to_default("transaction_deferrable", "off");
        self.sync_scope_settings();
    }

    /// Sets `name` back to `default_<name>` (or `fallback`) if it differs. This runs after
    /// every autocommit statement, so the usual case, nothing to change, must not allocate.
    fn reset_to_default(&mut self, name: &str, fallback: &str) {
        let default_name = match name {
            "transaction_isolation" => "default_transaction_isolation",
            "transaction_read_only" => "default_transaction_read_only",
            "transaction_deferrable" => "default_transaction_deferrable",
            _ => unreachable!("no default_ setting for {name}"),
        };
        let mut wanted = self.settings.get(default_name).unwrap_or(fallback);
        // A standby's transactions are read-only whatever the default says.
        if name == "transaction_read_only" && self.engine.in_recovery() {
            wanted = "on";
        }
        if self.settings.get(name) != Some(wanted) {
            let wanted = wanted.to_string();
            self.settings.set(name, &wanted, false).ok();
        }
    }

    /// Publishes the settings to the plan scope (which DataFusion's catalog functions read),
    /// if they changed since the last time.
    /// Applies the settings a client sent in its startup packet, as PostgreSQL does: the
    /// switches of `options` (PGOPTIONS), then every other parameter but the connection's
    /// identity. An unknown parameter or a bad value fails the connection. An encoding other
    /// than UTF8 or SQL_ASCII is the exception: refused, it would lock out clients that work
    /// today (psql sends its terminal's encoding), so the session stays in UTF8 and says so
    /// in the server log.
    /// SET ROLE `role`: the session user must be a member of it (or a superuser).
    fn check_set_role(&self, role: &str) -> SqlResult<()> {
        let catalog = self.engine.catalog.read();
        let Some(target) = catalog.role_named(role) else {
            return Err(SqlError::new(
                code::INVALID_PARAMETER_VALUE,
                format!("role \"{role}\" does not exist"),
            ));
        };
        let session_user = catalog.role_named(&self.scope.session_user()).cloned();
        let allowed =
            session_user.is_some_and(|u| u.superuser || catalog.is_member_of(u.oid, target.oid));
        if !allowed {
            return Err(SqlError::new(
                code::INSUFFICIENT_PRIVILEGE,
                format!("permission denied to set role \"{role}\""),
            ));
        }
        Ok(())
    }

    /// SET SESSION AUTHORIZATION: the session user (and the current user) becomes `user`. Only
    /// a client that logged in as a superuser may become another role, as in PostgreSQL.
    fn set_session_authorization(&mut self, user: &str, in_block: bool) -> SqlResult<()> {
        let authenticated = self.scope.authenticated_user();
        let (superuser, exists) = {
            let catalog = self.engine.catalog.read();
            let may = catalog
                .role_named(&authenticated)
                .is_some_and(|r| r.superuser);
            if user != authenticated && !may {
                return Err(SqlError::new(
                    code::INSUFFICIENT_PRIVILEGE,
                    format!("permission denied to set session authorization \"{user}\""),
                ));
            }
            let target = catalog.role_named(user);
            (target.is_some_and(|r| r.superuser), target.is_some())
        };
        if !exists {
            return Err(SqlError::new(
                code::INVALID_PARAMETER_VALUE,
                format!("role \"{user}\" does not exist"),
            ));
        }
        for (name, value) in [("session_authorization", user), ("role", "none")] {
            let name = if in_block {
                self.settings.set_in_block(name, value)?
            } else {
                self.settings.set(name, value, false)?
            };
            self.setting_changed(&name);
        }
        self.settings
            .set_by_server("is_superuser", if superuser { "on" } else { "off" });
        self.sync_scope_settings();
        Ok(())
    }

    /// The client logged in as `role`: it is the session and current user from now on.
    pub fn log_in_as(&mut self, role: &str, superuser: bool) {
        self.scope.log_in_as(role);
        self.settings.set_by_server("session_authorization", role);
        self.settings
            .set_by_server("is_superuser", if superuser { "on" } else { "off" });
        let ssl = if self.engine.ssl() { "on" } else { "off" };
        self.settings.set_by_server("ssl", ssl);
        let max_connections = self.engine.max_connections().to_string();
        self.settings
            .set_by_server("max_connections", &max_connections);
        // Shown as PostgreSQL shows a time setting: in the largest unit that divides it.
        let timeout_s = self.engine.authentication_timeout().as_secs();
        let timeout = match timeout_s % 60 {
            0 => format!("{}min", timeout_s / 60),
            _ => format!("{timeout_s}s"),
        };
        self.settings
            .set_by_server("authentication_timeout", &timeout);
        self.sync_scope_settings();
    }

    pub fn apply_startup_parameters(
        &mut self,
        params: &std::collections::HashMap<String, String>,
    ) -> SqlResult<()> {
        let mut settings = match params.get("options") {
            Some(options) => crate::settings::startup_options(options)?,
            None => Vec::new(),
        };
        let mut rest: Vec<(String, String)> = params
            .iter()
            .filter(|(k, _)| !matches!(k.as_str(), "user" | "database" | "options" | "replication"))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        rest.sort();
        settings.extend(rest);
        for (name, value) in settings {
            match self.settings.set_startup(&name, &value) {
                Ok(_) => {}
                Err(e) if name.eq_ignore_ascii_case("client_encoding") => {
                    tracing::warn!("client_encoding \"{value}\" from a client ignored: {e}");
                }
                Err(e) => return Err(e),
            }
        }
        self.sync_scope_settings();
        Ok(())
    }

    /// Takes the server-wide settings again after pg_reload_conf or SIGHUP reloaded them (see
    /// `Settings::apply_server_values`); checked as each statement starts.
    pub(super) fn take_reloaded_config(&mut self) {
        let generation = self.engine.config_generation();
        if generation == self.config_generation {
            return;
        }
        self.config_generation = generation;
        let values = self.engine.config.read().value_map();
        for name in self.settings.apply_server_values(&values) {
            self.setting_changed(&name);
        }
        // Promoted from a standby: no longer in hot standby, and transactions write again
        // (PostgreSQL sends the change as ParameterStatus too, for target_session_attrs).
        if self.settings.get("in_hot_standby") == Some("on") && !self.engine.in_recovery() {
            self.settings
                .set("in_hot_standby", "off", false)
                .expect("a boolean setting");
            self.setting_changed("in_hot_standby");
            if matches!(self.txn, TxnState::Idle) {
                self.reset_to_default("transaction_read_only", "off");
            }
        }
        self.sync_scope_settings();
    }

    /// Hands log_min_duration_statement to the backend, which times the statements.
    pub(super) fn sync_log_min_duration(&self) {
        let ms = match self.settings.get("log_min_duration_statement") {
            Some("-1") | None => -1,
            Some(v) => crate::settings::parse_duration_ms(v).map_or(-1, |ms| ms as i64),
        };
        self.backend.set_log_min_duration_ms(ms);
    }

    pub(super) fn sync_scope_settings(&mut self) {
        let generation = self.settings.generation();
        if self.scope_settings_generation == Some(generation) {
            return;
        }
        *self.scope.settings.lock() = self.settings.all().clone();
        *self.scope.search_path.lock() = self.settings.search_path();
        self.scope.time_zone.set(self.settings.time_zone().clone());
        self.scope_settings_generation = Some(generation);
    }

    fn setting_changed(&mut self, name: &str) {
        // Outside a block the next transaction takes the new default, and SHOW says so now.
        if matches!(self.txn, TxnState::Idle) {
            match name {
                "default_transaction_isolation" => {
                    self.reset_to_default("transaction_isolation", "read committed")
                }
                "default_transaction_read_only" => {
                    self.reset_to_default("transaction_read_only", "off")
                }
                _ => {}
            }
        }
        if name == "application_name" {
            self.backend
                .set_application_name(self.settings.get(name).unwrap_or(""));
        }
        if name == "log_min_duration_statement" {
            self.sync_log_min_duration();
        }
        if Settings::is_reported(name) {
            let value = self.settings.get(name).unwrap_or("").to_string();
            self.reported_changes
                .push((crate::settings::reported_name(name).to_string(), value));
        }
    }
}

/// The text of a SET value: identifiers and strings unquoted, numbers as written.
pub(crate) fn setting_value_text(e: &ast::Expr) -> String {
    match e {
        ast::Expr::Value(v) => match &v.value {
            ast::Value::SingleQuotedString(s) | ast::Value::DoubleQuotedString(s) => s.clone(),
            ast::Value::Number(n, _) => n.clone(),
            ast::Value::Boolean(b) => {
                if *b {
                    "on".into()
                } else {
                    "off".into()
                }
            }
            other => other.to_string(),
        },
        ast::Expr::Identifier(i) => i.value.clone(),
        ast::Expr::UnaryOp {
            op: ast::UnaryOperator::Minus,
            expr,
        } => format!("-{}", setting_value_text(expr)),
        other => other.to_string(),
    }
}

/// A channel name as PostgreSQL reads an identifier: folded to lower case unless quoted.
fn channel_name(channel: &ast::Ident) -> String {
    match channel.quote_style {
        Some(_) => channel.value.clone(),
        None => channel.value.to_lowercase(),
    }
}

/// The text after CONSTRAINTS of a `SET CONSTRAINTS` statement (see
/// `parse::rewrite_set_constraints`); None for any other statement.
pub(super) fn set_constraints_text(stmt: &Statement) -> Option<&str> {
    set_text(stmt, crate::parse::SET_CONSTRAINTS_VARIABLE)
}

/// The text of a role membership GRANT or REVOKE (see `parse::rewrite_role_membership`).
pub(crate) fn role_membership_text(stmt: &Statement) -> Option<&str> {
    set_text(stmt, crate::parse::ROLE_COMMAND_VARIABLE)
}

/// The text of an ALTER SEQUENCE statement (see `parse::ALTER_SEQUENCE_VARIABLE`).
pub(crate) fn alter_sequence_text(stmt: &Statement) -> Option<&str> {
    set_text(stmt, crate::parse::ALTER_SEQUENCE_VARIABLE)
}

/// The text of an ALTER SYSTEM statement (see `parse::rewrite_alter_system`).
fn alter_system_text(stmt: &Statement) -> Option<&str> {
    set_text(stmt, crate::parse::ALTER_SYSTEM_VARIABLE)
}

/// The text a `SET variable = 'text'` of one of the parser's rewrites carries.
fn set_text<'a>(stmt: &'a Statement, variable_name: &str) -> Option<&'a str> {
    let Statement::Set(ast::Set::SingleAssignment {
        variable, values, ..
    }) = stmt
    else {
        return None;
    };
    if variable.to_string() != variable_name {
        return None;
    }
    match values.as_slice() {
        [ast::Expr::Value(v)] => match &v.value {
            ast::Value::SingleQuotedString(text) => Some(text),
            _ => None,
        },
        _ => None,
    }
}

/// The setting `SHOW` names: one of SQL's spelled-out names (`TIME ZONE`), or a name whose
/// parts the parser split at dots (`shoal.max_memory`).
pub(super) fn show_name(variable: &[ast::Ident]) -> String {
    let words: Vec<String> = variable.iter().map(|i| i.value.to_lowercase()).collect();
    match words.join(" ").as_str() {
        "time zone" => "timezone".to_string(),
        "transaction isolation level" => "transaction_isolation".to_string(),
        "session authorization" => "session_authorization".to_string(),
        _ => words.join("."),
    }
}
