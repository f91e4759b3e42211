//! [`StripeProxy`]: an HTTP/1.1 forwarding proxy in front of a Stripe peer (localstripe, see
//! [`crate::localstripe`]) that adds what Stripe does and localstripe does not, and makes the
//! faults a gateway has to live through.
//!
//! What it adds, by default (from Stripe's documentation, `docs.stripe.com/idempotency` and the
//! PaymentIntents API reference):
//!
//! - **Idempotency keys.** A `POST` with an `Idempotency-Key` header (at most 255 characters;
//!   a longer one is refused 400) is one of the account's keys: the key is scoped by the
//!   request's `Authorization` header. The first request with a key is *in flight* from the
//!   moment it is read in full (before any hold); its answer is *saved* once it ends, whatever
//!   its status (a 402 and a 500 included) except 400, 401, 404, 409 and 429 (refused before
//!   the request executed: nothing saved, the key is free again), and except when the upstream
//!   could not be reached (the proxy's 502). While the key is in flight another request with it
//!   is answered 409 `idempotency_error`/`idempotency_key_in_use` and not forwarded. Once saved,
//!   a request with the same method, target (path and query) and body, byte for byte, gets the
//!   saved status, `Content-Type` and body again with `Idempotent-Replayed: true`, and is not
//!   forwarded; any other request with the key is answered 400 `idempotency_error`. Saved
//!   answers last until [`StripeProxy::expire_keys`] (Stripe prunes keys after 24 hours).
//!   Requests of other methods, and those without the header, are never saved, replayed or
//!   refused for a key.
//! - **`GET /v1/payment_intents` and `GET /v1/refunds`**, which localstripe answers oldest
//!   first and without the `created` filter (nor `customer` for intents: it refuses them, 400
//!   `Unexpected customer`), are answered by the proxy from localstripe's whole list (asked for
//!   100 at a time, `starting_after` the last id while `has_more`, with the client's headers and
//!   its `expand[]`): newest first (by `created`, then the later made first), filtered by
//!   `customer` (intents) or `payment_intent` (refunds) and by `created` (`created=N`,
//!   `created[gt|gte|lt|lte]=N`), then cut by `starting_after` or `ending_before` and `limit`
//!   (1 to 100, default 10) into `{"object":"list","data":[…],"has_more":…,"url":…}`. Another
//!   parameter, a bad value or a cursor naming no object is answered 400
//!   `invalid_request_error` as Stripe does; an error answer of localstripe's (e.g. 401) is
//!   passed on as it is. Intents in these lists carry `amount_received` (what the intent
//!   collected: its amount once `succeeded`, else 0), which localstripe leaves out.
//!
//! The faults it makes on request ([`StripeProxy::drop_answers`], [`hold_before`],
//! [`hold_after`], [`fail_before`], [`fail_after`]) each take the next `count` requests whose
//! method is the rule's (without case) and whose target starts with its prefix; rules add up,
//! each taken by one request after the other. A request takes at most one rule of each kind,
//! when it is read: the hold and failure before forwarding first; when it fails before, it
//! takes nothing else. Only requests that go to the upstream take rules: a replayed, refused
//! (409, 400) or wrongly formed request takes none. The rules applying after the upstream
//! answered (hold after, fail after, drop) are given back when the upstream cannot be reached,
//! as that request never got so far. In order, a request:
//!
//! 1. is held for the longest [`delay`](StripeProxy::delay) that matches it, then for its
//!    `hold_before` (the key, if any, is in flight meanwhile);
//! 2. is answered 500 by the proxy on a `fail_before` (not forwarded; the 500 is saved for the
//!    key, as Stripe saves its own 500);
//! 3. is forwarded (or, for the intents list, its pages asked for), and counted by
//!    [`count`](StripeProxy::count) once the upstream answered in full; its answer becomes a 500
//!    of the proxy on a `fail_after`;
//! 4. is held for its `hold_after` with that answer, the key still in flight;
//! 5. has that answer saved for its key (the request has finished, as Stripe saves it);
//! 6. is answered, or on `drop_answers` has its client's connection closed without a byte.
//!
//! A held request carries on when its client goes away meanwhile (the work is done, its answer
//! is saved); only the answer is lost.
//!
//! [`hold_before`]: StripeProxy::hold_before
//! [`hold_after`]: StripeProxy::hold_after
//! [`fail_before`]: StripeProxy::fail_before
//! [`fail_after`]: StripeProxy::fail_after

mod http;
mod keys;
mod lists;

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::localstripe::encode_into;
use http::{Answer, BadAnswer, Read, Request};
use keys::{Admission, Fingerprint, Keys, Scope};
use lists::{ListQuery, Listed};

/// The former name of [`StripeProxy`], kept for the suites that still use it.
pub type DroppingProxy = StripeProxy;

/// An HTTP/1.1 forwarding proxy on `127.0.0.1` in front of one upstream (a Stripe peer) that
/// behaves as Stripe does where localstripe does not (see the [module](self) documentation), and
/// can lose the upstream's answers, hold requests or answers, and fail requests. It runs on a
/// thread of its own (so sync tests can use it) and stops when dropped.
///
/// Client connections may be kept alive; each request goes upstream on a connection of its own
/// (`Connection: close`, `Host` set to the upstream), its body sent with `Content-Length`
/// (chunked request bodies are answered 501), and the upstream's answer is read to its end
/// before it is passed on with a `Content-Length`. An upstream that cannot be reached, or whose
/// answer cannot be read, is answered 502 by the proxy. Dropping it closes every connection;
/// requests still held then are not forwarded.
pub struct StripeProxy {
    /// `http://127.0.0.1:PORT`: give this to the service instead of the upstream.
    pub base: String,
    /// `127.0.0.1:PORT`.
    pub addr: String,
    state: Arc<State>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for StripeProxy {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

struct State {
    /// `host:port` of the upstream.
    upstream: String,
    inner: Mutex<Inner>,
}

impl State {
    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[derive(Default)]
struct Inner {
    /// Counted rules, in the order they were given (never removed).
    faults: Vec<Fault>,
    delays: Vec<(String, String, Duration)>,
    keys: Keys,
    /// Method and target of each request received, in order.
    received: Vec<(String, String)>,
    /// Method and target of each request the upstream answered in full.
    forwarded: Vec<(String, String)>,
    /// Method and target of each request answered with a saved answer.
    replayed: Vec<(String, String)>,
    /// Method and target of each request refused 409 for its key in flight.
    conflicts: Vec<(String, String)>,
    /// Method and target of each request refused 400 for another request's key.
    mismatches: Vec<(String, String)>,
}

struct Fault {
    method: String,
    prefix: String,
    remaining: usize,
    kind: FaultKind,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FaultKind {
    HoldBefore(Duration),
    FailBefore,
    HoldAfter(Duration),
    FailAfter,
    DropAnswer,
}

fn matches(method: &str, target: &str, rule_method: &str, prefix: &str) -> bool {
    method.eq_ignore_ascii_case(rule_method) && target.starts_with(prefix)
}

fn count_of(records: &[(String, String)], method: &str, path_prefix: &str) -> usize {
    records.iter().filter(|(m, t)| matches(m, t, method, path_prefix)).count()
}

impl Inner {
    /// Takes one of the next rule of a kind that `pick` accepts and that matches the request:
    /// its index and kind.
    fn take(&mut self, request: &Request, pick: impl Fn(FaultKind) -> bool) -> Option<(usize, FaultKind)> {
        let index = self.faults.iter().position(|f| {
            f.remaining > 0 && pick(f.kind) && matches(&request.method, &request.target, &f.method, &f.prefix)
        })?;
        let fault = self.faults.get_mut(index)?;
        fault.remaining -= 1;
        Some((index, fault.kind))
    }

    /// What happens to a request that goes to the upstream (see the module documentation).
    fn plan(&mut self, request: &Request) -> Plan {
        let delay = self
            .delays
            .iter()
            .filter(|(m, p, _)| matches(&request.method, &request.target, m, p))
            .map(|(_, _, d)| *d)
            .max()
            .unwrap_or(Duration::ZERO);
        let mut plan = Plan { hold_before: delay, ..Plan::default() };
        if let Some((_, FaultKind::HoldBefore(hold))) = self.take(request, |k| matches!(k, FaultKind::HoldBefore(_))) {
            plan.hold_before += hold;
        }
        if self.take(request, |k| k == FaultKind::FailBefore).is_some() {
            plan.fail_before = true;
            return plan;
        }
        if let Some((index, FaultKind::HoldAfter(hold))) = self.take(request, |k| matches!(k, FaultKind::HoldAfter(_)))
        {
            plan.hold_after = hold;
            plan.after.push(index);
        }
        if let Some((index, _)) = self.take(request, |k| k == FaultKind::FailAfter) {
            plan.fail_after = true;
            plan.after.push(index);
        }
        if let Some((index, _)) = self.take(request, |k| k == FaultKind::DropAnswer) {
            plan.drop_answer = true;
            plan.after.push(index);
        }
        plan
    }

    /// Gives back the rules a request took for after the upstream's answer.
    fn give_back(&mut self, plan: &Plan) {
        for index in &plan.after {
            if let Some(fault) = self.faults.get_mut(*index) {
                fault.remaining += 1;
            }
        }
    }
}

/// The faults one request takes.
#[derive(Debug, Default)]
struct Plan {
    hold_before: Duration,
    fail_before: bool,
    hold_after: Duration,
    fail_after: bool,
    drop_answer: bool,
    /// The indices of the rules taken for after the upstream's answer.
    after: Vec<usize>,
}

/// Where a request's answer comes from.
enum Route {
    /// The upstream's answer to the request itself.
    Forward,
    /// A list (intents, refunds) made from the upstream's whole list.
    List(ListQuery),
}

/// What the proxy does with a request it read.
enum Admitted {
    /// Answered by the proxy at once (a replay, a refusal).
    Answer(Answer),
    /// Goes to the upstream; the key, when it has one, is now in flight.
    Go { route: Route, key: Option<Scope>, plan: Plan },
}

/// Why the upstream gave no answer the proxy can pass on (answered 502).
#[derive(Debug)]
enum UpstreamError {
    Unreachable(std::io::Error),
    Unreadable(BadAnswer),
    /// A page of a list that is not a JSON list.
    NotAList(String),
    /// A page of a list whose `starting_after` was already asked for.
    Endless(String),
}

impl fmt::Display for UpstreamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UpstreamError::Unreachable(e) => write!(f, "the proxy could not reach the upstream: {e}"),
            UpstreamError::Unreadable(e) => write!(f, "the upstream sent {e}"),
            UpstreamError::NotAList(why) => write!(f, "the upstream's page of a list is not a list: {why}"),
            UpstreamError::Endless(id) => {
                write!(f, "the upstream's pages of a list come back to {id}: they would never end")
            }
        }
    }
}

impl std::error::Error for UpstreamError {}

impl StripeProxy {
    /// Starts a proxy forwarding to `upstream_base` (`http://host:port`, no path).
    pub fn start(upstream_base: &str) -> StripeProxy {
        let upstream = upstream_base
            .strip_prefix("http://")
            .map(|rest| rest.trim_end_matches('/'))
            .filter(|authority| !authority.is_empty() && !authority.contains('/'))
            .unwrap_or_else(|| panic!("the proxy's upstream is http://host:port, not {upstream_base:?}"))
            .to_owned();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind the proxy on 127.0.0.1");
        let addr = listener.local_addr().expect("the proxy's address").to_string();
        listener.set_nonblocking(true).expect("a non-blocking listener for the proxy");
        let state = Arc::new(State { upstream, inner: Mutex::new(Inner::default()) });
        let (shutdown, stop) = tokio::sync::oneshot::channel::<()>();
        let shared = state.clone();
        let thread = std::thread::Builder::new()
            .name(format!("proxy-{addr}"))
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("a runtime for the proxy");
                runtime.block_on(async move {
                    let listener = tokio::net::TcpListener::from_std(listener).expect("the proxy's listener on tokio");
                    let accept = async {
                        loop {
                            match listener.accept().await {
                                Ok((client, _)) => {
                                    tokio::spawn(connection(client, shared.clone()));
                                }
                                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
                            }
                        }
                    };
                    tokio::select! {
                        _ = stop => {}
                        () = accept => {}
                    }
                });
                // Dropping the runtime ends the connections still open.
            })
            .expect("start the proxy's thread");
        StripeProxy { base: format!("http://{addr}"), addr, state, shutdown: Some(shutdown), thread: Some(thread) }
    }

    fn add(&self, method: &str, path_prefix: &str, count: usize, kind: FaultKind) {
        self.state.inner().faults.push(Fault {
            method: method.to_owned(),
            prefix: path_prefix.to_owned(),
            remaining: count,
            kind,
        });
    }

    /// The next `count` requests whose method is `method` and whose target (path and query)
    /// starts with `path_prefix` are forwarded upstream in full and the upstream's answer is
    /// read to its end (so the upstream has acted on them, and a key's answer is saved); then
    /// the client's connection is closed without a byte of the answer. Adds to earlier calls.
    pub fn drop_answers(&self, method: &str, path_prefix: &str, count: usize) {
        self.add(method, path_prefix, count, FaultKind::DropAnswer);
    }

    /// Requests matching `method` and `path_prefix` are held for `delay` before they are
    /// forwarded (the longest delay applies when several match; `Duration::ZERO` takes the
    /// rule away). A held request is forwarded even when its client has gone away meanwhile,
    /// as when the client died just after sending it: wait for [`count`](Self::count) to
    /// see it land.
    pub fn delay(&self, method: &str, path_prefix: &str, delay: Duration) {
        let mut inner = self.state.inner();
        inner.delays.retain(|(m, p, _)| !(m.eq_ignore_ascii_case(method) && p == path_prefix));
        if !delay.is_zero() {
            inner.delays.push((method.to_owned(), path_prefix.to_owned(), delay));
        }
    }

    /// The next `count` matching requests are held for `hold` once read (after any
    /// [`delay`](Self::delay)), their key in flight meanwhile, then forwarded; the answer goes to
    /// the client if it is still connected, and is saved for the key either way. Adds to
    /// earlier calls.
    pub fn hold_before(&self, method: &str, path_prefix: &str, hold: Duration, count: usize) {
        self.add(method, path_prefix, count, FaultKind::HoldBefore(hold));
    }

    /// The next `count` matching requests are forwarded at once (the upstream acts on them) and
    /// their answer is held for `hold` before it is saved for the key and sent: the key stays
    /// in flight until the hold ends, as a request still running at Stripe. Adds to earlier
    /// calls.
    pub fn hold_after(&self, method: &str, path_prefix: &str, hold: Duration, count: usize) {
        self.add(method, path_prefix, count, FaultKind::HoldAfter(hold));
    }

    /// The next `count` matching requests are answered 500 `api_error` by the proxy without
    /// being forwarded; that 500 is saved for the request's key. Adds to earlier calls.
    pub fn fail_before(&self, method: &str, path_prefix: &str, count: usize) {
        self.add(method, path_prefix, count, FaultKind::FailBefore);
    }

    /// The next `count` matching requests are forwarded (the upstream acts on them), then
    /// answered 500 `api_error` by the proxy instead of the upstream's answer; that 500 is what
    /// is saved for the request's key. Adds to earlier calls.
    pub fn fail_after(&self, method: &str, path_prefix: &str, count: usize) {
        self.add(method, path_prefix, count, FaultKind::FailAfter);
    }

    /// Forgets every saved answer of an idempotency key, as Stripe does with keys older than
    /// 24 hours: the next request with such a key is a first one. Keys in flight stay.
    pub fn expire_keys(&self) {
        self.state.inner().keys.expire();
    }

    /// How many requests matching `method` and `path_prefix` were forwarded so far: sent
    /// upstream and answered by it in full (dropped and failed-after answers included; a list
    /// the proxy made from several pages counts once).
    pub fn count(&self, method: &str, path_prefix: &str) -> usize {
        count_of(&self.state.inner().forwarded, method, path_prefix)
    }

    /// How many requests matching `method` and `path_prefix` the proxy received so far (held
    /// ones included, as soon as they are read in full; replayed and refused ones too).
    pub fn received(&self, method: &str, path_prefix: &str) -> usize {
        count_of(&self.state.inner().received, method, path_prefix)
    }

    /// How many requests matching `method` and `path_prefix` were answered with the saved
    /// answer of their idempotency key (`Idempotent-Replayed: true`), not forwarded.
    pub fn replayed(&self, method: &str, path_prefix: &str) -> usize {
        count_of(&self.state.inner().replayed, method, path_prefix)
    }

    /// How many requests matching `method` and `path_prefix` were refused 409
    /// `idempotency_key_in_use` (their key was in flight), not forwarded.
    pub fn conflicts(&self, method: &str, path_prefix: &str) -> usize {
        count_of(&self.state.inner().conflicts, method, path_prefix)
    }

    /// How many requests matching `method` and `path_prefix` were refused 400
    /// `idempotency_error` (their key was saved for another request), not forwarded.
    pub fn mismatches(&self, method: &str, path_prefix: &str) -> usize {
        count_of(&self.state.inner().mismatches, method, path_prefix)
    }
}

/// A Stripe error body: `{"error":{"type":…,"message":…}}`, with `code` when given.
fn stripe_error(kind: &str, code: Option<&str>, message: &str) -> Value {
    let mut error = json!({"type": kind, "message": message});
    if let Some(code) = code {
        error["code"] = Value::String(code.to_owned());
    }
    json!({ "error": error })
}

/// The 500 of a fault.
fn api_error() -> Answer {
    Answer::json(
        500,
        &stripe_error(
            "api_error",
            None,
            "An unknown error occurred (the proxy in front of the Stripe peer was told to fail this request).",
        ),
    )
}

/// Reads a request in: records it, answers it at once when its key says so or its list query
/// is refused, else puts its key in flight and takes its faults.
fn admit(state: &State, request: &Request) -> Admitted {
    let mut inner = state.inner();
    let record = (request.method.clone(), request.target.clone());
    inner.received.push(record.clone());
    let listed = Listed::of(request.path()).filter(|_| request.method.eq_ignore_ascii_case("GET"));
    let route = match listed {
        Some(listed) => match lists::parse_query(listed, request.query()) {
            Ok(query) => Route::List(query),
            Err(e) => return Admitted::Answer(Answer::json(400, &e.to_json())),
        },
        None => Route::Forward,
    };
    let key =
        request.header("idempotency-key").filter(|key| request.method.eq_ignore_ascii_case("POST") && !key.is_empty());
    let mut scope = None;
    if let Some(key) = key {
        if key.len() > keys::MAX_KEY {
            let message = format!("Invalid idempotency key: keys may be at most {} characters long.", keys::MAX_KEY);
            return Admitted::Answer(Answer::json(400, &stripe_error("invalid_request_error", None, &message)));
        }
        let key = Scope {
            authorization: request.header("authorization").unwrap_or_default().to_owned(),
            key: key.to_owned(),
        };
        let fingerprint =
            Fingerprint { method: request.method.clone(), target: request.target.clone(), body: request.body.clone() };
        match inner.keys.admit(&key, fingerprint) {
            Admission::First => scope = Some(key),
            Admission::InUse => {
                inner.conflicts.push(record);
                let message = "There is currently another in-progress request using this Stripe API key and \
                               idempotency key. Please try again later.";
                let body = stripe_error("idempotency_error", Some("idempotency_key_in_use"), message);
                return Admitted::Answer(Answer::json(409, &body));
            }
            Admission::Replay(mut answer) => {
                inner.replayed.push(record);
                answer.headers.push(("Idempotent-Replayed".to_owned(), "true".to_owned()));
                return Admitted::Answer(answer);
            }
            Admission::Mismatch => {
                inner.mismatches.push(record);
                let message = format!(
                    "Keys for idempotent requests can only be used with the same parameters they were first used \
                     with. Try using a key other than '{}' if you meant to execute a different request.",
                    key.key
                );
                return Admitted::Answer(Answer::json(400, &stripe_error("idempotency_error", None, &message)));
            }
        }
    }
    let plan = inner.plan(request);
    Admitted::Go { route, key: scope, plan }
}

async fn connection(mut client: TcpStream, state: Arc<State>) {
    let mut buffer = Vec::new();
    loop {
        let request = match http::read_request(&mut client, &mut buffer).await {
            Read::Request(request) => request,
            Read::Closed => return,
            Read::Refuse(status, reason) => {
                let (bytes, _) = Answer::text(status, reason).to_wire("", false);
                let _ = client.write_all(&bytes).await;
                return;
            }
        };
        let Some(answer) = handle(&state, &request).await else {
            // Closing the connection: the client gets no byte of an answer.
            return;
        };
        let (bytes, close) = answer.to_wire(&request.method, request.keep_alive);
        if client.write_all(&bytes).await.is_err() || close {
            return;
        }
    }
}

/// What the client gets for `request`: None when its answer is to be lost (the connection is
/// closed without a byte).
async fn handle(state: &State, request: &Request) -> Option<Answer> {
    let (route, key, plan) = match admit(state, request) {
        Admitted::Answer(answer) => return Some(answer),
        Admitted::Go { route, key, plan } => (route, key, plan),
    };
    let finish = |answer: Option<&Answer>| {
        if let Some(key) = &key {
            state.inner().keys.finish(key, answer);
        }
    };
    if !plan.hold_before.is_zero() {
        tokio::time::sleep(plan.hold_before).await;
    }
    if plan.fail_before {
        let answer = api_error();
        finish(Some(&answer));
        return Some(answer);
    }
    let answered = match &route {
        Route::Forward => forward(&state.upstream, request).await,
        Route::List(query) => list(&state.upstream, request, query).await,
    };
    let answer = match answered {
        Ok(answer) => answer,
        Err(e) => {
            state.inner().give_back(&plan);
            finish(None);
            return Some(Answer::text(502, &e.to_string()));
        }
    };
    state.inner().forwarded.push((request.method.clone(), request.target.clone()));
    let answer = if plan.fail_after { api_error() } else { answer };
    if !plan.hold_after.is_zero() {
        tokio::time::sleep(plan.hold_after).await;
    }
    finish(Some(&answer));
    if plan.drop_answer { None } else { Some(answer) }
}

/// The upstream's answer to `request`.
async fn forward(upstream: &str, request: &Request) -> Result<Answer, UpstreamError> {
    let bytes = http::forward(upstream, request, &request.target).await.map_err(UpstreamError::Unreachable)?;
    Answer::parse(&bytes).map_err(UpstreamError::Unreadable)
}

/// The list for `query`, made from every page of the upstream's list (see the module
/// documentation); an answer of the upstream that is not a 2xx is passed on as it is.
async fn list(upstream: &str, request: &Request, query: &ListQuery) -> Result<Answer, UpstreamError> {
    let path = query.listed.path();
    let mut all: Vec<Value> = Vec::new();
    let mut after: Option<String> = None;
    let mut asked: Vec<String> = Vec::new();
    loop {
        let mut target = format!("{path}?limit={}", lists::MAX_LIMIT);
        if let Some(after) = &after {
            target.push_str("&starting_after=");
            encode_into(&mut target, after);
        }
        for expand in &query.expand {
            target.push_str("&expand%5B%5D=");
            encode_into(&mut target, expand);
        }
        let bytes = http::forward(upstream, request, &target).await.map_err(UpstreamError::Unreachable)?;
        let answer = Answer::parse(&bytes).map_err(UpstreamError::Unreadable)?;
        if !(200..300).contains(&answer.status) {
            return Ok(answer);
        }
        let mut page: Value =
            serde_json::from_slice(&answer.body).map_err(|e| UpstreamError::NotAList(format!("not JSON ({e})")))?;
        let Some(Value::Array(data)) = page.get_mut("data").map(Value::take) else {
            return Err(UpstreamError::NotAList("no data".to_owned()));
        };
        let more = page["has_more"].as_bool() == Some(true);
        let last = data.last().and_then(|object| object["id"].as_str()).map(str::to_owned);
        all.extend(data.into_iter().map(|object| query.listed.complete(object)));
        match last {
            Some(last) if more => {
                if asked.contains(&last) {
                    return Err(UpstreamError::Endless(last));
                }
                asked.push(last.clone());
                after = Some(last);
            }
            None if more => return Err(UpstreamError::NotAList("has_more without an id to go on from".to_owned())),
            _ => break,
        }
    }
    Ok(match lists::page(all, query, path) {
        Ok(page) => Answer::json(200, &page),
        Err(e) => Answer::json(400, &e.to_json()),
    })
}
