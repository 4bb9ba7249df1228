//! Assignment: `target := expr` to a variable, a record's field or a row, and the rows
//! that `SELECT ... INTO` and `FETCH ... INTO` give their targets.

use super::*;

impl Exec<'_> {
    pub(super) async fn assign(&mut self, target: &str, expr: &str) -> SqlResult<()> {
        if let Some((parts, index)) = element_target(target)? {
            return self.assign_element(&parts, &index, expr).await;
        }
        let parts = target_parts(target)?;
        let (r, field) = self.target_ref(&parts)?;
        let var = self.scopes.get(r);
        if var.constant {
            return Err(SqlError::syntax(format!(
                "variable \"{}\" is declared CONSTANT",
                var.name
            )));
        }
        match field {
            None => {
                let t = var.var_type.clone();
                let value = self.eval_typed(expr, &t).await?;
                self.store(r, value)
            }
            Some(field) => {
                let Datum::Row(fields) = &var.value else {
                    return Err(vars::unassigned_record(&var.name));
                };
                let Some(i) = fields.iter().position(|f| f.name == field) else {
                    return Err(SqlError::new(
                        code::UNDEFINED_COLUMN,
                        format!("record \"{}\" has no field \"{field}\"", var.name),
                    ));
                };
                let t = fields[i].data_type.clone();
                let Datum::Scalar(_, value) = self.eval_typed(expr, &VarType::Scalar(t)).await?
                else {
                    unreachable!("a scalar type evaluates to a scalar")
                };
                if let Datum::Row(fields) = &mut self.scopes.get_mut(r).value {
                    fields[i].value = value;
                }
                Ok(())
            }
        }
    }

    /// `a[i] := expr` on a one-dimensional array variable: as PostgreSQL, a subscript past the
    /// end extends the array (with NULLs in between), and a NULL array becomes one.
    async fn assign_element(&mut self, parts: &[String], index: &str, expr: &str) -> SqlResult<()> {
        let (r, field) = self.target_ref(parts)?;
        let var = self.scopes.get(r);
        if var.constant {
            return Err(SqlError::syntax(format!(
                "variable \"{}\" is declared CONSTANT",
                var.name
            )));
        }
        let (VarType::Scalar(array_type @ DataType::Array(element)), None) =
            (&var.var_type, &field)
        else {
            return Err(SqlError::new(
                code::DATATYPE_MISMATCH,
                format!(
                    "cannot subscript type {} because it does not support subscripting",
                    match &var.var_type {
                        VarType::Scalar(t) => crate::types::format_type(t),
                        _ => "record".to_string(),
                    }
                ),
            ));
        };
        let (array_type, element) = (array_type.clone(), element.as_ref().clone());
        let Datum::Scalar(_, at) = self
            .eval_typed(index, &VarType::Scalar(DataType::Int32))
            .await?
        else {
            unreachable!("a scalar type evaluates to a scalar")
        };
        let at = match at {
            Value::Int32(i) => i,
            _ => {
                return Err(SqlError::new(
                    code::NULL_VALUE_NOT_ALLOWED,
                    "array subscript in assignment must not be null",
                ))
            }
        };
        let Datum::Scalar(_, value) = self.eval_typed(expr, &VarType::Scalar(element)).await?
        else {
            unreachable!("a scalar type evaluates to a scalar")
        };
        let mut items = match &self.scopes.get(r).value {
            Datum::Scalar(_, Value::Array(items)) => items.clone(),
            _ => Vec::new(),
        };
        // Shoal's arrays start at 1: PostgreSQL would move the lower bound instead.
        if at < 1 || (items.is_empty() && at != 1) {
            return Err(SqlError::unsupported(format!(
                "assigning to element {at} of an array that does not reach it from element 1 \
                 (arrays with lower bounds other than 1)"
            )));
        }
        let at = at as usize;
        if at > items.len() {
            items.resize(at, Value::Null);
        }
        items[at - 1] = value;
        self.store(r, Datum::Scalar(array_type, Value::Array(items)))
    }

    /// The variable (and field of it) an assignment target names.
    pub(super) fn target_ref(&self, parts: &[String]) -> SqlResult<(VarRef, Option<String>)> {
        let missing =
            || SqlError::syntax(format!("\"{}\" is not a known variable", parts.join(".")));
        match parts {
            [name] => self
                .scopes
                .find(name)
                .map(|r| (r, None))
                .ok_or_else(missing),
            [a, b] => {
                if let Some(r) = self.scopes.find(a) {
                    if !matches!(self.scopes.get(r).var_type, VarType::Scalar(_)) {
                        return Ok((r, Some(b.clone())));
                    }
                }
                self.scopes
                    .find_qualified(a, b)
                    .map(|r| (r, None))
                    .ok_or_else(missing)
            }
            [label, rec, field] => self
                .scopes
                .find_qualified(label, rec)
                .map(|r| (r, Some(field.clone())))
                .ok_or_else(missing),
            _ => Err(missing()),
        }
    }

    pub(super) fn store(&mut self, r: VarRef, value: Datum) -> SqlResult<()> {
        let var = self.scopes.get_mut(r);
        if var.not_null && value.is_null() {
            return Err(null_into_not_null(&var.name));
        }
        var.value = value;
        Ok(())
    }

    /// Assigns a row to INTO or loop targets: one row or record variable takes the whole
    /// row; otherwise the scalars take its columns in order (missing ones NULL). None sets
    /// them all to NULL.
    pub(super) async fn assign_row(
        &mut self,
        targets: &[String],
        row: Option<Vec<Field>>,
    ) -> SqlResult<()> {
        let refs = targets
            .iter()
            .map(|t| {
                let parts = target_parts(t)?;
                self.target_ref(&parts)
            })
            .collect::<SqlResult<Vec<_>>>()?;
        if let [(r, None)] = refs.as_slice() {
            let t = self.scopes.get(*r).var_type.clone();
            if !matches!(t, VarType::Scalar(_)) {
                let value = match row {
                    Some(fields) => self.coerce(Datum::Row(fields), &t).await?,
                    None => match t {
                        VarType::Row(_) => t.initial(),
                        _ => Datum::Unassigned,
                    },
                };
                return self.store(*r, value);
            }
        }
        let mut values = row.map(|r| r.into_iter()).into_iter().flatten();
        for (r, field) in refs {
            let given = values.next();
            let target_type = match &field {
                None => self.scopes.get(r).var_type.clone(),
                Some(name) => match &self.scopes.get(r).value {
                    Datum::Row(fields) => fields
                        .iter()
                        .find(|f| &f.name == name)
                        .map(|f| VarType::Scalar(f.data_type.clone()))
                        .ok_or_else(|| {
                            SqlError::new(
                                code::UNDEFINED_COLUMN,
                                format!("record has no field \"{name}\""),
                            )
                        })?,
                    _ => return Err(vars::unassigned_record(&self.scopes.get(r).name)),
                },
            };
            let d = match given {
                Some(f) => Datum::Scalar(f.data_type, f.value),
                None => Datum::Unassigned,
            };
            let value = self.coerce(d, &target_type).await?;
            match field {
                None => self.store(r, value)?,
                Some(name) => {
                    let Datum::Scalar(_, v) = value else {
                        unreachable!("a field is a scalar")
                    };
                    if let Datum::Row(fields) = &mut self.scopes.get_mut(r).value {
                        if let Some(f) = fields.iter_mut().find(|f| f.name == name) {
                            f.value = v;
                        }
                    }
                }
            }
        }
        Ok(())
    }

    pub(super) fn set_found(&mut self, found: bool) {
        if let Some(r) = self.scopes.find_qualified(&self.name.clone(), "found") {
            self.scopes.get_mut(r).value = Datum::bool(found);
        } else if let Some(r) = self.scopes.find("found") {
            self.scopes.get_mut(r).value = Datum::bool(found);
        }
    }
}
