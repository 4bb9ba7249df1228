//! PL/pgSQL variables: their values (`Datum`), their declared types, and the nested scopes of
//! blocks that hold them.

use std::sync::Arc;

use datafusion::arrow::record_batch::RecordBatch;
use datafusion::sql::sqlparser::ast::{self, Expr};
use shoal_storage::types::{DataType, Value};

use crate::error::{code, SqlError, SqlResult};
use crate::timezone::TimeZone;

/// A value a variable holds.
#[derive(Clone, Debug, PartialEq)]
pub enum Datum {
    Scalar(DataType, Value),
    /// A row: a `%ROWTYPE` variable's, or a `record` once assigned.
    Row(Vec<Field>),
    /// A `record` not yet assigned: reading a field of it fails as in PostgreSQL.
    Unassigned,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Field {
    pub name: String,
    pub data_type: DataType,
    pub value: Value,
}

impl Datum {
    pub fn null(t: &DataType) -> Datum {
        Datum::Scalar(t.clone(), Value::Null)
    }

    pub fn bool(b: bool) -> Datum {
        Datum::Scalar(DataType::Bool, Value::Bool(b))
    }

    pub fn int(i: i64) -> Datum {
        Datum::Scalar(DataType::Int64, Value::Int64(i))
    }

    pub fn text(s: impl Into<String>) -> Datum {
        Datum::Scalar(DataType::Text, Value::Text(s.into()))
    }

    pub fn is_null(&self) -> bool {
        match self {
            Datum::Scalar(_, v) => v.is_null(),
            Datum::Row(fields) => fields.iter().all(|f| f.value.is_null()),
            Datum::Unassigned => true,
        }
    }

    /// The value as an SQL expression of its type, for a statement that reads the variable.
    pub fn to_expr(&self, zone: &TimeZone) -> SqlResult<Expr> {
        match self {
            Datum::Scalar(t, v) => literal(t, v, zone),
            Datum::Row(fields) => {
                let items = fields
                    .iter()
                    .map(|f| literal(&f.data_type, &f.value, zone))
                    .collect::<SqlResult<Vec<_>>>()?;
                Ok(Expr::Tuple(items))
            }
            Datum::Unassigned => Err(unassigned_record("record")),
        }
    }
}

/// `value` of type `t` as an SQL literal: a number or boolean as written, anything else as a
/// cast of its text, so that the statement reads exactly the value and type the variable has.
pub fn literal(t: &DataType, value: &Value, zone: &TimeZone) -> SqlResult<Expr> {
    let sql_type = super::super::sql_type(t)?;
    let e = match value {
        Value::Null => ast::Value::Null,
        Value::Bool(b) => return Ok(Expr::value(ast::Value::Boolean(*b))),
        Value::Int32(i) if *t == DataType::Int32 && *i >= 0 => {
            return Ok(Expr::value(ast::Value::Number(i.to_string(), false)))
        }
        other => match crate::pgtext::format_value(other, zone) {
            Some(text) => ast::Value::SingleQuotedString(text),
            None => ast::Value::Null,
        },
    };
    Ok(super::super::cast(Expr::value(e), sql_type))
}

pub fn unassigned_record(name: &str) -> SqlError {
    SqlError::new(
        code::OBJECT_NOT_IN_PREREQUISITE_STATE,
        format!("record \"{name}\" is not assigned yet"),
    )
    .with_detail("The tuple structure of a not-yet-assigned record is indeterminate.")
}

/// What a variable was declared as.
#[derive(Clone, Debug, PartialEq)]
pub enum VarType {
    Scalar(DataType),
    /// `%ROWTYPE` of a table (or the table's name as a type): its columns.
    Row(Vec<(String, DataType)>),
    /// `record`: takes the shape of whatever row it is given.
    Record,
}

impl VarType {
    /// The value a variable of this type starts with when it has no default.
    pub fn initial(&self) -> Datum {
        match self {
            VarType::Scalar(t) => Datum::null(t),
            VarType::Row(cols) => Datum::Row(
                cols.iter()
                    .map(|(n, t)| Field {
                        name: n.clone(),
                        data_type: t.clone(),
                        value: Value::Null,
                    })
                    .collect(),
            ),
            VarType::Record => Datum::Unassigned,
        }
    }
}

#[derive(Clone, Debug)]
pub struct Var {
    pub name: String,
    pub var_type: VarType,
    pub value: Datum,
    pub constant: bool,
    pub not_null: bool,
    /// A bound cursor's declaration (the variable holds its portal's name).
    pub cursor: Option<Arc<BoundCursor>>,
}

/// `name CURSOR [(arguments)] FOR query`: what OPEN of the cursor runs.
#[derive(Debug)]
pub struct BoundCursor {
    pub arguments: Vec<(String, VarType)>,
    pub query: String,
    /// False for NO SCROLL.
    pub scrollable: bool,
}

/// A block's variables, and its label for qualified references (`outer.x`).
#[derive(Debug, Default)]
pub struct Scope {
    pub label: Option<String>,
    pub vars: Vec<Var>,
    /// `name ALIAS FOR target`: another name for a variable of this or an outer scope.
    pub aliases: Vec<(String, VarRef)>,
}

/// Where a variable is: its scope and its place there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VarRef {
    pub scope: usize,
    pub index: usize,
}

/// The scopes of the blocks being run, outermost first.
#[derive(Debug, Default)]
pub struct Scopes {
    pub stack: Vec<Scope>,
    /// The parameters, for `$n`.
    pub positional: Vec<VarRef>,
}

impl Scopes {
    /// The innermost variable called `name`.
    pub fn find(&self, name: &str) -> Option<VarRef> {
        if let Some(n) = name.strip_prefix('$') {
            let n: usize = n.parse().ok()?;
            return self.positional.get(n.checked_sub(1)?).copied();
        }
        self.stack.iter().enumerate().rev().find_map(|(s, scope)| {
            let own = scope
                .vars
                .iter()
                .rposition(|v| v.name == name)
                .map(|index| VarRef { scope: s, index });
            own.or_else(|| {
                scope
                    .aliases
                    .iter()
                    .rev()
                    .find(|(n, _)| n == name)
                    .map(|(_, r)| *r)
            })
        })
    }

    /// `label.name`: the variable `name` of the block labelled `label`.
    pub fn find_qualified(&self, label: &str, name: &str) -> Option<VarRef> {
        self.stack.iter().enumerate().rev().find_map(|(s, scope)| {
            if scope.label.as_deref() != Some(label) {
                return None;
            }
            scope
                .vars
                .iter()
                .rposition(|v| v.name == name)
                .map(|index| VarRef { scope: s, index })
        })
    }

    pub fn get(&self, r: VarRef) -> &Var {
        &self.stack[r.scope].vars[r.index]
    }

    pub fn get_mut(&mut self, r: VarRef) -> &mut Var {
        &mut self.stack[r.scope].vars[r.index]
    }

    pub fn declare(&mut self, var: Var) {
        self.stack
            .last_mut()
            .expect("a block's scope is open while it declares")
            .vars
            .push(var);
    }

    pub fn has_label(&self, label: &str) -> bool {
        self.stack.iter().any(|s| s.label.as_deref() == Some(label))
    }
}

/// The rows of a result as (name, type, value) fields.
pub fn rows_of(batches: &[RecordBatch]) -> SqlResult<Vec<Vec<Field>>> {
    let mut rows = Vec::new();
    for batch in batches {
        let schema = batch.schema();
        let types: Vec<DataType> = schema
            .fields()
            .iter()
            .map(|f| crate::types::storage_type_of_field(f))
            .collect();
        // A column computed by DataFusion may come in another Arrow type than its storage
        // type's (a timestamp in nanoseconds): cast it first.
        let columns: Vec<_> = types
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let column = batch.column(i);
                let wanted = crate::types::arrow_type(t);
                match column.data_type() == &wanted {
                    true => column.clone(),
                    false => datafusion::arrow::compute::cast(column, &wanted)
                        .unwrap_or_else(|_| column.clone()),
                }
            })
            .collect();
        for row in 0..batch.num_rows() {
            let mut fields = Vec::with_capacity(types.len());
            for (i, t) in types.iter().enumerate() {
                fields.push(Field {
                    name: crate::query::column_names::output_name(schema.field(i).name())
                        .to_string(),
                    data_type: t.clone(),
                    value: crate::types::value_from_array(columns[i].as_ref(), row, t)?,
                });
            }
            rows.push(fields);
        }
    }
    Ok(rows)
}
