//! The HTTP endpoint of `--metrics-listen`: `GET /metrics` answers the server's metrics in
//! Prometheus's text format (`shoal_sql::metrics`). `/primary` and `/replica` answer 200 when
//! this server is the primary (takes writes), resp. a standby, and 503 otherwise, as
//! Patroni's health checks do for load balancers. Any other path is 404. HTTP/1.1 with
//! keep-alive, as Prometheus scrapes.

use std::convert::Infallible;
use std::sync::Arc;

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use shoal_sql::Engine;
use tokio::net::TcpListener;

/// The content type of Prometheus's text exposition format.
const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Serves `/metrics` on `listener` until the process ends.
pub async fn serve(listener: TcpListener, engine: Arc<Engine>) {
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                tracing::warn!("metrics endpoint: accept failed: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                continue;
            }
        };
        let engine = engine.clone();
        tokio::spawn(async move {
            let service =
                hyper::service::service_fn(move |request| answer(request, engine.clone()));
            let served = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
            if let Err(e) = served {
                tracing::debug!("metrics endpoint: connection from {peer}: {e}");
            }
        });
    }
}

async fn answer(
    request: Request<hyper::body::Incoming>,
    engine: Arc<Engine>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let reply = |status: StatusCode, body: String| {
        let mut response = Response::new(Full::new(Bytes::from(body)));
        *response.status_mut() = status;
        response
    };
    let role_check = match request.uri().path() {
        "/metrics" => None,
        "/primary" => Some(false),
        "/replica" => Some(true),
        _ => {
            return Ok(reply(
                StatusCode::NOT_FOUND,
                "not found: try /metrics, /primary or /replica\n".into(),
            ))
        }
    };
    if let Some(wants_standby) = role_check {
        let standby = engine.in_recovery();
        let role = if standby { "replica" } else { "primary" };
        let status = if standby == wants_standby {
            StatusCode::OK
        } else {
            StatusCode::SERVICE_UNAVAILABLE
        };
        return Ok(reply(status, format!("{role}\n")));
    }
    if request.method() != Method::GET && request.method() != Method::HEAD {
        return Ok(reply(
            StatusCode::METHOD_NOT_ALLOWED,
            "GET /metrics\n".into(),
        ));
    }
    // Rendering walks every table's rows for their memory: off the connections' threads.
    let rendered = tokio::task::spawn_blocking(move || shoal_sql::metrics::render(&engine)).await;
    Ok(match rendered {
        Ok(text) => {
            let mut response = reply(StatusCode::OK, text);
            response.headers_mut().insert(
                hyper::header::CONTENT_TYPE,
                hyper::header::HeaderValue::from_static(CONTENT_TYPE),
            );
            response
        }
        Err(e) => reply(StatusCode::INTERNAL_SERVER_ERROR, format!("{e}\n")),
    })
}
