//! Free TCP ports on 127.0.0.1 for servers started as separate programs.

use std::net::{Ipv4Addr, TcpListener};

/// A port nothing listens on right now: the one the kernel gives a listener bound to port 0.
///
/// Another process may take it before the server binds it; callers retry with a new port when
/// the server reports the address in use.
pub(crate) fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .unwrap_or_else(|err| panic!("cannot bind 127.0.0.1:0 to find a free port: {err}"))
}
