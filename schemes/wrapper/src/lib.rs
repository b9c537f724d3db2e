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

/// Fills `buf` with bytes from `/dev/urandom`, or a xorshift sequence if it cannot be read:
/// payloads only need to be incompressible, not secret (Pantheon fed its senders
/// `os.urandom`).
pub fn fill_random(buf: &mut [u8]) {
    use std::io::Read;
    let read = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(buf));
    if read.is_err() {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for b in buf.iter_mut() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *b = x as u8;
        }
    }
}
