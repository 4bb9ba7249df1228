//! One connection's protocol handler: pgwire decodes messages and calls in here; each call
//! locks the connection's `Session` and turns its results into wire responses. The handler
//! overrides Query and Sync so ReadyForQuery always carries the session's true transaction
//! status (idle, in block, failed block), and streams ParameterStatus when settings change.
//! Startup and authentication are in `startup`.

use std::fmt::Debug;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::common::ScalarValue;
use futures::sink::{Sink, SinkExt};
use futures::stream::{self, StreamExt};
use pgwire::api::copy::CopyHandler;
use pgwire::api::portal::{Format, Portal};
use pgwire::api::query::{ExtendedQueryHandler, SimpleQueryHandler};
use pgwire::api::results::{
    CopyResponse, DescribePortalResponse, DescribeStatementResponse, FieldInfo, QueryResponse,
    Response, Tag,
};
use pgwire::api::stmt::{QueryParser, StoredStatement};
use pgwire::api::store::PortalStore;
use pgwire::api::{
    ClientInfo, ClientPortalStore, ConnectionHandle, ConnectionManager, PgWireConnectionState, Type,
};
use pgwire::error::{PgWireError, PgWireResult};
use pgwire::messages::copy::{CopyData, CopyDone, CopyFail};
use pgwire::messages::data::{DataRow, RowDescription};
use pgwire::messages::extendedquery::{
    Bind, Close, CloseComplete, Describe, Execute, Parse, Sync as PgSync, TARGET_TYPE_BYTE_PORTAL,
    TARGET_TYPE_BYTE_STATEMENT,
};
use pgwire::messages::response::{
    EmptyQueryResponse, NotificationResponse, ReadyForQuery, TransactionStatus,
};
use pgwire::messages::simplequery::Query;
use pgwire::messages::startup::ParameterStatus;
use pgwire::messages::PgWireBackendMessage;
use shoal_sql::copy::{CopyIn, CopyRequest};
use shoal_sql::interrupt::{cancel_signal_from, CancelSignal};
use shoal_sql::notify::Inbox;
use shoal_sql::query::row_stream::RowStream;
use shoal_sql::session::Prepared;
use shoal_sql::timezone::TimeZone;
use shoal_sql::{Engine, Session, SqlError, StatementResult};
use tokio::sync::Mutex;

use super::auth::Authenticator;
use super::encode::{encode_point_rows, encode_rows, field_info_list, field_infos};
use super::errors::{error_info, to_pgwire};
use super::extended;
use super::reply_batch;
use super::startup::PendingAuth;

pub struct ConnectionHandler {
    pub session: Mutex<Session>,
    /// This connection's entry in the cancel registry, set at startup; kept here because
    /// looking it up in pgwire's session extensions per query takes a lock and a map probe.
    pub(super) connection: std::sync::OnceLock<Arc<ConnectionHandle>>,
    copy: Mutex<Option<CopyIn>>,
    pub(super) connections: Arc<ConnectionManager>,
    /// pg_hba.conf's rules and the roles: who may log in, and how.
    pub(super) auth: Arc<Authenticator>,
    /// The authentication exchange under way, between startup messages.
    pub(super) pending_auth: parking_lot::Mutex<Option<PendingAuth>>,
    parser: Arc<ShoalQueryParser>,
    /// Where the session's notifications arrive (LISTEN/NOTIFY), read without its lock.
    inbox: Arc<Inbox>,
    /// The session's backend entry (pg_stat_activity, pg_terminate_backend), read without its
    /// lock.
    backend: Arc<shoal_sql::backends::Backend>,
    /// Whether the message being handled has a Sync right behind it in the read buffer (set
    /// by the connection loop): an Execute without one starts or continues a pipeline.
    pub sync_follows: std::sync::atomic::AtomicBool,
    /// The engine, to ask without the session's lock whether pg_stat_statements counts.
    engine: Arc<Engine>,
}

impl ConnectionHandler {
    pub fn new(
        engine: Arc<Engine>,
        connections: Arc<ConnectionManager>,
        auth: Arc<Authenticator>,
    ) -> Arc<Self> {
        let session = Session::new(engine.clone());
        let inbox = session.scope.notifications.inbox();
        let backend = session.backend.clone();
        Arc::new_cyclic(
            |weak: &std::sync::Weak<ConnectionHandler>| ConnectionHandler {
                session: Mutex::new(session),
                connection: std::sync::OnceLock::new(),
                copy: Mutex::new(None),
                connections,
                auth,
                pending_auth: parking_lot::Mutex::new(None),
                sync_follows: std::sync::atomic::AtomicBool::new(true),
                parser: Arc::new(ShoalQueryParser {
                    handler: weak.clone(),
                }),
                inbox,
                backend,
                engine,
            },
        )
    }

    pub fn backend(&self) -> Arc<shoal_sql::backends::Backend> {
        self.backend.clone()
    }

    pub fn notification_inbox(&self) -> Arc<Inbox> {
        self.inbox.clone()
    }

    /// Notifications that arrived while the statement ran go out before its ReadyForQuery
    /// when the session is idle; inside a transaction block they wait for its end, as in
    /// PostgreSQL.
    async fn feed_notifications<C>(
        &self,
        client: &mut C,
        status: TransactionStatus,
    ) -> PgWireResult<()>
    where
        C: Sink<PgWireBackendMessage> + Unpin,
        PgWireError: From<C::Error>,
    {
        if !matches!(status, TransactionStatus::Idle) || self.inbox.is_empty() {
            return Ok(());
        }
        for n in self.inbox.take_all() {
            client
                .feed(PgWireBackendMessage::NotificationResponse(
                    NotificationResponse::new(n.sender_pid, n.channel, n.payload),
                ))
                .await?;
        }
        Ok(())
    }
}

fn status_of(code: u8) -> TransactionStatus {
    match code {
        b'T' => TransactionStatus::Transaction,
        b'E' => TransactionStatus::Error,
        _ => TransactionStatus::Idle,
    }
}

/// Converts one statement result to a pgwire response (text format for simple queries).
/// A timestamptz in text format shows in `zone`, the session's time zone.
fn to_response(
    result: StatementResult,
    binary: &dyn Fn(usize) -> bool,
    fields_override: Option<Arc<Vec<FieldInfo>>>,
    zone: &TimeZone,
) -> Response {
    match result {
        StatementResult::Rows {
            columns,
            batches,
            tag,
        } => {
            let fields = fields_override.unwrap_or_else(|| field_infos(&columns, binary));
            let rows = encode_rows(&batches, &columns, binary, zone);
            let mut resp = QueryResponse::new(fields, stream::iter(rows.into_iter().map(Ok)));
            resp.set_command_tag(tag);
            Response::Query(resp)
        }
        StatementResult::RowStream { columns, rows, tag } => {
            let fields = fields_override.unwrap_or_else(|| field_infos(&columns, binary));
            let binary: Vec<bool> = (0..columns.len()).map(binary).collect();
            let mut resp = QueryResponse::new(fields, stream_rows(rows, columns, binary, zone));
            resp.set_command_tag(tag);
            Response::Query(resp)
        }
        StatementResult::PointRows(point) => {
            let columns = &point.shape.columns;
            if (0..columns.len()).any(binary) {
                return match point.into_rows() {
                    Ok(rows) => to_response(rows, binary, fields_override, zone),
                    Err(e) => Response::Error(Box::new(error_info(&e))),
                };
            }
            let fields = fields_override.unwrap_or_else(|| field_infos(columns, binary));
            let rows = encode_point_rows(&point, zone);
            let mut resp = QueryResponse::new(fields, stream::iter(rows.into_iter().map(Ok)));
            resp.set_command_tag("SELECT");
            Response::Query(resp)
        }
        StatementResult::Command { tag, rows, oid } => {
            let mut t = Tag::new(&tag);
            if let Some(o) = oid {
                t = t.with_oid(o);
            }
            if let Some(r) = rows {
                t = t.with_rows(r);
            }
            Response::Execution(t)
        }
        StatementResult::TransactionStart(tag) => Response::TransactionStart(Tag::new(&tag)),
        StatementResult::TransactionEnd(tag) => Response::TransactionEnd(Tag::new(&tag)),
        StatementResult::CopyIn(req) => {
            let cols = req.column_count();
            let format = i8::from(req.format.binary);
            Response::CopyIn(CopyResponse::new(format, cols, stream::empty()))
        }
        StatementResult::CopyOut { columns, data, .. } => {
            let chunks: Vec<PgWireResult<CopyData>> = data
                .split_inclusive(|b| *b == b'\n')
                .map(|line| Ok(CopyData::new(bytes::Bytes::copy_from_slice(line))))
                .collect();
            Response::CopyOut(CopyResponse::new(0, columns, stream::iter(chunks)))
        }
        StatementResult::CopyOutBinary { .. } => {
            unreachable!("COPY TO STDOUT results are sent by copy_out_then_tag")
        }
        StatementResult::Empty => Response::EmptyQuery,
    }
}

/// A COPY ... TO STDOUT result: its messages up to CopyDone go out now, and it becomes the
/// command whose completion ("COPY n") follows them. Other results are returned unchanged.
async fn copy_out_then_tag<C>(
    client: &mut C,
    result: StatementResult,
) -> PgWireResult<StatementResult>
where
    C: Sink<PgWireBackendMessage> + Unpin,
    PgWireError: From<C::Error>,
{
    let (rows, data, format) = match result {
        StatementResult::CopyOut {
            columns,
            data,
            rows,
            ..
        } => (rows, data, vec![0; columns]),
        StatementResult::CopyOutBinary { columns, batches } => {
            let rows = batches.iter().map(|b| b.num_rows()).sum();
            let data = super::encode::copy_binary_data(&batches, &columns);
            (rows, data, vec![1; columns.len()])
        }
        other => return Ok(other),
    };
    super::encode::feed_copy_out(client, &format, &data).await?;
    Ok(StatementResult::Command {
        tag: "COPY".to_string(),
        rows: Some(rows),
        oid: None,
    })
}

/// A query's DataRows, encoded a batch at a time as the client takes them (see
/// `shoal_sql::query::row_stream`). An error ends the rows.
fn stream_rows(
    rows: RowStream,
    columns: Vec<shoal_sql::session::ResultColumn>,
    binary: Vec<bool>,
    zone: &TimeZone,
) -> impl futures::Stream<Item = PgWireResult<DataRow>> + Send + 'static {
    let zone = zone.clone();
    stream::unfold(rows, move |mut rows| {
        let (columns, binary, zone) = (columns.clone(), binary.clone(), zone.clone());
        async move {
            let encoded: Vec<PgWireResult<DataRow>> = match rows.next_batch().await? {
                Ok(batch) => encode_rows(&[batch], &columns, &|i| binary[i], &zone)
                    .into_iter()
                    .map(Ok)
                    .collect(),
                Err(e) => vec![Err(to_pgwire(e))],
            };
            Some((stream::iter(encoded), rows))
        }
    })
    .flatten()
}

/// Sends a simple query's rows and CommandComplete. An error after some rows (the query
/// failed, was canceled or timed out while the client read it) goes out as the statement's
/// ErrorResponse, as PostgreSQL's does; the session has failed the block it belonged to.
/// Returns the command tag and the rows sent when the query completed.
async fn send_query_rows<C>(
    client: &mut C,
    results: QueryResponse,
) -> PgWireResult<Option<(String, usize)>>
where
    C: Sink<PgWireBackendMessage> + Unpin + Send,
    C::Error: Debug,
    PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
{
    let QueryResponse {
        command_tag,
        row_schema,
        mut data_rows,
        ..
    } = results;
    let description = RowDescription::new(row_schema.iter().map(Into::into).collect());
    client
        .feed(PgWireBackendMessage::RowDescription(description))
        .await?;
    let mut row_count = 0;
    while let Some(row) = data_rows.next().await {
        match row {
            Ok(row) => client.feed(PgWireBackendMessage::DataRow(row)).await?,
            Err(PgWireError::UserError(info)) => {
                client
                    .feed(PgWireBackendMessage::ErrorResponse((*info).into()))
                    .await?;
                return Ok(None);
            }
            Err(other) => return Err(other),
        }
        row_count += 1;
    }
    let tag = Tag::new(&command_tag).with_rows(row_count);
    client
        .feed(PgWireBackendMessage::CommandComplete(tag.into()))
        .await?;
    Ok(Some((command_tag, row_count)))
}

/// The command tag and row count of a result that completes as soon as it is sent (not a
/// query's rows, nor COPY FROM STDIN).
fn command_completion(result: &StatementResult) -> Option<(String, u64)> {
    match result {
        StatementResult::Command { tag, rows, .. } => Some((tag.clone(), rows.unwrap_or(0) as u64)),
        StatementResult::TransactionStart(tag) | StatementResult::TransactionEnd(tag) => {
            Some((tag.clone(), 0))
        }
        _ => None,
    }
}

impl ConnectionHandler {
    /// The signal a CancelRequest for this connection fires during the query about to run.
    /// The session races it against the statement's work, so a canceled statement fails with
    /// 57014 and leaves the transaction as any failed statement does.
    async fn cancel_signal(&self) -> Option<CancelSignal> {
        let connection = self.connection.get()?;
        Some(cancel_signal_from(connection.start_query().await).of_backend(self.backend.clone()))
    }

    /// What the statement tells the client besides its result: changed settings
    /// (ParameterStatus) and its NOTICEs, sent ahead of the result as PostgreSQL sends them.
    async fn send_parameter_changes<C>(
        &self,
        client: &mut C,
        session: &mut Session,
    ) -> PgWireResult<()>
    where
        C: Sink<PgWireBackendMessage> + Unpin + Send,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        for (k, v) in session.reported_changes.drain(..) {
            client
                .feed(PgWireBackendMessage::ParameterStatus(ParameterStatus::new(
                    k, v,
                )))
                .await?;
        }
        let notices = std::mem::take(&mut *session.scope.notices.lock());
        for notice in notices {
            let mut info = pgwire::error::ErrorInfo::new(
                notice.severity.to_owned(),
                notice.code.to_owned(),
                notice.message,
            );
            info.detail = notice.detail;
            info.hint = notice.hint;
            client
                .feed(PgWireBackendMessage::NoticeResponse(info.into()))
                .await?;
        }
        Ok(())
    }

    /// Stashes a COPY FROM STDIN until its data arrives.
    async fn begin_copy(&self, session: &Session, result: StatementResult) -> StatementResult {
        if let StatementResult::CopyIn(req) = result {
            let binary = req.format.binary;
            let copy = CopyIn::new(session, req);
            let cols = copy.column_count();
            *self.copy.lock().await = Some(copy);
            return StatementResult::CopyIn(CopyRequest::placeholder(cols, binary));
        }
        result
    }
}

#[async_trait]
impl extended::QueryCompletion for ConnectionHandler {
    async fn query_completed(&self, tag: &str, rows: usize) {
        if self.engine.catalog.tracks_statements() {
            self.session
                .lock()
                .await
                .statement_completed(tag, rows as u64);
        }
    }
}

#[async_trait]
impl SimpleQueryHandler for ConnectionHandler {
    async fn on_query<C>(&self, client: &mut C, query: Query) -> PgWireResult<()>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        client.set_state(PgWireConnectionState::QueryInProgress);
        let mut session = self.session.lock().await;
        session.set_cancel_signal(self.cancel_signal().await);
        let sql = query.query;
        session.backend.start_query(&sql);
        let mut copy_started = false;
        if sql.chars().all(|c| c == ';' || c.is_whitespace()) {
            client
                .feed(PgWireBackendMessage::EmptyQueryResponse(
                    EmptyQueryResponse::new(),
                ))
                .await?;
        } else {
            let mut run = session.start_query(&sql);
            let mut results = 0usize;
            while let Some(r) = session.next_result(&mut run).await {
                results += 1;
                self.send_parameter_changes(client, &mut session).await?;
                let result = match r {
                    Ok(result) => result,
                    Err(e) => {
                        client
                            .feed(PgWireBackendMessage::ErrorResponse(error_info(&e).into()))
                            .await?;
                        continue;
                    }
                };
                let is_copy_in = matches!(result, StatementResult::CopyIn(_));
                let streamed = matches!(result, StatementResult::RowStream { .. });
                let result = self.begin_copy(&session, result).await;
                let result = copy_out_then_tag(client, result).await?;
                let completion = session
                    .is_tracking_statement()
                    .then(|| command_completion(&result))
                    .flatten();
                let zone = session.settings.time_zone();
                match to_response(result, &|_| false, None, zone) {
                    Response::Query(q) => {
                        if let Some((tag, rows)) = send_query_rows(client, q).await? {
                            session.statement_completed(&tag, rows as u64);
                        }
                    }
                    Response::Execution(t)
                    | Response::TransactionStart(t)
                    | Response::TransactionEnd(t) => {
                        client
                            .feed(PgWireBackendMessage::CommandComplete(t.into()))
                            .await?
                    }
                    Response::EmptyQuery => {
                        client
                            .feed(PgWireBackendMessage::EmptyQueryResponse(
                                EmptyQueryResponse::new(),
                            ))
                            .await?
                    }
                    Response::CopyIn(c) => {
                        pgwire::api::copy::send_copy_in_response(client, c).await?;
                        client.set_state(PgWireConnectionState::CopyInProgress(false));
                    }
                    Response::CopyOut(c) => {
                        pgwire::api::copy::send_copy_out_response(client, c).await?
                    }
                    _ => {}
                }
                if let Some((tag, rows)) = completion {
                    session.statement_completed(&tag, rows);
                }
                if is_copy_in {
                    copy_started = true;
                    break;
                }
                // The rows took the statement's cancel signal with them; the next statement
                // of the message gets its own.
                if streamed {
                    session.set_cancel_signal(self.cancel_signal().await);
                }
            }
            // Text with no statement in it, only comments: PostgreSQL answers EmptyQueryResponse
            // (pg_restore sends a dump's comment header so).
            if results == 0 {
                client
                    .feed(PgWireBackendMessage::EmptyQueryResponse(
                        EmptyQueryResponse::new(),
                    ))
                    .await?;
            }
            session.set_cancel_signal(None);
            self.send_parameter_changes(client, &mut session).await?;
        }
        if !copy_started {
            let status = status_of(session.transaction_status());
            let waited_for = session.transaction_is_waited_for();
            drop(session);
            client.set_state(PgWireConnectionState::ReadyForQuery);
            client.set_transaction_status(status);
            self.feed_notifications(client, status).await?;
            reply_batch::before_reply(waited_for).await;
            client
                .send(PgWireBackendMessage::ReadyForQuery(ReadyForQuery::new(
                    status,
                )))
                .await?;
        }
        Ok(())
    }

    async fn do_query<C>(&self, _client: &mut C, _query: &str) -> PgWireResult<Vec<Response>>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        unreachable!("on_query is overridden")
    }
}

#[derive(Debug)]
pub struct ShoalQueryParser {
    handler: std::sync::Weak<ConnectionHandler>,
}

#[async_trait]
impl QueryParser for ShoalQueryParser {
    type Statement = Arc<Prepared>;

    async fn parse_sql<C>(
        &self,
        _client: &C,
        sql: &str,
        types: &[Option<Type>],
    ) -> PgWireResult<Option<Self::Statement>>
    where
        C: ClientInfo + Unpin + Send + Sync,
    {
        let handler = self
            .handler
            .upgrade()
            .ok_or(PgWireError::NotReadyForQuery)?;
        let oids: Vec<u32> = types
            .iter()
            .map(|t| t.as_ref().map(|t| t.oid()).unwrap_or(0))
            .collect();
        let mut session = handler.session.lock().await;
        let prepared = session.prepare(sql, &oids).await.map_err(to_pgwire)?;
        Ok(Some(Arc::new(prepared)))
    }

    fn get_parameter_types(&self, stmt: &Self::Statement) -> PgWireResult<Vec<Type>> {
        Ok(stmt
            .param_oids
            .iter()
            .map(|o| Type::from_oid(*o).unwrap_or(Type::TEXT))
            .collect())
    }

    fn get_result_schema(
        &self,
        stmt: &Self::Statement,
        format: Option<&Format>,
    ) -> PgWireResult<Vec<FieldInfo>> {
        let Some(columns) = &stmt.columns else {
            return Ok(vec![]);
        };
        Ok(field_info_list(columns, |i| {
            format.map(|f| f.is_binary(i)).unwrap_or(false)
        }))
    }
}

fn decode_parameters(
    prepared: &Prepared,
    portal: &Portal<Arc<Prepared>>,
    zone: &TimeZone,
) -> Result<Vec<ScalarValue>, SqlError> {
    let mut values = Vec::with_capacity(prepared.param_types.len());
    if portal.parameters.len() != prepared.param_types.len() {
        return Err(SqlError::new(
            shoal_sql::error::code::PROTOCOL_VIOLATION,
            format!(
                "bind message supplies {} parameters, but prepared statement requires {}",
                portal.parameters.len(),
                prepared.param_types.len()
            ),
        ));
    }
    for (i, t) in prepared.param_types.iter().enumerate() {
        let v = match &portal.parameters[i] {
            None => ScalarValue::try_from(t).unwrap_or(ScalarValue::Null),
            Some(bytes) if portal.parameter_format.is_binary(i) => {
                shoal_sql::params::decode_binary(bytes, prepared.param_oids[i], t)?
            }
            Some(bytes) => {
                let text = std::str::from_utf8(bytes).map_err(|_| {
                    SqlError::new("22021", "invalid byte sequence for encoding \"UTF8\"")
                })?;
                shoal_sql::params::decode_text(text, t, zone)?
            }
        };
        values.push(v);
    }
    Ok(values)
}

#[async_trait]
impl ExtendedQueryHandler for ConnectionHandler {
    type Statement = Arc<Prepared>;
    type QueryParser = ShoalQueryParser;

    fn query_parser(&self) -> Arc<Self::QueryParser> {
        self.parser.clone()
    }

    async fn do_describe_statement<C>(
        &self,
        _client: &mut C,
        target: &StoredStatement<Self::Statement>,
    ) -> PgWireResult<DescribeStatementResponse>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let p = &target.statement;
        let params = p
            .param_oids
            .iter()
            .map(|o| Type::from_oid(*o).unwrap_or(Type::TEXT))
            .collect();
        let fields = match &p.columns {
            Some(c) => field_info_list(c, |_| false),
            None => vec![],
        };
        Ok(DescribeStatementResponse::new(params, fields))
    }

    async fn do_describe_portal<C>(
        &self,
        _client: &mut C,
        target: &Portal<Self::Statement>,
    ) -> PgWireResult<DescribePortalResponse>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let p = &target.statement.statement;
        let fields = match &p.columns {
            Some(c) => field_info_list(c, |i| target.result_column_format.is_binary(i)),
            None => vec![],
        };
        Ok(DescribePortalResponse::new(fields))
    }

    async fn do_query<C>(
        &self,
        client: &mut C,
        portal: &Portal<Self::Statement>,
        _max_rows: usize,
    ) -> PgWireResult<Response>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let prepared = portal.statement.statement.clone();
        let mut session = self.session.lock().await;
        session
            .backend
            .start_execute(&prepared.sql, &portal.statement.id);
        // Statements up to a Sync form one implicit transaction, as in PostgreSQL: a batch
        // whose third statement fails leaves nothing of the first two. An Execute with its
        // Sync right behind it (the usual case) runs as a single statement.
        if !self.sync_follows.load(std::sync::atomic::Ordering::Relaxed) {
            session.continue_pipeline(&prepared);
        }
        let values = match decode_parameters(&prepared, portal, session.settings.time_zone()) {
            Ok(v) => v,
            Err(e) => {
                session.statement_failed();
                return Err(to_pgwire(e));
            }
        };
        session.set_cancel_signal(self.cancel_signal().await);
        let result = session.execute_prepared(&prepared, values).await;
        session.set_cancel_signal(None);
        self.send_parameter_changes(client, &mut session).await?;
        match result {
            Ok(r) => {
                let r = self.begin_copy(&session, r).await;
                let r = copy_out_then_tag(client, r).await?;
                if session.is_tracking_statement() {
                    if let Some((tag, rows)) = command_completion(&r) {
                        session.statement_completed(&tag, rows);
                    }
                }
                let binary = |i: usize| portal.result_column_format.is_binary(i);
                // Execute sends no RowDescription (Describe does), so the response needs no
                // field list: one shared empty list instead of building one per execution.
                static NO_FIELDS: std::sync::LazyLock<Arc<Vec<FieldInfo>>> =
                    std::sync::LazyLock::new(|| Arc::new(Vec::new()));
                let zone = session.settings.time_zone();
                Ok(to_response(r, &binary, Some(NO_FIELDS.clone()), zone))
            }
            Err(e) => Err(to_pgwire(e)),
        }
    }

    // Parse, Bind, Describe and Execute queue their responses without flushing; Sync and
    // Flush flush them, as in PostgreSQL (see `extended`).
    async fn on_parse<C>(&self, client: &mut C, message: Parse) -> PgWireResult<()>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let name = message.name.clone().filter(|n| !n.is_empty());
        extended::parse(self, client, message).await?;
        // A named statement is listed in pg_prepared_statements until it is closed.
        if let Some(name) = name {
            if let Some(pgwire::api::store::Entry::Value(stmt)) =
                client.portal_store().get_statement(&name)
            {
                let listed = shoal_sql::session::SqlPrepared {
                    prepared: stmt.statement.clone(),
                    text: stmt.statement.sql.clone(),
                    prepared_at_micros: chrono::Utc::now().timestamp_micros(),
                };
                let session = self.session.lock().await;
                session
                    .scope
                    .protocol_statements
                    .lock()
                    .insert(name, listed);
            }
        }
        Ok(())
    }

    /// Close, as pgwire's, with the statement leaving pg_prepared_statements; CloseComplete is
    /// queued until Sync or Flush like the other extended-protocol replies.
    async fn on_close<C>(&self, client: &mut C, message: Close) -> PgWireResult<()>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let name = message.name.as_deref().unwrap_or(pgwire::api::DEFAULT_NAME);
        match message.target_type {
            TARGET_TYPE_BYTE_STATEMENT => {
                client.portal_store().rm_statement(name);
                let session = self.session.lock().await;
                session.scope.protocol_statements.lock().remove(name);
            }
            TARGET_TYPE_BYTE_PORTAL => client.portal_store().rm_portal(name),
            _ => {}
        }
        client
            .feed(PgWireBackendMessage::CloseComplete(CloseComplete::new()))
            .await?;
        Ok(())
    }

    async fn on_bind<C>(&self, client: &mut C, message: Bind) -> PgWireResult<()>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        // A named statement DEALLOCATE dropped is gone, as in PostgreSQL.
        if let Some(name) = message.statement_name.as_deref().filter(|n| !n.is_empty()) {
            let deallocated = {
                let session = self.session.lock().await;
                let listed = session.scope.protocol_statements.lock().contains_key(name);
                !listed
            };
            if deallocated && client.portal_store().get_statement(name).is_some() {
                client.portal_store().rm_statement(name);
                return Err(PgWireError::UserError(Box::new(
                    pgwire::error::ErrorInfo::new(
                        "ERROR".to_owned(),
                        "26000".to_owned(),
                        format!("prepared statement \"{name}\" does not exist"),
                    ),
                )));
            }
        }
        extended::bind(client, message).await
    }

    async fn on_describe<C>(&self, client: &mut C, message: Describe) -> PgWireResult<()>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        if message.target_type == TARGET_TYPE_BYTE_PORTAL {
            if let Some(name) = message.name.as_deref().filter(|n| !n.is_empty()) {
                if client.portal_store().get_portal(name).is_none() {
                    let columns = self.session.lock().await.cursor_columns(name);
                    if let Some(columns) = columns {
                        let fields = field_info_list(&columns, |_| false);
                        return extended::describe_cursor(client, fields).await;
                    }
                }
            }
        }
        extended::describe(self, client, message).await
    }

    async fn on_execute<C>(&self, client: &mut C, message: Execute) -> PgWireResult<()>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        extended::execute(self, client, message).await
    }

    async fn on_sync<C>(&self, client: &mut C, _message: PgSync) -> PgWireResult<()>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        client.portal_store().rm_portal(pgwire::api::DEFAULT_NAME);
        let (status, waited_for) = {
            let mut session = self.session.lock().await;
            if let Err(e) = session.sync().await {
                client
                    .feed(PgWireBackendMessage::ErrorResponse(error_info(&e).into()))
                    .await?;
            }
            let status = status_of(session.transaction_status());
            (status, session.transaction_is_waited_for())
        };
        client.set_transaction_status(status);
        self.feed_notifications(client, status).await?;
        reply_batch::before_reply(waited_for).await;
        client
            .send(PgWireBackendMessage::ReadyForQuery(ReadyForQuery::new(
                status,
            )))
            .await?;
        client.flush().await?;
        Ok(())
    }
}

#[async_trait]
impl CopyHandler for ConnectionHandler {
    async fn on_copy_data<C>(&self, _client: &mut C, copy_data: CopyData) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        // Errors wait for CopyDone: the client sends all its data before it reads replies.
        let mut copy = self.copy.lock().await;
        if let Some(copy) = copy.as_mut() {
            let mut session = self.session.lock().await;
            copy.data(&mut session, &copy_data.data).await;
        }
        Ok(())
    }

    async fn on_copy_done<C>(&self, client: &mut C, _done: CopyDone) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let Some(copy) = self.copy.lock().await.take() else {
            return Ok(());
        };
        let mut session = self.session.lock().await;
        let result = copy.done(&mut session).await;
        client.set_transaction_status(status_of(session.transaction_status()));
        match result {
            Ok(rows) => {
                client
                    .send(PgWireBackendMessage::CommandComplete(
                        Tag::new("COPY").with_rows(rows).into(),
                    ))
                    .await?;
                Ok(())
            }
            Err(e) => Err(to_pgwire(e)),
        }
    }

    async fn on_copy_fail<C>(&self, client: &mut C, fail: CopyFail) -> PgWireError
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let error = SqlError::new(
            shoal_sql::error::code::QUERY_CANCELED,
            format!("COPY from stdin failed: {}", fail.message),
        );
        if let Some(copy) = self.copy.lock().await.take() {
            let mut session = self.session.lock().await;
            copy.fail(&mut session, error.clone()).await;
            client.set_transaction_status(status_of(session.transaction_status()));
        }
        to_pgwire(error)
    }
}
