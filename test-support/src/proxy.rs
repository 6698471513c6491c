//! [`TcpProxy`]: a TCP proxy in the test's runtime whose network a test can break.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use sqlx::postgres::PgConnectOptions;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Bytes one direction of a connection reads at a time.
const CHUNK: usize = 16 * 1024;

/// What the proxy does with connections; [`TcpProxy::set_mode`] switches it at any time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ProxyMode {
    /// Forwards bytes both ways, and end-of-stream too.
    #[default]
    Pass,
    /// Closes every open connection with a TCP RST (`SO_LINGER` 0), on both sides, and resets
    /// each new one as soon as it is accepted.
    Reset,
    /// Swallows every byte, both ways, and sends nothing back, as a dropped route or a pulled
    /// cable does; new connections are accepted (the handshake completes) and never reach the
    /// server. A connection once blackholed stays so (see [`TcpProxy`]).
    Blackhole,
}

/// The mode, with how many times each breaking mode was entered: a connection compares them
/// with the counts at its opening, so no switch is missed however quickly the next one comes.
#[derive(Debug, Clone, Copy, Default)]
struct State {
    mode: ProxyMode,
    resets: u64,
    blackholes: u64,
}

/// A TCP proxy on a free port of 127.0.0.1, forwarding to one upstream address, whose mode the
/// test switches to break the network under a client.
///
/// It runs as tasks on the runtime that created it, and stops, resetting every connection, when
/// dropped.
///
/// A connection that was ever blackholed stays blackholed after the mode is back to
/// [`Pass`](ProxyMode::Pass): a real network that drops packets for a while does not hand a
/// client its stream back intact, and the client must give it up on its own (a timeout, a
/// keepalive of its protocol). Only [`Reset`](ProxyMode::Reset) or dropping the proxy ends
/// such a connection; connections opened after the switch back pass. While blackholed, the
/// proxy's own kernel still acknowledges what it receives, so TCP-level timeouts
/// (keepalive, `TCP_USER_TIMEOUT`) do not fire: what notices is the application's timeouts.
///
/// ```no_run
/// # async fn example(cluster: pgq_test_support::Cluster) {
/// use pgq_test_support::{ProxyMode, TcpProxy};
///
/// let proxy = TcpProxy::new(cluster.addr()).await;
/// let pool = sqlx::PgPool::connect_with(proxy.connect_options(&cluster.connect_options()))
///     .await
///     .unwrap();
/// proxy.set_mode(ProxyMode::Reset); // every connection of `pool` is reset
/// # }
/// ```
#[derive(Debug)]
pub struct TcpProxy {
    addr: SocketAddr,
    state: watch::Sender<State>,
    opened: Arc<AtomicU64>,
    accept: JoinHandle<()>,
}

impl TcpProxy {
    /// Starts a proxy to `upstream` in [`Pass`](ProxyMode::Pass) mode. Must be called within a
    /// tokio runtime, which runs it.
    ///
    /// ```no_run
    /// # async fn example(cluster: pgq_test_support::Cluster) {
    /// let proxy = pgq_test_support::TcpProxy::new(cluster.addr()).await;
    /// # }
    /// ```
    pub async fn new(upstream: SocketAddr) -> Self {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .await
            .unwrap_or_else(|err| panic!("cannot bind a proxy on 127.0.0.1: {err}"));
        let addr = listener
            .local_addr()
            .unwrap_or_else(|err| panic!("cannot read the proxy's address: {err}"));
        let (state, _) = watch::channel(State::default());
        let opened = Arc::new(AtomicU64::new(0));
        let accept = tokio::spawn(accept(listener, upstream, state.clone(), opened.clone()));
        Self {
            addr,
            state,
            opened,
            accept,
        }
    }

    /// Switches the mode for open connections and new ones.
    ///
    /// ```no_run
    /// # async fn example(proxy: pgq_test_support::TcpProxy) {
    /// use pgq_test_support::ProxyMode;
    ///
    /// proxy.set_mode(ProxyMode::Blackhole); // open connections hang from now on
    /// proxy.set_mode(ProxyMode::Pass); // new connections work; the hung ones stay hung
    /// # }
    /// ```
    pub fn set_mode(&self, mode: ProxyMode) {
        self.state.send_modify(|state| {
            state.mode = mode;
            match mode {
                ProxyMode::Pass => {}
                ProxyMode::Reset => state.resets += 1,
                ProxyMode::Blackhole => state.blackholes += 1,
            }
        });
    }

    /// The current mode.
    ///
    /// ```no_run
    /// # async fn example(proxy: pgq_test_support::TcpProxy) {
    /// assert_eq!(proxy.mode(), pgq_test_support::ProxyMode::Pass);
    /// # }
    /// ```
    pub fn mode(&self) -> ProxyMode {
        self.state.borrow().mode
    }

    /// The address clients connect to.
    ///
    /// ```no_run
    /// # async fn example(proxy: pgq_test_support::TcpProxy) {
    /// let stream = tokio::net::TcpStream::connect(proxy.addr()).await.unwrap();
    /// # }
    /// ```
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The port clients connect to, on 127.0.0.1.
    ///
    /// ```no_run
    /// # async fn example(proxy: pgq_test_support::TcpProxy) {
    /// let url = format!("postgres://postgres@127.0.0.1:{}/postgres", proxy.port());
    /// # }
    /// ```
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// How many connections the proxy has accepted so far, in every mode.
    ///
    /// ```no_run
    /// # use sqlx::postgres::PgConnectOptions;
    /// # async fn example(proxy: pgq_test_support::TcpProxy, options: PgConnectOptions) {
    /// use sqlx::Connection;
    ///
    /// let before = proxy.connections();
    /// let connection = sqlx::PgConnection::connect_with(&options).await.unwrap();
    /// assert_eq!(proxy.connections(), before + 1);
    /// # }
    /// ```
    pub fn connections(&self) -> u64 {
        self.opened.load(Ordering::Relaxed)
    }

    /// `server`'s options with host and port pointing at the proxy (user, database, TLS and
    /// the rest kept).
    ///
    /// ```no_run
    /// # async fn example(cluster: pgq_test_support::Cluster, proxy: pgq_test_support::TcpProxy) {
    /// let through_proxy = proxy.connect_options(&cluster.connect_options());
    /// # }
    /// ```
    pub fn connect_options(&self, server: &PgConnectOptions) -> PgConnectOptions {
        server.clone().host("127.0.0.1").port(self.port())
    }
}

impl Drop for TcpProxy {
    fn drop(&mut self) {
        // Connections end when they see the state's sender gone.
        self.accept.abort();
    }
}

/// Accepts connections and hands each to a task according to the mode.
async fn accept(
    listener: TcpListener,
    upstream: SocketAddr,
    state: watch::Sender<State>,
    opened: Arc<AtomicU64>,
) {
    loop {
        let Ok((client, _)) = listener.accept().await else {
            continue;
        };
        opened.fetch_add(1, Ordering::Relaxed);
        let link = Link::new(state.subscribe());
        match link.verdict() {
            ProxyMode::Reset => abort(&client),
            ProxyMode::Blackhole => {
                tokio::spawn(swallow(client, link));
            }
            ProxyMode::Pass => {
                tokio::spawn(forward(client, upstream, link));
            }
        }
    }
}

/// One connection's view of the proxy's state.
#[derive(Clone)]
struct Link {
    state: watch::Receiver<State>,
    /// The counts of resets and blackholes when the connection opened.
    opened_at: State,
}

impl Link {
    fn new(state: watch::Receiver<State>) -> Self {
        let opened_at = *state.borrow();
        Self { state, opened_at }
    }

    /// What this connection gets now: reset if a reset came since it opened, swallowed if a
    /// blackhole did (or is on), passed otherwise.
    fn verdict(&self) -> ProxyMode {
        let now = *self.state.borrow();
        if now.resets > self.opened_at.resets || now.mode == ProxyMode::Reset {
            ProxyMode::Reset
        } else if now.blackholes > self.opened_at.blackholes || now.mode == ProxyMode::Blackhole {
            ProxyMode::Blackhole
        } else {
            ProxyMode::Pass
        }
    }

    /// Resolves when the connection must be reset: a reset came, or the proxy was dropped.
    async fn reset(&mut self) {
        while self.verdict() != ProxyMode::Reset {
            if self.state.changed().await.is_err() {
                return;
            }
        }
    }
}

/// Connects to `upstream` and pumps both ways.
async fn forward(client: TcpStream, upstream: SocketAddr, mut link: Link) {
    let server = tokio::select! {
        biased;
        () = link.reset() => return abort(&client),
        server = TcpStream::connect(upstream) => server,
    };
    let Ok(server) = server else {
        return abort(&client);
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    tokio::spawn(pump(client_read, server_write, link.clone()));
    tokio::spawn(pump(server_read, client_write, link));
}

/// Copies one direction while the connection passes; swallows once it is blackholed; resets
/// both sockets on a reset.
async fn pump(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, mut link: Link) {
    let mut buf = vec![0; CHUNK];
    loop {
        let read = tokio::select! {
            biased;
            () = link.reset() => return abort_halves(from, to),
            read = from.read(&mut buf) => read,
        };
        let verdict = link.verdict();
        match read {
            Ok(0) | Err(_) if verdict == ProxyMode::Pass => {
                // End of stream passes on as one: a FIN to the other side.
                let _ = to.shutdown().await;
                return;
            }
            Ok(0) | Err(_) => {
                // A dead network carries no FIN: keep the other side open until a reset.
                link.reset().await;
                return abort_halves(from, to);
            }
            Ok(_) if verdict == ProxyMode::Reset => return abort_halves(from, to),
            Ok(_) if verdict == ProxyMode::Blackhole => continue,
            Ok(n) => {
                tokio::select! {
                    biased;
                    () = link.reset() => return abort_halves(from, to),
                    written = to.write_all(&buf[..n]) => {
                        if written.is_err() {
                            return;
                        }
                    }
                }
            }
        }
    }
}

/// Holds a connection accepted during a blackhole: reads and drops its bytes, sends none.
async fn swallow(mut client: TcpStream, mut link: Link) {
    let mut buf = vec![0; CHUNK];
    loop {
        tokio::select! {
            biased;
            () = link.reset() => return abort(&client),
            read = client.read(&mut buf) => {
                if matches!(read, Ok(0) | Err(_)) {
                    link.reset().await;
                    return abort(&client);
                }
            }
        }
    }
}

/// Sets `SO_LINGER` to zero, so that closing the socket (when the caller drops it) sends a RST.
fn abort(stream: &TcpStream) {
    let _ = stream.set_zero_linger();
}

/// Resets both sockets of a pump: zero linger on each, and no FIN from dropping the write half.
fn abort_halves(from: OwnedReadHalf, to: OwnedWriteHalf) {
    abort(from.as_ref());
    abort(to.as_ref());
    to.forget();
}
