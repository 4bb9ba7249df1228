//! What a body gives back and says: RETURN, RETURN NEXT, RETURN QUERY, RAISE and
//! GET DIAGNOSTICS.

use super::*;

impl Exec<'_> {
    pub(super) async fn return_value(&mut self, expr: Option<&str>) -> SqlResult<()> {
        match (&self.returns, expr) {
            (Returns::Scalar(t), Some(e)) => {
                let t = VarType::Scalar(t.clone());
                self.returned = Some(self.eval_typed(e, &t).await?);
            }
            (Returns::Scalar(_), None) => {
                return Err(SqlError::syntax("missing expression at or near \";\""))
            }
            (Returns::Trigger, Some(e)) => {
                self.returned = Some(self.eval_row_expression(e)?);
            }
            (Returns::OutRow(_), Some(_)) => {
                return Err(SqlError::syntax(
                    "RETURN cannot have a parameter in function with OUT parameters",
                ))
            }
            (Returns::OutRow(_), None) => self.returned = Some(self.out_row()),
            (Returns::Void, Some(e)) if !e.trim().is_empty() => {
                return Err(SqlError::new(
                    code::DATATYPE_MISMATCH,
                    "RETURN cannot have a parameter in function returning void",
                ))
            }
            (Returns::Rows(_), Some(e)) if !e.trim().is_empty() => {
                return Err(SqlError::new(
                    code::DATATYPE_MISMATCH,
                    "RETURN cannot have a parameter in function returning set",
                )
                .with_hint("Use RETURN NEXT or RETURN QUERY."))
            }
            _ => {}
        }
        Ok(())
    }

    pub(super) async fn return_next(&mut self, expr: Option<&str>) -> SqlResult<()> {
        let Returns::Rows(columns) = self.returns.clone() else {
            return Err(SqlError::syntax(
                "cannot use RETURN NEXT in a non-SETOF function",
            ));
        };
        let row = match expr {
            None if !self.outputs.is_empty() => match self.out_row() {
                Datum::Row(f) => f,
                _ => unreachable!("out_row is a row"),
            },
            None => {
                return Err(SqlError::syntax("RETURN NEXT must have a parameter"));
            }
            Some(e) if columns.len() == 1 => {
                let t = VarType::Scalar(columns[0].1.clone());
                match self.eval_typed(e, &t).await? {
                    Datum::Scalar(data_type, value) => vec![Field {
                        name: columns[0].0.clone(),
                        data_type,
                        value,
                    }],
                    _ => unreachable!("a scalar type evaluates to a scalar"),
                }
            }
            Some(e) => {
                let d = self.eval_row_expression(e)?;
                match self.coerce(d, &VarType::Row(columns.clone())).await? {
                    Datum::Row(f) => f,
                    _ => unreachable!("a row type coerces to a row"),
                }
            }
        };
        self.rows.push(row);
        Ok(())
    }

    pub(super) async fn return_query(
        &mut self,
        query: &str,
        dynamic: bool,
        using: &[String],
    ) -> SqlResult<()> {
        let Returns::Rows(columns) = self.returns.clone() else {
            return Err(SqlError::syntax(
                "cannot use RETURN QUERY in a non-SETOF function",
            ));
        };
        let rows = match dynamic {
            true => self.dynamic_rows(query, using).await?,
            false => {
                let r = self.run_sql(query).await?;
                vars::rows_of(&r.batches)?
            }
        };
        let found = !rows.is_empty();
        for row in rows {
            if row.len() != columns.len() {
                return Err(SqlError::new(
                    code::DATATYPE_MISMATCH,
                    "structure of query does not match function result type",
                )
                .with_detail("Number of returned columns does not match expected column count."));
            }
            let mut out = Vec::with_capacity(row.len());
            for (i, (f, (name, t))) in row.into_iter().zip(&columns).enumerate() {
                if crate::types::pg_type_of(&f.data_type).0 != crate::types::pg_type_of(t).0
                    && !f.value.is_null()
                {
                    return Err(SqlError::new(
                        code::DATATYPE_MISMATCH,
                        "structure of query does not match function result type",
                    )
                    .with_detail(format!(
                        "Returned type {} does not match expected type {} in column {}.",
                        crate::types::format_type(&f.data_type),
                        crate::types::format_type(t),
                        i + 1
                    )));
                }
                out.push(Field {
                    name: name.clone(),
                    data_type: t.clone(),
                    value: f.value,
                });
            }
            self.rows.push(out);
        }
        self.set_found(found);
        Ok(())
    }

    // ----- RAISE and diagnostics -----

    pub(super) async fn raise(&mut self, r: &Raise) -> SqlResult<()> {
        if r.format.is_none() && r.condition.is_none() && r.options.is_empty() {
            // A bare RAISE re-throws the error being handled.
            return match self.handling.last() {
                Some(e) => Err(e.clone()),
                None => Err(SqlError::new(
                    "0Z002",
                    "RAISE without parameters cannot be used outside an exception handler",
                )),
            };
        }
        let mut sqlstate: Option<String> = None;
        let mut message = match &r.format {
            Some(f) => Some(self.format_message(&string_constant(f)?, &r.args).await?),
            None => None,
        };
        if let Some(c) = &r.condition {
            match c {
                Condition::SqlState(s) => sqlstate = Some(s.clone()),
                Condition::Name(n) => {
                    let code = conditions::sqlstate_of(n).ok_or_else(|| {
                        SqlError::new(
                            code::UNDEFINED_OBJECT,
                            format!("unrecognized exception condition \"{n}\""),
                        )
                    })?;
                    sqlstate = Some(code.to_string());
                    if message.is_none() {
                        message = Some(n.clone());
                    }
                }
            }
        }
        let (mut detail, mut hint) = (None, None);
        for (option, expr) in &r.options {
            let value = self.eval_text(expr).await?;
            let Some(value) = value else {
                return Err(SqlError::new(
                    code::NULL_VALUE_NOT_ALLOWED,
                    format!("RAISE option cannot be null"),
                ));
            };
            match option.as_str() {
                "message" => message = Some(value),
                "detail" => detail = Some(value),
                "hint" => hint = Some(value),
                "errcode" => {
                    let code = match conditions::sqlstate_of(&value.to_ascii_lowercase()) {
                        Some(c) => c.to_string(),
                        None if is_sqlstate(&value) => value,
                        None => {
                            return Err(SqlError::new(
                                code::UNDEFINED_OBJECT,
                                format!("unrecognized exception condition \"{value}\""),
                            ))
                        }
                    };
                    sqlstate = Some(code);
                }
                // COLUMN, CONSTRAINT, DATATYPE, TABLE, SCHEMA: kept by PostgreSQL for the
                // client's error fields.
                _ => {}
            }
        }
        let level = r.level.as_str();
        if level == "exception" {
            let code = conditions::static_code(sqlstate.as_deref().unwrap_or("P0001"));
            let message = message.unwrap_or_else(|| code.to_string());
            let mut e = SqlError::new(code, message);
            e.detail = detail;
            e.hint = hint;
            return Err(e);
        }
        let message = message.unwrap_or_default();
        let severity = match level {
            "warning" => "WARNING",
            "info" => "INFO",
            "notice" => "NOTICE",
            "log" | "debug" => return Ok(()),
            _ => "NOTICE",
        };
        if !self.client_hears(severity) {
            return Ok(());
        }
        let code = conditions::static_code(sqlstate.as_deref().unwrap_or(match severity {
            "WARNING" => "01000",
            _ => "00000",
        }));
        self.session
            .scope
            .notices
            .lock()
            .push(crate::error::Notice {
                severity,
                code,
                message,
                detail,
                hint,
            });
        Ok(())
    }

    /// Whether `client_min_messages` lets a message of this severity through (INFO always).
    pub(super) fn client_hears(&self, severity: &str) -> bool {
        let min = self
            .session
            .settings
            .get("client_min_messages")
            .unwrap_or("notice")
            .to_ascii_lowercase();
        let rank = |s: &str| match s {
            "debug5" | "debug4" | "debug3" | "debug2" | "debug1" | "debug" => 0,
            "log" => 1,
            "notice" => 2,
            "warning" => 3,
            "error" => 4,
            _ => 2,
        };
        severity == "INFO" || rank(&severity.to_ascii_lowercase()) >= rank(&min)
    }

    pub(super) async fn format_message(
        &mut self,
        format: &str,
        args: &[String],
    ) -> SqlResult<String> {
        let mut values = Vec::with_capacity(args.len());
        for a in args {
            let d = self.eval(a).await?;
            values.push(self.text_of(&d).unwrap_or_else(|| "<NULL>".to_string()));
        }
        let mut out = String::new();
        let mut next = values.into_iter();
        let mut used = 0;
        let mut chars = format.chars().peekable();
        while let Some(c) = chars.next() {
            if c != '%' {
                out.push(c);
                continue;
            }
            if chars.peek() == Some(&'%') {
                chars.next();
                out.push('%');
                continue;
            }
            match next.next() {
                Some(v) => {
                    out.push_str(&v);
                    used += 1;
                }
                None => {
                    return Err(SqlError::syntax("too few parameters specified for RAISE"));
                }
            }
        }
        if used < args.len() {
            return Err(SqlError::syntax("too many parameters specified for RAISE"));
        }
        Ok(out)
    }

    pub(super) async fn get_diagnostics(
        &mut self,
        stacked: bool,
        items: &[(String, String)],
    ) -> SqlResult<()> {
        for (target, item) in items {
            let item = item.to_ascii_lowercase();
            let value = if stacked {
                let Some(e) = self.handling.last() else {
                    return Err(SqlError::new(
                        "0Z002",
                        "GET STACKED DIAGNOSTICS cannot be used outside an exception handler",
                    ));
                };
                let object = e.object.as_deref();
                let text = match item.as_str() {
                    "returned_sqlstate" => Some(e.code.to_string()),
                    "message_text" => Some(e.message.clone()),
                    "pg_exception_detail" => e.detail.clone(),
                    "pg_exception_hint" => e.hint.clone(),
                    "pg_exception_context" => e.context.clone(),
                    "column_name" => object.and_then(|o| o.column.clone()),
                    "constraint_name" => object.and_then(|o| o.constraint.clone()),
                    "pg_datatype_name" => object.and_then(|o| o.datatype.clone()),
                    "table_name" => object.and_then(|o| o.table.clone()),
                    "schema_name" => object.and_then(|o| o.schema.clone()),
                    other => {
                        return Err(SqlError::syntax(format!(
                            "unrecognized GET STACKED DIAGNOSTICS item \"{other}\""
                        )))
                    }
                };
                Datum::text(text.unwrap_or_default())
            } else {
                match item.as_str() {
                    "row_count" => Datum::int(self.row_count as i64),
                    "pg_context" => Datum::text(format!("PL/pgSQL function {}", self.name)),
                    other => {
                        return Err(SqlError::syntax(format!(
                            "unrecognized GET DIAGNOSTICS item \"{other}\""
                        )))
                    }
                }
            };
            let parts = target_parts(target)?;
            let (r, _) = self.target_ref(&parts)?;
            let t = self.scopes.get(r).var_type.clone();
            let value = self.coerce(value, &t).await?;
            self.store(r, value)?;
        }
        Ok(())
    }
}
