//! Pantheon's instrumented tunnel, in Rust.
//!
//! # Brief overview
//!
//! Every packet of a scheme under test crosses a UDP tunnel whose two endpoints read IP packets
//! from a TUN device, give each a 64-bit unique id (UID), log `(time, uid, size)` and send it to
//! the peer. Joining the sender's egress log with the receiver's ingress log on the UID gives
//! each packet's one-way delay, and which packets were lost (Pantheon paper §3; reference
//! `pantheon.md` §3).
//!
//! - [`wire`]: the datagram format (8-byte UID header, SYN/ACK control datagrams).
//! - [`endpoint::Endpoint`]: the sans-IO state machine (handshake, UIDs, log records), fed
//!   `(now, bytes)` and tested without sockets.
//! - [`log`]: the binary packet-log format and its reader/writer.
//! - [`capture`]: pcapng captures of the inner packets (`--capture`), beside the logs.
//! - [`ecn`]: the ECN field of IP packets, carried across the tunnel as RFC 6040 says.
//! - [`io`]: the thin shell: UDP socket + TUN device in a network namespace + one thread.
//! - [`messages`] (feature `cli`): the programs print the libraries' `tracing` messages.
//!
//! ```
//! use pantheon_tunnel::{ecn::Codepoint, endpoint::Endpoint, log::Role};
//! let mut server = Endpoint::new(Role::Server, 1, 0);
//! let mut client = Endpoint::new(Role::Client, 1, 0);
//! let mut syn = client.poll_transmit(0).unwrap();
//! server.handle_datagram(0, &mut syn, Codepoint::NotEct);
//! let mut ack = server.poll_transmit(0).unwrap();
//! client.handle_datagram(0, &mut ack, Codepoint::NotEct);
//! assert!(client.is_connected() && server.is_connected());
//! ```

pub mod capture;
pub mod ecn;
pub mod endpoint;
#[cfg(feature = "io")]
pub mod io;
pub mod log;
#[cfg(feature = "cli")]
pub mod messages;
pub mod ring;
#[cfg(feature = "io")]
pub mod tun;
pub mod udp;
pub mod wire;
