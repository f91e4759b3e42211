//! A local webhook receiver: answers 200 at once to every POST, counts them and the
//! notification kinds (each body's root element, e.g. `new_account_notification`), on a thread of
//! its own.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A running receiver (on the current tokio runtime, until it ends).
pub struct Receiver {
    /// Where to post: `http://127.0.0.1:PORT/hooks`.
    pub url: String,
    count: tokio::sync::watch::Receiver<u64>,
    kinds: Arc<Mutex<BTreeMap<String, u64>>>,
}

impl Receiver {
    /// Binds a local port and starts answering, on a thread and a runtime of its own: the
    /// receiver stands for a merchant's server elsewhere, so it does not take turns on the
    /// measured service's runtime (it still shares the machine's cores).
    pub fn start() -> anyhow::Result<Receiver> {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let url = format!("http://{}/hooks", listener.local_addr()?);
        let runtime = tokio::runtime::Builder::new_current_thread().enable_io().build()?;
        let (counted, count) = tokio::sync::watch::channel(0_u64);
        let counted = Arc::new(counted);
        let kinds = Arc::new(Mutex::new(BTreeMap::new()));
        let kinded = kinds.clone();
        std::thread::Builder::new().name("receiver".into()).spawn(move || {
            runtime.block_on(async move {
                let Ok(listener) = tokio::net::TcpListener::from_std(listener) else { return };
                while let Ok((stream, _)) = listener.accept().await {
                    tokio::spawn(serve(stream, counted.clone(), kinded.clone()));
                }
            })
        })?;
        Ok(Receiver { url, count, kinds })
    }

    /// Notifications received so far.
    pub fn count(&self) -> u64 {
        *self.count.borrow()
    }

    /// Waits until at least `n` notifications were received (an error when the receiver's
    /// thread ended first).
    pub async fn wait_for(&self, n: u64) -> anyhow::Result<()> {
        let mut count = self.count.clone();
        count.wait_for(|received| *received >= n).await.map(drop).map_err(|_| anyhow::anyhow!("the receiver stopped"))
    }

    /// Notifications received so far by kind.
    pub fn kinds(&self) -> BTreeMap<String, u64> {
        self.kinds.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clone()
    }
}

/// Answers every complete request of one connection (the poster may keep it alive), each
/// counted by its head and `Content-Length`.
async fn serve(
    mut stream: tokio::net::TcpStream,
    count: Arc<tokio::sync::watch::Sender<u64>>,
    kinds: Arc<Mutex<BTreeMap<String, u64>>>,
) {
    let mut buffer = vec![0u8; 64 * 1024];
    let mut seen = Vec::new();
    loop {
        let Ok(n) = stream.read(&mut buffer).await else { return };
        if n == 0 {
            return;
        }
        seen.extend_from_slice(&buffer[..n]);
        while let Some(end) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&seen[..end]).to_ascii_lowercase();
            let length: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            if seen.len() < end + 4 + length {
                break;
            }
            let kind = root_element(&seen[end + 4..end + 4 + length]);
            seen.drain(..end + 4 + length);
            count.send_modify(|received| *received += 1);
            {
                let mut kinds = kinds.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
                *kinds.entry(kind).or_default() += 1;
            }
            if stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n").await.is_err() {
                return;
            }
        }
    }
}

/// The name of an XML document's root element (`?` when there is none).
fn root_element(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let mut rest = text.trim_start();
    while let Some(after) = rest.strip_prefix("<?").or_else(|| rest.strip_prefix("<!--")) {
        let Some(close) = after.find('>') else { break };
        rest = after[close + 1..].trim_start();
    }
    rest.strip_prefix('<')
        .map(|r| r.chars().take_while(|c| !c.is_whitespace() && *c != '>' && *c != '/').collect::<String>())
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "?".to_owned())
}

#[cfg(test)]
mod tests {
    use super::root_element;

    #[test]
    fn kinds_are_root_elements() {
        let body = b"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<new_account_notification>\n  <account/>\n</new_account_notification>";
        assert_eq!(root_element(body), "new_account_notification");
        assert_eq!(root_element(b"<x/>"), "x");
        assert_eq!(root_element(b""), "?");
    }
}
