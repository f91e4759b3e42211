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
//! A request that writes runs to its end whether or not its client still waits for the answer.
//! hyper drops a request's future when its connection closes (the client hung up, also right
//! after sending a whole request, before the future was ever polled), and a future dropped at
//! an await would cut its operation in two: a charge recorded but never settled, a subscription
//! ended but never refunded, a subscription's claim held until its lease ends. So every request
//! whose method is not `GET`, `HEAD` or `OPTIONS` is handed to a task of its own the moment
//! hyper hands it over (`Connection`), and the connection awaits that task's answer; dropping
//! the wait leaves the task running. The whole router runs in the task (the request log, the
//! protocol layers, the body's reading, the handler), so a request cut before its body was whole
//! fails reading it and writes nothing, and one that was whole runs to its end and is logged
//! with the status it would have been answered. A panic in the task is the same 500 the router's
//! panic layer answers. Reads are not detached: they cost no task, and a read cut off leaves
//! nothing half-done. A detached write keeps its connection's slot among `max_connections`
//! until it ends, so hanging up does not let a client past the bound.
//!
//! Shutting down ([`serve`]'s `shutdown` future): the listener closes at once (new connections
//! are refused), every open connection finishes the request it is serving and closes (an idle
//! kept-alive one closes at once), the writes whose clients went away run to their end, and
//! `serve` returns when all are done or the grace ended.

use std::convert::Infallible;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::http::{Extensions, Method, Request, Response};
use futures_util::FutureExt;
use futures_util::future::Either;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::{OwnedSemaphorePermit, watch};
use tower::ServiceExt;

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

/// The writes running in tasks of their own ([`Connection`]): a count that [`serve`] waits on
/// to fall to zero when it shuts down, also for the writes whose connections closed.
#[derive(Clone)]
struct Detached(Arc<watch::Sender<usize>>);

/// One detached write, counted while it lives (dropped when its task ends, also by a panic).
struct Running(Arc<watch::Sender<usize>>);

impl Detached {
    fn new() -> Self {
        Self(Arc::new(watch::Sender::new(0)))
    }

    /// Counts one more write, until the guard answered is dropped.
    fn enter(&self) -> Running {
        self.0.send_modify(|n| *n += 1);
        Running(self.0.clone())
    }

    /// Writes running now.
    fn running(&self) -> usize {
        *self.0.borrow()
    }

    /// Waits until no write is running.
    async fn finished(&self) {
        // The sender lives in `self`, so the wait ends only at zero.
        let _ = self.0.subscribe().wait_for(|n| *n == 0).await;
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n = n.saturating_sub(1));
    }
}

/// Whether a request is a read, served where hyper polls it rather than in a task of its own.
fn reads(method: &Method) -> bool {
    matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// hyper's service for one connection: a read is served by `app` where hyper polls it; any
/// other request runs in a task of its own, spawned as hyper hands the request over (not when
/// the answer is first polled: hyper may drop it unpolled when it finds the connection closed),
/// and runs to its end whether or not the connection still waits for its answer. Each such task
/// holds `slot`, the connection's place among the open connections, until it ends.
struct Connection<S> {
    app: S,
    slot: Arc<OwnedSemaphorePermit>,
    detached: Detached,
}

/// The answer of a detached write: the task's, or for a task that panicked (the router's own
/// panic layer answers for a handler; this covers what lies outside it) the same 500, and a 500
/// for one the runtime cancelled while shutting down.
fn joined(
    joined: Result<Result<axum::response::Response, Infallible>, tokio::task::JoinError>,
) -> Result<axum::response::Response, Infallible> {
    match joined {
        Ok(answer) => answer,
        Err(e) if e.is_panic() => Ok(crate::respond::panicked()),
        Err(e) => Ok(crate::respond::internal(&e)),
    }
}

type Joined = fn(
    Result<Result<axum::response::Response, Infallible>, tokio::task::JoinError>,
) -> Result<axum::response::Response, Infallible>;

impl<S, B> hyper::service::Service<Request<B>> for Connection<S>
where
    S: tower::Service<Request<B>, Response = axum::response::Response, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send + 'static,
    B: Send + 'static,
{
    type Response = axum::response::Response;
    type Error = Infallible;
    type Future = Either<
        tower::util::Oneshot<S, Request<B>>,
        futures_util::future::Map<tokio::task::JoinHandle<Result<axum::response::Response, Infallible>>, Joined>,
    >;

    fn call(&self, request: Request<B>) -> Self::Future {
        let read = reads(request.method());
        let answer = self.app.clone().oneshot(request);
        if read {
            return Either::Left(answer);
        }
        let held = (self.detached.enter(), self.slot.clone());
        let task = tokio::spawn(async move {
            let _held = held;
            answer.await
        });
        Either::Right(task.map(joined as Joined))
    }
}

/// Serves `app` on `listener` (HTTP/1.1, canonical header names) with at most
/// `max_connections` open connections (at least 1), until `shutdown` completes; then stops
/// accepting and lets the open connections finish their requests, and the writes whose clients
/// went away run to their end, for at most `grace`.
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
    let detached = Detached::new();
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
        // The slot is let go once the connection and every write it detached have ended.
        let service = Connection { app: app.clone(), slot: Arc::new(permit), detached: detached.clone() };
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
        });
    }
    drop(listener);
    let deadline = tokio::time::Instant::now() + grace;
    match tokio::time::timeout_at(deadline, graceful.shutdown()).await {
        Ok(()) => tracing::info!("every connection finished"),
        Err(_) => tracing::warn!(grace_seconds = grace.as_secs(), "connections still open when the grace ended"),
    }
    // Writes whose clients went away outlive their connections.
    let running = detached.running();
    if running > 0 {
        match tokio::time::timeout_at(deadline, detached.finished()).await {
            Ok(()) => tracing::info!(running, "every request whose client went away finished"),
            Err(_) => tracing::warn!(
                running = detached.running(),
                "requests whose clients went away were still running when the grace ended"
            ),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use axum::body::Body;
    use axum::http::{Method, Request, StatusCode};
    use axum::response::Response;
    use hyper::service::Service as _;

    use super::{CANONICAL_NAMES, Connection, Detached, title_case};

    /// A connection's service over an app that answers once `gate` is opened, counting the
    /// requests it served in `served`, and panicking on `/panic`; with the semaphore of its slot.
    fn connection(
        gate: Arc<tokio::sync::Notify>,
        served: Arc<AtomicUsize>,
    ) -> (
        Connection<impl tower::Service<Request<String>, Response = Response, Error = Infallible, Future: Send> + Clone>,
        Arc<tokio::sync::Semaphore>,
        Detached,
    ) {
        let app = tower::service_fn(move |request: Request<String>| {
            let (gate, served) = (gate.clone(), served.clone());
            async move {
                assert_ne!(request.uri().path(), "/panic", "a handler panicked");
                gate.notified().await;
                served.fetch_add(1, Ordering::SeqCst);
                Ok::<_, Infallible>(Response::new(Body::empty()))
            }
        });
        let slots = Arc::new(tokio::sync::Semaphore::new(1));
        let slot = Arc::new(slots.clone().try_acquire_owned().expect("the one slot"));
        let detached = Detached::new();
        (Connection { app, slot, detached: detached.clone() }, slots, detached)
    }

    fn request(method: Method, path: &str) -> Request<String> {
        let mut request = Request::new(String::new());
        *request.method_mut() = method;
        *request.uri_mut() = path.parse().expect("a path");
        request
    }

    /// A write whose answer is dropped before it was ever polled (its client went away, its
    /// connection closed) runs to its end all the same, holding the connection's slot until
    /// then; the shutdown's wait sees it. A read dropped so never runs, and costs no task.
    #[tokio::test]
    async fn a_write_runs_to_its_end_when_nobody_waits_for_it() {
        let gate = Arc::new(tokio::sync::Notify::new());
        let served = Arc::new(AtomicUsize::new(0));
        let (service, slots, detached) = connection(gate.clone(), served.clone());
        for method in [Method::GET, Method::HEAD, Method::OPTIONS] {
            drop(service.call(request(method, "/v2/accounts")));
            assert_eq!(detached.running(), 0, "a read is not detached");
        }
        drop(service.call(request(Method::PUT, "/v2/subscriptions/x/terminate")));
        drop(service);
        assert_eq!(detached.running(), 1, "the write runs on");
        assert_eq!(slots.available_permits(), 0, "the write holds its connection's slot");
        let mut finished = std::pin::pin!(detached.finished());
        assert!(futures_util::FutureExt::now_or_never(finished.as_mut()).is_none(), "the wait waits for the write");
        gate.notify_one();
        tokio::time::timeout(Duration::from_secs(10), finished).await.expect("the write ends");
        assert_eq!(served.load(Ordering::SeqCst), 1, "the write was served, the reads were not");
        assert_eq!(slots.available_permits(), 1, "the slot is free once the write ended");
    }

    /// A read is answered where it is polled; a write is answered through its task; a write
    /// that panics is the router's 500, and is counted no more.
    #[tokio::test]
    async fn answers_come_back_and_a_panic_is_a_500() {
        let gate = Arc::new(tokio::sync::Notify::new());
        let served = Arc::new(AtomicUsize::new(0));
        let (service, _slots, detached) = connection(gate.clone(), served.clone());
        for method in [Method::GET, Method::POST, Method::DELETE] {
            gate.notify_one();
            let answer = service.call(request(method.clone(), "/v2/accounts")).await.expect("an answer");
            assert_eq!(answer.status(), StatusCode::OK, "{method}");
        }
        assert_eq!(served.load(Ordering::SeqCst), 3);
        let answer = service.call(request(Method::POST, "/panic")).await.expect("an answer");
        assert_eq!(answer.status(), StatusCode::INTERNAL_SERVER_ERROR);
        let body = axum::body::to_bytes(answer.into_body(), usize::MAX).await.expect("the body");
        let body = String::from_utf8_lossy(&body);
        assert!(body.contains("<symbol>internal_server_error</symbol>") && !body.contains("panicked"), "{body}");
        tokio::time::timeout(Duration::from_secs(10), detached.finished()).await.expect("nothing runs");
    }

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
