//! What every scheme program of `schemes/` shares: Pantheon's wrapper command line (reference
//! `pantheon.md` §1.1). The side that runs first gets `PORT`; the other gets `IP PORT`. Our
//! programs all start the receiver first, so the receiver listens and the sender connects.

use std::net::Ipv4Addr;

pub mod transfers;

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

/// The environment variable naming the file a QUIC side writes its qlog to: `pantheon run
/// --capture` sets it (`pantheon_engine::process::QLOG_ENV`), beside `SSLKEYLOGFILE`.
pub const QLOG_ENV: &str = "PANTHEON_QLOG";

/// The qlog file [`QLOG_ENV`] names, created, as the writer a QUIC library's qlog streamer
/// takes; `None` when the environment names none. Each JSON-SEQ record reaches the file whole
/// when its line ends — serde_json writes a record in pieces, which a 64-KiB line buffer keeps
/// together — so that a side killed at the run's end leaves whole records. Errors name the
/// file that cannot be created.
pub fn qlog_writer() -> anyhow::Result<Option<Box<dyn std::io::Write + Send + Sync>>> {
    use anyhow::Context;
    let Some(path) = std::env::var_os(QLOG_ENV) else {
        return Ok(None);
    };
    let file = std::fs::File::create(&path)
        .with_context(|| format!("{QLOG_ENV} {}", path.to_string_lossy()))?;
    Ok(Some(Box::new(std::io::LineWriter::with_capacity(
        1 << 16,
        file,
    ))))
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

/// A transfer-record file (the `workload` crate's `record` formats): rows appended as
/// transfers start or end, each with one `write` so that a killed program leaves whole rows.
/// Shared by the threads of a program.
#[derive(Debug)]
pub struct Recorder(std::sync::Mutex<std::fs::File>);

impl Recorder {
    /// Creates (truncates) `path` and writes `header` as its first row. Errors name the file.
    pub fn create(path: &std::path::Path, header: &str) -> std::io::Result<Recorder> {
        use std::io::Write;
        let mut f = std::fs::File::create(path).map_err(|e| {
            std::io::Error::new(e.kind(), format!("create {}: {e}", path.display()))
        })?;
        f.write_all(format!("{header}\n").as_bytes())?;
        Ok(Recorder(std::sync::Mutex::new(f)))
    }

    /// Appends `row` and a newline. A failed write is reported on stderr, not fatal: the
    /// transfer itself goes on, and the analysis reports the row as missing.
    pub fn row(&self, row: impl std::fmt::Display) {
        use std::io::Write;
        let line = format!("{row}\n");
        let mut f = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Err(e) = f.write_all(line.as_bytes()) {
            eprintln!("transfer record not written ({e}): {}", line.trim_end());
        }
    }
}

/// Now, ns since the Unix epoch: the clock of transfer records (the tunnel logs' too).
pub fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}
