//! [`TcpCut`]: a TCP forwarder in front of a server (PostgreSQL in the suites) that can cut every
//! connection at once and refuse new ones until it is restored — what a service sees of a
//! database primary that died, or that a network cut took away.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use tokio::io::copy_bidirectional;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// A forwarder on `127.0.0.1` to one upstream address. It runs on a thread of its own (sync
/// tests can use it) and stops when dropped.
pub struct TcpCut {
    /// `127.0.0.1:<port>`: where clients connect.
    pub addr: SocketAddr,
    cut: Arc<AtomicBool>,
    /// Bumped by every cut: a piped connection ends when it changes.
    generation: watch::Sender<u64>,
    accepted: Arc<AtomicU64>,
    _runtime: tokio::runtime::Runtime,
}

impl TcpCut {
    /// Starts forwarding to `upstream` (e.g. `127.0.0.1:5432`).
    pub fn start(upstream: &str) -> TcpCut {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("the forwarder's runtime");
        let listener = runtime.block_on(TcpListener::bind("127.0.0.1:0")).expect("the forwarder's port");
        let addr = listener.local_addr().expect("the forwarder's address");
        let cut = Arc::new(AtomicBool::new(false));
        let (generation, _) = watch::channel(0u64);
        let accepted = Arc::new(AtomicU64::new(0));
        let upstream = upstream.to_owned();
        let (cut_flag, cuts, count) = (cut.clone(), generation.clone(), accepted.clone());
        runtime.spawn(async move {
            loop {
                let Ok((client, _)) = listener.accept().await else { continue };
                if cut_flag.load(Ordering::SeqCst) {
                    // Refused: closed at once, as a connection to a host that is gone fails.
                    drop(client);
                    continue;
                }
                count.fetch_add(1, Ordering::SeqCst);
                let mut ended = cuts.subscribe();
                let upstream = upstream.clone();
                tokio::spawn(async move {
                    let Ok(mut server) = TcpStream::connect(&upstream).await else { return };
                    let mut client = client;
                    tokio::select! {
                        _ = copy_bidirectional(&mut client, &mut server) => {}
                        _ = ended.changed() => {}
                    }
                });
            }
        });
        TcpCut { addr, cut, generation, accepted, _runtime: runtime }
    }

    /// Closes every connection piped now and refuses new ones until [`TcpCut::restore`].
    pub fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
        self.generation.send_modify(|g| *g += 1);
    }

    /// Forwards new connections again.
    pub fn restore(&self) {
        self.cut.store(false, Ordering::SeqCst);
    }

    /// Connections forwarded so far.
    pub fn accepted(&self) -> u64 {
        self.accepted.load(Ordering::SeqCst)
    }

    /// `url` (a `postgres://…@host:port/…` URL) with its host and port replaced by the
    /// forwarder's.
    pub fn route(&self, url: &str) -> String {
        let (scheme, rest) = url.split_once("://").expect("a URL with a scheme");
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        let credentials = authority.rsplit_once('@').map(|(c, _)| format!("{c}@")).unwrap_or_default();
        format!("{scheme}://{credentials}{}/{path}", self.addr)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_routed_through_it() {
        let cut = TcpCut::start("127.0.0.1:1");
        let port = cut.addr.port();
        assert_eq!(
            cut.route("postgres://postgres@127.0.0.1:5432/rebill_x?sslmode=disable"),
            format!("postgres://postgres@127.0.0.1:{port}/rebill_x?sslmode=disable")
        );
        assert_eq!(cut.route("postgres://localhost/db"), format!("postgres://127.0.0.1:{port}/db"));
    }
}
