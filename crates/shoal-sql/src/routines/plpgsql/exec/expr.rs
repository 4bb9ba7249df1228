//! Expressions: their values (computed directly by `fast_eval` when simple, else as
//! `SELECT expr`), coercion to a variable's type, and the types that declarations name.

use super::*;

impl Exec<'_> {
    /// The value of an expression, as `SELECT expr` gives it.
    pub(super) async fn eval(&mut self, expr: &str) -> SqlResult<Datum> {
        self.eval_with(expr, None).await
    }

    /// The value of an expression cast to `t` (an assignment's).
    pub(super) async fn eval_typed(&mut self, expr: &str, t: &VarType) -> SqlResult<Datum> {
        match t {
            VarType::Scalar(t) => self.eval_with(expr, Some(t)).await,
            VarType::Row(_) | VarType::Record => {
                let d = self.eval_row_expression(expr)?;
                self.coerce(d, t).await
            }
        }
    }

    /// A whole-row expression: a row or record variable's name.
    pub(super) fn eval_row_expression(&self, expr: &str) -> SqlResult<Datum> {
        let name = expr.trim().to_ascii_lowercase();
        if name == "null" {
            return Ok(Datum::Unassigned);
        }
        match self.scopes.find(&name) {
            Some(r) => Ok(self.scopes.get(r).value.clone()),
            None => Err(SqlError::unsupported(format!(
                "assigning the expression \"{expr}\" to a row variable"
            ))),
        }
    }

    pub(super) async fn eval_with(
        &mut self,
        expr: &str,
        cast_to: Option<&DataType>,
    ) -> SqlResult<Datum> {
        if let Some(simple) = self.simple_expression(expr) {
            let done = match cast_to {
                Some(t) => fast_eval::eval_as(&simple, &self.scopes, t),
                None => fast_eval::eval(&simple, &self.scopes),
            };
            if let Some(d) = done {
                return Ok(d);
            }
        }
        // A value for a varchar(n) or char(n) is made as text and then fitted, as an
        // assignment fits it: a cast would cut any text to the length.
        let fitted = match cast_to {
            Some(t @ (DataType::Varchar(Some(_)) | DataType::Char(_))) => Some(t),
            _ => None,
        };
        if let Some(t) = fitted {
            let d = Box::pin(self.eval_with(expr, Some(&DataType::Text))).await?;
            let Datum::Scalar(_, v) = d else {
                unreachable!("eval_with gives scalars")
            };
            let v = match (cut_to_length(v, t)?, t) {
                (Value::Text(s), DataType::Char(n)) => Value::Text(crate::types::pad_char(&s, *n)),
                (v, _) => v,
            };
            return Ok(Datum::Scalar(t.clone(), v));
        }
        let key = format!("SELECT {expr}");
        let result = self.run_kept(&key, cast_to).await?;
        let mut rows = vars::rows_of(&result.batches)?;
        if rows.len() > 1 {
            return Err(SqlError::new(
                code::CARDINALITY_VIOLATION,
                "query returned more than one row",
            )
            .with_context(format!("PL/pgSQL expression \"{expr}\"")));
        }
        let width = result.columns.len();
        if width != 1 {
            return Err(SqlError::syntax(format!(
                "query \"{key}\" returned {width} columns"
            )));
        }
        Ok(match rows.pop() {
            Some(mut row) => {
                let f = row.pop().expect("one column");
                Datum::Scalar(f.data_type, f.value)
            }
            None => Datum::null(&crate::types::storage_type_of_field(
                &crate::types::arrow_field("", &cast_to.cloned().unwrap_or(DataType::Text)),
            )),
        })
    }

    pub(super) async fn condition(&mut self, expr: &str) -> SqlResult<bool> {
        match self.eval_with(expr, Some(&DataType::Bool)).await? {
            Datum::Scalar(_, Value::Bool(b)) => Ok(b),
            _ => Ok(false),
        }
    }

    /// An expression's value as text (RAISE, EXECUTE): None for NULL.
    pub(super) async fn eval_text(&mut self, expr: &str) -> SqlResult<Option<String>> {
        let d = self.eval(expr).await?;
        Ok(self.text_of(&d))
    }

    pub(super) fn text_of(&self, d: &Datum) -> Option<String> {
        match d {
            Datum::Scalar(_, v) => crate::pgtext::format_value(v, &self.zone),
            Datum::Row(fields) => {
                let parts: Vec<String> = fields
                    .iter()
                    .map(|f| {
                        crate::pgtext::format_value(&f.value, &self.zone)
                            .map(|s| composite_field(&s))
                            .unwrap_or_default()
                    })
                    .collect();
                Some(format!("({})", parts.join(",")))
            }
            Datum::Unassigned => None,
        }
    }

    /// `d` made a value of type `t`: scalars cast as an assignment casts them, rows field by
    /// field in order.
    pub(super) fn coerce<'a>(&'a mut self, d: Datum, t: &'a VarType) -> Boxed<'a, Datum> {
        Box::pin(async move {
            match (t, d) {
                (VarType::Record, d) => Ok(d),
                (VarType::Scalar(t), Datum::Scalar(from, v)) => {
                    if &from == t || v.is_null() {
                        return Ok(Datum::Scalar(t.clone(), v));
                    }
                    // Query results come as text and unconstrained numerics: the common
                    // conversions into a declared type are done here, the rest by SQL.
                    if let Some(converted) = super::super::kept::convert(&from, v.clone(), t) {
                        return Ok(Datum::Scalar(t.clone(), converted));
                    }
                    let v = cut_to_length(v, t)?;
                    let lit = vars::literal(&from, &v, &self.zone)?;
                    let e = crate::routines::cast(lit, crate::routines::sql_type(t)?);
                    let stmt = select_of(e);
                    let result = self.run_statement(stmt).await?;
                    let f = vars::rows_of(&result.batches)?
                        .pop()
                        .and_then(|mut r| r.pop())
                        .ok_or_else(|| SqlError::internal("a cast gave no row"))?;
                    Ok(Datum::Scalar(t.clone(), f.value))
                }
                (VarType::Row(cols), Datum::Row(fields)) => {
                    let mut out = Vec::with_capacity(cols.len());
                    for (i, (name, ct)) in cols.iter().enumerate() {
                        let d = match fields.get(i) {
                            Some(f) => Datum::Scalar(f.data_type.clone(), f.value.clone()),
                            None => Datum::null(ct),
                        };
                        let Datum::Scalar(_, value) =
                            self.coerce(d, &VarType::Scalar(ct.clone())).await?
                        else {
                            unreachable!("a scalar coerces to a scalar")
                        };
                        out.push(Field {
                            name: name.clone(),
                            data_type: ct.clone(),
                            value,
                        });
                    }
                    Ok(Datum::Row(out))
                }
                (VarType::Row(cols), Datum::Unassigned) => Ok(VarType::Row(cols.clone()).initial()),
                (VarType::Scalar(t), Datum::Unassigned) => Ok(Datum::null(t)),
                (VarType::Scalar(_), Datum::Row(_)) => Err(SqlError::new(
                    code::DATATYPE_MISMATCH,
                    "cannot assign a row to a scalar variable",
                )),
                (VarType::Row(cols), Datum::Scalar(t, v)) => {
                    // One value into a row: its first field, as PostgreSQL assigns a scalar
                    // query result to a one-column row.
                    let first = vec![Field {
                        name: String::new(),
                        data_type: t,
                        value: v,
                    }];
                    let row = VarType::Row(cols.clone());
                    self.coerce(Datum::Row(first), &row).await
                }
            }
        })
    }

    /// The declared type a declaration's text names.
    pub(super) fn resolve_type(&self, text: &str) -> SqlResult<VarType> {
        let trimmed = text.trim();
        let lower = trimmed.to_ascii_lowercase();
        if lower == "record" {
            return Ok(VarType::Record);
        }
        if let Some(of) = lower.strip_suffix("%rowtype") {
            return self.table_row_type(of.trim());
        }
        if let Some(of) = lower.strip_suffix("%type") {
            let of = of.trim();
            if let Some(r) = self.scopes.find(of) {
                return Ok(self.scopes.get(r).var_type.clone());
            }
            let Some((table, column)) = of.rsplit_once('.') else {
                return Err(SqlError::syntax(format!("invalid type name \"{trimmed}\"")));
            };
            let VarType::Row(cols) = self.table_row_type(table)? else {
                unreachable!("a table's type is a row")
            };
            return cols
                .into_iter()
                .find(|(n, _)| n == column)
                .map(|(_, t)| VarType::Scalar(t))
                .ok_or_else(|| {
                    SqlError::new(
                        code::UNDEFINED_COLUMN,
                        format!("column \"{column}\" of relation \"{table}\" does not exist"),
                    )
                });
        }
        let parsed = datafusion::sql::sqlparser::parser::Parser::new(
            &datafusion::sql::sqlparser::dialect::PostgreSqlDialect {},
        )
        .try_with_sql(trimmed)
        .and_then(|mut p| p.parse_data_type());
        match parsed {
            Ok(t) => match crate::ddl::column_type(self.session, &t) {
                Ok(t) => Ok(VarType::Scalar(t)),
                // A table's name is its row type.
                Err(e) => self.table_row_type(&lower).map_err(|_| e),
            },
            Err(_) => self.table_row_type(&lower),
        }
    }

    pub(super) fn table_row_type(&self, name: &str) -> SqlResult<VarType> {
        let (schema, table) = match name.rsplit_once('.') {
            Some((s, t)) => (Some(s), t),
            None => (None, name),
        };
        let found = self.session.scope.resolve_relation(schema, table);
        let catalog = self.session.engine.catalog.read();
        let def = found.and_then(|(_, _, oid)| catalog.tables.get(&oid).cloned());
        match def {
            Some(def) => Ok(VarType::Row(
                def.columns
                    .iter()
                    .map(|c| (c.name.clone(), c.data_type.clone()))
                    .collect(),
            )),
            None => Err(SqlError::new(
                code::UNDEFINED_OBJECT,
                format!("type \"{name}\" does not exist"),
            )),
        }
    }
}

/// A text assigned to a varchar(n) or char(n) variable: longer than n is an error, unless
/// what is past n is blanks, which are cut (PostgreSQL's assignment rule; an explicit cast
/// cuts any text).
fn cut_to_length(v: Value, t: &DataType) -> SqlResult<Value> {
    let n = match t {
        DataType::Varchar(Some(n)) | DataType::Char(n) => *n as usize,
        _ => return Ok(v),
    };
    let Value::Text(s) = &v else { return Ok(v) };
    let Some((end, _)) = s.char_indices().nth(n) else {
        return Ok(v);
    };
    if !s[end..].chars().all(|c| c == ' ') {
        return Err(SqlError::new(
            code::STRING_DATA_RIGHT_TRUNCATION,
            format!("value too long for type {}", crate::types::format_type(t)),
        ));
    }
    Ok(Value::Text(s[..end].to_string()))
}
