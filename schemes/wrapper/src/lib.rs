//! What every scheme program of `schemes/` shares: Pantheon's wrapper command line (reference
//! `pantheon.md` §1.1). The side that runs first gets `PORT`; the other gets `IP PORT`. Our
//! programs all start the receiver first, so the receiver listens and the sender connects.

use std::net::Ipv4Addr;

/// The side to run, as a clap subcommand: `receiver PORT` or `sender IP PORT`.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum Side {
    /// Runs first: listens on UDP `0.0.0.0:PORT`, reads and discards.
    Receiver {
        /// UDP port to listen on.
        port: u16,
    },
    /// Runs second: connects to `IP:PORT` and sends until it is killed.
    Sender {
        /// The receiver's address.
        ip: Ipv4Addr,
        /// The receiver's UDP port.
        port: u16,
    },
}
