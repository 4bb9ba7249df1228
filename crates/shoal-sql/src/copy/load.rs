//! COPY FROM as a stream: data arrives in pieces (CopyData messages or file reads), is cut into
//! chunks of whole records, parsed on the blocking pool several chunks at a time, and written
//! to the table in input order inside the COPY's transaction. Memory holds the parsed rows and
//! a bounded number of chunks in flight, never the whole input. A bad line fails the COPY, and
//! the transaction's rollback takes back whatever was written before it.

use std::collections::VecDeque;
use std::sync::Arc;

use datafusion::arrow::array::{new_null_array, Array, ArrayRef};
use datafusion::arrow::compute::concat_batches;
use datafusion::arrow::datatypes::{Field, Schema, SchemaRef};
use datafusion::arrow::record_batch::RecordBatch;
use shoal_storage::catalog::{ConstraintDef, ConstraintKind, TableDef};
use shoal_storage::column::SEGMENT_MAX_ROWS;
use shoal_storage::table::InsertOutcome;
use shoal_storage::{ColumnStats, ColumnTable, StorageError, Transaction};
use tokio::task::JoinHandle;

use super::parse::{parse_chunk, ChunkLayout, ParsedChunk};
use super::split::{RecordSplitter, CHUNK_BYTES, SEGMENT_CHUNK_BYTES_MAX};
use super::CopyFormat;
use crate::dml::TableStore;
use crate::error::{SqlError, SqlResult};
use crate::query::provider::table_schema;
use crate::routines::trigger::{Triggers, WrittenRow};
use crate::session::Session;
use crate::types::array_from_values;
use shoal_storage::catalog_triggers::{TriggerEvent, TriggerTiming};

/// Parse jobs in flight per COPY, beyond which the loader waits for the oldest: one per core
/// keeps them all busy, and one more covers the hand-off.
fn max_chunks_in_flight() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get()) + 1
}

pub struct CopyLoader {
    def: Arc<TableDef>,
    /// Table column of each COPY column.
    columns: Vec<usize>,
    layout: Arc<ChunkLayout>,
    splitter: RecordSplitter,
    /// Data received but not yet handed to a parse job; starts at a record.
    pending: Vec<u8>,
    /// The input line `pending` starts on.
    next_line: usize,
    header_pending: bool,
    in_flight: VecDeque<JoinHandle<SqlResult<ParsedChunk>>>,
    in_flight_max: usize,
    sink: Sink,
    rows: usize,
    /// The end-of-data marker was seen: the rest of the input is ignored.
    ended: bool,
    /// Rows whose referenced row was missing when they were written, checked again at the end.
    deferred: crate::constraints::DeferredReferences,
    /// Binary format: rows are read here as whole rows arrive, not by parse jobs.
    binary: Option<super::binary::BinaryReader>,
    /// The table's INSERT triggers, fired as INSERT fires them (see `write_with_triggers`).
    triggers: Option<FiredTriggers>,
}

/// The INSERT triggers of a COPY's table and what they need between chunks.
struct FiredTriggers {
    triggers: Triggers,
    /// BEFORE STATEMENT triggers have run (before the first row is written).
    started: bool,
    /// Rows written, for the AFTER ROW triggers at the end.
    after_rows: Vec<WrittenRow>,
}

enum Sink {
    Row(Arc<shoal_storage::RowTable>),
    /// Parsed batches not yet sealed into a segment (fewer than SEGMENT_MAX_ROWS rows).
    Column {
        table: Arc<ColumnTable>,
        batches: Vec<RecordBatch>,
    },
}

impl CopyLoader {
    pub fn new(
        session: &Session,
        def: Arc<TableDef>,
        columns: Vec<usize>,
        format: CopyFormat,
    ) -> SqlResult<Self> {
        let sink = match crate::dml::store_by_oid(session, def.oid, &def.name)?.1 {
            TableStore::Row(table) => Sink::Row(table),
            TableStore::Column(table) => Sink::Column {
                table,
                batches: Vec::new(),
            },
        };
        // A column table gets a chunk per segment: each parse job then builds a whole
        // segment, stats included, and nothing is copied together afterwards.
        let (chunk_bytes, chunk_records, stats_rows) = match &sink {
            Sink::Row(_) => (CHUNK_BYTES, usize::MAX, None),
            Sink::Column { .. } => (
                SEGMENT_CHUNK_BYTES_MAX,
                SEGMENT_MAX_ROWS,
                Some(SEGMENT_MAX_ROWS),
            ),
        };
        let layout = Arc::new(ChunkLayout::new(
            format.clone(),
            def.name.clone(),
            columns
                .iter()
                .map(|c| {
                    (
                        def.columns[*c].name.clone(),
                        def.columns[*c].data_type.clone(),
                    )
                })
                .collect(),
            session.settings.time_zone().clone(),
            stats_rows,
        ));
        let triggers =
            Triggers::of(&def, TriggerEvent::Insert, &[]).map(|triggers| FiredTriggers {
                triggers,
                started: false,
                after_rows: Vec::new(),
            });
        Ok(CopyLoader {
            splitter: RecordSplitter::new(&format, chunk_bytes, chunk_records, format.header),
            header_pending: format.header,
            def,
            columns,
            layout,
            pending: Vec::new(),
            next_line: 1,
            in_flight: VecDeque::new(),
            in_flight_max: max_chunks_in_flight(),
            sink,
            rows: 0,
            ended: false,
            deferred: Default::default(),
            binary: format.binary.then(Default::default),
            triggers,
        })
    }

    /// Takes the next piece of input; writes whatever chunks have been parsed so far.
    pub async fn push(
        &mut self,
        session: &mut Session,
        txn: &mut Transaction,
        data: &[u8],
    ) -> SqlResult<()> {
        if self.ended {
            return Ok(());
        }
        self.pending.extend_from_slice(data);
        if self.binary.is_some() {
            return self.push_binary(session, txn).await;
        }
        let cuts = self.splitter.cuts(&self.pending);
        let Some(&last) = cuts.last() else {
            return Ok(());
        };
        // The parse jobs share the cut data; only the unfinished tail is copied.
        let tail = self.pending.split_off(last);
        let data = Arc::new(std::mem::replace(&mut self.pending, tail));
        self.splitter.consumed(last);
        let mut start = 0;
        for cut in cuts {
            self.spawn(data.clone(), start..cut);
            start = cut;
            while self.in_flight.len() > self.in_flight_max {
                self.write_oldest(session, txn).await?;
            }
        }
        while self.in_flight.front().is_some_and(|h| h.is_finished()) {
            self.write_oldest(session, txn).await?;
        }
        Ok(())
    }

    /// The input is complete: parses the rest, writes everything, returns the row count.
    pub async fn finish(
        mut self,
        session: &mut Session,
        txn: &mut Transaction,
    ) -> SqlResult<usize> {
        if let Some(reader) = &self.binary {
            reader.finish(self.pending.len())?;
        } else if !self.ended && !self.pending.is_empty() {
            let rest = std::mem::take(&mut self.pending);
            let len = rest.len();
            self.spawn(Arc::new(rest), 0..len);
        }
        while !self.in_flight.is_empty() {
            self.write_oldest(session, txn).await?;
        }
        if let Sink::Column { table, batches } = &mut self.sink {
            let batches = std::mem::take(batches);
            seal_segments(&session.engine.db, table, txn, batches, true)?;
        }
        self.start_triggers(session, txn).await?;
        let deferred = std::mem::take(&mut self.deferred);
        let def = &self.def;
        deferred
            .check_deferred(session, txn, def)
            .await
            .map_err(|(line, e)| e.with_context(format!("COPY {}, line {line}", def.name)))?;
        if let Some(fired) = self.triggers.take() {
            let t = &fired.triggers;
            t.after_statement(session, txn, fired.after_rows).await?;
        }
        // The parse buffers and log images of a large load are free now; give them back.
        crate::allocator::release_free_memory();
        Ok(self.rows)
    }

    /// Binary format: writes the whole rows received so far.
    async fn push_binary(&mut self, session: &mut Session, txn: &mut Transaction) -> SqlResult<()> {
        let reader = self.binary.as_mut().expect("binary COPY");
        let types: Vec<_> = self
            .columns
            .iter()
            .map(|c| self.def.columns[*c].data_type.clone())
            .collect();
        let (rows, used) = reader
            .read_rows(&self.pending, &types, session.settings.time_zone())
            .map_err(|e| {
                e.with_context(format!("COPY {}, line {}", self.def.name, self.next_line))
            })?;
        self.ended = reader.ended;
        self.pending.drain(..used);
        if rows.is_empty() {
            return Ok(());
        }
        let arrays = types
            .iter()
            .enumerate()
            .map(|(i, t)| array_from_values(t, rows.iter().map(|r| &r[i])))
            .collect();
        let first = self.next_line;
        self.next_line += rows.len();
        let parsed = ParsedChunk {
            arrays,
            stats: None,
            lines: (first..self.next_line).collect(),
            saw_end_marker: false,
        };
        self.write(session, txn, parsed).await
    }

    fn spawn(&mut self, data: Arc<Vec<u8>>, chunk: std::ops::Range<usize>) {
        let first_line = self.next_line;
        let newlines = memchr::memchr_iter(b'\n', &data[chunk.clone()]).count();
        self.next_line += newlines;
        let rows_hint = newlines + usize::from(!data[chunk.clone()].ends_with(b"\n"));
        let skip_header = std::mem::take(&mut self.header_pending);
        let layout = self.layout.clone();
        self.in_flight
            .push_back(tokio::task::spawn_blocking(move || {
                parse_chunk(&layout, &data[chunk], first_line, rows_hint, skip_header)
            }));
    }

    async fn write_oldest(
        &mut self,
        session: &mut Session,
        txn: &mut Transaction,
    ) -> SqlResult<()> {
        let handle = self.in_flight.pop_front().expect("a chunk in flight");
        let parsed = handle
            .await
            .map_err(|e| SqlError::internal(format!("COPY parse job failed: {e}")))??;
        if self.ended {
            return Ok(());
        }
        self.ended = parsed.saw_end_marker;
        self.write(session, txn, parsed).await
    }

    /// Completes a parsed chunk into whole table rows (defaults, NULLs), checks constraints,
    /// and writes it.
    async fn write(
        &mut self,
        session: &mut Session,
        txn: &mut Transaction,
        parsed: ParsedChunk,
    ) -> SqlResult<()> {
        let rows = parsed.rows();
        if rows == 0 {
            return Ok(());
        }
        let def = self.def.clone();
        let ParsedChunk {
            arrays: parsed_arrays,
            stats: parsed_stats,
            lines,
            ..
        } = parsed;
        let mut arrays: Vec<Option<ArrayRef>> = vec![None; def.columns.len()];
        for (array, col) in parsed_arrays.into_iter().zip(&self.columns) {
            arrays[*col] = Some(array);
        }
        let mut full = Vec::with_capacity(arrays.len());
        for (c, array) in arrays.into_iter().enumerate() {
            full.push(match array {
                Some(a) => a,
                None => default_array(session, &def, c, rows).await?,
            });
        }
        let batch = RecordBatch::try_new(schema_of(&table_schema(&def), &full), full)?;
        if self.triggers.is_some() {
            return Box::pin(self.write_with_triggers(session, txn, &batch, &lines)).await;
        }
        check_constraints(session, txn, &self.sink, &def, &batch, &lines).await?;
        self.rows += rows;
        match &mut self.sink {
            Sink::Row(table) => {
                let has_foreign_keys = def
                    .constraints
                    .iter()
                    .any(|c| matches!(c.kind, ConstraintKind::ForeignKey { .. }));
                let zone = session.settings.time_zone();
                let mut cursor = crate::dml::RowCursor::new(&batch, &def, 0, zone)?;
                let mut row = Vec::with_capacity(def.columns.len());
                for (i, line) in lines.iter().enumerate() {
                    crate::dml::yield_between_rows(i).await;
                    let more = cursor.next_into(&mut row);
                    debug_assert!(more, "a row per line");
                    loop {
                        match table.insert_or_conflict(txn, &row) {
                            Ok(InsertOutcome::Inserted(_)) => break,
                            Ok(InsertOutcome::Conflict { index, .. }) => {
                                return Err(crate::dml::unique_violation(
                                    session, &def, index, &row,
                                )
                                .with_context(format!("COPY {}, line {line}", def.name)));
                            }
                            Err(StorageError::WouldBlock { holder }) => {
                                session.wait_for_row_holder(txn, holder).await?
                            }
                            Err(e) => return Err(e.into()),
                        }
                    }
                    // After the row is in, so that it may reference itself (or, deferred, a
                    // later row).
                    if has_foreign_keys {
                        self.deferred
                            .check_or_defer(session, txn, &def, &row, *line)
                            .await
                            .map_err(|e| {
                                e.with_context(format!("COPY {}, line {line}", def.name))
                            })?;
                    }
                }
            }
            Sink::Column { table, batches } => {
                if let (true, Some(parsed_stats)) = (batches.is_empty(), parsed_stats) {
                    // The parse job made a whole segment: append it as it is.
                    debug_assert_eq!(rows, SEGMENT_MAX_ROWS, "stats come with whole segments");
                    let stats = complete_stats(&batch, &self.columns, parsed_stats)?;
                    append_segment(&session.engine.db, table, txn, batch, stats)?;
                    return Ok(());
                }
                batches.push(batch);
                if batches.iter().map(RecordBatch::num_rows).sum::<usize>() >= SEGMENT_MAX_ROWS {
                    let full = std::mem::take(batches);
                    *batches = seal_segments(&session.engine.db, table, txn, full, false)?;
                }
            }
        }
        Ok(())
    }
}

impl CopyLoader {
    /// Fires the BEFORE STATEMENT triggers, once, before anything is written (or at the end
    /// of a COPY without rows).
    async fn start_triggers(
        &mut self,
        session: &mut Session,
        txn: &mut Transaction,
    ) -> SqlResult<()> {
        match &mut self.triggers {
            Some(fired) if !fired.started => {
                fired.started = true;
                fired
                    .triggers
                    .statement(session, txn, TriggerTiming::Before)
                    .await
            }
            _ => Ok(()),
        }
    }

    /// Writes a chunk into a table with triggers one row at a time, as INSERT does: each row
    /// goes through the BEFORE ROW triggers (which may change or skip it), then its
    /// constraints, and is kept for the AFTER ROW triggers at the end.
    async fn write_with_triggers(
        &mut self,
        session: &mut Session,
        txn: &mut Transaction,
        batch: &RecordBatch,
        lines: &[usize],
    ) -> SqlResult<()> {
        self.start_triggers(session, txn).await?;
        let def = self.def.clone();
        let table = match &self.sink {
            Sink::Row(table) => table.clone(),
            Sink::Column { table, .. } => {
                let table = table.clone();
                return self
                    .write_column_with_triggers(session, txn, &table, batch, lines)
                    .await;
            }
        };
        let fired = self.triggers.as_mut().expect("a table with triggers");
        let keep_rows = fired.triggers.keeps_rows();
        let zone = session.settings.time_zone().clone();
        let mut cursor = crate::dml::RowCursor::new(batch, &def, 0, &zone)?;
        let mut row = Vec::with_capacity(def.columns.len());
        for (i, line) in lines.iter().enumerate() {
            crate::dml::yield_between_rows(i).await;
            let more = cursor.next_into(&mut row);
            debug_assert!(more, "a row per line");
            let in_line = |e: SqlError| e.with_context(format!("COPY {}, line {line}", def.name));
            let Some(new) = fired
                .triggers
                .before_row(session, txn, None, Some(row.clone()))
                .await
                .map_err(in_line)?
            else {
                continue;
            };
            crate::constraints::check_row_with(session, &def, &new, true)
                .await
                .map_err(in_line)?;
            insert_one(session, txn, &table, &def, &new)
                .await
                .map_err(in_line)?;
            // After the row is in, as in `write`.
            self.deferred
                .check_or_defer(session, txn, &def, &new, *line)
                .await
                .map_err(in_line)?;
            self.rows += 1;
            if keep_rows {
                fired.after_rows.push((None, Some(new)));
            }
        }
        Ok(())
    }
}

impl CopyLoader {
    /// `write_with_triggers` into a column table: the rows that pass the BEFORE ROW triggers
    /// and the constraints are appended (see `RowAppender`).
    async fn write_column_with_triggers(
        &mut self,
        session: &mut Session,
        txn: &mut Transaction,
        table: &Arc<ColumnTable>,
        batch: &RecordBatch,
        lines: &[usize],
    ) -> SqlResult<()> {
        let def = self.def.clone();
        let fired = self.triggers.as_mut().expect("a table with triggers");
        let keep_rows = fired.triggers.keeps_rows();
        let zone = session.settings.time_zone().clone();
        let mut appender = crate::dml::column::RowAppender::new(&def, table, &fired.triggers);
        let rows = crate::dml::batch_rows(std::slice::from_ref(batch), &def, 0, &zone)?;
        for (i, (row, line)) in rows.into_iter().zip(lines).enumerate() {
            crate::dml::yield_between_rows(i).await;
            let in_line = |e: SqlError| e.with_context(format!("COPY {}, line {line}", def.name));
            appender.before_trigger(txn)?;
            let Some(new) = fired
                .triggers
                .before_row(session, txn, None, Some(row))
                .await
                .map_err(in_line)?
            else {
                continue;
            };
            crate::constraints::check_row(session, txn, &def, &new)
                .await
                .map_err(in_line)?;
            self.rows += 1;
            if keep_rows {
                fired.after_rows.push((None, Some(new.clone())));
            }
            appender.push(txn, new)?;
        }
        appender.flush(txn)
    }
}

/// Inserts one row, waiting for a writer of a conflicting key to end.
async fn insert_one(
    session: &Session,
    txn: &mut Transaction,
    table: &shoal_storage::RowTable,
    def: &TableDef,
    row: &[shoal_storage::types::Value],
) -> SqlResult<()> {
    loop {
        match table.insert_or_conflict(txn, row) {
            Ok(InsertOutcome::Inserted(_)) => return Ok(()),
            Ok(InsertOutcome::Conflict { index, .. }) => {
                return Err(crate::dml::unique_violation(session, def, index, row))
            }
            Err(StorageError::WouldBlock { holder }) => {
                session.wait_for_row_holder(txn, holder).await?
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// Appends `batches` to the table as segments of SEGMENT_MAX_ROWS rows. Unless `all`, a last
/// partial segment's batches are returned instead, to be filled up by the next chunks.
fn seal_segments(
    db: &shoal_storage::Database,
    table: &Arc<ColumnTable>,
    txn: &mut Transaction,
    batches: Vec<RecordBatch>,
    all: bool,
) -> SqlResult<Vec<RecordBatch>> {
    let Some(schema) = batches.first().map(|b| b.schema()) else {
        return Ok(Vec::new());
    };
    debug_assert!(batches.iter().all(|b| b.schema() == schema));
    let mut rest: VecDeque<RecordBatch> = batches.into();
    loop {
        let available: usize = rest.iter().map(RecordBatch::num_rows).sum();
        if available == 0 || (available < SEGMENT_MAX_ROWS && !all) {
            return Ok(rest.into());
        }
        // Gather slices for one segment, then copy them once into arrays of its own.
        let mut parts = Vec::new();
        let mut rows = 0;
        while rows < SEGMENT_MAX_ROWS {
            let Some(b) = rest.pop_front() else { break };
            let take = (SEGMENT_MAX_ROWS - rows).min(b.num_rows());
            if take < b.num_rows() {
                rest.push_front(b.slice(take, b.num_rows() - take));
            }
            rows += take;
            parts.push(b.slice(0, take));
        }
        let segment = concat_batches(&schema, &parts)?;
        drop(parts);
        let stats = crate::dml::column::segment_stats(&segment)?;
        append_segment(db, table, txn, segment, stats)?;
    }
}

/// `plain` with each field of the type of its array (a column table's text arrives from the
/// parse as dictionaries).
fn schema_of(plain: &SchemaRef, arrays: &[ArrayRef]) -> SchemaRef {
    if plain
        .fields()
        .iter()
        .zip(arrays)
        .all(|(f, a)| f.data_type() == a.data_type())
    {
        return plain.clone();
    }
    let fields: Vec<Field> = plain
        .fields()
        .iter()
        .zip(arrays)
        .map(|(f, a)| f.as_ref().clone().with_data_type(a.data_type().clone()))
        .collect();
    Arc::new(Schema::new_with_metadata(fields, plain.metadata().clone()))
}

/// The stats of every column of `batch`: those the parse job computed for the COPY columns
/// (`parsed[i]` is table column `copy_columns[i]`), and the rest (columns filled with their
/// defaults) computed here.
fn complete_stats(
    batch: &RecordBatch,
    copy_columns: &[usize],
    parsed: Vec<ColumnStats>,
) -> SqlResult<Vec<ColumnStats>> {
    let mut stats: Vec<Option<ColumnStats>> = vec![None; batch.num_columns()];
    for (s, col) in parsed.into_iter().zip(copy_columns) {
        stats[*col] = Some(s);
    }
    stats
        .into_iter()
        .zip(batch.columns())
        .map(|(s, array)| match s {
            Some(s) => Ok(s),
            None => crate::dml::column::column_stats(array),
        })
        .collect()
}

fn append_segment(
    db: &shoal_storage::Database,
    table: &Arc<ColumnTable>,
    txn: &mut Transaction,
    segment: RecordBatch,
    stats: Vec<ColumnStats>,
) -> SqlResult<()> {
    let no = table.append(txn, segment, stats)?;
    // Logged now, not in the commit record: the log write overlaps the rest of the load.
    db.log_segment_early(txn, table.id(), no)?;
    Ok(())
}

/// The column's default for `rows` rows, computed once per chunk rather than per row
/// (`nextval` still advances once per row).
async fn default_array(
    session: &Session,
    def: &TableDef,
    col: usize,
    rows: usize,
) -> SqlResult<ArrayRef> {
    let c = &def.columns[col];
    let t = crate::types::arrow_type(&c.data_type);
    let Some(default) = &c.default_sql else {
        return Ok(new_null_array(&t, rows));
    };
    let sql = format!("SELECT {default} FROM generate_series(1, {rows})");
    let batches = crate::query::run_generated_sql(session.state(), &session.scope, &sql).await?;
    let mut values = Vec::with_capacity(rows);
    for b in &batches {
        values.extend(crate::dml::column_values(
            b.column(0),
            &c.data_type,
            &c.name,
            session.settings.time_zone(),
        )?);
    }
    if values.len() != rows {
        return Err(SqlError::internal(
            "column default gave the wrong row count",
        ));
    }
    Ok(array_from_values(&c.data_type, values.iter()))
}

/// NOT NULL and CHECK constraints of a chunk's rows, and for a column table its foreign keys
/// (a row table's are checked row by row right after each is inserted, so that a row may
/// reference itself or one before it). NOT NULL is checked on whole arrays; a violation (and
/// every row of a table with CHECK constraints) goes through the per-row check for
/// PostgreSQL's exact message.
async fn check_constraints(
    session: &Session,
    txn: &mut Transaction,
    sink: &Sink,
    def: &TableDef,
    batch: &RecordBatch,
    lines: &[usize],
) -> SqlResult<()> {
    // A row table's rows have their foreign keys checked as they are inserted instead.
    let row_table = matches!(sink, Sink::Row(_));
    let references = |c: &ConstraintDef| matches!(c.kind, ConstraintKind::ForeignKey { .. });
    let has_checks = crate::constraints::has_checks(def)
        || (!row_table && def.constraints.iter().any(references));
    let first_null = def
        .columns
        .iter()
        .enumerate()
        .filter(|(_, c)| c.not_null)
        .filter_map(|(i, _)| {
            let a = batch.column(i);
            (a.null_count() > 0).then(|| (0..a.len()).find(|r| a.is_null(*r)))?
        })
        .min();
    if !has_checks && first_null.is_none() {
        return Ok(());
    }
    let from = if has_checks { 0 } else { first_null.unwrap() };
    let rows = crate::dml::batch_rows(
        &[batch.slice(from, batch.num_rows() - from)],
        def,
        0,
        session.settings.time_zone(),
    )?;
    let checked = TableDef {
        constraints: (def.constraints.iter())
            .filter(|c| !(row_table && references(c)))
            .cloned()
            .collect(),
        ..def.clone()
    };
    crate::constraints::check_rows(session, txn, &checked, &rows)
        .await
        .map_err(|(i, e)| e.with_context(format!("COPY {}, line {}", def.name, lines[from + i])))
}
