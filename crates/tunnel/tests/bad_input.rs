//! A running endpoint pair under fire: datagrams from strangers and malformed datagrams reach
//! the server's UDP port. They are counted and dropped, nothing reaches a TUN device, and the
//! tunnel keeps working. Needs root (namespaces, TUN devices); traffic stays on loopback and in
//! namespaces this test creates.

use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::time::Duration;

use netns::NetNs;
use pantheon_tunnel::io::{self, EndpointConfig, RunningEndpoint};
use pantheon_tunnel::log::{LogFormat, Role};
use pantheon_tunnel::wire;

const SERVER_PRIVATE: Ipv4Addr = Ipv4Addr::new(100, 64, 0, 3);
const CLIENT_PRIVATE: Ipv4Addr = Ipv4Addr::new(100, 64, 0, 4);

fn endpoint(role: Role, udp_addr: SocketAddrV4, ns: &NetNs) -> RunningEndpoint {
    let (local_private, peer_private) = match role {
        Role::Server => (SERVER_PRIVATE, CLIENT_PRIVATE),
        Role::Client => (CLIENT_PRIVATE, SERVER_PRIVATE),
    };
    io::start(
        EndpointConfig {
            role,
            flow: 1,
            sender_side: role == Role::Client,
            ingress_log: None,
            egress_log: None,
            log_format: LogFormat::Binary,
            capture_snaplen: None,
            local_private,
            peer_private,
            path_mtu: 1500,
            udp_addr,
            bind_device: None,
            peer_timeout: None,
        },
        None,
        ns,
    )
    .expect("start endpoint")
}

/// Packets the TUN device `tunnel` in `ns` has received, i.e. that its endpoint wrote into the
/// namespace (`/proc/thread-self/net/dev`, second column; `/proc/net` would show the
/// process's namespace, not the thread's).
fn tun_rx_packets(ns: &NetNs) -> u64 {
    ns.run_in(|| {
        std::fs::read_to_string("/proc/thread-self/net/dev")
            .unwrap()
            .lines()
            .find(|l| l.trim_start().starts_with("tunnel:"))
            .and_then(|l| l.split(':').nth(1))
            .and_then(|v| v.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .expect("tunnel in /proc/net/dev")
    })
    .unwrap()
}

/// An IPv4/UDP packet from the client's tunnel address to the server's, as a stranger would
/// forge it (checksums zero: it must never get far enough for them to matter).
fn forged_ip_packet() -> Vec<u8> {
    let mut p = vec![0u8; 28 + 4];
    p[0] = 0x45;
    let len = p.len() as u16;
    p[2..4].copy_from_slice(&len.to_be_bytes());
    p[8] = 64;
    p[9] = 17;
    p[12..16].copy_from_slice(&CLIENT_PRIVATE.octets());
    p[16..20].copy_from_slice(&SERVER_PRIVATE.octets());
    p[20..22].copy_from_slice(&9u16.to_be_bytes());
    p[22..24].copy_from_slice(&9u16.to_be_bytes());
    p[24..26].copy_from_slice(&12u16.to_be_bytes());
    p
}

#[test]
fn strangers_and_garbage_are_counted_and_dropped() {
    let pid = std::process::id();
    let server_ns = NetNs::create(&format!("ptun-bad-{pid}-s")).unwrap();
    let client_ns = NetNs::create(&format!("ptun-bad-{pid}-c")).unwrap();
    let server = endpoint(
        Role::Server,
        SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0),
        &server_ns,
    );
    let port = server.local_udp.port();
    let stranger = UdpSocket::bind("127.0.0.1:0").unwrap();
    let target = SocketAddrV4::new(Ipv4Addr::LOCALHOST, port);
    let mut data = vec![0u8; wire::UID_LEN];
    data.extend_from_slice(&forged_ip_packet());

    // Before any handshake: data from someone who never sent a SYN.
    stranger.send_to(&data, target).unwrap();
    assert!(io::wait_until(Duration::from_secs(5), || server
        .control
        .foreign_datagrams()
        == 1));

    let client = endpoint(Role::Client, target, &client_ns);
    assert!(io::wait_until(Duration::from_secs(10), || {
        client.control.is_connected() && server.control.is_connected()
    }));
    let written_before = tun_rx_packets(&server_ns);

    // After it: a forged data datagram, a truncated one, an unknown control UID, a non-IP
    // payload and a maximum-size datagram of garbage, all from the stranger.
    let mut non_ip = data.clone();
    non_ip[wire::UID_LEN] = 0x12;
    let garbage: Vec<u8> = (0..65_507u32).map(|i| (i * 7919 % 251) as u8).collect();
    let sends: [&[u8]; 6] = [
        &data,
        &[1, 2, 3],
        &wire::control(42),
        &non_ip,
        &garbage,
        &wire::control(wire::FIN),
    ];
    for d in sends {
        stranger.send_to(d, target).unwrap();
    }
    assert!(
        io::wait_until(Duration::from_secs(5), || server
            .control
            .foreign_datagrams()
            == 1 + sends.len() as u64),
        "foreign datagrams counted: {}",
        server.control.foreign_datagrams()
    );
    assert_eq!(
        tun_rx_packets(&server_ns),
        written_before,
        "a forged packet reached the TUN"
    );
    assert!(
        server.control.error().is_none(),
        "a stranger's FIN ended the tunnel"
    );

    // The tunnel still carries traffic: a UDP datagram from the client's namespace to a socket
    // in the server's, through the tunnel.
    let receiver = server_ns
        .run_in(|| UdpSocket::bind(SocketAddrV4::new(SERVER_PRIVATE, 0)))
        .unwrap()
        .unwrap();
    receiver
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let sender = client_ns
        .run_in(|| UdpSocket::bind(SocketAddrV4::new(CLIENT_PRIVATE, 0)))
        .unwrap()
        .unwrap();
    sender
        .send_to(b"still here", receiver.local_addr().unwrap())
        .unwrap();
    let mut buf = [0u8; 64];
    let (n, from) = receiver
        .recv_from(&mut buf)
        .expect("datagram through the tunnel");
    assert_eq!(&buf[..n], b"still here");
    assert_eq!(from, sender.local_addr().unwrap());

    let client_counters = client.finish();
    let server_counters = server.finish();
    assert!(client_counters.sent >= 1);
    assert_eq!(server_counters.received, client_counters.sent);
    // Strangers never reach the state machine: nothing of theirs counts as malformed either.
    assert_eq!(server_counters.malformed, 0);
}
