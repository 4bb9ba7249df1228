//! The one error type of this crate: an error as PostgreSQL reports it, with its SQLSTATE, primary
//! message and the optional DETAIL, HINT and CONTEXT lines, so the wire layer can forward every
//! field PostgreSQL would send.

use std::fmt;

use shoal_numeric::NumericError;

/// An error as PostgreSQL 15 reports it for json and jsonb.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JsonError {
    /// The five-character SQLSTATE, e.g. `22P02`.
    pub sqlstate: &'static str,
    /// The primary message, worded as PostgreSQL words it.
    pub message: String,
    /// PostgreSQL's DETAIL line, e.g. `Token "x" is invalid.`.
    pub detail: Option<String>,
    /// PostgreSQL's HINT line.
    pub hint: Option<String>,
    /// PostgreSQL's CONTEXT line for input errors, e.g. `JSON data, line 1: {"a" 1...`.
    pub context: Option<String>,
}

impl JsonError {
    pub(crate) fn new(sqlstate: &'static str, message: impl Into<String>) -> JsonError {
        JsonError {
            sqlstate,
            message: message.into(),
            detail: None,
            hint: None,
            context: None,
        }
    }

    /// 22023, the code PostgreSQL uses for a json function applied to the wrong kind of value.
    pub(crate) fn invalid_parameter(message: impl Into<String>) -> JsonError {
        JsonError::new("22023", message)
    }

    /// 54001, what PostgreSQL's `check_stack_depth` raises on too deeply nested input.
    pub(crate) fn stack_depth_exceeded() -> JsonError {
        JsonError::new("54001", "stack depth limit exceeded").with_hint(
            "Increase the configuration parameter \"max_stack_depth\" (currently 2048kB), \
             after ensuring the platform's stack depth limit is adequate.",
        )
    }

    pub(crate) fn with_detail(mut self, detail: impl Into<String>) -> JsonError {
        self.detail = Some(detail.into());
        self
    }

    pub(crate) fn with_hint(mut self, hint: impl Into<String>) -> JsonError {
        self.hint = Some(hint.into());
        self
    }

    pub(crate) fn with_context(mut self, context: impl Into<String>) -> JsonError {
        self.context = Some(context.into());
        self
    }
}

impl From<NumericError> for JsonError {
    fn from(error: NumericError) -> JsonError {
        JsonError {
            sqlstate: error.sqlstate,
            message: error.message,
            detail: error.detail,
            hint: None,
            context: None,
        }
    }
}

impl fmt::Display for JsonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for JsonError {}
