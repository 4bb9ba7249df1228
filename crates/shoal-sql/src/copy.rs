//! COPY: bulk load from the client (COPY t FROM STDIN) and bulk export (COPY t/query TO
//! STDOUT), in PostgreSQL's text and CSV formats. A COPY FROM parses every line before writing
//! anything, so a bad line fails the whole COPY with its line number and loads nothing.

use datafusion::arrow::array::Array;
use datafusion::sql::sqlparser::ast::{
    CopyLegacyCsvOption, CopyLegacyOption, CopyOption, CopySource, CopyTarget,
};
use shoal_storage::catalog::TableDef;
use shoal_storage::table::InsertOutcome;
use shoal_storage::types::Value;
use shoal_storage::{StorageError, Transaction};
use std::sync::Arc;

use crate::dml::TableStore;
use crate::error::{code, SqlError, SqlResult};
use crate::pgtext;
use crate::session::{Session, StatementResult};

#[derive(Clone, Debug)]
pub struct CopyFormat {
    pub csv: bool,
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
    pub fn placeholder(columns: usize) -> Self {
        CopyRequest {
            def: Arc::new(TableDef {
                oid: 0,
                schema: String::new(),
                name: String::new(),
                columns: vec![],
                constraints: vec![],
                access_method: shoal_storage::catalog::AccessMethod::Heap,
                options: vec![],
            }),
            columns: (0..columns).collect(),
            format: CopyFormat::default(),
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
                "binary" => return Err(SqlError::unsupported("COPY BINARY")),
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
            CopyLegacyOption::Binary => return Err(SqlError::unsupported("COPY BINARY")),
            _ => {}
        }
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

#[allow(clippy::too_many_arguments)]
pub async fn start(
    session: &mut Session,
    _txn: &mut Transaction,
    source: CopySource,
    to: bool,
    target: CopyTarget,
    options: Vec<CopyOption>,
    legacy_options: Vec<CopyLegacyOption>,
    _values: Vec<Option<String>>,
) -> SqlResult<StatementResult> {
    let format = parse_format(&options, &legacy_options)?;
    match (to, &target) {
        (false, CopyTarget::Stdin) => {
            let CopySource::Table {
                table_name,
                columns,
            } = source
            else {
                return Err(SqlError::syntax("COPY FROM needs a table"));
            };
            let (def, _) = crate::dml::resolve_store(session, &table_name)?;
            let cols = if columns.is_empty() {
                (0..def.columns.len()).collect()
            } else {
                columns
                    .iter()
                    .map(|c| {
                        let n = crate::ddl::ident_of(&c.to_string());
                        def.column_index(&n).ok_or_else(|| {
                            SqlError::new(
                                code::UNDEFINED_COLUMN,
                                format!(
                                    "column \"{n}\" of relation \"{}\" does not exist",
                                    def.name
                                ),
                            )
                        })
                    })
                    .collect::<SqlResult<Vec<_>>>()?
            };
            Ok(StatementResult::CopyIn(CopyRequest {
                def,
                columns: cols,
                format,
                txn: None,
            }))
        }
        (true, CopyTarget::Stdout) => {
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
            let columns = plan.schema().fields().len();
            let names: Vec<String> = plan
                .schema()
                .fields()
                .iter()
                .map(|f| f.name().clone())
                .collect();
            let batches = crate::query::execute_plan(session.state(), plan, None).await?;
            let mut data = Vec::new();
            let mut rows = 0;
            if format.header && format.csv {
                let header: Vec<String> = names.iter().map(|n| csv_field(n, &format)).collect();
                data.extend_from_slice(header.join(&format.delimiter.to_string()).as_bytes());
                data.push(b'\n');
            }
            for b in &batches {
                for r in 0..b.num_rows() {
                    let mut fields = Vec::with_capacity(columns);
                    for c in 0..columns {
                        let col = b.column(c);
                        if col.is_null(r) {
                            fields.push(format.null.clone());
                        } else {
                            let mut s = String::new();
                            pgtext::format_array_value(col.as_ref(), r, &mut s);
                            fields.push(if format.csv {
                                csv_field(&s, &format)
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
            Ok(StatementResult::CopyOut {
                columns,
                data,
                rows,
                csv: format.csv,
            })
        }
        (false, CopyTarget::File { .. }) | (true, CopyTarget::File { .. }) => Err(SqlError::new(
            code::FEATURE_NOT_SUPPORTED,
            "COPY to or from a server file is not supported yet",
        )),
        _ => Err(SqlError::unsupported("this form of COPY")),
    }
}

fn csv_field(s: &str, f: &CopyFormat) -> String {
    let needs = s.is_empty()
        || s.contains(f.delimiter)
        || s.contains(f.quote)
        || s.contains('\n')
        || s.contains('\r')
        || s == f.null;
    if needs {
        let q = f.quote.to_string();
        format!("{q}{}{q}", s.replace(&q, &format!("{}{q}", f.escape)))
    } else {
        s.to_string()
    }
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

/// Splits one text-format line into fields (None = NULL), undoing backslash escapes.
fn split_text_line(line: &str, f: &CopyFormat) -> Vec<Option<String>> {
    let mut fields = Vec::new();
    for raw in line.split(f.delimiter) {
        if raw == f.null {
            fields.push(None);
            continue;
        }
        let mut out = String::with_capacity(raw.len());
        let mut chars = raw.chars();
        while let Some(c) = chars.next() {
            if c != '\\' {
                out.push(c);
                continue;
            }
            match chars.next() {
                Some('n') => out.push('\n'),
                Some('r') => out.push('\r'),
                Some('t') => out.push('\t'),
                Some('b') => out.push('\u{8}'),
                Some('f') => out.push('\u{c}'),
                Some('v') => out.push('\u{b}'),
                Some(o) => out.push(o),
                None => {}
            }
        }
        fields.push(Some(out));
    }
    fields
}

/// Splits CSV text into records of fields; quoted fields may span lines.
fn split_csv(data: &str, f: &CopyFormat) -> Vec<(usize, Vec<Option<String>>)> {
    let mut records = Vec::new();
    let mut fields = Vec::new();
    let mut field = String::new();
    let mut quoted_field = false;
    let mut in_quotes = false;
    let mut line = 1;
    let mut record_line = 1;
    let mut chars = data.chars().peekable();
    let end_field = |field: &mut String, quoted: &mut bool, fields: &mut Vec<Option<String>>| {
        let v = std::mem::take(field);
        fields.push(if !*quoted && v == f.null {
            None
        } else {
            Some(v)
        });
        *quoted = false;
    };
    while let Some(c) = chars.next() {
        if in_quotes {
            if c == f.escape && chars.peek() == Some(&f.quote) && (f.escape != f.quote || true) {
                if f.escape == f.quote {
                    chars.next();
                    field.push(f.quote);
                    continue;
                }
                chars.next();
                field.push(f.quote);
            } else if c == f.quote {
                in_quotes = false;
            } else {
                if c == '\n' {
                    line += 1;
                }
                field.push(c);
            }
        } else if c == f.quote {
            in_quotes = true;
            quoted_field = true;
        } else if c == f.delimiter {
            end_field(&mut field, &mut quoted_field, &mut fields);
        } else if c == '\n' || c == '\r' {
            if c == '\r' && chars.peek() == Some(&'\n') {
                chars.next();
            }
            end_field(&mut field, &mut quoted_field, &mut fields);
            records.push((record_line, std::mem::take(&mut fields)));
            line += 1;
            record_line = line;
        } else {
            field.push(c);
        }
    }
    if !field.is_empty() || !fields.is_empty() || quoted_field {
        end_field(&mut field, &mut quoted_field, &mut fields);
        records.push((record_line, fields));
    }
    records
}

/// Parses all the COPY data, then inserts the rows; returns the row count.
pub async fn load(
    session: &Session,
    req: &CopyRequest,
    txn: &mut Transaction,
    data: &[u8],
) -> SqlResult<usize> {
    let text = std::str::from_utf8(data).map_err(|_| {
        SqlError::new(
            code::BAD_COPY_FILE_FORMAT,
            "invalid byte sequence for encoding \"UTF8\"",
        )
    })?;
    let def = &req.def;
    let records: Vec<(usize, Vec<Option<String>>)> = if req.format.csv {
        split_csv(text, &req.format)
    } else {
        text.split('\n')
            .enumerate()
            .filter(|(_, l)| !l.is_empty())
            .take_while(|(_, l)| *l != "\\.")
            .map(|(i, l)| {
                (
                    i + 1,
                    split_text_line(l.strip_suffix('\r').unwrap_or(l), &req.format),
                )
            })
            .collect()
    };
    let skip = usize::from(req.format.header);
    let context = |line: usize| format!("COPY {}, line {line}", def.name);
    let mut rows = Vec::with_capacity(records.len());
    for (line, fields) in records.into_iter().skip(skip) {
        if fields.len() != req.columns.len() {
            let msg = if fields.len() < req.columns.len() {
                format!(
                    "missing data for column \"{}\"",
                    def.columns[req.columns[fields.len()]].name
                )
            } else {
                "extra data after last expected column".to_string()
            };
            return Err(SqlError::new(code::BAD_COPY_FILE_FORMAT, msg).with_detail(context(line)));
        }
        let mut row = vec![Value::Null; def.columns.len()];
        for (i, field) in fields.into_iter().enumerate() {
            let col = req.columns[i];
            if let Some(s) = field {
                row[col] = pgtext::parse_value(&s, &def.columns[col].data_type).map_err(|e| {
                    let detail = format!(
                        "{}, column {}: \"{s}\"",
                        context(line),
                        def.columns[col].name
                    );
                    e.with_detail(detail)
                })?;
            }
        }
        rows.push((line, row));
    }
    let store = crate::dml::store_by_oid(session, def.oid, &def.name)?.1;
    let needs_defaults: Vec<usize> = (0..def.columns.len())
        .filter(|c| !req.columns.contains(c) && def.columns[*c].default_sql.is_some())
        .collect();
    let count = rows.len();
    let table = match store {
        TableStore::Row(table) => table,
        TableStore::Column(table) => {
            let mut checked = Vec::with_capacity(rows.len());
            for (line, mut row) in rows {
                for c in &needs_defaults {
                    row[*c] = default_value(session, def, *c).await?;
                }
                crate::constraints::check_row(session, def, &row)
                    .await
                    .map_err(|e| e.with_detail(context(line)))?;
                checked.push(row);
            }
            crate::dml::column::append_rows(txn, def, &table, &checked)?;
            return Ok(count);
        }
    };
    for (line, mut row) in rows {
        for c in &needs_defaults {
            row[*c] = default_value(session, def, *c).await?;
        }
        crate::constraints::check_row(session, def, &row)
            .await
            .map_err(|e| e.with_detail(context(line)))?;
        loop {
            match table.insert_or_conflict(txn, &row) {
                Ok(InsertOutcome::Inserted(_)) => break,
                Ok(InsertOutcome::Conflict { index, .. }) => {
                    return Err(crate::dml::unique_violation(session, def, index, &row));
                }
                Err(StorageError::WouldBlock { holder }) => {
                    session.engine.db.wait_for(txn, holder).await?
                }
                Err(e) => return Err(e.into()),
            }
        }
    }
    Ok(count)
}

async fn default_value(session: &Session, def: &TableDef, col: usize) -> SqlResult<Value> {
    let d = def.columns[col]
        .default_sql
        .clone()
        .unwrap_or_else(|| "NULL".into());
    let sql = format!("SELECT {d}");
    let batches = crate::query::run_generated_sql(session.state(), &session.scope, &sql).await?;
    let b = batches
        .into_iter()
        .find(|b| b.num_rows() > 0)
        .ok_or_else(|| SqlError::internal("default gave no row"))?;
    let c = &def.columns[col];
    Ok(crate::dml::column_values(&b.column(0).slice(0, 1), &c.data_type, &c.name)?.remove(0))
}
