//! Extended-query responses (Parse, Bind, Describe, Execute) queued without flushing the socket.
//! PostgreSQL buffers the answers to these messages and flushes only at Sync and Flush (or when
//! its output buffer fills), so one pipelined round trip such as pgbench's Bind, Execute, Sync
//! costs one `sendto`. pgwire's default handlers use `send`, which flushes after every message:
//! three or four syscalls per round trip, about 40% of server CPU on `pgbench -S -M prepared`.
//! These functions mirror pgwire 0.42's defaults message for message but use `feed`; the flush
//! comes from `on_sync` / `on_flush`, and the codec's own backpressure flushes a buffer that
//! grows past its bound. Errors returned from here go to pgwire's `process_error`, which sends
//! and flushes the ErrorResponse itself, then skips messages until Sync, as PostgreSQL does.

use std::fmt::Debug;
use std::ops::Deref;
use std::sync::Arc;

use futures::sink::{Sink, SinkExt};
use futures::stream::StreamExt;
use pgwire::api::copy;
use pgwire::api::portal::{Portal, PortalExecutionState};
use pgwire::api::query::ExtendedQueryHandler;
use pgwire::api::results::{
    DescribePortalResponse, DescribeResponse, DescribeStatementResponse, Response, Tag,
};
use pgwire::api::stmt::StoredStatement;
use pgwire::api::store::{Entry, PortalStore};
use pgwire::api::{ClientInfo, ClientPortalStore, PgWireConnectionState, DEFAULT_NAME};
use pgwire::error::{ErrorInfo, PgWireError, PgWireResult, SEVERITY_ERROR};
use pgwire::messages::data::{NoData, ParameterDescription, RowDescription};
use pgwire::messages::extendedquery::{
    Bind, BindComplete, Describe, Execute, Parse, ParseComplete, PortalSuspended,
    TARGET_TYPE_BYTE_PORTAL, TARGET_TYPE_BYTE_STATEMENT,
};
use pgwire::messages::response::{EmptyQueryResponse, TransactionStatus};
use pgwire::messages::PgWireBackendMessage;

/// Parse: stores the statement (or an empty statement) and queues ParseComplete.
pub async fn parse<H, C>(handler: &H, client: &mut C, message: Parse) -> PgWireResult<()>
where
    H: ExtendedQueryHandler + ?Sized,
    C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
    C::PortalStore: PortalStore<Statement = H::Statement>,
    C::Error: Debug,
    PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
{
    let name = message.name.as_deref().unwrap_or(DEFAULT_NAME);
    match StoredStatement::parse(client, &message, handler.query_parser()).await? {
        Some(stmt) => client.portal_store().put_statement(Arc::new(stmt)),
        None => client.portal_store().put_empty_statement(name),
    }
    client
        .feed(PgWireBackendMessage::ParseComplete(ParseComplete::new()))
        .await?;
    Ok(())
}

/// Bind: stores the portal (or an empty portal) and queues BindComplete.
pub async fn bind<S, C>(client: &mut C, message: Bind) -> PgWireResult<()>
where
    S: Clone + Send + Sync + 'static,
    C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
    C::PortalStore: PortalStore<Statement = S>,
    C::Error: Debug,
    PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
{
    let statement_name = message.statement_name.as_deref().unwrap_or(DEFAULT_NAME);
    let portal_name = message.portal_name.as_deref().unwrap_or(DEFAULT_NAME);
    match client.portal_store().get_statement(statement_name) {
        Some(Entry::Value(statement)) => {
            let portal = Portal::try_new(&message, statement)?;
            client.portal_store().put_portal(Arc::new(portal));
        }
        Some(Entry::Empty) => {
            if !message.parameters.is_empty() {
                return Err(PgWireError::UserError(Box::new(ErrorInfo::new(
                    SEVERITY_ERROR.to_owned(),
                    "08P01".to_owned(),
                    format!(
                        "bind message supplies {} parameters, but prepared statement {:?} requires 0",
                        message.parameters.len(),
                        statement_name
                    ),
                ))));
            }
            client.portal_store().put_empty_portal(portal_name);
        }
        None => return Err(PgWireError::StatementNotFound(statement_name.to_owned())),
    }
    client
        .feed(PgWireBackendMessage::BindComplete(BindComplete::new()))
        .await?;
    Ok(())
}

/// Describe: queues ParameterDescription (statements only) and RowDescription or NoData.
pub async fn describe<H, C>(handler: &H, client: &mut C, message: Describe) -> PgWireResult<()>
where
    H: ExtendedQueryHandler + ?Sized,
    C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
    C::PortalStore: PortalStore<Statement = H::Statement>,
    C::Error: Debug,
    PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
{
    let name = message.name.as_deref().unwrap_or(DEFAULT_NAME);
    match message.target_type {
        TARGET_TYPE_BYTE_STATEMENT => match client.portal_store().get_statement(name) {
            Some(Entry::Value(stmt)) => {
                let response = handler.do_describe_statement(client, &stmt).await?;
                feed_describe_response(client, &response).await
            }
            Some(Entry::Empty) => {
                feed_describe_response(client, &DescribeStatementResponse::no_data()).await
            }
            None => Err(PgWireError::StatementNotFound(name.to_owned())),
        },
        TARGET_TYPE_BYTE_PORTAL => match client.portal_store().get_portal(name) {
            Some(Entry::Value(portal)) => {
                let response = handler.do_describe_portal(client, &portal).await?;
                feed_describe_response(client, &response).await
            }
            Some(Entry::Empty) => {
                feed_describe_response(client, &DescribePortalResponse::no_data()).await
            }
            None => Err(PgWireError::PortalNotFound(name.to_owned())),
        },
        _ => Err(PgWireError::InvalidTargetType(message.target_type)),
    }
}

/// Describe of a portal that is an SQL cursor (`DECLARE name CURSOR`): PostgreSQL's cursors
/// share the protocol's portal names, and psycopg's server-side cursors learn their columns so.
pub async fn describe_cursor<C>(
    client: &mut C,
    fields: Vec<pgwire::api::results::FieldInfo>,
) -> PgWireResult<()>
where
    C: Sink<PgWireBackendMessage> + Unpin,
    C::Error: Debug,
    PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
{
    feed_describe_response(client, &DescribePortalResponse::new(fields)).await
}

/// pgwire's `send_describe_response` with `feed`; its `into_row_description` is crate-private,
/// so the RowDescription is built here from the public `FieldInfo` conversion.
async fn feed_describe_response<C, DR>(client: &mut C, response: &DR) -> PgWireResult<()>
where
    C: Sink<PgWireBackendMessage> + Unpin,
    C::Error: Debug,
    PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    DR: DescribeResponse,
{
    if let Some(parameter_types) = response.parameters() {
        let oids = parameter_types.iter().map(|t| t.oid()).collect();
        client
            .feed(PgWireBackendMessage::ParameterDescription(
                ParameterDescription::new(oids),
            ))
            .await?;
    }
    // NoData for a statement without result columns, whether or not it has parameters
    // (pgwire's `is_no_data` answers an INSERT with parameters by an empty RowDescription,
    // which pgJDBC takes for a result). A SELECT of zero columns also gets NoData here, where
    // PostgreSQL sends a RowDescription without fields.
    if response.is_no_data() || response.fields().is_empty() {
        client
            .feed(PgWireBackendMessage::NoData(NoData::new()))
            .await?;
    } else {
        let fields = response.fields().iter().map(Into::into).collect();
        client
            .feed(PgWireBackendMessage::RowDescription(RowDescription::new(
                fields,
            )))
            .await?;
    }
    Ok(())
}

/// Told when a portal's query has completed: its last row and CommandComplete are queued.
#[async_trait::async_trait]
pub trait QueryCompletion {
    async fn query_completed(&self, tag: &str, rows: usize);
}

/// A query that completed: its command tag and how many rows it sent.
type Completed = Option<(String, usize)>;

/// Execute: runs the portal on its first Execute, then queues up to `max_rows` rows and
/// CommandComplete, or PortalSuspended when rows remain for a later Execute.
pub async fn execute<H, C>(handler: &H, client: &mut C, message: Execute) -> PgWireResult<()>
where
    H: ExtendedQueryHandler + QueryCompletion + ?Sized,
    C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
    C::PortalStore: PortalStore<Statement = H::Statement>,
    C::Error: Debug,
    PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
{
    if !matches!(client.state(), PgWireConnectionState::ReadyForQuery) {
        return Err(PgWireError::NotReadyForQuery);
    }
    let mut transaction_status = client.transaction_status();
    client.set_state(PgWireConnectionState::QueryInProgress);

    let portal_name = message.name.as_deref().unwrap_or(DEFAULT_NAME);
    let max_rows = message.max_rows as usize;
    let portal = match client.portal_store().get_portal(portal_name) {
        Some(Entry::Value(portal)) => portal,
        Some(Entry::Empty) => {
            // An empty portal never reaches do_query and stays valid for repeated Execute.
            client
                .feed(PgWireBackendMessage::EmptyQueryResponse(
                    EmptyQueryResponse::new(),
                ))
                .await?;
            client.set_state(PgWireConnectionState::ReadyForQuery);
            return Ok(());
        }
        None => return Err(PgWireError::PortalNotFound(portal_name.to_owned())),
    };

    let not_started = matches!(
        portal.state().lock().await.deref(),
        PortalExecutionState::Initial
    );
    // A portal already started (suspended or finished) only has rows left to fetch.
    let (has_rows, mut completed) = if not_started {
        let response = handler.do_query(client, &portal, max_rows).await?;
        feed_start_response(client, &portal, response, max_rows, &mut transaction_status).await?
    } else {
        (true, None)
    };
    if has_rows {
        completed = feed_portal_rows(client, &portal, max_rows).await?;
    }
    if let Some((tag, rows)) = completed {
        handler.query_completed(&tag, rows).await;
    }

    if !matches!(client.state(), PgWireConnectionState::CopyInProgress(_)) {
        client.set_state(PgWireConnectionState::ReadyForQuery);
        client.set_transaction_status(transaction_status);
    }
    Ok(())
}

/// Queues the answer to a portal's first Execute; returns true when it produced rows that
/// the portal now holds for `feed_portal_rows` (an Execute with a row limit), and the query
/// if it completed.
async fn feed_start_response<S, C>(
    client: &mut C,
    portal: &Portal<S>,
    response: Response,
    max_rows: usize,
    transaction_status: &mut TransactionStatus,
) -> PgWireResult<(bool, Completed)>
where
    S: Clone + Send + Sync + 'static,
    C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
    C::PortalStore: PortalStore<Statement = S>,
    C::Error: Debug,
    PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
{
    let command_complete = |tag: Tag| PgWireBackendMessage::CommandComplete(tag.into());
    match response {
        // Without a row limit every row goes out now, so the rows skip the portal: pgwire's
        // `Portal::fetch` collects them into a fresh 256-row vector and re-boxes the stream,
        // per execution, which a one-row point select notices.
        Response::Query(mut results) if max_rows == 0 => {
            let tag = results.command_tag().to_owned();
            let mut row_count = 0;
            while let Some(row) = results.data_rows().next().await {
                client.feed(PgWireBackendMessage::DataRow(row?)).await?;
                row_count += 1;
            }
            *portal.state().lock().await = PortalExecutionState::Finished;
            client
                .feed(command_complete(Tag::new(&tag).with_rows(row_count)))
                .await?;
            return Ok((false, Some((tag, row_count))));
        }
        Response::Query(results) => {
            portal.start(results).await;
            return Ok((true, None));
        }
        Response::EmptyQuery => {
            client
                .feed(PgWireBackendMessage::EmptyQueryResponse(
                    EmptyQueryResponse::new(),
                ))
                .await?;
        }
        Response::Execution(tag) => client.feed(command_complete(tag)).await?,
        Response::TransactionStart(tag) => {
            client.feed(command_complete(tag)).await?;
            *transaction_status = transaction_status.to_in_transaction_state();
        }
        Response::TransactionEnd(tag) => {
            client.feed(command_complete(tag)).await?;
            *transaction_status = transaction_status.to_idle_state();
            client.portal_store().rm_portal(DEFAULT_NAME);
        }
        Response::Error(err) => {
            client
                .feed(PgWireBackendMessage::ErrorResponse((*err).into()))
                .await?;
            *transaction_status = transaction_status.to_error_state();
        }
        // pgwire's COPY helpers `send` (flush) CopyInResponse / CopyOutResponse themselves, as
        // PostgreSQL flushes before waiting for copy data, so COPY needs no flush of its own.
        Response::CopyIn(result) => {
            client.set_state(PgWireConnectionState::CopyInProgress(true));
            copy::send_copy_in_response(client, result).await?;
        }
        Response::CopyOut(result) => copy::send_copy_out_response(client, result).await?,
        Response::CopyBoth(result) => {
            client.set_state(PgWireConnectionState::CopyInProgress(true));
            copy::send_copy_both_response(client, result).await?;
        }
    }
    Ok((false, None))
}

/// Queues up to `max_rows` (0 = all) of a started portal's rows, then CommandComplete, or
/// PortalSuspended when rows remain; returns the query if it completed.
async fn feed_portal_rows<S, C>(
    client: &mut C,
    portal: &Portal<S>,
    max_rows: usize,
) -> PgWireResult<Completed>
where
    S: Clone + Send + Sync + 'static,
    C: Sink<PgWireBackendMessage> + Unpin,
    C::Error: Debug,
    PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
{
    let fetch_result = portal.fetch(max_rows).await?;
    let mut response = fetch_result.response;
    let command_tag = response.command_tag().to_owned();
    let mut row_count = 0;
    while let Some(row) = response.data_rows().next().await {
        client.feed(PgWireBackendMessage::DataRow(row?)).await?;
        row_count += 1;
    }
    if fetch_result.suspended {
        client
            .feed(PgWireBackendMessage::PortalSuspended(PortalSuspended::new()))
            .await?;
        return Ok(None);
    }
    let tag = Tag::new(&command_tag).with_rows(row_count);
    client
        .feed(PgWireBackendMessage::CommandComplete(tag.into()))
        .await?;
    Ok(Some((command_tag, row_count)))
}
