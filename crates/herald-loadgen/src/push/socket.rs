//! Client sockets for the benchmarks' connections, optionally from a chosen
//! loopback source address: one source address gives some 28,000
//! ephemeral ports toward one listener, so runs with more connections than
//! that spread them over 127.0.0.0/8.

use std::net::{IpAddr, SocketAddr};

use tokio::net::{TcpSocket, TcpStream};

use super::PushBenchError;

/// Connects to `addr` from `source` (any port; `None`: the kernel's
/// choice), with Nagle off and, if given, a kernel receive buffer of
/// `receive_buffer` bytes.
pub async fn connect_from(
    addr: &str,
    source: Option<IpAddr>,
    receive_buffer: Option<u32>,
) -> Result<TcpStream, PushBenchError> {
    let failed = |reason: String| PushBenchError::Connect {
        addr: addr.to_owned(),
        reason,
    };
    let target: SocketAddr = tokio::net::lookup_host(addr)
        .await
        .map_err(|e| failed(e.to_string()))?
        .next()
        .ok_or_else(|| failed("the name has no address".into()))?;
    let socket = if target.is_ipv4() {
        TcpSocket::new_v4()
    } else {
        TcpSocket::new_v6()
    }
    .map_err(|e| failed(e.to_string()))?;
    if let Some(source) = source {
        bind_address_no_port(&socket);
        socket
            .bind(SocketAddr::new(source, 0))
            .map_err(|e| failed(format!("binding {source}: {e}")))?;
    }
    if let Some(bytes) = receive_buffer {
        socket
            .set_recv_buffer_size(bytes)
            .map_err(|e| failed(e.to_string()))?;
    }
    let stream = socket
        .connect(target)
        .await
        .map_err(|e| failed(e.to_string()))?;
    stream
        .set_nodelay(true)
        .map_err(|e| failed(e.to_string()))?;
    Ok(stream)
}

/// Asks Linux to choose the source port at `connect` rather than at
/// `bind` (`IP_BIND_ADDRESS_NO_PORT`): a port bound without a destination
/// must be free of every socket on that address, TIME_WAIT ones from the
/// previous run included, so back-to-back runs of 10,000 connections from
/// one address ran out of ports; chosen at connect, a port only has to
/// make the four-tuple unique, and loopback TIME_WAIT ports are reused. On
/// a kernel without it, binding works as before.
fn bind_address_no_port(socket: &TcpSocket) {
    use std::os::fd::AsRawFd as _;
    let on: libc::c_int = 1;
    // SAFETY: the descriptor is the socket's own and open; the option value
    // is a c_int that outlives the call, and its size is passed with it.
    let _ = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::IPPROTO_IP,
            libc::IP_BIND_ADDRESS_NO_PORT,
            std::ptr::addr_of!(on).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
}

/// The loopback source address of generator process `index`: 127.0.N.M
/// from 127.0.1.1 on, one per process, so each has its own ports.
pub fn loopback_source(index: usize) -> IpAddr {
    let third = 1 + index / 254 % 255;
    let fourth = 1 + index % 254;
    IpAddr::from([127, 0, third as u8, fourth as u8])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn connects_from_the_source_it_is_given() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let source = loopback_source(3);
        let client = connect_from(&addr, Some(source), None).await.unwrap();
        let (_, peer) = listener.accept().await.unwrap();
        assert_eq!(peer.ip(), source);
        assert_eq!(client.local_addr().unwrap().ip(), source);
        assert!(client.nodelay().unwrap());
    }

    #[test]
    fn every_process_gets_its_own_loopback_address() {
        let sources: std::collections::HashSet<_> = (0..1000).map(loopback_source).collect();
        assert_eq!(sources.len(), 1000);
        assert!(sources.iter().all(|ip| ip.is_loopback()));
        assert!(!sources.contains(&IpAddr::from([127, 0, 0, 1])));
    }
}
