//! Embedded and dynamic SQL: statements parsed once per body and run with the variables
//! they name replaced by their values (on a kept plan when they have one), `EXECUTE ... USING`.

use super::*;

impl Exec<'_> {
    /// The expression, parsed, when `SELECT expr` is all there is to it (no FROM, no
    /// aggregate, one item): what `fast_eval` may compute. Kept per text for the session.
    pub(super) fn simple_expression(&mut self, expr: &str) -> Option<Arc<Expr>> {
        if let Some(found) = self.session.routine_cache.simple(expr) {
            return found;
        }
        let parsed = crate::routines::parse_expr(expr).ok().filter(|e| {
            let mut plain = true;
            let _ = ast::visit_expressions(e, |x| {
                if matches!(
                    x,
                    Expr::Function(_)
                        | Expr::Subquery(_)
                        | Expr::Exists { .. }
                        | Expr::InSubquery { .. }
                ) {
                    plain = false;
                }
                std::ops::ControlFlow::<()>::Continue(())
            });
            plain
        });
        let parsed = parsed.map(Arc::new);
        self.session.routine_cache.keep_simple(expr, parsed.clone());
        parsed
    }

    /// An embedded statement, parsed; kept per text for the session.
    pub(super) fn parsed_statement(&mut self, text: &str) -> SqlResult<Statement> {
        let in_trigger = self.returns == Returns::Trigger;
        if let Some(s) = self.session.routine_cache.parsed(text, in_trigger) {
            return Ok(s);
        }
        let mut statements = crate::session::parse_sql(text)?;
        if statements.len() != 1 {
            return Err(SqlError::syntax(format!(
                "expected one SQL statement in \"{text}\""
            )));
        }
        let mut stmt = statements.pop().expect("one statement");
        if in_trigger {
            embed::zero_based_tg_argv(&mut stmt);
        }
        self.session
            .routine_cache
            .keep_parsed(text, in_trigger, stmt.clone());
        Ok(stmt)
    }

    /// Runs a statement with the variables it names replaced by their values.
    pub(super) async fn run_statement(&mut self, mut stmt: Statement) -> SqlResult<EmbeddedResult> {
        let columns = self.columns_read(&stmt);
        embed::substitute(&mut stmt, &self.scopes, &columns, &self.zone)?;
        self.session.run_embedded(self.txn, stmt).await
    }

    /// Runs an embedded statement given by its text: as it was kept (see `kept`) when it was,
    /// else the ordinary way, after which it is kept.
    pub(super) async fn run_sql(&mut self, text: &str) -> SqlResult<EmbeddedResult> {
        self.run_kept(text, None).await
    }

    /// `run_sql` of `text`, a `SELECT` of one item, with the item cast to `cast_to`.
    /// Boxed: a recursive routine's statements nest here, and debug builds give each level
    /// of an unboxed chain of futures a large frame.
    pub(super) fn run_kept<'a>(
        &'a mut self,
        text: &'a str,
        cast_to: Option<&'a DataType>,
    ) -> Boxed<'a, EmbeddedResult> {
        Box::pin(self.run_kept_now(text, cast_to))
    }

    async fn run_kept_now(
        &mut self,
        text: &str,
        cast_to: Option<&DataType>,
    ) -> SqlResult<EmbeddedResult> {
        if !self.session.scope.transition_tables.lock().is_empty() {
            // A trigger's transition tables hold other rows at each firing: its statements are
            // planned each time, not kept.
            let mut stmt = self.parsed_statement(text)?;
            if let Some(t) = cast_to {
                cast_projection(&mut stmt, crate::routines::sql_type(t)?)?;
            }
            return self.run_statement(stmt).await;
        }
        let catalog_version = self.session.engine.catalog.read().version;
        let generation = self.session.settings.generation();
        let key = match cast_to {
            None => std::borrow::Cow::Borrowed(text),
            // A line break and `::` cannot end a statement's text, so no statement has this key.
            Some(t) => std::borrow::Cow::Owned(format!("{text}\n::{t:?}")),
        };
        let kept = self
            .session
            .routine_cache
            .statement(&key, catalog_version, generation);
        if let Some(kept) = &kept {
            match &kept.run {
                KeptRun::Fast(plan) => {
                    if let Some(values) = kept.bind_fast(&self.scopes, plan) {
                        if !(plan.writes() && self.session.read_only()) {
                            return self
                                .session
                                .run_embedded_plan(self.txn, plan, &values)
                                .await;
                        }
                    }
                }
                KeptRun::General(general) => {
                    if let Some(values) =
                        kept.bind_general(&self.scopes, general, self.session.now_micros())
                    {
                        let run = self.session.run_embedded_general(self.txn, general, values);
                        if let Some(result) = run.await? {
                            return Ok(result);
                        }
                    }
                }
                KeptRun::Ordinary => {}
            }
        }
        let mut stmt = self.parsed_statement(text)?;
        if let Some(t) = cast_to {
            cast_projection(&mut stmt, crate::routines::sql_type(t)?)?;
        }
        if kept.is_some() {
            return self.run_statement(stmt).await;
        }
        let result = self.run_statement(stmt.clone()).await?;
        let session = &*self.session;
        // A statement the role may not run is left to the ordinary path, which says so; so
        // are calls of routines, which run before the statement (see `routines::call`).
        let ordinary = session.check_privileges(&stmt).is_err()
            || !matches!(crate::routines::call::describable(session, &stmt), Ok(None));
        let kept = match ordinary {
            true => KeptStatement::ordinary(catalog_version, generation),
            false => KeptStatement::new(
                &stmt,
                &self.scopes,
                catalog_version,
                generation,
                |s, count| crate::fastpath::plan(session, s, count),
                |s, types| General::new(s, types, session.runs_with_placeholders(s)),
            ),
        };
        self.session.routine_cache.keep(&key, Arc::new(kept));
        Ok(result)
    }

    /// The column names of the tables `stmt` reads, which variables must not shadow.
    pub(super) fn columns_read(&self, stmt: &Statement) -> HashSet<String> {
        let mut columns = HashSet::new();
        let tables = embed::read_tables(stmt);
        if tables.is_empty() {
            return columns;
        }
        for name in tables {
            let parts: Vec<String> = name
                .0
                .iter()
                .filter_map(|p| p.as_ident().map(ident_name))
                .collect();
            let (schema, table) = match parts.as_slice() {
                [t] => (None, t.as_str()),
                [.., s, t] => (Some(s.as_str()), t.as_str()),
                [] => continue,
            };
            let Some((_, _, oid)) = self.session.scope.resolve_relation(schema, table) else {
                continue;
            };
            let catalog = self.session.engine.catalog.read();
            if let Some(def) = catalog.tables.get(&oid) {
                columns.extend(def.columns.iter().map(|c| c.name.clone()));
            }
        }
        columns
    }

    pub(super) async fn sql_statement(
        &mut self,
        text: &str,
        into: Option<&IntoClause>,
    ) -> SqlResult<()> {
        let result = self.run_sql(text).await?;
        // A query, or a statement with RETURNING.
        let returns_rows = result.tag == "SELECT" || !result.columns.is_empty();
        self.row_count = result.row_count;
        match into {
            Some(into) => {
                let rows = vars::rows_of(&result.batches)?;
                self.into_targets(into, rows).await?;
            }
            None if returns_rows => {
                return Err(SqlError::syntax("query has no destination for result data")
                    .with_hint(
                        "If you want to discard the results of a SELECT, use PERFORM instead.",
                    ));
            }
            None => self.set_found(result.row_count > 0),
        }
        Ok(())
    }

    pub(super) async fn into_targets(
        &mut self,
        into: &IntoClause,
        mut rows: Vec<Vec<Field>>,
    ) -> SqlResult<()> {
        if into.strict {
            if rows.is_empty() {
                return Err(SqlError::new("P0002", "query returned no rows"));
            }
            if rows.len() > 1 {
                return Err(SqlError::new("P0003", "query returned more than one row")
                    .with_hint("Make sure the query returns a single row, or use LIMIT 1."));
            }
        }
        let found = !rows.is_empty();
        let first = if rows.is_empty() {
            None
        } else {
            Some(rows.swap_remove(0))
        };
        self.assign_row(&into.targets, first).await?;
        self.set_found(found);
        Ok(())
    }

    /// The statement text EXECUTE runs, with `$n` taking the USING values.
    pub(super) async fn dynamic_statement(
        &mut self,
        command: &str,
        using: &[String],
    ) -> SqlResult<Statement> {
        let text = match self.eval_text(command).await? {
            Some(t) => t,
            None => {
                return Err(SqlError::new(
                    code::NULL_VALUE_NOT_ALLOWED,
                    "query string argument of EXECUTE is null",
                ))
            }
        };
        let mut values = Vec::with_capacity(using.len());
        for u in using {
            values.push(self.eval(u).await?);
        }
        let mut statements = crate::session::parse_sql(&text)?;
        if statements.len() != 1 {
            return Err(SqlError::syntax(
                "EXECUTE of a string with several statements is not supported",
            ));
        }
        let mut stmt = statements.pop().expect("one statement");
        let zone = self.zone.clone();
        let mut error = None;
        let _ = ast::visit_expressions_mut(&mut stmt, |e| {
            if let Expr::Value(v) = e {
                if let ast::Value::Placeholder(p) = &v.value {
                    let n = p.trim_start_matches('$').parse::<usize>().unwrap_or(0);
                    match values.get(n.wrapping_sub(1)) {
                        Some(d) => match d.to_expr(&zone) {
                            Ok(lit) => *e = Expr::Nested(Box::new(lit)),
                            Err(err) => error = Some(err),
                        },
                        None => {
                            error = Some(SqlError::new(
                                code::UNDEFINED_PARAMETER,
                                format!("there is no parameter {p}"),
                            ))
                        }
                    }
                }
            }
            std::ops::ControlFlow::<()>::Continue(())
        });
        match error {
            Some(e) => Err(e),
            None => Ok(stmt),
        }
    }

    pub(super) async fn dynamic_rows(
        &mut self,
        command: &str,
        using: &[String],
    ) -> SqlResult<Vec<Vec<Field>>> {
        let stmt = self.dynamic_statement(command, using).await?;
        let result = self.session.run_embedded(self.txn, stmt).await?;
        vars::rows_of(&result.batches)
    }

    pub(super) async fn execute(
        &mut self,
        command: &str,
        into: Option<&IntoClause>,
        using: &[String],
    ) -> SqlResult<()> {
        let stmt = self.dynamic_statement(command, using).await?;
        let result = self.session.run_embedded(self.txn, stmt).await?;
        self.row_count = result.row_count;
        if let Some(into) = into {
            let rows = vars::rows_of(&result.batches)?;
            let found = self
                .scopes
                .find("found")
                .map(|r| self.scopes.get(r).value.clone());
            self.into_targets(into, rows).await?;
            // EXECUTE leaves FOUND alone.
            if let (Some(r), Some(v)) = (self.scopes.find("found"), found) {
                self.scopes.get_mut(r).value = v;
            }
        }
        Ok(())
    }
}
