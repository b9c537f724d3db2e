//! Binary packet logs: what each tunnel endpoint records about every packet it forwards.
//!
//! One file per endpoint and event kind (ingress = received from the peer, egress = sent to the
//! peer), named as Pantheon names its text logs, e.g. `cubic_datalink_run1_flow1.egress.ptlog`.
//! The layout (all integers little-endian) is specified in `docs/formats.md`:
//!
//! ```text
//! header, 64 bytes:
//!   0..8   magic b"PANTHLOG"          8..10  version (2; 1 is read too)
//!   10     role (0 server, 1 client)  11     kind (0 ingress, 1 egress)
//!   12..14 flow id (1-based)          14     direction (0 datalink, 1 acklink)
//!   15     flags (bit 0: clock offset measured)
//!   16..18 record size (24)           18..24 reserved (0)
//!   24..32 base time: CLOCK_REALTIME at the endpoint's start, ns since the Unix epoch (i64)
//!   32..40 clock offset of this host to true time at the base time, ns (i64; meaningful when
//!          flag bit 0 is set): add it to the base time to get true time
//!   40..48 drift of that offset, ns per second since the base time (i64; 0: constant)
//!   48..64 reserved (0)
//! records, 24 bytes each:
//!   0..8   t_ns: time of the event, ns since the base time (u64)
//!   8..16  uid of the packet (u64)
//!   16..20 size: outer datagram bytes = inner IP length + 36, as pantheon-tunnel logs (u32)
//!   20..22 flow id (u16)              22     event (0 ingress, 1 egress)
//!   23     ECN (version 2): bit 7 set when the field was recorded, bits 0..2 the packet's
//!          ECN codepoint (0 Not-ECT, 1 ECT(1), 2 ECT(0), 3 CE) — as sent for an egress
//!          record, as delivered (after RFC 6040 decapsulation) for an ingress one;
//!          0 in version 1 (reserved) and when unknown
//! ```
//! A truncated file keeps every whole record; [`read_log`] says where it stopped.

use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use crate::ecn::Codepoint;

/// File magic.
pub const MAGIC: [u8; 8] = *b"PANTHLOG";
/// Format version written by this crate (2: records carry the ECN codepoint).
pub const VERSION: u16 = 2;
/// Oldest format version read (1: byte 23 of a record reserved, so no ECN field).
pub const OLDEST_VERSION: u16 = 1;
/// Bit 7 of a record's byte 23: the ECN codepoint in bits 0..2 was recorded.
const ECN_RECORDED: u8 = 0x80;
/// Header length in bytes.
pub const HEADER_LEN: usize = 64;
/// Record length in bytes.
pub const RECORD_LEN: usize = 24;

/// Which end of the tunnel wrote the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The endpoint that waits for the handshake.
    Server = 0,
    /// The endpoint that opens the tunnel.
    Client = 1,
}

/// What the endpoint logs: packets received from the peer or sent to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Received from the peer (a departure from the path under test).
    Ingress = 0,
    /// Read from the TUN device and sent to the peer (an arrival into the path).
    Egress = 1,
}

impl Kind {
    /// `ingress` or `egress`, as in Pantheon's file names and log headers.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Ingress => "ingress",
            Kind::Egress => "egress",
        }
    }
}

/// Which direction of the experiment the logged packets travel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Sender → receiver (data; Mahimahi's uplink in local mode).
    Datalink = 0,
    /// Receiver → sender (ACKs; Mahimahi's downlink in local mode).
    Acklink = 1,
}

impl Direction {
    /// `datalink` or `acklink`, as in Pantheon's file names.
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::Datalink => "datalink",
            Direction::Acklink => "acklink",
        }
    }
}

/// The 64-byte file header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Writer's role.
    pub role: Role,
    /// Ingress or egress.
    pub kind: Kind,
    /// Flow id, 1-based.
    pub flow: u16,
    /// Datalink or acklink.
    pub direction: Direction,
    /// CLOCK_REALTIME at the endpoint's start, ns since the Unix epoch.
    pub base_realtime_ns: i64,
    /// Offset of the writer's clock to true time in ns, if it was measured (NTP).
    pub clock_offset_ns: Option<i64>,
    /// How the offset changes over the log, ns per second after the base time (parts per
    /// billion; 0 for a constant offset). A record at `t` gets `offset + drift·t`.
    pub clock_drift_ppb: i64,
}

impl Header {
    /// Serialises the header.
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[0..8].copy_from_slice(&MAGIC);
        b[8..10].copy_from_slice(&VERSION.to_le_bytes());
        b[10] = self.role as u8;
        b[11] = self.kind as u8;
        b[12..14].copy_from_slice(&self.flow.to_le_bytes());
        b[14] = self.direction as u8;
        b[15] = u8::from(self.clock_offset_ns.is_some());
        b[16..18].copy_from_slice(&(RECORD_LEN as u16).to_le_bytes());
        b[24..32].copy_from_slice(&self.base_realtime_ns.to_le_bytes());
        b[32..40].copy_from_slice(&self.clock_offset_ns.unwrap_or(0).to_le_bytes());
        b[40..48].copy_from_slice(&self.clock_drift_ppb.to_le_bytes());
        b
    }

    /// Parses a header; errors name the offending byte offset.
    pub fn decode(b: &[u8]) -> Result<Header, FormatError> {
        if b.len() < HEADER_LEN {
            return Err(FormatError::at(
                b.len(),
                "file ends inside the 64-byte header",
            ));
        }
        if b[0..8] != MAGIC {
            return Err(FormatError::at(
                0,
                "bad magic: not a Pantheon-rs packet log",
            ));
        }
        let version = u16::from_le_bytes([b[8], b[9]]);
        if !(OLDEST_VERSION..=VERSION).contains(&version) {
            return Err(FormatError::at(
                8,
                &format!("unsupported version {version}"),
            ));
        }
        let role = match b[10] {
            0 => Role::Server,
            1 => Role::Client,
            x => return Err(FormatError::at(10, &format!("bad role {x}"))),
        };
        let kind = match b[11] {
            0 => Kind::Ingress,
            1 => Kind::Egress,
            x => return Err(FormatError::at(11, &format!("bad kind {x}"))),
        };
        let direction = match b[14] {
            0 => Direction::Datalink,
            1 => Direction::Acklink,
            x => return Err(FormatError::at(14, &format!("bad direction {x}"))),
        };
        let record_len = u16::from_le_bytes([b[16], b[17]]) as usize;
        if record_len != RECORD_LEN {
            return Err(FormatError::at(
                16,
                &format!("record size {record_len}, expected 24"),
            ));
        }
        let i64_at = |o: usize| i64::from_le_bytes(b[o..o + 8].try_into().expect("8 bytes"));
        Ok(Header {
            role,
            kind,
            flow: u16::from_le_bytes([b[12], b[13]]),
            direction,
            base_realtime_ns: i64_at(24),
            clock_offset_ns: (b[15] & 1 == 1).then(|| i64_at(32)),
            clock_drift_ppb: i64_at(40),
        })
    }
}

/// One logged packet event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record {
    /// ns since the header's base time.
    pub t_ns: u64,
    /// The packet's UID.
    pub uid: u64,
    /// Outer datagram size in bytes (inner IP length + 36).
    pub size: u32,
    /// Flow id.
    pub flow: u16,
    /// Ingress or egress.
    pub kind: Kind,
    /// The packet's ECN codepoint, if recorded: as sent (egress), as delivered (ingress).
    /// `None` in version-1 logs and from writers that do not see the IP header.
    pub ecn: Option<Codepoint>,
}

impl Record {
    /// Serialises the record.
    pub fn encode(&self) -> [u8; RECORD_LEN] {
        let mut b = [0u8; RECORD_LEN];
        b[0..8].copy_from_slice(&self.t_ns.to_le_bytes());
        b[8..16].copy_from_slice(&self.uid.to_le_bytes());
        b[16..20].copy_from_slice(&self.size.to_le_bytes());
        b[20..22].copy_from_slice(&self.flow.to_le_bytes());
        b[22] = self.kind as u8;
        b[23] = self.ecn.map_or(0, |c| ECN_RECORDED | c.bits());
        b
    }

    /// Parses one record (exactly [`RECORD_LEN`] bytes).
    pub fn decode(b: &[u8]) -> Result<Record, &'static str> {
        let kind = match b[22] {
            0 => Kind::Ingress,
            1 => Kind::Egress,
            _ => return Err("bad event kind"),
        };
        Ok(Record {
            t_ns: u64::from_le_bytes(b[0..8].try_into().expect("8 bytes")),
            uid: u64::from_le_bytes(b[8..16].try_into().expect("8 bytes")),
            size: u32::from_le_bytes(b[16..20].try_into().expect("4 bytes")),
            flow: u16::from_le_bytes([b[20], b[21]]),
            kind,
            ecn: (b[23] & ECN_RECORDED != 0).then(|| Codepoint::from_bits(b[23])),
        })
    }
}

/// A malformed log, with the byte offset where reading stopped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("byte {offset}: {message}")]
pub struct FormatError {
    /// Byte offset into the file.
    pub offset: usize,
    /// What is wrong there.
    pub message: String,
}

impl FormatError {
    fn at(offset: usize, message: &str) -> FormatError {
        FormatError {
            offset,
            message: message.to_owned(),
        }
    }
}

/// Errors of [`read_log`].
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// The header is malformed (nothing could be read).
    #[error("{path}: {source}")]
    Format {
        /// The file.
        path: PathBuf,
        /// Where and what.
        source: FormatError,
    },
}

/// A log read from disk.
#[derive(Debug, Clone)]
pub struct LogFile {
    /// The header.
    pub header: Header,
    /// Every whole, well-formed record, in file order.
    pub records: Vec<Record>,
    /// Set when reading stopped early (a partial trailing record or a corrupt one): what was
    /// read before that point is in `records`.
    pub stopped_at: Option<FormatError>,
}

/// Reads a whole log. A truncated or corrupt tail is reported in [`LogFile::stopped_at`], not
/// as an error: the records before it are kept.
pub fn read_log(path: &Path) -> Result<LogFile, ReadError> {
    let mut bytes = Vec::new();
    File::open(path)
        .and_then(|mut f| f.read_to_end(&mut bytes))
        .map_err(|source| ReadError::Io {
            path: path.to_owned(),
            source,
        })?;
    parse_log(&bytes).map_err(|source| ReadError::Format {
        path: path.to_owned(),
        source,
    })
}

/// Parses a whole log from its bytes (sans-IO form of [`read_log`]): errors only if the
/// header is unusable; a truncated or corrupt record ends the records and is reported in
/// [`LogFile::stopped_at`] with its byte offset.
pub fn parse_log(bytes: &[u8]) -> Result<LogFile, FormatError> {
    let header = Header::decode(bytes)?;
    let body = &bytes[HEADER_LEN..];
    let mut records = Vec::with_capacity(body.len() / RECORD_LEN);
    let (used, mut stopped_at) = scan_records(body, HEADER_LEN, &mut |r| records.push(r));
    if stopped_at.is_none() && used < body.len() {
        stopped_at = Some(truncated(HEADER_LEN + used, body.len() - used));
    }
    Ok(LogFile {
        header,
        records,
        stopped_at,
    })
}

/// Streams a log's records to `f` without holding the file in memory (1 MiB reads), for logs
/// of millions of packets. Returns the header and, as [`LogFile::stopped_at`], where reading
/// stopped early; errors only if the file cannot be read or its header is unusable.
pub fn read_log_with(
    path: &Path,
    mut f: impl FnMut(Record),
) -> Result<(Header, Option<FormatError>), ReadError> {
    let io_err = |source| ReadError::Io {
        path: path.to_owned(),
        source,
    };
    let (mut file, header) = open_log(path)?;
    let mut buf = vec![0u8; 1 << 20];
    let (mut filled, mut offset) = (0, HEADER_LEN);
    loop {
        let n = file.read(&mut buf[filled..]).map_err(io_err)?;
        filled += n;
        let (used, stop) = scan_records(&buf[..filled], offset, &mut f);
        if stop.is_some() {
            return Ok((header, stop));
        }
        if n == 0 {
            let stop = (used < filled).then(|| truncated(offset + used, filled - used));
            return Ok((header, stop));
        }
        buf.copy_within(used..filled, 0);
        filled -= used;
        offset += used;
    }
}

/// The header of the log at `path` (its first 64 bytes only). Errors as [`read_log`].
pub fn read_header(path: &Path) -> Result<Header, ReadError> {
    open_log(path).map(|(_, header)| header)
}

/// Records a measured clock correction in a log's header, in place: `offset_ns` at the base
/// time and its drift in ns per second (see [`Header::clock_offset_ns`]). The remote runner
/// calls it once NTP offsets before and after the run are known; the records are untouched.
pub fn set_clock_offset(path: &Path, offset_ns: i64, drift_ppb: i64) -> Result<(), ReadError> {
    let (_, mut header) = open_log(path)?;
    header.clock_offset_ns = Some(offset_ns);
    header.clock_drift_ppb = drift_ppb;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(|source| ReadError::Io {
            path: path.to_owned(),
            source,
        })?;
    file.write_all(&header.encode())
        .map_err(|source| ReadError::Io {
            path: path.to_owned(),
            source,
        })
}

/// Opens a log and decodes its header; the file is left positioned at the first record.
fn open_log(path: &Path) -> Result<(File, Header), ReadError> {
    let io_err = |source| ReadError::Io {
        path: path.to_owned(),
        source,
    };
    let mut file = File::open(path).map_err(io_err)?;
    let mut head = [0u8; HEADER_LEN];
    let mut got = 0;
    while got < HEADER_LEN {
        match file.read(&mut head[got..]).map_err(io_err)? {
            0 => break,
            n => got += n,
        }
    }
    let header = Header::decode(&head[..got]).map_err(|source| ReadError::Format {
        path: path.to_owned(),
        source,
    })?;
    Ok((file, header))
}

/// Decodes the whole records at the start of `body` (whose first byte is at file offset
/// `offset`), handing each to `f`; returns the bytes used and the error of a corrupt record.
fn scan_records(
    body: &[u8],
    offset: usize,
    f: &mut impl FnMut(Record),
) -> (usize, Option<FormatError>) {
    let mut used = 0;
    for chunk in body.chunks_exact(RECORD_LEN) {
        match Record::decode(chunk) {
            Ok(r) => f(r),
            Err(msg) => return (used, Some(FormatError::at(offset + used, msg))),
        }
        used += RECORD_LEN;
    }
    (used, None)
}

fn truncated(offset: usize, len: usize) -> FormatError {
    FormatError::at(offset, &format!("truncated record ({len} of 24 bytes)"))
}

/// On-disk form of a packet log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogFormat {
    /// Ours: the 64-byte header and 24-byte records above.
    Binary,
    /// pantheon-tunnel's text log (reference `pantheon.md` §3.3), byte for byte:
    /// `# <command_line> ingress: <base, ms since the epoch, 3 decimals>` then one
    /// `<ms since base, 3 decimals> - <uid> - <size>` line per packet. Pantheon's
    /// `merge_tunnel_logs.py` reads it.
    Pantheon {
        /// The shell-quoted command line of the header ([`quote_command_line`]).
        command_line: String,
    },
}

/// Quotes one argument as Mahimahi's `shell_quote` does: inside single quotes, each `'`
/// written as `'\''`.
pub fn shell_quote(arg: &str) -> String {
    format!("'{}'", arg.replace('\'', "'\\''"))
}

/// The arguments quoted with [`shell_quote`] and joined by spaces, as in a pantheon-tunnel log
/// header.
pub fn quote_command_line<S: AsRef<str>>(args: &[S]) -> String {
    let quoted: Vec<String> = args.iter().map(|a| shell_quote(a.as_ref())).collect();
    quoted.join(" ")
}

/// Writes `ns` as milliseconds with exactly 3 decimals, rounded to the nearest µs
/// (`1_795_311_268_677_206_499` → `1795311268677.206`).
fn write_ms3(out: &mut impl Write, ns: i128) -> io::Result<()> {
    let us = (ns + if ns < 0 { -500 } else { 500 }) / 1000;
    let sign = if us < 0 { "-" } else { "" };
    let us = us.abs();
    write!(out, "{sign}{}.{:03}", us / 1000, us % 1000)
}

/// Writes the Pantheon text header line of a log with `header`'s kind and base time.
pub fn write_text_header(
    out: &mut impl Write,
    command_line: &str,
    header: &Header,
) -> io::Result<()> {
    write!(out, "# {command_line} {}: ", header.kind.as_str())?;
    write_ms3(out, header.base_realtime_ns as i128)?;
    out.write_all(b"\n")
}

/// Writes one Pantheon text data line: `<ms> - <uid> - <size>`.
pub fn write_text_record(out: &mut impl Write, record: &Record) -> io::Result<()> {
    write_ms3(out, record.t_ns as i128)?;
    writeln!(out, " - {} - {}", record.uid, record.size)
}

/// Buffered writer of one log file: records are copied into a 256 KiB buffer and written in
/// large writes, so logging costs a memcpy per packet on the forwarding thread.
#[derive(Debug)]
pub struct LogWriter {
    out: BufWriter<File>,
    text: bool,
}

impl LogWriter {
    /// Creates (truncates) `path` and writes the header in `format`.
    pub fn create(path: &Path, header: &Header, format: &LogFormat) -> io::Result<LogWriter> {
        let mut out = BufWriter::with_capacity(256 * 1024, File::create(path)?);
        match format {
            LogFormat::Binary => out.write_all(&header.encode())?,
            LogFormat::Pantheon { command_line } => {
                write_text_header(&mut out, command_line, header)?
            }
        }
        Ok(LogWriter {
            out,
            text: matches!(format, LogFormat::Pantheon { .. }),
        })
    }

    /// Appends one record.
    pub fn push(&mut self, record: &Record) -> io::Result<()> {
        if self.text {
            write_text_record(&mut self.out, record)
        } else {
            self.out.write_all(&record.encode())
        }
    }

    /// Writes buffered records to the file.
    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

/// Converts a binary log to Pantheon's text form: the header line names `command_line`
/// (pantheon-tunnel wrote its own argv there), then one line per record. Returns how many
/// records were written.
pub fn write_pantheon_text(
    log: &LogFile,
    command_line: &str,
    out: &mut impl Write,
) -> io::Result<usize> {
    write_text_header(out, command_line, &log.header)?;
    for r in &log.records {
        write_text_record(out, r)?;
    }
    Ok(log.records.len())
}

/// What one endpoint sent and the other received, matched on UIDs: a quick check of a tunnel
/// pair (or of the path between them) without the full analysis.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PairCheck {
    /// Records in the egress log (packets sent into the path).
    pub sent: u64,
    /// Records in the ingress log whose UID was sent.
    pub received: u64,
    /// Sent UIDs never received: `sent − received`.
    pub lost: u64,
    /// Ingress records whose UID was never sent (should be 0).
    pub unexpected: u64,
    /// Records that repeat a UID already logged in the same log, sent or received (should be
    /// 0): the first record of a UID counts, the repeats are dropped — as `pantheon analyze`
    /// treats them.
    pub duplicates: u64,
    /// Received packets whose size differs from the size they were sent with (should be 0).
    pub size_mismatches: u64,
    /// Median one-way delay of received packets ([`percentile_nearest`] at 0.5), ms, on the two logs' own clocks (exact on
    /// one host; add the clock offset between hosts otherwise). NaN when nothing arrived.
    pub median_delay_ms: f64,
    /// 95th percentile of the same delays ([`percentile_nearest`]), ms.
    pub p95_delay_ms: f64,
}

/// Pantheon's percentile `q` (0–1) of `sorted` (ascending): the value at index
/// round(q·(n−1)), numpy's `interpolation='nearest'` as Pantheon's `tunnel_graph.py` takes the
/// 95th-percentile one-way delay (an exact .5 rounds away from zero here, to even in numpy).
/// `None` when `sorted` is empty. The one definition of the workspace: `pantheon-tunnel check`
/// calls it, and `pantheon analyze` computes the same index (Polars' `QuantileMethod::Nearest`;
/// the analyzer re-exports this function as `analyzer::stats::percentile` and tests that both
/// agree on one log).
pub fn percentile_nearest(sorted: &[f64], q: f64) -> Option<f64> {
    let last = sorted.len().checked_sub(1)?;
    // q ≤ 1 keeps the index ≤ last; a NaN q casts to index 0.
    Some(sorted[(q.clamp(0.0, 1.0) * last as f64).round() as usize])
}

/// Why two logs' headers say they are not one flow's (sent, received) pair of one direction:
/// `egress` must be an egress log and `ingress` an ingress log (two logs given the other way
/// round are *swapped*), of the same direction and flow, written by the two different
/// endpoints. Empty when they are a pair. `pantheon-tunnel check` warns with these;
/// `pantheon analyze` marks the run invalid.
pub fn pair_problems(egress: &Header, ingress: &Header) -> Vec<String> {
    let mut p = Vec::new();
    if egress.kind == Kind::Ingress && ingress.kind == Kind::Egress {
        p.push(
            "swapped: the egress log's header says ingress and the ingress log's says egress"
                .into(),
        );
    } else {
        for (h, want) in [(egress, Kind::Egress), (ingress, Kind::Ingress)] {
            if h.kind != want {
                p.push(format!(
                    "mismatched: the {} log's header says {}",
                    want.as_str(),
                    h.kind.as_str()
                ));
            }
        }
    }
    if egress.direction != ingress.direction {
        p.push(format!(
            "mismatched: a {} log paired with an {} log",
            egress.direction.as_str(),
            ingress.direction.as_str()
        ));
    }
    if egress.flow != ingress.flow {
        p.push(format!(
            "mismatched: flow {} paired with flow {}",
            egress.flow, ingress.flow
        ));
    }
    if egress.role == ingress.role {
        p.push("mismatched: both logs were written by the same endpoint".into());
    }
    p
}

/// The warning of `pantheon-tunnel check` and `pantheon analyze` for `n` records that repeat
/// a UID already logged in the same log (a tunnel numbers every packet once: a log that
/// repeats UIDs was written or copied wrongly).
pub fn duplicates_warning(n: u64) -> String {
    format!("duplicate UIDs: {n} records repeat a UID logged before in the same log (the first record of each UID counted, the repeats dropped)")
}

/// Matches `egress` (one endpoint's sent packets) with `ingress` (the other's received ones)
/// on their UIDs, as Pantheon's `merge_tunnel_logs.py` does, but counting problems instead of
/// stopping at the first one. A UID logged twice in one log counts once (its first record).
pub fn check_pair(egress: &LogFile, ingress: &LogFile) -> PairCheck {
    let mut sent = std::collections::HashMap::with_capacity(egress.records.len());
    let mut duplicates = 0u64;
    for r in &egress.records {
        match sent.entry(r.uid) {
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert((r.t_ns, r.size, false));
            }
            std::collections::hash_map::Entry::Occupied(_) => duplicates += 1,
        }
    }
    let shift = ingress.header.base_realtime_ns as i128 - egress.header.base_realtime_ns as i128;
    let (mut received, mut unexpected, mut size_mismatches) = (0u64, 0u64, 0u64);
    let mut delays = Vec::with_capacity(ingress.records.len());
    for r in &ingress.records {
        match sent.get_mut(&r.uid) {
            Some((t_sent, size, seen)) if !*seen => {
                *seen = true;
                received += 1;
                size_mismatches += u64::from(*size != r.size);
                delays.push((r.t_ns as i128 + shift - *t_sent as i128) as f64 / 1e6);
            }
            Some(_) => duplicates += 1,
            None => unexpected += 1,
        }
    }
    delays.sort_by(f64::total_cmp);
    let rank = |q: f64| percentile_nearest(&delays, q).unwrap_or(f64::NAN);
    PairCheck {
        sent: sent.len() as u64,
        received,
        lost: sent.len() as u64 - received,
        unexpected,
        duplicates,
        size_mismatches,
        median_delay_ms: rank(0.5),
        p95_delay_ms: rank(0.95),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header() -> Header {
        Header {
            role: Role::Client,
            kind: Kind::Egress,
            flow: 2,
            direction: Direction::Datalink,
            base_realtime_ns: 1_795_311_268_677_206_000,
            clock_offset_ns: Some(-1500),
            clock_drift_ppb: -20_000,
        }
    }

    #[test]
    fn golden_header_bytes() {
        let b = header().encode();
        assert_eq!(&b[0..8], b"PANTHLOG");
        assert_eq!(&b[8..18], &[2, 0, 1, 1, 2, 0, 0, 1, 24, 0]);
        assert_eq!(Header::decode(&b).unwrap(), header());
        let mut bad = b;
        bad[0] = b'X';
        assert_eq!(Header::decode(&bad).unwrap_err().offset, 0);
        assert_eq!(Header::decode(&b[..10]).unwrap_err().offset, 10);
        assert_eq!(
            &b[32..48],
            &[
                0x24, 0xfa, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // −1500
                0xe0, 0xb1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // −20 000
            ]
        );
    }

    #[test]
    fn a_clock_offset_is_set_in_place_and_records_are_kept() {
        let dir = std::env::temp_dir().join(format!("ptlog-clock-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("c.ptlog");
        let mut h = header();
        h.clock_offset_ns = None;
        h.clock_drift_ppb = 0;
        let mut w = LogWriter::create(&path, &h, &LogFormat::Binary).unwrap();
        let r = Record {
            t_ns: 7,
            uid: 9,
            size: 1500,
            flow: 2,
            kind: Kind::Egress,
            ecn: Some(Codepoint::Ect1),
        };
        w.push(&r).unwrap();
        w.flush().unwrap();
        drop(w);
        set_clock_offset(&path, 3_000_000, 1_000).unwrap();
        let log = read_log(&path).unwrap();
        assert_eq!(log.header.clock_offset_ns, Some(3_000_000));
        assert_eq!(log.header.clock_drift_ppb, 1_000);
        assert_eq!(log.records, vec![r]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn records_keep_their_ecn_codepoint_and_version_1_logs_still_read() {
        let mut h = header();
        h.clock_offset_ns = None;
        h.clock_drift_ppb = 0;
        let rec = |uid, ecn| Record {
            t_ns: uid * 10,
            uid,
            size: 1500,
            flow: 1,
            kind: Kind::Ingress,
            ecn,
        };
        let records: Vec<Record> = [
            None,
            Some(Codepoint::NotEct),
            Some(Codepoint::Ect1),
            Some(Codepoint::Ect0),
            Some(Codepoint::Ce),
        ]
        .into_iter()
        .zip(0..)
        .map(|(ecn, uid)| rec(uid, ecn))
        .collect();
        let mut bytes = h.encode().to_vec();
        for r in &records {
            bytes.extend_from_slice(&r.encode());
        }
        assert_eq!(u16::from_le_bytes([bytes[8], bytes[9]]), 2);
        assert_eq!(
            bytes[HEADER_LEN + 4 * RECORD_LEN + 23],
            0x83,
            "CE, recorded"
        );
        assert_eq!(parse_log(&bytes).unwrap().records, records);
        // Version 1: byte 23 was reserved (0), so no record has a codepoint.
        bytes[8] = 1;
        for i in 0..records.len() {
            bytes[HEADER_LEN + i * RECORD_LEN + 23] = 0;
        }
        let v1 = parse_log(&bytes).unwrap();
        assert!(v1.records.iter().all(|r| r.ecn.is_none()));
        assert_eq!(v1.records.len(), 5);
        bytes[8] = 3;
        assert_eq!(parse_log(&bytes).unwrap_err().offset, 8);
    }

    #[test]
    fn truncated_file_keeps_whole_records() {
        let dir = std::env::temp_dir().join(format!("ptlog-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.ptlog");
        let mut w = LogWriter::create(&path, &header(), &LogFormat::Binary).unwrap();
        for i in 0..3u64 {
            w.push(&Record {
                t_ns: i * 1000,
                uid: i,
                size: 1500,
                flow: 2,
                kind: Kind::Egress,
                ecn: None,
            })
            .unwrap();
        }
        w.flush().unwrap();
        drop(w);
        let full = std::fs::read(&path).unwrap();
        std::fs::write(&path, &full[..full.len() - 5]).unwrap();
        let log = read_log(&path).unwrap();
        assert_eq!(log.records.len(), 2);
        assert_eq!(log.records[1].uid, 1);
        let stop = log.stopped_at.unwrap();
        assert_eq!(stop.offset, HEADER_LEN + 2 * RECORD_LEN);
        // The streaming reader gives the same records and the same stop.
        let mut streamed = Vec::new();
        let (h, stop2) = read_log_with(&path, |r| streamed.push(r)).unwrap();
        assert_eq!((h, &streamed), (log.header, &log.records));
        assert_eq!(stop2.unwrap(), stop);
        // A corrupt record (bad kind) stops both readers at its offset.
        let mut bad = full.clone();
        bad[HEADER_LEN + RECORD_LEN + 22] = 9;
        std::fs::write(&path, &bad).unwrap();
        let (_, stop3) = read_log_with(&path, |_| {}).unwrap();
        assert_eq!(stop3.unwrap().offset, HEADER_LEN + RECORD_LEN);
        assert_eq!(
            parse_log(&bad).unwrap().stopped_at.unwrap().offset,
            HEADER_LEN + RECORD_LEN
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn streaming_reader_crosses_its_buffer_boundaries() {
        // More than 1 MiB of records: a record straddles every read boundary.
        let dir = std::env::temp_dir().join(format!("ptlog-stream-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("s.ptlog");
        let mut w = LogWriter::create(&path, &header(), &LogFormat::Binary).unwrap();
        let n = 100_000u64; // 2.4 MB
        for i in 0..n {
            w.push(&Record {
                t_ns: i,
                uid: i,
                size: 100,
                flow: 1,
                kind: Kind::Ingress,
                ecn: None,
            })
            .unwrap();
        }
        w.flush().unwrap();
        drop(w);
        let mut next = 0u64;
        let (_, stop) = read_log_with(&path, |r| {
            assert_eq!(r.uid, next);
            next += 1;
        })
        .unwrap();
        assert_eq!((next, stop), (n, None));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn pantheon_text_matches_the_real_sample() {
        // First lines of ../shared/data/samples/pantheon-tunnel_tun_server_ingress_2.log.
        let argv = [
            "/usr/local/bin/mm-tunnelserver",
            "--ingress-log=/data/tun_server_ingress_2.log",
            "--egress-log=/data/tun_server_egress_2.log",
            "sleep",
            "100000",
        ];
        let expected =
            "# '/usr/local/bin/mm-tunnelserver' '--ingress-log=/data/tun_server_ingress_2.log' \
'--egress-log=/data/tun_server_egress_2.log' 'sleep' '100000' ingress: 1795311353983.235\n\
1822.136 - 0 - 120\n2026.181 - 1 - 120\n";
        let log = LogFile {
            header: Header {
                role: Role::Server,
                kind: Kind::Ingress,
                flow: 1,
                direction: Direction::Datalink,
                base_realtime_ns: 1_795_311_353_983_234_600,
                clock_offset_ns: None,
                clock_drift_ppb: 0,
            },
            records: vec![
                Record {
                    t_ns: 1_822_136_400,
                    uid: 0,
                    size: 120,
                    flow: 1,
                    kind: Kind::Ingress,
                    ecn: None,
                },
                Record {
                    t_ns: 2_026_180_600,
                    uid: 1,
                    size: 120,
                    flow: 1,
                    kind: Kind::Ingress,
                    ecn: None,
                },
            ],
            stopped_at: None,
        };
        let mut out = Vec::new();
        assert_eq!(
            write_pantheon_text(&log, &quote_command_line(&argv), &mut out).unwrap(),
            2
        );
        assert_eq!(String::from_utf8(out).unwrap(), expected);
    }

    #[test]
    fn shell_quote_escapes_single_quotes() {
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
        assert_eq!(quote_command_line(&["a b", ""]), "'a b' ''");
    }

    #[test]
    fn check_pair_counts_losses_strays_and_delays() {
        let rec = |t_ns, uid, kind| Record {
            t_ns,
            uid,
            size: 1500,
            flow: 1,
            kind,
            ecn: None,
        };
        let mut h = header();
        let egress = LogFile {
            header: h,
            records: (0..10)
                .map(|u| rec(u * 1_000_000, u, Kind::Egress))
                .collect(),
            stopped_at: None,
        };
        // Ingress base is 1 ms later; packets take 2 ms on the egress clock, uid 3 is lost,
        // uid 42 was never sent and uid 5 arrives twice; uid 7 is logged as sent twice.
        let mut egress = egress;
        egress.records.push(rec(9_000_000, 7, Kind::Egress));
        h.base_realtime_ns += 1_000_000;
        h.kind = Kind::Ingress;
        let mut records: Vec<Record> = (0..10u64)
            .filter(|&u| u != 3)
            .map(|u| rec(u * 1_000_000 + 1_000_000, u, Kind::Ingress))
            .collect();
        records.push(rec(20_000_000, 42, Kind::Ingress));
        records.push(rec(20_000_000, 5, Kind::Ingress));
        let c = check_pair(
            &egress,
            &LogFile {
                header: h,
                records,
                stopped_at: None,
            },
        );
        assert_eq!(
            (c.sent, c.received, c.lost, c.unexpected, c.duplicates),
            (10, 9, 1, 1, 2)
        );
        assert_eq!(c.size_mismatches, 0);
        assert_eq!((c.median_delay_ms, c.p95_delay_ms), (2.0, 2.0));
    }

    #[test]
    fn headers_tell_swapped_and_mismatched_pairs() {
        let egress = header();
        let ingress = Header {
            role: Role::Server,
            kind: Kind::Ingress,
            ..header()
        };
        assert!(pair_problems(&egress, &ingress).is_empty());
        let p = pair_problems(&ingress, &egress);
        assert!(p[0].starts_with("swapped:"), "{p:?}");
        let acklink = Header {
            direction: Direction::Acklink,
            ..ingress
        };
        let p = pair_problems(&egress, &acklink);
        assert_eq!(p, ["mismatched: a datalink log paired with an acklink log"]);
        let other_flow = Header { flow: 3, ..ingress };
        assert_eq!(
            pair_problems(&egress, &other_flow),
            ["mismatched: flow 2 paired with flow 3"]
        );
        let p = pair_problems(&egress, &egress);
        assert!(
            p.iter()
                .any(|w| w.contains("ingress log's header says egress")),
            "{p:?}"
        );
        assert!(p.iter().any(|w| w.contains("same endpoint")), "{p:?}");
    }

    #[test]
    fn percentile_is_pantheons_nearest_index() {
        let v: Vec<f64> = (1..=13).map(f64::from).collect();
        // round(0.95·12) = round(11.4) = 11 → 12 (nearest rank would give 13).
        assert_eq!(percentile_nearest(&v, 0.95), Some(12.0));
        // Even length: round(0.5·3) = round(1.5) = 2 → the upper middle.
        assert_eq!(percentile_nearest(&[1.0, 2.0, 3.0, 4.0], 0.5), Some(3.0));
        assert_eq!(percentile_nearest(&[7.0], 0.95), Some(7.0));
        assert_eq!(percentile_nearest(&[], 0.95), None);
        assert_eq!(percentile_nearest(&v, 1.0), Some(13.0));
    }
}
