//! COPY: bulk load (COPY t FROM STDIN or from a server file) and bulk export (COPY t/query TO
//! STDOUT or a server file), in PostgreSQL's text and CSV formats, and loading in its binary
//! format (`binary`). Loading text streams through
//! parallel parse workers (`load`): `split` cuts the input into chunks of whole records and
//! `parse` turns each into Arrow arrays. A bad line fails the whole COPY with its line number,
//! and the transaction's rollback leaves nothing loaded.

pub(crate) mod binary;
mod decimal;
mod load;
mod parse;
mod scan;
mod split;

use std::path::PathBuf;
use std::sync::Arc;

use datafusion::arrow::array::Array;
use datafusion::sql::sqlparser::ast::{
    CopyLegacyCsvOption, CopyLegacyOption, CopyOption, CopySource, CopyTarget,
};
use shoal_storage::catalog::TableDef;
use shoal_storage::Transaction;
use tokio::io::AsyncReadExt;

pub use load::CopyLoader;

use crate::error::{code, SqlError, SqlResult};
use crate::pgtext;
use crate::session::{Session, StatementResult};

/// Bytes read from a server file per step of COPY FROM 'file'.
const FILE_READ_BYTES: usize = 8 << 20;

#[derive(Clone, Debug)]
pub struct CopyFormat {
    pub csv: bool,
    /// PostgreSQL's binary format (FORMAT binary).
    pub binary: bool,
    pub delimiter: char,
    pub null: String,
    pub header: bool,
    pub quote: char,
    pub escape: char,
}

impl Default for CopyFormat {
    fn default() -> Self {
        CopyFormat {
            csv: false,
            binary: false,
            delimiter: '\t',
            null: "\\N".into(),
            header: false,
            quote: '"',
            escape: '"',
        }
    }
}

/// A COPY FROM STDIN waiting for its data; it owns the transaction until the data is in.
#[derive(Debug)]
pub struct CopyRequest {
    pub def: Arc<TableDef>,
    pub columns: Vec<usize>,
    pub format: CopyFormat,
    pub txn: Option<(Transaction, bool)>,
}

impl CopyRequest {
    pub fn with_transaction(mut self, txn: Transaction, implicit: bool) -> Self {
        self.txn = Some((txn, implicit));
        self
    }

    /// A stand-in sent to the protocol layer while the real request (with its transaction)
    /// waits in the connection for the data.
    pub fn placeholder(columns: usize, binary: bool) -> Self {
        CopyRequest {
            def: Arc::new(TableDef {
                oid: 0,
                schema: String::new(),
                name: String::new(),
                columns: vec![],
                constraints: vec![],
                access_method: shoal_storage::catalog::AccessMethod::Heap,
                options: vec![],
                triggers: vec![],
            }),
            columns: (0..columns).collect(),
            format: CopyFormat {
                binary,
                ..CopyFormat::default()
            },
            txn: None,
        }
    }

    pub fn column_count(&self) -> usize {
        self.columns.len()
    }
}

fn parse_format(options: &[CopyOption], legacy: &[CopyLegacyOption]) -> SqlResult<CopyFormat> {
    let mut f = CopyFormat::default();
    let mut delimiter = None;
    let mut null = None;
    for o in options {
        match o {
            CopyOption::Format(i) => match i.value.to_lowercase().as_str() {
                "csv" => f.csv = true,
                "text" => f.csv = false,
                "binary" => f.binary = true,
                other => {
                    return Err(SqlError::new(
                        code::INVALID_PARAMETER_VALUE,
                        format!("COPY format \"{other}\" not recognized"),
                    ))
                }
            },
            CopyOption::Delimiter(c) => delimiter = Some(*c),
            CopyOption::Null(s) => null = Some(s.clone()),
            CopyOption::Header(h) => f.header = *h,
            CopyOption::Quote(c) => f.quote = *c,
            CopyOption::Escape(c) => f.escape = *c,
            CopyOption::Freeze(_) | CopyOption::Encoding(_) => {}
            _ => {}
        }
    }
    for o in legacy {
        match o {
            CopyLegacyOption::Csv(csv_opts) => {
                f.csv = true;
                for c in csv_opts {
                    match c {
                        CopyLegacyCsvOption::Header => f.header = true,
                        CopyLegacyCsvOption::Quote(q) => f.quote = *q,
                        CopyLegacyCsvOption::Escape(e) => f.escape = *e,
                        _ => {}
                    }
                }
            }
            CopyLegacyOption::Delimiter(c) => delimiter = Some(*c),
            CopyLegacyOption::Null(s) => null = Some(s.clone()),
            CopyLegacyOption::Header => f.header = true,
            CopyLegacyOption::Binary => f.binary = true,
            _ => {}
        }
    }
    for (what, c) in [
        ("delimiter", delimiter),
        ("quote", Some(f.quote)),
        ("escape", Some(f.escape)),
    ] {
        match c {
            Some(c) if !c.is_ascii() => {
                return Err(SqlError::new(
                    code::FEATURE_NOT_SUPPORTED,
                    format!("COPY {what} must be a single one-byte character"),
                ))
            }
            Some('\n' | '\r') => {
                return Err(SqlError::new(
                    code::INVALID_PARAMETER_VALUE,
                    format!("COPY {what} cannot be newline or carriage return"),
                ))
            }
            _ => {}
        }
    }
    if f.binary && (f.csv || delimiter.is_some() || null.is_some() || f.header) {
        return Err(SqlError::syntax(
            "cannot specify CSV, DELIMITER, NULL or HEADER in BINARY mode",
        ));
    }
    if f.csv {
        f.delimiter = delimiter.unwrap_or(',');
        f.null = null.unwrap_or_default();
    } else {
        f.delimiter = delimiter.unwrap_or('\t');
        f.null = null.unwrap_or_else(|| "\\N".into());
    }
    Ok(f)
}

/// The table columns a COPY names, or all of them.
fn copy_columns(
    def: &TableDef,
    columns: &[datafusion::sql::sqlparser::ast::Ident],
) -> SqlResult<Vec<usize>> {
    if columns.is_empty() {
        return Ok((0..def.columns.len()).collect());
    }
    columns
        .iter()
        .map(|c| {
            let n = crate::ddl::ident_of(&c.to_string());
            def.column_index(&n).ok_or_else(|| {
                SqlError::new(
                    code::UNDEFINED_COLUMN,
                    format!("column \"{n}\" of relation \"{}\" does not exist", def.name),
                )
            })
        })
        .collect()
}

#[allow(clippy::too_many_arguments)]
pub async fn start(
    session: &mut Session,
    txn: &mut Transaction,
    source: CopySource,
    to: bool,
    target: CopyTarget,
    options: Vec<CopyOption>,
    legacy_options: Vec<CopyLegacyOption>,
    _values: Vec<Option<String>>,
) -> SqlResult<StatementResult> {
    let format = parse_format(&options, &legacy_options)?;
    match (to, &target) {
        (false, CopyTarget::Stdin | CopyTarget::File { .. }) => {
            let CopySource::Table {
                table_name,
                columns,
            } = source
            else {
                return Err(SqlError::syntax("COPY FROM needs a table"));
            };
            let (def, _) = crate::dml::resolve_store(session, &table_name)?;
            let columns = copy_columns(&def, &columns)?;
            if let CopyTarget::File { filename } = &target {
                let rows = load_file(session, txn, def, columns, format, filename).await?;
                return Ok(StatementResult::Command {
                    tag: "COPY".into(),
                    rows: Some(rows),
                    oid: None,
                });
            }
            Ok(StatementResult::CopyIn(CopyRequest {
                def,
                columns,
                format,
                txn: None,
            }))
        }
        (true, CopyTarget::Stdout | CopyTarget::File { .. }) => {
            let query = match source {
                CopySource::Table {
                    table_name,
                    columns,
                } => {
                    let (def, _) = crate::dml::resolve_store(session, &table_name)?;
                    let cols = if columns.is_empty() {
                        "*".to_string()
                    } else {
                        columns
                            .iter()
                            .map(|c| c.to_string())
                            .collect::<Vec<_>>()
                            .join(", ")
                    };
                    format!("SELECT {cols} FROM {}", crate::dml::qualified(&def))
                }
                CopySource::Query(q) => q.to_string(),
            };
            let stmt = crate::session::parse_sql(&query)?
                .pop()
                .expect("one statement");
            let plan = crate::query::plan_statement(session.state(), &session.scope, stmt).await?;
            if format.binary {
                if matches!(target, CopyTarget::File { .. }) {
                    return Err(SqlError::unsupported("COPY TO a file in binary format"));
                }
                let columns = crate::session::columns_of_schema(plan.schema().inner());
                let batches = crate::query::execute_plan(session.state(), plan, None).await?;
                return Ok(StatementResult::CopyOutBinary { columns, batches });
            }
            let columns = plan.schema().fields().len();
            let names: Vec<String> = plan
                .schema()
                .fields()
                .iter()
                .map(|f| f.name().clone())
                .collect();
            let batches = crate::query::execute_plan(session.state(), plan, None).await?;
            let zone = session.settings.time_zone().clone();
            let mut data = Vec::new();
            let mut rows = 0;
            if format.header && format.csv {
                let header: Vec<String> = names
                    .iter()
                    .map(|n| csv_field(n, &format, columns == 1))
                    .collect();
                data.extend_from_slice(header.join(&format.delimiter.to_string()).as_bytes());
                data.push(b'\n');
            }
            for b in &batches {
                for r in 0..b.num_rows() {
                    let mut fields = Vec::with_capacity(columns);
                    for c in 0..columns {
                        let col = b.column(c);
                        // A NullArray (`COPY (SELECT NULL) TO`) has no validity bitmap.
                        let null = col.is_null(r)
                            || matches!(
                                col.data_type(),
                                datafusion::arrow::datatypes::DataType::Null
                            );
                        if null {
                            fields.push(format.null.clone());
                        } else {
                            let mut s = String::new();
                            pgtext::format_array_value(col.as_ref(), r, &zone, &mut s);
                            fields.push(if format.csv {
                                csv_field(&s, &format, columns == 1)
                            } else {
                                text_escape(&s, format.delimiter)
                            });
                        }
                    }
                    data.extend_from_slice(fields.join(&format.delimiter.to_string()).as_bytes());
                    data.push(b'\n');
                    rows += 1;
                }
            }
            if let CopyTarget::File { filename } = &target {
                if std::path::Path::new(filename).is_relative() {
                    return Err(SqlError::new(
                        code::INVALID_NAME,
                        "relative path not allowed for COPY to file",
                    ));
                }
                tokio::fs::write(filename, &data).await.map_err(|e| {
                    SqlError::new(
                        io_error_code(&e),
                        format!(
                            "could not open file \"{filename}\" for writing: {}",
                            io_message(&e)
                        ),
                    )
                })?;
                return Ok(StatementResult::Command {
                    tag: "COPY".into(),
                    rows: Some(rows),
                    oid: None,
                });
            }
            Ok(StatementResult::CopyOut {
                columns,
                data,
                rows,
                csv: format.csv,
            })
        }
        _ => Err(SqlError::unsupported("this form of COPY")),
    }
}

/// A CSV field, quoted where PostgreSQL quotes it: when it holds the delimiter, the quote or a
/// line break, when it reads as the NULL string, and when it is `\.` alone on its line (the
/// only column), which a reader would take for the end of the data.
fn csv_field(s: &str, f: &CopyFormat, single_column: bool) -> String {
    let needs = s == f.null
        || (single_column && s == "\\.")
        || s.contains(f.delimiter)
        || s.contains(f.quote)
        || s.contains('\n')
        || s.contains('\r');
    if !needs {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len() + 2);
    out.push(f.quote);
    for c in s.chars() {
        if c == f.quote || c == f.escape {
            out.push(f.escape);
        }
        out.push(c);
    }
    out.push(f.quote);
    out
}

fn text_escape(s: &str, delimiter: char) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' if delimiter == '\t' => out.push_str("\\t"),
            c if c == delimiter => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out
}

/// A COPY FROM STDIN whose data is arriving: the request (with its transaction), the loader,
/// and the first error, kept until CopyDone because the client goes on sending until then.
pub struct CopyIn {
    req: CopyRequest,
    loader: Option<CopyLoader>,
    error: Option<SqlError>,
}

impl CopyIn {
    pub fn new(session: &Session, req: CopyRequest) -> Self {
        let (loader, error) = match CopyLoader::new(
            session,
            req.def.clone(),
            req.columns.clone(),
            req.format.clone(),
        ) {
            Ok(l) => (Some(l), None),
            Err(e) => (None, Some(e)),
        };
        CopyIn { req, loader, error }
    }

    pub fn column_count(&self) -> usize {
        self.req.column_count()
    }

    /// Takes one CopyData message. After an error, the rest of the data is discarded.
    pub async fn data(&mut self, session: &mut Session, data: &[u8]) {
        if self.error.is_some() {
            return;
        }
        let (Some(loader), Some((txn, _))) = (self.loader.as_mut(), self.req.txn.as_mut()) else {
            return;
        };
        if let Err(e) = loader.push(session, txn, data).await {
            self.error = Some(e);
            self.loader = None;
        }
    }

    /// CopyDone: loads the rest and ends the statement; returns the row count.
    pub async fn done(mut self, session: &mut Session) -> SqlResult<usize> {
        let Some((mut txn, implicit)) = self.req.txn.take() else {
            return Err(SqlError::internal("COPY without a transaction"));
        };
        let loaded = match (self.error.take(), self.loader.take()) {
            (Some(e), _) => Err(e),
            (None, Some(loader)) => loader.finish(session, &mut txn).await,
            (None, None) => Err(SqlError::internal("COPY without a loader")),
        };
        session.finish_copy(txn, implicit, loaded).await
    }

    /// CopyFail from the client, or a connection that went away: the statement fails.
    pub async fn fail(mut self, session: &mut Session, reason: SqlError) {
        if let Some((txn, implicit)) = self.req.txn.take() {
            let _ = session.finish_copy(txn, implicit, Err(reason)).await;
        }
    }
}

/// COPY t FROM 'file': the server reads the file itself, through the same loader.
async fn load_file(
    session: &mut Session,
    txn: &mut Transaction,
    def: Arc<TableDef>,
    columns: Vec<usize>,
    format: CopyFormat,
    filename: &str,
) -> SqlResult<usize> {
    let path = server_path(session, filename);
    let mut file = tokio::fs::File::open(&path).await.map_err(|e| {
        SqlError::new(
            io_error_code(&e),
            format!(
                "could not open file \"{filename}\" for reading: {}",
                io_message(&e)
            ),
        )
    })?;
    let mut loader = CopyLoader::new(session, def, columns, format)?;
    let mut buf = vec![0u8; FILE_READ_BYTES];
    loop {
        let n = file.read(&mut buf).await.map_err(|e| {
            SqlError::new(
                io_error_code(&e),
                format!(
                    "could not read from COPY file \"{filename}\": {}",
                    io_message(&e)
                ),
            )
        })?;
        if n == 0 {
            break;
        }
        loader.push(session, txn, &buf[..n]).await?;
    }
    loader.finish(session, txn).await
}

/// A relative server path is relative to the data directory, as in PostgreSQL.
fn server_path(session: &Session, filename: &str) -> PathBuf {
    let path = PathBuf::from(filename);
    match &session.engine.durability {
        Some(d) if path.is_relative() => d.data_dir.join(path),
        _ => path,
    }
}

fn io_error_code(e: &std::io::Error) -> &'static str {
    match e.kind() {
        std::io::ErrorKind::NotFound => code::UNDEFINED_FILE,
        std::io::ErrorKind::PermissionDenied => code::INSUFFICIENT_PRIVILEGE,
        _ => code::IO_ERROR,
    }
}

/// PostgreSQL's wording of the common file errors (strerror).
fn io_message(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "No such file or directory".into(),
        std::io::ErrorKind::PermissionDenied => "Permission denied".into(),
        _ => e.to_string(),
    }
}
