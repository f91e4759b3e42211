//! The HTTP side of webhooks: [`HttpPoster`] posts notifications for
//! [`rebill_app::operations::webhooks::run`], the worker every `rebill serve` process runs.

use rebill_app::operations::webhooks;

/// How much of an endpoint's answer is read; the rest is dropped with its connection.
const ANSWER_READ_LIMIT: usize = 64 * 1024;

/// Posts notifications over HTTP(S): no redirect is followed (one counts as a failure), the
/// attempt's timeout bounds the whole exchange.
pub struct HttpPoster {
    client: reqwest::Client,
}

impl HttpPoster {
    pub fn new() -> Result<Self, reqwest::Error> {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .user_agent("rebill-webhooks")
            .build()
            .map_err(|e| e.without_url())?;
        Ok(Self { client })
    }
}

impl webhooks::Poster for HttpPoster {
    fn post(
        &self,
        post: webhooks::Post,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = webhooks::Posted> + Send + '_>> {
        Box::pin(async move {
            let mut request = self
                .client
                .post(&post.url)
                .timeout(post.timeout)
                .header("Content-Type", "application/xml; charset=utf-8")
                .body(post.body);
            for (name, value) in post.headers {
                request = request.header(name, value);
            }
            if let Some((user, password)) = post.basic {
                request = request.basic_auth(user, Some(password));
            }
            match request.send().await {
                Ok(mut response) => {
                    let status = response.status().as_u16();
                    // The answer is read (up to a bound, within the timeout) so that its
                    // connection can carry the endpoint's next notification.
                    let mut read = 0;
                    while read < ANSWER_READ_LIMIT {
                        match response.chunk().await {
                            Ok(Some(chunk)) => read += chunk.len(),
                            _ => break,
                        }
                    }
                    webhooks::Posted::Status(status)
                }
                // The error names the URL and what failed, never a credential (they travel in a
                // header, not the URL: URLs with credentials are refused when added).
                Err(e) if e.is_timeout() => webhooks::Posted::Failed("timed out".to_owned()),
                Err(e) if e.is_connect() => webhooks::Posted::Failed("connection failed".to_owned()),
                Err(e) => webhooks::Posted::Failed(e.without_url().to_string()),
            }
        })
    }
}
