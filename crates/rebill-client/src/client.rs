//! The client, its builder and the transport: one HTTP exchange with the rebill headers, the
//! rate-limit headers kept, bounded retries of idempotent calls and the opt-in wait on 429.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use rebill_xml::{ApiVersion, Features, WireContext};
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap};
use reqwest::{Method, StatusCode, Url};

use crate::error::{self, Error};

/// The user agent every request carries.
pub const USER_AGENT: &str = concat!("rebill-client/", env!("CARGO_PKG_VERSION"));

/// A rebill API client: cheap to clone (clones share the connection pool and the last
/// rate-limit reading).
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

struct Inner {
    http: reqwest::Client,
    /// Without a trailing slash.
    base_url: String,
    api_key: String,
    ctx: WireContext,
    retry: RetryPolicy,
    rate_limit_wait: Option<Duration>,
    rate: Mutex<Option<RateLimit>>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key.
        f.debug_struct("Client")
            .field("base_url", &self.inner.base_url)
            .field("api_version", &self.inner.ctx.version)
            .finish_non_exhaustive()
    }
}

/// The site's rate limit as the last answer reported it (`X-RateLimit-*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit {
    /// Requests allowed in the window (`X-RateLimit-Limit`).
    pub limit: u64,
    /// Requests left in the window (`X-RateLimit-Remaining`).
    pub remaining: u64,
    /// When the window frees up (`X-RateLimit-Reset`).
    pub reset_at: DateTime<Utc>,
}

/// How idempotent calls (GET, HEAD) are retried on 502, 503 and connection errors. Writes are
/// never retried: a write whose answer was lost may have happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first attempt (0: none).
    pub max_retries: u32,
    /// Delay before the first retry; doubled each time, with random jitter of up to half.
    pub base_delay: Duration,
    /// Longest delay between two attempts.
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy { max_retries: 2, base_delay: Duration::from_millis(200), max_delay: Duration::from_secs(5) }
    }
}

impl RetryPolicy {
    /// No retries at all.
    pub fn none() -> Self {
        RetryPolicy { max_retries: 0, ..RetryPolicy::default() }
    }

    /// The delay before retry number `attempt` (1-based): exponential, capped, jittered.
    fn delay(&self, attempt: u32) -> Duration {
        let exponential = self.base_delay.saturating_mul(1u32 << attempt.saturating_sub(1).min(16));
        let capped = exponential.min(self.max_delay);
        // Jitter: between half and all of the delay.
        let half = capped / 2;
        half + half.mul_f64(jitter())
    }
}

/// A number in [0, 1) that differs from call to call (from the standard library's randomly
/// seeded hasher; good enough to spread retries, not for anything secret).
fn jitter() -> f64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher
        .write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos());
    (hasher.finish() >> 11) as f64 / (1u64 << 53) as f64
}

/// A client configuration that cannot work.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// No base URL was given.
    #[error("a base URL is required (e.g. http://127.0.0.1:8080)")]
    MissingBaseUrl,
    /// The base URL is not an http(s) URL.
    #[error("the base URL {0:?} is not an http or https URL")]
    InvalidBaseUrl(String),
    /// No API key was given.
    #[error("an API key is required")]
    MissingApiKey,
    /// The HTTP client could not be set up (TLS).
    #[error("cannot set up the HTTP client: {0}")]
    Http(#[from] reqwest::Error),
}

/// Builds a [`Client`]: `Client::builder().base_url(…).api_key(…).build()`.
#[derive(Debug, Clone)]
pub struct ClientBuilder {
    base_url: Option<String>,
    api_key: Option<String>,
    version: ApiVersion,
    features: Features,
    timeout: Duration,
    user_agent: String,
    retry: RetryPolicy,
    rate_limit_wait: Option<Duration>,
}

impl Default for ClientBuilder {
    fn default() -> Self {
        ClientBuilder {
            base_url: None,
            api_key: None,
            version: rebill_xml::version::LATEST_VERSION,
            features: Features::none(),
            timeout: Duration::from_secs(60),
            user_agent: USER_AGENT.to_owned(),
            retry: RetryPolicy::default(),
            rate_limit_wait: None,
        }
    }
}

impl ClientBuilder {
    /// The service's base URL (`https://api.example.com`, `http://127.0.0.1:8080`).
    pub fn base_url(mut self, url: impl Into<String>) -> Self {
        self.base_url = Some(url.into());
        self
    }

    /// The site's private API key (sent as the Basic user name).
    pub fn api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    /// The API version every request asks for (`X-Api-Version`); it decides the element names
    /// written and read (default: the newest).
    pub fn api_version(mut self, version: ApiVersion) -> Self {
        self.version = version;
        self
    }

    /// The site's features that change the wire (`credit_memos`).
    pub fn site_features(mut self, features: Features) -> Self {
        self.features = features;
        self
    }

    /// The whole-request timeout (default 60 s).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The `User-Agent` (default `rebill-client/<version>`).
    pub fn user_agent(mut self, agent: impl Into<String>) -> Self {
        self.user_agent = agent.into();
        self
    }

    /// How GET and HEAD are retried on 502, 503 and connection errors (default: twice).
    pub fn retry_policy(mut self, policy: RetryPolicy) -> Self {
        self.retry = policy;
        self
    }

    /// Opt in to waiting on 429: when the site's limit is used up, wait until
    /// `X-RateLimit-Reset` and send the request again, as long as the wait is at most `max_wait`
    /// (a longer wait answers [`Error::RateLimited`] at once; at most three waits per call).
    /// This applies to writes too: the service refuses a request over the limit before doing
    /// anything with it. Without it, 429 is [`Error::RateLimited`].
    pub fn wait_on_rate_limit(mut self, max_wait: Duration) -> Self {
        self.rate_limit_wait = Some(max_wait);
        self
    }

    /// The client.
    pub fn build(self) -> Result<Client, BuildError> {
        let base = self.base_url.ok_or(BuildError::MissingBaseUrl)?;
        let base_url = base.trim_end_matches('/').to_owned();
        match Url::parse(&base_url) {
            Ok(u) if matches!(u.scheme(), "http" | "https") && u.query().is_none() => {}
            _ => return Err(BuildError::InvalidBaseUrl(base)),
        }
        let api_key = self.api_key.filter(|k| !k.is_empty()).ok_or(BuildError::MissingApiKey)?;
        let http = reqwest::Client::builder().timeout(self.timeout).user_agent(self.user_agent).build()?;
        Ok(Client {
            inner: Arc::new(Inner {
                http,
                ctx: WireContext::new(self.version, self.features, &base_url),
                base_url,
                api_key,
                retry: self.retry,
                rate_limit_wait: self.rate_limit_wait,
                rate: Mutex::new(None),
            }),
        })
    }
}

/// One answer, read whole.
pub(crate) struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

impl Client {
    /// A builder.
    pub fn builder() -> ClientBuilder {
        ClientBuilder::default()
    }

    /// The API version the client speaks.
    pub fn api_version(&self) -> ApiVersion {
        self.inner.ctx.version
    }

    /// The wire context documents are written and read in (version, features, base URL).
    pub fn wire_context(&self) -> &WireContext {
        &self.inner.ctx
    }

    /// The rate limit reported by the last answer that carried one.
    pub fn rate_limit(&self) -> Option<RateLimit> {
        self.inner.rate.lock().ok().and_then(|r| *r)
    }

    /// The absolute URL of an API path (`/v2/accounts`).
    pub(crate) fn url(&self, path: &str) -> Result<Url, Error> {
        Url::parse(&format!("{}{path}", self.inner.base_url)).map_err(|e| Error::Api {
            status: 0,
            symbol: "invalid_url".into(),
            description: e.to_string(),
        })
    }

    fn record_rate_limit(&self, headers: &HeaderMap) -> Option<DateTime<Utc>> {
        let number = |name: &str| headers.get(name)?.to_str().ok()?.trim().parse::<i64>().ok();
        let reset_at = number("x-ratelimit-reset").and_then(|t| DateTime::from_timestamp(t, 0));
        if let (Some(limit), Some(remaining), Some(reset_at)) =
            (number("x-ratelimit-limit"), number("x-ratelimit-remaining"), reset_at)
            && let Ok(mut rate) = self.inner.rate.lock()
        {
            *rate = Some(RateLimit {
                limit: u64::try_from(limit).unwrap_or(0),
                remaining: u64::try_from(remaining).unwrap_or(0),
                reset_at,
            });
        }
        reset_at
    }

    /// Sends one request (with retries as configured) and reads the answer whole. An answer
    /// outside 2xx is turned into its [`Error`].
    pub(crate) async fn send(&self, method: Method, url: Url, body: Option<String>) -> Result<Answer, Error> {
        let idempotent = method == Method::GET || method == Method::HEAD;
        let mut retries = 0u32;
        let mut rate_waits = 0u32;
        loop {
            let mut request = self
                .inner
                .http
                .request(method.clone(), url.clone())
                .basic_auth(&self.inner.api_key, Some(""))
                .header(ACCEPT, "application/xml")
                .header("X-Api-Version", self.inner.ctx.version.to_string());
            if let Some(body) = &body {
                request = request.header(CONTENT_TYPE, "application/xml; charset=utf-8").body(body.clone());
            }
            let outcome = match request.send().await {
                Ok(response) => {
                    let status = response.status();
                    let headers = response.headers().clone();
                    response.bytes().await.map(|b| Answer { status, headers, body: b.to_vec() })
                }
                Err(e) => Err(e),
            };
            let answer = match outcome {
                Ok(answer) => answer,
                Err(e) => {
                    let connection = e.is_connect() || (e.is_request() && !e.is_timeout());
                    if idempotent && connection && retries < self.inner.retry.max_retries {
                        retries += 1;
                        tokio::time::sleep(self.inner.retry.delay(retries)).await;
                        continue;
                    }
                    return Err(Error::Transport(e));
                }
            };
            let reset_at = self.record_rate_limit(&answer.headers);
            let status = answer.status.as_u16();
            if status == 429
                && let Some(max_wait) = self.inner.rate_limit_wait
                && rate_waits < 3
                && let Some(wait) = reset_at.map(until)
                && wait <= max_wait
            {
                rate_waits += 1;
                tokio::time::sleep(wait).await;
                continue;
            }
            if idempotent && matches!(status, 502 | 503) && retries < self.inner.retry.max_retries {
                retries += 1;
                tokio::time::sleep(self.inner.retry.delay(retries)).await;
                continue;
            }
            if !answer.status.is_success() {
                return Err(error::from_response(status, &answer.body, reset_at, &self.inner.ctx));
            }
            return Ok(answer);
        }
    }
}

/// How long from now until `at` (zero when past).
fn until(at: DateTime<Utc>) -> Duration {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let at = Duration::from_secs(u64::try_from(at.timestamp()).unwrap_or(0));
    at.saturating_sub(now)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_grow_are_capped_and_jittered() {
        let policy = RetryPolicy {
            max_retries: 5,
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_millis(350),
        };
        for attempt in 1..=5 {
            let full = (Duration::from_millis(100) * (1 << (attempt - 1))).min(Duration::from_millis(350));
            let d = policy.delay(attempt);
            assert!(d >= full / 2 && d <= full, "attempt {attempt}: {d:?} outside [{:?}, {full:?}]", full / 2);
        }
    }

    #[test]
    fn builder_refuses_what_cannot_work() {
        assert!(matches!(Client::builder().api_key("k").build(), Err(BuildError::MissingBaseUrl)));
        assert!(matches!(
            Client::builder().base_url("ftp://x").api_key("k").build(),
            Err(BuildError::InvalidBaseUrl(_))
        ));
        assert!(matches!(Client::builder().base_url("http://x").build(), Err(BuildError::MissingApiKey)));
        let client = Client::builder().base_url("http://x/").api_key("secret").build().expect("client");
        assert_eq!(client.api_version(), rebill_xml::version::LATEST_VERSION);
        assert!(!format!("{client:?}").contains("secret"));
    }
}
