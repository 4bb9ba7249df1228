//! SQL errors as PostgreSQL ErrorResponse fields.

use pgwire::error::{ErrorInfo, PgWireError};
use shoal_sql::error::code;
use shoal_sql::SqlError;

pub fn error_info(e: &SqlError) -> ErrorInfo {
    // A terminated backend's error ends its connection.
    let severity = match e.code {
        code::ADMIN_SHUTDOWN => "FATAL",
        _ => "ERROR",
    };
    let mut info = ErrorInfo::new(severity.to_string(), e.code.to_string(), e.message.clone());
    info.detail = e.detail.clone();
    info.hint = e.hint.clone();
    info.where_context = e.context.clone();
    info.position = e.position.map(|p| p.to_string());
    if let Some(object) = &e.object {
        info.schema = object.schema.clone();
        info.table = object.table.clone();
        info.column = object.column.clone();
        info.datatype = object.datatype.clone();
        info.constraint = object.constraint.clone();
    }
    info
}

pub fn to_pgwire(e: SqlError) -> PgWireError {
    PgWireError::UserError(Box::new(error_info(&e)))
}
