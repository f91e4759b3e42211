//! The soak's traffic: the kinds of request, what the driver knows of the site (accounts,
//! subscriptions still to refund), what every request answered, the paced workers and the
//! sandbox clock.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rebill_load_bench::http::{api_headers, http_client, post_card_token, token_id};
use tokio::sync::Notify;

/// A kind of request. The first nine are API requests, paced together at the site's rate
/// limit; a token is made before each subscription and the clock moves on a timer of its own
/// (neither counts against the rate limit).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    GetAccount,
    ListAccounts,
    GetSubscriptions,
    GetInvoices,
    PostAccount,
    PutAccount,
    PostSubscription,
    TerminateWithRefund,
    RefundInvoice,
    Token,
    Clock,
}

impl Kind {
    /// The API requests (what the rate limit counts).
    pub const API: [Kind; 9] = [
        Kind::GetAccount,
        Kind::ListAccounts,
        Kind::GetSubscriptions,
        Kind::GetInvoices,
        Kind::PostAccount,
        Kind::PutAccount,
        Kind::PostSubscription,
        Kind::TerminateWithRefund,
        Kind::RefundInvoice,
    ];
    /// The others.
    pub const OTHER: [Kind; 2] = [Kind::Token, Kind::Clock];

    /// How the report names it.
    pub fn name(self) -> &'static str {
        match self {
            Kind::GetAccount => "GET /v2/accounts/:code",
            Kind::ListAccounts => "GET /v2/accounts?per_page=50",
            Kind::GetSubscriptions => "GET /v2/accounts/:code/subscriptions",
            Kind::GetInvoices => "GET /v2/accounts/:code/invoices",
            Kind::PostAccount => "POST /v2/accounts",
            Kind::PutAccount => "PUT /v2/accounts/:code",
            Kind::PostSubscription => "POST /v2/subscriptions (token)",
            Kind::TerminateWithRefund => "PUT /v2/subscriptions/:uuid/terminate?refund=…",
            Kind::RefundInvoice => "POST /v2/invoices/:n/refund",
            Kind::Token => "POST /js/v1/token",
            Kind::Clock => "POST /sandbox/clock",
        }
    }

    /// A short name for the JSON report.
    pub fn key(self) -> &'static str {
        match self {
            Kind::GetAccount => "get_account",
            Kind::ListAccounts => "list_accounts",
            Kind::GetSubscriptions => "get_subscriptions",
            Kind::GetInvoices => "get_invoices",
            Kind::PostAccount => "post_account",
            Kind::PutAccount => "put_account",
            Kind::PostSubscription => "post_subscription",
            Kind::TerminateWithRefund => "terminate_with_refund",
            Kind::RefundInvoice => "refund_invoice",
            Kind::Token => "token",
            Kind::Clock => "clock",
        }
    }
}

/// What a slot of the mix sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    Do(Kind),
    /// A refund: terminations with a refund and invoice refunds take turns.
    Refund,
}

/// The mix, repeated: of 20 API requests 9 are reads, 6 account writes, 3 new subscriptions
/// and 2 refunds.
const MIX: [Slot; 20] = [
    Slot::Do(Kind::GetAccount),
    Slot::Do(Kind::PostAccount),
    Slot::Do(Kind::PostSubscription),
    Slot::Do(Kind::ListAccounts),
    Slot::Do(Kind::PutAccount),
    Slot::Do(Kind::GetSubscriptions),
    Slot::Refund,
    Slot::Do(Kind::GetAccount),
    Slot::Do(Kind::PostAccount),
    Slot::Do(Kind::GetInvoices),
    Slot::Do(Kind::PostSubscription),
    Slot::Do(Kind::PutAccount),
    Slot::Do(Kind::GetAccount),
    Slot::Do(Kind::ListAccounts),
    Slot::Refund,
    Slot::Do(Kind::GetSubscriptions),
    Slot::Do(Kind::PostAccount),
    Slot::Do(Kind::PutAccount),
    Slot::Do(Kind::PostSubscription),
    Slot::Do(Kind::GetInvoices),
];

/// The plans subscriptions are spread over (code, interval in days): short, so that the moving
/// clock keeps renewals coming.
pub const PLANS: [(&str, u32); 3] = [("soak-daily", 1), ("soak-2days", 2), ("soak-weekly", 7)];

/// A subscription the driver made.
#[derive(Debug, Clone)]
struct Subscribed {
    uuid: String,
    /// The number of its first invoice, when the reply named it.
    invoice: Option<u64>,
}

/// What the driver knows of the site.
#[derive(Debug, Default)]
struct Pools {
    accounts: Vec<String>,
    subscribed: Vec<String>,
    /// The live subscriptions the driver made, oldest first. Terminations take the oldest; an
    /// invoice refund takes the oldest whose purchase invoice was not refunded yet and puts it
    /// back at the end.
    live: VecDeque<Subscribed>,
    /// xorshift64 state.
    seed: u64,
}

impl Pools {
    fn next(&mut self) -> u64 {
        let mut x = self.seed.max(1);
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.seed = x;
        x
    }

    fn pick(&mut self, from_subscribed: bool) -> Option<String> {
        let r = self.next() as usize;
        let list = if from_subscribed && !self.subscribed.is_empty() { &self.subscribed } else { &self.accounts };
        if list.is_empty() { None } else { list.get(r % list.len()).cloned() }
    }
}

/// A reply worth showing in the report.
#[derive(Debug, Clone)]
pub struct Sample {
    pub kind: Kind,
    pub request: String,
    pub status: Option<u16>,
    pub body: String,
    /// Seconds since the traffic began.
    pub at: f64,
}

/// What one kind of request got.
#[derive(Debug, Default, Clone)]
pub struct KindStats {
    /// Latencies in microseconds of the requests that got an answer.
    pub latencies: Vec<u64>,
    /// Answers with the expected status.
    pub ok: u64,
    /// 429 answers.
    pub too_many: u64,
    /// 5xx answers.
    pub server_errors: u64,
    /// Other unexpected statuses.
    pub unexpected: u64,
    /// Requests without an answer (connection refused or reset, timeout).
    pub transport_errors: u64,
    /// The documented "try again" answers: the clock's 503 `clock_catching_up` (the clock moves
    /// again at its next tick) and 422 `simultaneous_request` (a change of a subscription the
    /// scheduler is renewing at that moment; not sent again).
    pub try_again: u64,
}

impl KindStats {
    pub fn requests(&self) -> u64 {
        self.ok + self.too_many + self.server_errors + self.unexpected + self.transport_errors + self.try_again
    }
}

/// Everything recorded.
#[derive(Debug, Default)]
pub struct Recorded {
    pub kinds: BTreeMap<Kind, KindStats>,
    pub server_errors: Vec<Sample>,
    pub unexpected: Vec<Sample>,
    pub transport_errors: Vec<Sample>,
}

/// At most this many samples of each sort are kept.
const SAMPLES: usize = 20;

/// The shared state of the driver.
pub struct Traffic {
    base: String,
    public_key: String,
    headers: [(&'static str, String); 4],
    pools: Mutex<Pools>,
    recorded: Mutex<Recorded>,
    started: Instant,
    /// Numbers for new account codes.
    counter: AtomicU64,
    /// Refunds sent, to alternate their two kinds.
    refunds: AtomicU64,
    /// Tickets sent and not finished, the clock's request included.
    in_flight: AtomicUsize,
    idle: Notify,
    /// The clock waits while set.
    paused: AtomicBool,
    stopped: AtomicBool,
    /// Jobs the clock's answers said ran.
    pub jobs_run: AtomicU64,
    /// Prefix of the account codes of this run.
    run: String,
    /// The live subscriptions to keep: past it, new-subscription slots end the oldest. `None`:
    /// no cap.
    population: Option<usize>,
    /// Set once a new subscription brought the live ones to the population (only a new one can):
    /// from then on the load is level.
    reached: AtomicBool,
}

/// The outcome of one HTTP exchange.
struct Exchange {
    status: u16,
    body: String,
    took: Duration,
}

impl Traffic {
    pub fn new(addr: &str, key: &str, public_key: &str, run: &str, population: Option<usize>) -> Arc<Traffic> {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0x9e37_79b9_7f4a_7c15);
        Arc::new(Traffic {
            base: format!("http://{addr}"),
            public_key: public_key.to_owned(),
            headers: api_headers(key),
            pools: Mutex::new(Pools { seed, ..Pools::default() }),
            recorded: Mutex::new(Recorded::default()),
            started: Instant::now(),
            counter: AtomicU64::new(0),
            refunds: AtomicU64::new(0),
            in_flight: AtomicUsize::new(0),
            idle: Notify::new(),
            paused: AtomicBool::new(false),
            stopped: AtomicBool::new(false),
            jobs_run: AtomicU64::new(0),
            run: run.to_owned(),
            population,
            reached: AtomicBool::new(false),
        })
    }

    fn pools(&self) -> std::sync::MutexGuard<'_, Pools> {
        self.pools.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn recorded_mut(&self) -> std::sync::MutexGuard<'_, Recorded> {
        self.recorded.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// A copy of what was recorded so far.
    pub fn recorded(&self) -> Recorded {
        let r = self.recorded_mut();
        Recorded {
            kinds: r.kinds.clone(),
            server_errors: r.server_errors.clone(),
            unexpected: r.unexpected.clone(),
            transport_errors: r.transport_errors.clone(),
        }
    }

    /// A client for one worker: one keep-alive connection, the API headers.
    pub fn client(&self) -> anyhow::Result<reqwest::Client> {
        http_client(&self.headers)
    }

    async fn exchange(
        &self,
        client: &reqwest::Client,
        method: reqwest::Method,
        path: &str,
        body: Option<String>,
    ) -> reqwest::Result<Exchange> {
        let sent = Instant::now();
        let mut request = client.request(method, format!("{}{path}", self.base));
        if let Some(body) = body {
            request = request.body(body);
        }
        let reply = request.send().await?;
        let status = reply.status().as_u16();
        let body = reply.text().await?;
        Ok(Exchange { status, body, took: sent.elapsed() })
    }

    /// Records an exchange of `kind` expecting `expected`; answers the reply when it is the
    /// expected one.
    fn record(&self, kind: Kind, request: &str, expected: u16, outcome: reqwest::Result<Exchange>) -> Option<Exchange> {
        let at = self.started.elapsed().as_secs_f64();
        let mut recorded = self.recorded_mut();
        let recorded = &mut *recorded;
        let stats = recorded.kinds.entry(kind).or_default();
        let exchange = match outcome {
            Ok(e) => e,
            Err(e) => {
                stats.transport_errors += 1;
                if recorded.transport_errors.len() < SAMPLES {
                    recorded.transport_errors.push(Sample {
                        kind,
                        request: request.to_owned(),
                        status: None,
                        body: format!("{e:#}"),
                        at,
                    });
                }
                return None;
            }
        };
        stats.latencies.push(exchange.took.as_micros() as u64);
        let sample = |e: &Exchange| Sample {
            kind,
            request: request.to_owned(),
            status: Some(e.status),
            body: e.body.chars().take(2000).collect(),
            at,
        };
        match exchange.status {
            s if s == expected => {
                stats.ok += 1;
                return Some(exchange);
            }
            429 if kind != Kind::Clock && kind != Kind::Token => stats.too_many += 1,
            503 if kind == Kind::Clock && exchange.body.contains("<symbol>clock_catching_up</symbol>") => {
                stats.try_again += 1
            }
            422 if exchange.body.contains("<symbol>simultaneous_request</symbol>") => stats.try_again += 1,
            500..=599 => {
                stats.server_errors += 1;
                if recorded.server_errors.len() < SAMPLES {
                    recorded.server_errors.push(sample(&exchange));
                }
            }
            _ => {
                stats.unexpected += 1;
                if recorded.unexpected.len() < SAMPLES {
                    recorded.unexpected.push(sample(&exchange));
                }
            }
        }
        None
    }

    async fn api(
        &self,
        client: &reqwest::Client,
        kind: Kind,
        method: reqwest::Method,
        path: &str,
        body: Option<String>,
        expected: u16,
    ) -> Option<Exchange> {
        let request = format!("{method} {path}");
        let outcome = self.exchange(client, method, path, body).await;
        self.record(kind, &request, expected, outcome)
    }

    /// Creates what the traffic needs before it starts (not counted in the report): the plans
    /// and `accounts` accounts.
    pub async fn prepare(&self, accounts: usize) -> anyhow::Result<()> {
        let client = self.client()?;
        for (code, days) in PLANS {
            let body = format!(
                "<plan><plan_code>{code}</plan_code><name>{code}</name><plan_interval_length>{days}</plan_interval_length>\
                 <plan_interval_unit>days</plan_interval_unit>\
                 <unit_amount_in_cents><USD>1000</USD></unit_amount_in_cents></plan>"
            );
            let reply = self.exchange(&client, reqwest::Method::POST, "/v2/plans", Some(body)).await?;
            anyhow::ensure!(reply.status == 201, "POST /v2/plans answered {}:\n{}", reply.status, reply.body);
        }
        for i in 0..accounts {
            let code = format!("{}-seed-{i}", self.run);
            let body = format!(
                "<account><account_code>{code}</account_code><email>seed{i}@example.com</email>\
                 <first_name>Ada</first_name><last_name>Lovelace</last_name></account>"
            );
            let reply = self.exchange(&client, reqwest::Method::POST, "/v2/accounts", Some(body)).await?;
            anyhow::ensure!(reply.status == 201, "POST /v2/accounts answered {}:\n{}", reply.status, reply.body);
            self.pools().accounts.push(code);
        }
        Ok(())
    }

    /// Sends the request of ticket `n` of the mix.
    async fn send(&self, client: &reqwest::Client, n: u64) {
        use reqwest::Method;
        let slot = MIX[(n % MIX.len() as u64) as usize];
        let kind = match slot {
            Slot::Do(kind) => kind,
            Slot::Refund => {
                if self.refunds.fetch_add(1, Ordering::Relaxed).is_multiple_of(2) {
                    Kind::TerminateWithRefund
                } else {
                    Kind::RefundInvoice
                }
            }
        };
        let fresh = self.counter.fetch_add(1, Ordering::Relaxed);
        match kind {
            Kind::GetAccount | Kind::GetSubscriptions | Kind::GetInvoices | Kind::PutAccount => {
                let code = self.pools().pick(kind != Kind::GetAccount && kind != Kind::PutAccount);
                let Some(code) = code else { return };
                match kind {
                    Kind::GetAccount => {
                        self.api(client, kind, Method::GET, &format!("/v2/accounts/{code}"), None, 200).await;
                    }
                    Kind::GetSubscriptions => {
                        let path = format!("/v2/accounts/{code}/subscriptions");
                        self.api(client, kind, Method::GET, &path, None, 200).await;
                    }
                    Kind::GetInvoices => {
                        let path = format!("/v2/accounts/{code}/invoices");
                        self.api(client, kind, Method::GET, &path, None, 200).await;
                    }
                    _ => {
                        let body = format!(
                            "<account><first_name>Ada {fresh}</first_name>\
                             <email>ada.{fresh}@example.com</email></account>"
                        );
                        self.api(client, kind, Method::PUT, &format!("/v2/accounts/{code}"), Some(body), 200).await;
                    }
                }
            }
            Kind::ListAccounts => {
                self.api(client, kind, Method::GET, "/v2/accounts?per_page=50", None, 200).await;
            }
            Kind::PostAccount => {
                let code = format!("{}-a{fresh}", self.run);
                let body = format!(
                    "<account><account_code>{code}</account_code><email>a{fresh}@example.com</email>\
                     <first_name>Grace</first_name><last_name>Hopper</last_name></account>"
                );
                if self.api(client, kind, Method::POST, "/v2/accounts", Some(body), 201).await.is_some() {
                    self.pools().accounts.push(code);
                }
            }
            // At the population cap a new subscription's slot ends the oldest one instead, so
            // that the number of live subscriptions (and with it the renewals per clock move)
            // stays level through the run.
            Kind::PostSubscription if self.population.is_some_and(|cap| self.pools().live.len() >= cap) => {
                let Some(target) = self.pools().live.pop_front() else { return };
                self.terminate(client, &target, fresh).await;
            }
            Kind::PostSubscription => self.subscribe(client, fresh).await,
            Kind::TerminateWithRefund | Kind::RefundInvoice => {
                let target = {
                    let mut pools = self.pools();
                    let refundable = if kind == Kind::RefundInvoice {
                        pools.live.iter().position(|s| s.invoice.is_some())
                    } else {
                        None
                    };
                    match refundable {
                        Some(at) => pools.live.remove(at),
                        None => pools.live.pop_front(),
                    }
                };
                let Some(target) = target else {
                    // Nothing to refund yet: the slot reads an account instead.
                    let code = self.pools().pick(false);
                    if let Some(code) = code {
                        let path = format!("/v2/accounts/{code}");
                        self.api(client, Kind::GetAccount, Method::GET, &path, None, 200).await;
                    }
                    return;
                };
                match (kind, target.invoice) {
                    (Kind::RefundInvoice, Some(invoice)) => {
                        // A part of the purchase invoice; the subscription goes on renewing, and
                        // back in line for a termination.
                        let body = "<invoice><amount_in_cents>250</amount_in_cents></invoice>".to_owned();
                        let path = format!("/v2/invoices/{invoice}/refund");
                        self.api(client, kind, Method::POST, &path, Some(body), 201).await;
                        self.pools().live.push_back(Subscribed { invoice: None, ..target });
                    }
                    _ => self.terminate(client, &target, fresh).await,
                }
            }
            Kind::Token | Kind::Clock => {}
        }
    }

    /// Terminates a subscription with a full or a partial refund (taking turns).
    async fn terminate(&self, client: &reqwest::Client, target: &Subscribed, fresh: u64) {
        let refund = if fresh.is_multiple_of(2) { "full" } else { "partial" };
        let path = format!("/v2/subscriptions/{}/terminate?refund={refund}", target.uuid);
        self.api(client, Kind::TerminateWithRefund, reqwest::Method::PUT, &path, None, 200).await;
    }

    /// The number of live subscriptions the driver made.
    pub fn live_subscriptions(&self) -> usize {
        self.pools().live.len()
    }

    /// Whether the live subscriptions reached the population at some point. They then hover
    /// just under it, as terminations and refunds take their turns, so their number at one
    /// moment does not tell.
    pub fn population_reached(&self) -> bool {
        self.reached.load(Ordering::SeqCst)
    }

    /// A card token, then a new account with it and a subscription to one of the plans.
    async fn subscribe(&self, client: &reqwest::Client, fresh: u64) {
        let url = format!("{}/js/v1/token", self.base);
        let sent = Instant::now();
        let outcome = post_card_token(client, &url, &self.public_key).await;
        let took = sent.elapsed();
        let (token, exchange) = match outcome {
            Ok((status, body)) => (token_id(status, &body).ok(), Ok(Exchange { status, body, took })),
            Err(e) => (None, Err(e)),
        };
        if self.record(Kind::Token, "POST /js/v1/token", 200, exchange).is_none() {
            return;
        }
        let Some(token) = token else { return };
        let (plan, _) = PLANS[(fresh % PLANS.len() as u64) as usize];
        let code = format!("{}-s{fresh}", self.run);
        let body = format!(
            "<subscription><plan_code>{plan}</plan_code><currency>USD</currency><account>\
             <account_code>{code}</account_code><email>s{fresh}@example.com</email>\
             <billing_info><token_id>{token}</token_id></billing_info></account></subscription>"
        );
        let reply =
            self.api(client, Kind::PostSubscription, reqwest::Method::POST, "/v2/subscriptions", Some(body), 201).await;
        let Some(reply) = reply else { return };
        let uuid = tag(&reply.body, "uuid");
        let invoice = reply
            .body
            .find("/v2/invoices/")
            .map(|at| &reply.body[at + "/v2/invoices/".len()..])
            .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
            .and_then(|n| n.parse().ok());
        let mut pools = self.pools();
        pools.accounts.push(code.clone());
        pools.subscribed.push(code);
        if let Some(uuid) = uuid {
            pools.live.push_back(Subscribed { uuid, invoice });
            if self.population.is_some_and(|cap| pools.live.len() >= cap) {
                self.reached.store(true, Ordering::SeqCst);
            }
        }
    }

    /// The clock: moves the site's clock on by `step` every `every`, while not paused, until
    /// stopped.
    pub async fn clock(self: Arc<Self>, step: String, every: Duration) -> anyhow::Result<()> {
        let client = self.client()?;
        let body = format!("<clock><advance>{step}</advance></clock>");
        let mut ticker = tokio::time::interval(every);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticker.tick().await;
        while !self.stopped.load(Ordering::SeqCst) {
            ticker.tick().await;
            // Counted in flight before looking at the pause, so that a pause never misses it.
            self.in_flight.fetch_add(1, Ordering::SeqCst);
            if self.paused.load(Ordering::SeqCst) || self.stopped.load(Ordering::SeqCst) {
                self.finished();
                continue;
            }
            let outcome = self.exchange(&client, reqwest::Method::POST, "/sandbox/clock", Some(body.clone())).await;
            if let Some(reply) = self.record(Kind::Clock, "POST /sandbox/clock", 200, outcome)
                && let Some(n) = tag(&reply.body, "jobs_run").and_then(|n| n.parse::<u64>().ok())
            {
                self.jobs_run.fetch_add(n, Ordering::SeqCst);
            }
            self.finished();
        }
        Ok(())
    }

    fn finished(&self) {
        if self.in_flight.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.idle.notify_waiters();
        }
    }

    /// Waits until no request is in flight.
    async fn drained(&self) {
        loop {
            let idle = self.idle.notified();
            if self.in_flight.load(Ordering::SeqCst) == 0 {
                return;
            }
            idle.await;
        }
    }

    /// Stops the clock (it ends at its next tick).
    pub fn stop(&self) {
        self.stopped.store(true, Ordering::SeqCst);
    }

    /// Seconds since the traffic began.
    pub fn elapsed(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }
}

/// The text of the first `<name>…</name>` (attributes allowed) in `body`.
fn tag(body: &str, name: &str) -> Option<String> {
    let open = format!("<{name}");
    let mut from = 0;
    while let Some(at) = body[from..].find(&open) {
        let after = from + at + open.len();
        let rest = &body[after..];
        if rest.starts_with('>') || rest.starts_with(' ') {
            let start = after + rest.find('>')? + 1;
            let end = body[start..].find('<')?;
            return Some(body[start..start + end].to_owned());
        }
        from = after;
    }
    None
}

/// The paced API traffic: `connections` workers, each with its own keep-alive connection, take
/// tickets that a pacer hands out every `interval`.
pub struct Pacer {
    traffic: Arc<Traffic>,
    tickets: tokio::sync::mpsc::Sender<u64>,
    interval: Duration,
    next: u64,
    workers: tokio::task::JoinSet<()>,
}

impl Pacer {
    pub fn start(traffic: Arc<Traffic>, connections: usize, per_minute: u64) -> anyhow::Result<Pacer> {
        let (tickets, receiver) = tokio::sync::mpsc::channel::<u64>(connections);
        let receiver = Arc::new(tokio::sync::Mutex::new(receiver));
        let mut workers = tokio::task::JoinSet::new();
        for _ in 0..connections {
            let client = traffic.client()?;
            let (traffic, receiver) = (traffic.clone(), receiver.clone());
            workers.spawn(async move {
                loop {
                    let ticket = receiver.lock().await.recv().await;
                    let Some(n) = ticket else { return };
                    traffic.send(&client, n).await;
                    traffic.finished();
                }
            });
        }
        let interval = Duration::from_secs_f64(60.0 / per_minute.max(1) as f64);
        Ok(Pacer { traffic, tickets, interval, next: 0, workers })
    }

    /// Hands out tickets at the pace for `duration`, then waits until every request it started
    /// (and the clock's) has its answer. Answers the tickets handed out.
    pub async fn run_for(&mut self, duration: Duration) -> anyhow::Result<u64> {
        self.traffic.paused.store(false, Ordering::SeqCst);
        let deadline = tokio::time::Instant::now() + duration;
        let mut ticker = tokio::time::interval(self.interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut sent = 0;
        loop {
            let at = ticker.tick().await;
            if at >= deadline {
                break;
            }
            self.traffic.in_flight.fetch_add(1, Ordering::SeqCst);
            if self.tickets.send(self.next).await.is_err() {
                self.traffic.finished();
                anyhow::bail!("the workers ended");
            }
            self.next += 1;
            sent += 1;
        }
        self.traffic.paused.store(true, Ordering::SeqCst);
        self.traffic.drained().await;
        Ok(sent)
    }

    /// Ends the workers.
    pub async fn finish(self) {
        drop(self.tickets);
        let mut workers = self.workers;
        while workers.join_next().await.is_some() {}
    }
}

#[cfg(test)]
mod tests {
    use super::tag;

    #[test]
    fn tags_with_and_without_attributes() {
        let body =
            "<clock><now type=\"datetime\">2030-01-01T00:00:00Z</now><jobs_run type=\"integer\">61</jobs_run></clock>";
        assert_eq!(tag(body, "jobs_run").as_deref(), Some("61"));
        assert_eq!(tag("<subscription><uuid>ab12</uuid></subscription>", "uuid").as_deref(), Some("ab12"));
        assert_eq!(tag("<uuids>x</uuids>", "uuid"), None);
    }
}
