//! The PL/pgSQL interpreter: runs a body that `shoal_plpgsql` parsed, inside the caller's
//! session and transaction.
//!
//! PostgreSQL's PL/pgSQL evaluates every expression as a `SELECT expr` and hands embedded
//! statements to the SQL executor; so does this one (`Exec::eval`, `Exec::run_sql`), with the
//! variables a statement names replaced by their values (`embed`). Each statement of the body
//! runs through `Session::run_embedded`, the same planning and fast paths as a client's
//! statement. A block with an EXCEPTION clause runs under a savepoint, so that a caught error
//! undoes the block's changes, as PostgreSQL's subtransaction does.
//!
//! Entry points: `run` for a function, procedure or DO block.

pub mod conditions;
pub(crate) mod embed;
mod exec;
mod fast_eval;
pub(crate) mod kept;
#[cfg(test)]
mod tests;
pub mod vars;

use shoal_plpgsql::Block;
use shoal_storage::types::DataType;
use shoal_storage::Transaction;

use crate::error::SqlResult;
use crate::session::Session;
use vars::{Datum, Field, VarType};

pub use exec::Outcome;

/// What a routine gives back, as the interpreter must shape it.
#[derive(Clone, Debug, PartialEq)]
pub enum Returns {
    /// A procedure, a DO block or a `void` function.
    Void,
    Scalar(DataType),
    /// `SETOF type`, `RETURNS TABLE (...)` or OUT parameters with SETOF: rows built with
    /// RETURN NEXT and RETURN QUERY, each of these columns.
    Rows(Vec<(String, DataType)>),
    /// One row of OUT parameters.
    OutRow(Vec<(String, DataType)>),
    /// A trigger function: the row returned (NEW, OLD or NULL).
    Trigger,
}

/// One parameter as the body sees it: named (or only `$n`), typed, with its value.
#[derive(Clone, Debug)]
pub struct Param {
    pub name: Option<String>,
    pub var_type: VarType,
    pub value: Datum,
    /// An OUT (or INOUT) parameter: a variable whose final value is returned.
    pub output: bool,
}

/// A call of a PL/pgSQL body.
pub struct Invocation<'a> {
    /// The routine's name (the outer block's label, and what error contexts name).
    pub name: &'a str,
    /// How error contexts name it: `f(integer,text)`, or `inline_code_block`.
    pub context: &'a str,
    pub body: &'a Block,
    pub params: Vec<Param>,
    pub returns: Returns,
    /// Extra variables the body reads (a trigger's NEW, OLD, TG_OP, ...).
    pub specials: Vec<(String, VarType, Datum)>,
    /// A procedure called outside a transaction block may COMMIT and ROLLBACK.
    pub transaction_control: bool,
}

/// Runs a PL/pgSQL body.
pub async fn run(
    session: &mut Session,
    txn: &mut Transaction,
    invocation: Invocation<'_>,
) -> SqlResult<Outcome> {
    exec::Exec::new(session, txn, &invocation)
        .run(&invocation)
        .await
}

/// A row's fields named by `columns`, from the values in order.
pub fn named_row(
    columns: &[(String, DataType)],
    values: Vec<shoal_storage::types::Value>,
) -> Vec<Field> {
    columns
        .iter()
        .zip(values)
        .map(|((name, t), value)| Field {
            name: name.clone(),
            data_type: t.clone(),
            value,
        })
        .collect()
}
