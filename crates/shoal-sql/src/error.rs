//! The one error type every user-facing failure becomes: a PostgreSQL SQLSTATE plus a message
//! (and optional detail/hint) in PostgreSQL's style, so clients and drivers that branch on codes
//! (retry on 40001, report 23505 as a duplicate) behave as they do against PostgreSQL.

use std::fmt;

use datafusion::error::DataFusionError;
use datafusion::sql::sqlparser::parser::ParserError;
use shoal_storage::catalog::CatalogError;
use shoal_storage::error::StorageError;

#[derive(Clone, Debug, PartialEq)]
pub struct SqlError {
    pub code: &'static str,
    pub message: String,
    pub detail: Option<String>,
    pub hint: Option<String>,
    /// Where the error happened, as PostgreSQL's CONTEXT field (e.g. `COPY t, line 3`).
    pub context: Option<String>,
    /// The 1-based character offset into the statement's text where a syntax error was found
    /// (ErrorResponse field `P`; psql draws its caret from it).
    pub position: Option<u32>,
    /// The object a constraint or data error is about (fields `s`, `t`, `c`, `d`, `n`), which
    /// drivers expose as e.g. psycopg's `diag.constraint_name` and ORMs use to name the column.
    pub object: Option<Box<ErrorObject>>,
}

/// The schema object an error names, as PostgreSQL reports it with constraint violations.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ErrorObject {
    pub schema: Option<String>,
    pub table: Option<String>,
    pub column: Option<String>,
    pub datatype: Option<String>,
    pub constraint: Option<String>,
}

pub type SqlResult<T> = Result<T, SqlError>;

/// SQLSTATE codes used by Shoal, named as in PostgreSQL's errcodes.txt.
pub mod code {
    pub const SUCCESSFUL_COMPLETION: &str = "00000";
    pub const WARNING: &str = "01000";
    pub const ADMIN_SHUTDOWN: &str = "57P01";
    pub const FEATURE_NOT_SUPPORTED: &str = "0A000";
    pub const CARDINALITY_VIOLATION: &str = "21000";
    pub const STRING_DATA_RIGHT_TRUNCATION: &str = "22001";
    pub const NUMERIC_VALUE_OUT_OF_RANGE: &str = "22003";
    pub const INVALID_DATETIME_FORMAT: &str = "22007";
    pub const DATETIME_FIELD_OVERFLOW: &str = "22008";
    pub const DIVISION_BY_ZERO: &str = "22012";
    pub const INTERVAL_FIELD_OVERFLOW: &str = "22015";
    pub const INVALID_PARAMETER_VALUE: &str = "22023";
    pub const INVALID_TEXT_REPRESENTATION: &str = "22P02";
    pub const BAD_COPY_FILE_FORMAT: &str = "22P04";
    pub const CHARACTER_NOT_IN_REPERTOIRE: &str = "22021";
    pub const DATA_EXCEPTION: &str = "22000";
    pub const NULL_VALUE_NOT_ALLOWED: &str = "22004";
    pub const NOT_NULL_VIOLATION: &str = "23502";
    pub const FOREIGN_KEY_VIOLATION: &str = "23503";
    pub const UNIQUE_VIOLATION: &str = "23505";
    pub const CHECK_VIOLATION: &str = "23514";
    pub const ACTIVE_SQL_TRANSACTION: &str = "25001";
    pub const NO_ACTIVE_SQL_TRANSACTION: &str = "25P01";
    pub const IN_FAILED_SQL_TRANSACTION: &str = "25P02";
    pub const READ_ONLY_SQL_TRANSACTION: &str = "25006";
    pub const INVALID_TRANSACTION_STATE: &str = "25000";
    pub const INVALID_SAVEPOINT_SPECIFICATION: &str = "3B001";
    pub const SERIALIZATION_FAILURE: &str = "40001";
    pub const DEADLOCK_DETECTED: &str = "40P01";
    pub const SYNTAX_ERROR: &str = "42601";
    pub const INSUFFICIENT_PRIVILEGE: &str = "42501";
    pub const RESERVED_NAME: &str = "42939";
    pub const INVALID_NAME: &str = "42602";
    pub const UNDEFINED_FILE: &str = "58P01";
    pub const IO_ERROR: &str = "58030";
    pub const UNDEFINED_COLUMN: &str = "42703";
    pub const UNDEFINED_FUNCTION: &str = "42883";
    pub const AMBIGUOUS_FUNCTION: &str = "42725";
    pub const DUPLICATE_FUNCTION: &str = "42723";
    pub const INVALID_FUNCTION_DEFINITION: &str = "42P13";
    pub const STATEMENT_TOO_COMPLEX: &str = "54001";
    pub const UNDEFINED_TABLE: &str = "42P01";
    pub const UNDEFINED_OBJECT: &str = "42704";
    pub const INVALID_SCHEMA_NAME: &str = "3F000";
    pub const DUPLICATE_TABLE: &str = "42P07";
    pub const DUPLICATE_SCHEMA: &str = "42P06";
    pub const DUPLICATE_OBJECT: &str = "42710";
    pub const DUPLICATE_COLUMN: &str = "42701";
    pub const AMBIGUOUS_COLUMN: &str = "42702";
    pub const DATATYPE_MISMATCH: &str = "42804";
    pub const CANNOT_COERCE: &str = "42846";
    pub const WRONG_OBJECT_TYPE: &str = "42809";
    pub const INVALID_TABLE_DEFINITION: &str = "42P16";
    pub const INVALID_OBJECT_DEFINITION: &str = "42P17";
    pub const INVALID_COLUMN_REFERENCE: &str = "42P10";
    pub const INVALID_FOREIGN_KEY: &str = "42830";
    pub const GROUPING_ERROR: &str = "42803";
    pub const DEPENDENT_OBJECTS_STILL_EXIST: &str = "2BP01";
    pub const GENERATED_ALWAYS: &str = "428C9";
    pub const LOCK_NOT_AVAILABLE: &str = "55P03";
    pub const OBJECT_NOT_IN_PREREQUISITE_STATE: &str = "55000";
    pub const OBJECT_IN_USE: &str = "55006";
    pub const QUERY_CANCELED: &str = "57014";
    pub const PROTOCOL_VIOLATION: &str = "08P01";
    pub const PROGRAM_LIMIT_EXCEEDED: &str = "54000";
    pub const OUT_OF_MEMORY: &str = "53200";
    pub const UNDEFINED_PARAMETER: &str = "42P02";
    pub const INTERNAL_ERROR: &str = "XX000";
    pub const DISK_FULL: &str = "53100";
    pub const SEQUENCE_GENERATOR_LIMIT_EXCEEDED: &str = "2200H";
    pub const INVALID_ROW_COUNT_IN_LIMIT_CLAUSE: &str = "2201W";
    pub const INVALID_ROW_COUNT_IN_RESULT_OFFSET_CLAUSE: &str = "2201X";
    pub const INVALID_ARGUMENT_FOR_LOGARITHM: &str = "2201E";
    pub const INVALID_ARGUMENT_FOR_POWER_FUNCTION: &str = "2201F";
    pub const WINDOWING_ERROR: &str = "42P20";
    pub const INVALID_RECURSION: &str = "42P19";
    pub const DUPLICATE_ALIAS: &str = "42712";
}

impl SqlError {
    pub fn new(code: &'static str, message: impl Into<String>) -> Self {
        SqlError {
            code,
            message: message.into(),
            detail: None,
            hint: None,
            context: None,
            position: None,
            object: None,
        }
    }

    /// Names the table (and its schema) the error is about.
    pub fn with_table(mut self, schema: &str, table: &str) -> Self {
        let object = self.object.get_or_insert_with(Default::default);
        object.schema = Some(schema.to_string());
        object.table = Some(table.to_string());
        self
    }

    pub fn with_column(mut self, column: &str) -> Self {
        self.object.get_or_insert_with(Default::default).column = Some(column.to_string());
        self
    }

    pub fn with_constraint(mut self, constraint: &str) -> Self {
        self.object.get_or_insert_with(Default::default).constraint = Some(constraint.to_string());
        self
    }

    pub fn with_position(mut self, position: u32) -> Self {
        self.position = Some(position);
        self
    }

    /// Adds the position of the missing relation, column or function an error names in `sql` (the
    /// statement's text), as PostgreSQL reports it, unless the error has one already.
    pub fn locate_in(mut self, sql: &str) -> Self {
        if self.position.is_some() {
            return self;
        }
        let name = match self.code {
            code::UNDEFINED_TABLE | code::UNDEFINED_COLUMN => self
                .message
                .split_once('"')
                .and_then(|(_, rest)| rest.split_once('"'))
                .map(|(name, _)| name.to_string()),
            // `function f(integer) does not exist`
            code::UNDEFINED_FUNCTION => self
                .message
                .strip_prefix("function ")
                .and_then(|rest| rest.split_once('('))
                .map(|(name, _)| name.to_string()),
            _ => None,
        };
        if let Some(position) = name.and_then(|n| crate::parse::name_position(sql, &n)) {
            self.position = Some(position);
        }
        self
    }

    pub fn with_context(mut self, context: impl Into<String>) -> Self {
        self.context = Some(context.into());
        self
    }

    pub fn with_detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = Some(detail.into());
        self
    }

    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    pub fn syntax(message: impl Into<String>) -> Self {
        Self::new(code::SYNTAX_ERROR, message)
    }

    pub fn unsupported(what: impl Into<String>) -> Self {
        Self::new(
            code::FEATURE_NOT_SUPPORTED,
            format!("{} is not supported", what.into()),
        )
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(code::INTERNAL_ERROR, message)
    }

    pub fn undefined_table(name: &str) -> Self {
        Self::new(
            code::UNDEFINED_TABLE,
            format!("relation \"{name}\" does not exist"),
        )
    }

    pub fn undefined_column(name: &str) -> Self {
        Self::new(
            code::UNDEFINED_COLUMN,
            format!("column \"{name}\" does not exist"),
        )
    }

    pub fn in_failed_transaction() -> Self {
        Self::new(
            code::IN_FAILED_SQL_TRANSACTION,
            "current transaction is aborted, commands ignored until end of transaction block",
        )
    }
}

impl fmt::Display for SqlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.message, self.code)
    }
}

impl std::error::Error for SqlError {}

impl From<CatalogError> for SqlError {
    fn from(e: CatalogError) -> Self {
        match e {
            CatalogError::DuplicateRelation(n) => SqlError::new(
                code::DUPLICATE_TABLE,
                format!("relation \"{n}\" already exists"),
            ),
            CatalogError::DuplicateSchema(n) => SqlError::new(
                code::DUPLICATE_SCHEMA,
                format!("schema \"{n}\" already exists"),
            ),
            CatalogError::UndefinedSchema(n) => SqlError::new(
                code::INVALID_SCHEMA_NAME,
                format!("schema \"{n}\" does not exist"),
            ),
            CatalogError::UndefinedRelation(n) => SqlError::undefined_table(&n),
            CatalogError::DuplicateRole(n) => SqlError::new(
                code::DUPLICATE_OBJECT,
                format!("role \"{n}\" already exists"),
            ),
            CatalogError::UndefinedRole(n) => SqlError::new(
                code::UNDEFINED_OBJECT,
                format!("role \"{n}\" does not exist"),
            ),
        }
    }
}

impl From<StorageError> for SqlError {
    fn from(e: StorageError) -> Self {
        match e {
            StorageError::SerializationFailure => SqlError::new(
                code::SERIALIZATION_FAILURE,
                "could not serialize access due to concurrent update",
            ),
            StorageError::Deadlock => SqlError::new(code::DEADLOCK_DETECTED, "deadlock detected"),
            StorageError::LockNotAvailable => SqlError::new(
                code::LOCK_NOT_AVAILABLE,
                "could not obtain lock on row in relation",
            ),
            StorageError::NoSuchSavepoint(name) => SqlError::new(
                code::INVALID_SAVEPOINT_SPECIFICATION,
                format!("savepoint \"{name}\" does not exist"),
            ),
            StorageError::OutOfMemory {
                used_bytes,
                limit_bytes,
            } => SqlError::new("53200", "out of memory")
                .with_detail(format!(
                    "The server uses {} MB of memory and its limit, shoal.max_memory, is {} MB.",
                    used_bytes >> 20,
                    limit_bytes >> 20
                ))
                .with_hint(
                    "Delete rows or drop tables to free memory, or raise shoal.max_memory \
                     (ALTER SYSTEM SET shoal.max_memory = ...; SELECT pg_reload_conf())."
                        .to_string(),
                ),
            // Each storage error knows its SQLSTATE (a commit the redo log refused is 58030).
            other => SqlError::new(other.sqlstate(), other.to_string()),
        }
    }
}

impl From<ParserError> for SqlError {
    /// PostgreSQL names only the token where parsing stopped: `syntax error at or near "SELEC"`,
    /// or `syntax error at end of input`; sqlparser says what it expected and what it "found".
    fn from(e: ParserError) -> Self {
        let msg = e.to_string();
        let msg = msg.trim_start_matches("sql parser error: ");
        let Some(found) = msg.rsplit_once("found: ").map(|(_, f)| f) else {
            return SqlError::syntax(format!("syntax error: {msg}"));
        };
        let token = found
            .rsplit_once(" at Line: ")
            .map_or(found, |(token, _)| token);
        if token == "EOF" {
            SqlError::syntax("syntax error at end of input")
        } else {
            SqlError::syntax(format!("syntax error at or near \"{token}\""))
        }
    }
}

impl From<DataFusionError> for SqlError {
    fn from(e: DataFusionError) -> Self {
        crate::query::errors::from_datafusion(e)
    }
}

impl From<datafusion::arrow::error::ArrowError> for SqlError {
    fn from(e: datafusion::arrow::error::ArrowError) -> Self {
        crate::query::errors::from_arrow(e)
    }
}

/// A message for the client (a NoticeResponse) that does not end the statement: what `DROP
/// TABLE IF EXISTS` skipped (a NOTICE), or a statement that had no effect (a WARNING).
#[derive(Debug, Clone, PartialEq)]
pub struct Notice {
    /// "NOTICE" or "WARNING".
    pub severity: &'static str,
    pub code: &'static str,
    pub message: String,
    pub detail: Option<String>,
    pub hint: Option<String>,
}
