//! The HTTP/1.1 server loop and header-name casing on the wire.
//!
//! hyper writes header names in lowercase; its title-case option gives `X-Records` and `Link`
//! but `X-Ratelimit-Limit` and `Etag`, and some clients read these names case-sensitively. hyper
//! does write a name exactly as spelled in a response's header-case map, a type it keeps private
//! but fills when it parses a message with `preserve_header_case`. So at start-up rebill has
//! hyper parse one request spelling every header name it emits, keeps the resulting extensions
//! and attaches a copy to every response; names not in the map fall back to title case. The
//! raw-bytes test in the end-to-end suite guards this.
//!
//! Open connections are bounded: each holds a permit of a semaphore of `max_connections`, taken
//! *before* `accept`. At the bound the loop waits instead of accepting, so further clients queue
//! in the kernel's listen backlog (their connect succeeds, their request waits) and are served
//! as soon as a connection closes; none is accepted only to be dropped. Slots free up within
//! bounded time: request heads must arrive within [`HEADER_TIMEOUT`], bodies within the body
//! deadline (see `layers::body_deadline`), and an idle keep-alive connection is closed after
//! [`HEADER_TIMEOUT`] too.
//!
//! Shutting down ([`serve`]'s `shutdown` future): the listener closes at once (new connections
//! are refused), every open connection finishes the request it is serving and closes (an idle
//! kept-alive one closes at once), and `serve` returns when all are closed or the grace ended.

use std::convert::Infallible;
use std::io;
use std::time::Duration;

use axum::Router;
use axum::http::{Extensions, Request, Response};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// How long a connection may take to send a request head (and may stay idle between two
/// requests on a kept-alive connection).
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(30);

/// Header names written exactly as spelled here.
pub const CANONICAL_NAMES: &[&str] = &[
    "Content-Type",
    "Content-Length",
    "Location",
    "Link",
    "ETag",
    "X-Records",
    "X-RateLimit-Limit",
    "X-RateLimit-Remaining",
    "X-RateLimit-Reset",
    "X-Api-Version",
    "Service-Deprecated",
    "Service-Sunset-Date",
    "WWW-Authenticate",
    "Allow",
];

/// Extensions holding hyper's header-case map for those of [`CANONICAL_NAMES`] that title
/// case spells otherwise (hyper writes title case for names not in the map).
pub async fn canonical_case_extensions() -> io::Result<Extensions> {
    let (mut client, server) = tokio::io::duplex(16 * 1024);
    let (tx, rx) = tokio::sync::oneshot::channel();
    let tx = std::sync::Mutex::new(Some(tx));
    let service = service_fn(move |request: Request<Incoming>| {
        if let Some(tx) = tx.lock().ok().and_then(|mut t| t.take()) {
            let _ = tx.send(request.extensions().clone());
        }
        async { Ok::<_, Infallible>(Response::new(String::new())) }
    });
    let conn = hyper::server::conn::http1::Builder::new()
        .preserve_header_case(true)
        .serve_connection(TokioIo::new(server), service);
    let task = tokio::spawn(conn);
    let mut head = String::from("GET / HTTP/1.1\r\nHost: rebill\r\n");
    // Only the names title case would spell otherwise: the map is copied into every response.
    for name in CANONICAL_NAMES.iter().filter(|name| title_case(name) != **name) {
        if !name.eq_ignore_ascii_case("content-length") {
            head.push_str(&format!("{name}: x\r\n"));
        }
    }
    head.push_str("Content-Length: 0\r\nConnection: close\r\n\r\n");
    client.write_all(head.as_bytes()).await?;
    let mut sink = Vec::new();
    client.read_to_end(&mut sink).await?;
    let _ = task.await;
    rx.await.map_err(|_| io::Error::other("hyper did not deliver the header-case request"))
}

/// A header name as hyper's title case writes it: the first letter and each one after a `-`
/// upper case, the others lower case.
fn title_case(name: &str) -> String {
    let mut upper = true;
    name.chars()
        .map(|c| {
            let out = if upper { c.to_ascii_uppercase() } else { c.to_ascii_lowercase() };
            upper = c == '-';
            out
        })
        .collect()
}

/// Serves `app` on `listener` (HTTP/1.1, canonical header names) with at most
/// `max_connections` open connections (at least 1), until `shutdown` completes; then stops
/// accepting and lets the open connections finish their requests for at most `grace`.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    max_connections: usize,
    shutdown: impl std::future::Future<Output = ()>,
    grace: Duration,
) -> io::Result<()> {
    let case = canonical_case_extensions().await?;
    // Around the router as a whole (`Router::layer` would wrap every route).
    let app = tower::ServiceBuilder::new()
        .map_response(move |mut response: axum::response::Response| {
            response.extensions_mut().extend(case.clone());
            response
        })
        .service(app);
    let slots = std::sync::Arc::new(tokio::sync::Semaphore::new(max_connections.max(1)));
    let mut warned: Option<std::time::Instant> = None;
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        let permit = match slots.clone().try_acquire_owned() {
            Ok(permit) => permit,
            Err(_) => {
                // At most one warning a minute, however often the bound is reached.
                if warned.is_none_or(|at| at.elapsed() >= Duration::from_secs(60)) {
                    tracing::warn!(max_connections, "connection bound reached: new connections wait until one closes");
                    warned = Some(std::time::Instant::now());
                }
                tokio::select! {
                    permit = slots.clone().acquire_owned() => permit.map_err(io::Error::other)?,
                    () = &mut shutdown => break,
                }
            }
        };
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut shutdown => break,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(e) => {
                // Out of file descriptors and similar: wait and go on accepting.
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let service = TowerToHyperService::new(app.clone());
        let watcher = graceful.watcher();
        tokio::spawn(async move {
            let conn = hyper::server::conn::http1::Builder::new()
                .title_case_headers(true)
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .serve_connection(TokioIo::new(stream), service);
            let watched = watcher.watch(conn);
            if let Err(e) = watched.await {
                tracing::debug!(error = %e, "connection ended with an error");
            }
            drop(permit);
        });
    }
    drop(listener);
    match tokio::time::timeout(grace, graceful.shutdown()).await {
        Ok(()) => tracing::info!("every connection finished"),
        Err(_) => tracing::warn!(grace_seconds = grace.as_secs(), "connections still open when the grace ended"),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{CANONICAL_NAMES, title_case};

    /// Only the names hyper's title case would misspell go into the header-case map.
    #[test]
    fn the_map_holds_the_names_title_case_misspells() {
        assert_eq!(title_case("content-type"), "Content-Type");
        let misspelled: Vec<&str> = CANONICAL_NAMES.iter().copied().filter(|name| title_case(name) != *name).collect();
        assert_eq!(
            misspelled,
            ["ETag", "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "WWW-Authenticate"]
        );
    }
}
