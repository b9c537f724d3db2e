//! mm-link's per-packet logs (`--uplink-log=FILE`, `--downlink-log=FILE`), byte for byte in
//! Mahimahi's text format (`mahimahi.md` §2.4), so `mm-throughput-graph`, Pantheon's
//! `merge_tunnel_logs.py` and our analyzer all read them:
//!
//! ```text
//! # mahimahi mm-link (Uplink) [/data/10mbps.trace] > /data/up.log
//! # command line: 'mm-link' '/data/10mbps.trace' '/data/10mbps.trace' '--uplink-log=/data/up.log'
//! # queue: droptail [packets=50]
//! # init timestamp: 1795311537227
//! # base timestamp: 0
//! # mahimahi config: [delay 28 ms]
//! 1 # 1504
//! 1 + 88
//! 2 # 1504
//! 2 - 88 1
//! ```
//! Event times are whole ms since the init timestamp (epoch ms of the emulator's start); sizes
//! include Mahimahi's 4-byte header; `- LEN DELAY` gives the ms the packet spent in this link
//! (queueing and serialisation). The `mahimahi config` line (the shells around this mm-link)
//! is written only inside other shells. Our link's trace clock starts with the emulator, so the
//! base timestamp is 0 (Mahimahi's is a few tens of ms).
//!
//! Cross traffic (`--uplink-cross-traffic`, [`crate::cross`]; ours) adds its own events, marked
//! with `c`: `T c+ LEN` (arrival), `T c- LEN DELAY` (departure: it leaves the emulator) and
//! `T cd NPKTS NBYTES` (an arrival the queue refused). Mahimahi's tools do not know them
//! (`grep -v ' c'` leaves Mahimahi's own form); they are never a scheme's packets.
//!
//! ECN (ours): a departure whose packet leaves carrying Congestion Experienced is followed by
//! `T m LEN` (a marking queue marked it: `codel`/`pie` with `ecn=1`, `step`, `dualpi2`), so a
//! link log counts the queue's marks beside its drops; `grep -v ' m '` leaves Mahimahi's form.
//!
//! # Binary form (`mm-link … --log-format=binary`, ours)
//!
//! The same events at ns resolution, 24 bytes each, for long or fast runs (a 1 Gbit/s link
//! logs ≈ 250 k events/s). All integers little-endian:
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 8 | magic `PTMMLOG\0` |
//! | 8 | 4 | version, 1 |
//! | 12 | 1 | direction: 0 uplink, 1 downlink |
//! | 13 | 3 | zero |
//! | 16 | 8 | init timestamp, ns since the Unix epoch |
//! | 24 | 4 | H, length of the text header |
//! | 28 | H | the Mahimahi text header above, verbatim |
//! | 28+H | 24·n | records: `t` u64 ns since init · `x` u64 · `bytes` u32 · kind u8 · 3 zero |
//!
//! Kinds are the text form's characters: `+` arrival, `-` departure (`x` = arrival time, ns),
//! `#` opportunity (`bytes` = 1504), `d` drop (`x` = packets), `m` CE-marked departure; cross
//! traffic's are the same
//! characters with the high bit set (`0x80 | b'+'`, …). [`read_binary`] reads it back,
//! keeping what precedes a truncated or corrupt record; [`to_text`] gives the Mahimahi text.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::mm::{quote, LinkDirection, LinkShell, LogFormat};
use crate::stage::{LinkEvent, MS, OPPORTUNITY_BYTES};

/// The header lines of one direction's log (each ending in `\n`).
///
/// `init_epoch_ns`: wall-clock time of the emulator's start, ns since the Unix epoch (the
/// header gives whole ms).
pub fn header(
    link: &LinkShell,
    direction: LinkDirection,
    log_path: &Path,
    init_epoch_ns: u64,
) -> String {
    let side = link.direction(direction);
    let init_epoch_ms = init_epoch_ns / MS;
    let argv: Vec<String> = link.argv.iter().map(|a| quote(a)).collect();
    let mut h = format!(
        "# mahimahi mm-link ({}) [{}] > {}\n# command line: {}\n# queue: {}\n\
         # init timestamp: {init_epoch_ms}\n# base timestamp: 0\n",
        direction.title(),
        side.trace_path.display(),
        log_path.display(),
        argv.join(" "),
        side.queue.describe(),
    );
    if !link.enclosing_prefix.is_empty() {
        h.push_str(&format!("# mahimahi config: {}\n", link.enclosing_prefix));
    }
    h
}

/// Appends one event's line to `out` (`T + LEN`, `T d N B`, `T # 1504`, `T - LEN DELAY`;
/// cross traffic's `T c+ LEN`, `T cd N B`, `T c- LEN DELAY`; ECN's `T m LEN`). Numbers are
/// written with `itoa` (a line per packet at up to millions of packets a second).
pub fn format_event(event: &LinkEvent, out: &mut Vec<u8>) {
    let mut digits = itoa::Buffer::new();
    let mut num = |out: &mut Vec<u8>, v: u64| out.extend_from_slice(digits.format(v).as_bytes());
    let (t, word, a, b) = match *event {
        LinkEvent::Arrival { t, bytes } => (t, "+", Some(bytes), None),
        LinkEvent::CrossArrival { t, bytes } => (t, "c+", Some(bytes), None),
        LinkEvent::Drop { t, packets, bytes } => (t, "d", Some(packets), Some(bytes)),
        LinkEvent::CrossDrop { t, packets, bytes } => (t, "cd", Some(packets), Some(bytes)),
        LinkEvent::Opportunity { t } => (t, "#", Some(OPPORTUNITY_BYTES as u64), None),
        LinkEvent::Departure { t, bytes, arrival } => {
            (t, "-", Some(bytes), Some(t / MS - arrival / MS))
        }
        LinkEvent::CrossDeparture { t, bytes, arrival } => {
            (t, "c-", Some(bytes), Some(t / MS - arrival / MS))
        }
        LinkEvent::Marked { t, bytes } => (t, "m", Some(bytes), None),
    };
    num(out, t / MS);
    out.push(b' ');
    out.extend_from_slice(word.as_bytes());
    for v in [a, b].into_iter().flatten() {
        out.push(b' ');
        num(out, v);
    }
    out.push(b'\n');
}

/// The high bit of a binary record's kind: cross traffic.
const CROSS_KIND: u8 = 0x80;

/// Magic bytes of a binary link log.
pub const BINARY_MAGIC: [u8; 8] = *b"PTMMLOG\0";
/// Version of the binary link-log format.
pub const BINARY_VERSION: u32 = 1;
/// Bytes per binary record.
pub const RECORD_BYTES: usize = 24;

/// Appends one event's binary record to `out`.
pub fn encode_event(event: &LinkEvent, out: &mut Vec<u8>) {
    let (t, x, bytes, kind) = match *event {
        LinkEvent::Arrival { t, bytes } => (t, 0, bytes, b'+'),
        LinkEvent::Drop { t, packets, bytes } => (t, packets, bytes, b'd'),
        LinkEvent::Opportunity { t } => (t, 0, OPPORTUNITY_BYTES as u64, b'#'),
        LinkEvent::Departure { t, bytes, arrival } => (t, arrival, bytes, b'-'),
        LinkEvent::CrossArrival { t, bytes } => (t, 0, bytes, CROSS_KIND | b'+'),
        LinkEvent::CrossDrop { t, packets, bytes } => (t, packets, bytes, CROSS_KIND | b'd'),
        LinkEvent::CrossDeparture { t, bytes, arrival } => (t, arrival, bytes, CROSS_KIND | b'-'),
        LinkEvent::Marked { t, bytes } => (t, 0, bytes, b'm'),
    };
    out.extend_from_slice(&t.to_le_bytes());
    out.extend_from_slice(&x.to_le_bytes());
    out.extend_from_slice(&(bytes.min(u32::MAX as u64) as u32).to_le_bytes());
    out.extend_from_slice(&[kind, 0, 0, 0]);
}

/// One direction's log file, written in large blocks.
#[derive(Debug)]
pub struct LinkLogWriter {
    path: PathBuf,
    out: BufWriter<File>,
    line: Vec<u8>,
    format: LogFormat,
}

impl LinkLogWriter {
    /// Creates `path` and writes the header, in the link's `--log-format`. `init_epoch_ns`:
    /// wall-clock time of the emulator's start. Errors name the file.
    pub fn create(
        path: &Path,
        link: &LinkShell,
        direction: LinkDirection,
        init_epoch_ns: u64,
    ) -> io::Result<LinkLogWriter> {
        let file = File::create(path).map_err(|e| named(path, e))?;
        let mut out = BufWriter::with_capacity(1 << 20, file);
        let text = header(link, direction, path, init_epoch_ns);
        let mut head = Vec::new();
        if link.log_format == LogFormat::Binary {
            head.extend_from_slice(&BINARY_MAGIC);
            head.extend_from_slice(&BINARY_VERSION.to_le_bytes());
            head.extend_from_slice(&[u8::from(direction == LinkDirection::Downlink), 0, 0, 0]);
            head.extend_from_slice(&init_epoch_ns.to_le_bytes());
            head.extend_from_slice(&(text.len() as u32).to_le_bytes());
        }
        head.extend_from_slice(text.as_bytes());
        out.write_all(&head).map_err(|e| named(path, e))?;
        Ok(LinkLogWriter {
            path: path.to_owned(),
            out,
            line: Vec::with_capacity(64),
            format: link.log_format,
        })
    }

    /// Appends events; errors name the file.
    pub fn write(&mut self, events: &[LinkEvent]) -> io::Result<()> {
        for e in events {
            self.line.clear();
            match self.format {
                LogFormat::Mahimahi => format_event(e, &mut self.line),
                LogFormat::Binary => encode_event(e, &mut self.line),
            }
            self.out
                .write_all(&self.line)
                .map_err(|e| named(&self.path, e))?;
        }
        Ok(())
    }

    /// Writes what is buffered; errors name the file.
    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush().map_err(|e| named(&self.path, e))
    }
}

/// A binary link log read back ([`read_binary`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BinaryLinkLog {
    /// The link direction it records.
    pub direction: LinkDirection,
    /// Wall-clock time of the emulator's start, ns since the Unix epoch.
    pub init_epoch_ns: u64,
    /// The Mahimahi text header (lines ending in `\n`).
    pub header: String,
    /// The events, times in ns since the init timestamp.
    pub events: Vec<LinkEvent>,
    /// Why reading stopped before the end of the data (truncated or corrupt record, with its
    /// byte offset); `None` if every byte was read.
    pub stopped: Option<String>,
}

/// Reads a binary link log. Errors (naming the byte offset) only if the header itself is
/// unusable; a truncated or corrupt record ends the events, and [`BinaryLinkLog::stopped`]
/// says where and why.
pub fn read_binary(data: &[u8]) -> Result<BinaryLinkLog, String> {
    let field = |at: usize, len: usize, what: &str| {
        data.get(at..at + len)
            .ok_or_else(|| format!("byte {at}: file ends inside the header ({what})"))
    };
    if field(0, 8, "magic")? != BINARY_MAGIC {
        return Err("byte 0: not a binary mm-link log (magic is not PTMMLOG)".into());
    }
    let u32_at =
        |at, what| field(at, 4, what).map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")));
    let version = u32_at(8, "version")?;
    if version != BINARY_VERSION {
        return Err(format!(
            "byte 8: version {version} is not supported (only {BINARY_VERSION})"
        ));
    }
    let direction = match field(12, 1, "direction")?[0] {
        0 => LinkDirection::Uplink,
        1 => LinkDirection::Downlink,
        d => {
            return Err(format!(
                "byte 12: direction {d} is neither 0 (uplink) nor 1 (downlink)"
            ))
        }
    };
    let init_epoch_ns = u64::from_le_bytes(field(16, 8, "init timestamp")?.try_into().expect("8"));
    let h = u32_at(24, "header length")? as usize;
    let header = std::str::from_utf8(field(28, h, "text header")?)
        .map_err(|e| format!("byte {}: text header is not UTF-8", 28 + e.valid_up_to()))?
        .to_owned();
    let mut events = Vec::with_capacity((data.len() - 28 - h) / RECORD_BYTES);
    let mut stopped = None;
    let mut at = 28 + h;
    while at < data.len() {
        let Some(r) = data.get(at..at + RECORD_BYTES) else {
            stopped = Some(format!(
                "byte {at}: truncated record ({} of {RECORD_BYTES} bytes); {} events kept",
                data.len() - at,
                events.len()
            ));
            break;
        };
        let u64_at = |i: usize| u64::from_le_bytes(r[i..i + 8].try_into().expect("8 bytes"));
        let (t, x) = (u64_at(0), u64_at(8));
        let bytes = u64::from(u32::from_le_bytes(r[16..20].try_into().expect("4 bytes")));
        events.push(match r[20] {
            b'+' => LinkEvent::Arrival { t, bytes },
            b'-' => LinkEvent::Departure {
                t,
                bytes,
                arrival: x,
            },
            b'#' => LinkEvent::Opportunity { t },
            b'm' => LinkEvent::Marked { t, bytes },
            b'd' => LinkEvent::Drop {
                t,
                packets: x,
                bytes,
            },
            k if k == CROSS_KIND | b'+' => LinkEvent::CrossArrival { t, bytes },
            k if k == CROSS_KIND | b'-' => LinkEvent::CrossDeparture {
                t,
                bytes,
                arrival: x,
            },
            k if k == CROSS_KIND | b'd' => LinkEvent::CrossDrop {
                t,
                packets: x,
                bytes,
            },
            k => {
                stopped = Some(format!(
                    "byte {}: unknown record kind {k:#04x}; {} events kept",
                    at + 20,
                    events.len()
                ));
                break;
            }
        });
        at += RECORD_BYTES;
    }
    Ok(BinaryLinkLog {
        direction,
        init_epoch_ns,
        header,
        events,
        stopped,
    })
}

/// The Mahimahi text form of a binary log: its header, then one line per event.
pub fn to_text(log: &BinaryLinkLog) -> Vec<u8> {
    let mut out = log.header.clone().into_bytes();
    for e in &log.events {
        format_event(e, &mut out);
    }
    out
}

/// `e` with the file's name in front.
fn named(path: &Path, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mm::{parse_chain, Shell};
    use crate::stage::{AnyStage, Pipeline};

    /// Cross traffic's events are marked in both forms and read back; the option survives
    /// the words round trip and is refused with the Mahimahi backend.
    #[test]
    fn cross_traffic_events_are_marked_in_text_and_binary() {
        let words: Vec<String> = "mm-link a b --uplink-cross-traffic=8,2.5 --uplink-log=up.bin \
             --log-format=binary -- true"
            .split_whitespace()
            .map(str::to_owned)
            .collect();
        let chain = parse_chain(&words).unwrap();
        let Shell::Link(link) = &chain.shells[0] else {
            panic!()
        };
        assert_eq!(
            link.uplink_cross.as_ref().unwrap().mbps_per_second,
            [8.0, 2.5]
        );
        assert_eq!(
            parse_chain(&chain.shells[0].words()).unwrap().shells,
            chain.shells
        );
        let plain: Vec<String> = ["mm-link", "a", "b", "--uplink-cross-traffic=8"]
            .map(str::to_owned)
            .to_vec();
        let refused = crate::mm::mahimahi_argv(&parse_chain(&plain).unwrap(), &plain).unwrap_err();
        assert!(
            refused.to_string().contains("--uplink-cross-traffic"),
            "{refused}"
        );
        let bad: Vec<String> = ["mm-link", "a", "b", "--downlink-cross-traffic", "3,,1"]
            .map(str::to_owned)
            .to_vec();
        let e = parse_chain(&bad).unwrap_err().to_string();
        assert!(
            e.contains("--downlink-cross-traffic=3,,1: value 2 (``)"),
            "{e}"
        );

        let events = [
            LinkEvent::CrossArrival { t: MS, bytes: 1504 },
            LinkEvent::CrossDrop {
                t: MS,
                packets: 1,
                bytes: 1504,
            },
            LinkEvent::CrossDeparture {
                t: 3 * MS,
                bytes: 1504,
                arrival: MS,
            },
            LinkEvent::Marked {
                t: 3 * MS,
                bytes: 1504,
            },
        ];
        let mut text = Vec::new();
        for e in &events {
            format_event(e, &mut text);
        }
        assert_eq!(
            String::from_utf8(text).unwrap(),
            "1 c+ 1504\n1 cd 1 1504\n3 c- 1504 2\n3 m 1504\n"
        );
        let dir = std::env::temp_dir().join(format!("linklog-cross-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("up.bin");
        let mut w = LinkLogWriter::create(&file, link, LinkDirection::Uplink, 7).unwrap();
        w.write(&events).unwrap();
        w.flush().unwrap();
        drop(w);
        let log = read_binary(&std::fs::read(&file).unwrap()).unwrap();
        assert_eq!(log.events, events);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn header_and_events_match_mahimahis_format() {
        let dir = std::env::temp_dir().join(format!("linklog-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let trace = dir.join("10mbps.trace");
        std::fs::write(&trace, "1\n2\n3\n4\n6\n").unwrap();
        let t = trace.display().to_string();
        let words: Vec<String> = format!(
            "mm-delay 28 mm-link {t} {t} --uplink-queue=droptail --uplink-queue-args=packets=1 \
             --uplink-log=/data/up.log -- sh -c it's"
        )
        .split(' ')
        .map(str::to_owned)
        .collect();
        let chain = parse_chain(&words).unwrap();
        let path = crate::mm::EmulatedPath::load(chain.shells, chain.command).unwrap();
        let Shell::Link(link) = &path.shells[1] else {
            panic!()
        };
        let h = header(
            link,
            LinkDirection::Uplink,
            Path::new("/data/up.log"),
            1795311537227 * MS + 999_999,
        );
        assert_eq!(
            h,
            format!(
                "# mahimahi mm-link (Uplink) [{t}] > /data/up.log\n\
                 # command line: 'mm-link' '{t}' '{t}' '--uplink-queue=droptail' \
                 '--uplink-queue-args=packets=1' '--uplink-log=/data/up.log' '--' 'sh' '-c' \
                 'it'\\''s'\n\
                 # queue: droptail [packets=1]\n\
                 # init timestamp: 1795311537227\n\
                 # base timestamp: 0\n\
                 # mahimahi config: [delay 28 ms] \n"
            )
        );
        // Events of a real run of the stage: a 1500-byte packet at 0.5 ms, a second dropped
        // (packets=1, the first still queued), both opportunities at 1 and 2 ms logged.
        let (mut p, links): (Pipeline, _) = path.pipeline(LinkDirection::Uplink, 0);
        assert_eq!(links[0].0, 0);
        p.push(MS / 2, vec![0; 1500]);
        p.push(MS / 2, vec![0; 84]);
        p.advance(2 * MS);
        let mut events = Vec::new();
        if let Some(AnyStage::Link(l)) = p.stage_mut(0) {
            l.take_events(&mut events);
        }
        let mut text = Vec::new();
        for e in &events {
            format_event(e, &mut text);
        }
        assert_eq!(
            String::from_utf8(text).unwrap(),
            "0 + 1504\n0 + 88\n0 d 1 88\n1 # 1504\n1 - 1504 1\n2 # 1504\n"
        );

        // The binary form of the same events reads back exactly and converts to that text.
        let mut bin_link = (**link).clone();
        bin_link.log_format = LogFormat::Binary;
        let file = dir.join("up.bin");
        let mut w = LinkLogWriter::create(&file, &bin_link, LinkDirection::Uplink, 42).unwrap();
        w.write(&events).unwrap();
        w.flush().unwrap();
        drop(w);
        let data = std::fs::read(&file).unwrap();
        let log = read_binary(&data).unwrap();
        assert_eq!(log.events, events);
        assert_eq!(log.stopped, None);
        assert_eq!(
            (log.direction, log.init_epoch_ns),
            (LinkDirection::Uplink, 42)
        );
        let text = String::from_utf8(to_text(&log)).unwrap();
        assert!(text.starts_with("# mahimahi mm-link (Uplink)"), "{text}");
        assert!(
            text.ends_with("0 d 1 88\n1 # 1504\n1 - 1504 1\n2 # 1504\n"),
            "{text}"
        );
        // Truncated: the whole records before the cut are kept, the cut is named.
        let cut = read_binary(&data[..data.len() - 5]).unwrap();
        assert_eq!(cut.events, events[..events.len() - 1]);
        let why = cut.stopped.unwrap();
        assert!(
            why.starts_with(&format!("byte {}: truncated record", data.len() - 24)),
            "{why}"
        );
        // Corrupt kind: stops there.
        let mut bad = data.clone();
        let k = data.len() - 24 * 2 + 20;
        bad[k] = b'?';
        let c = read_binary(&bad).unwrap();
        assert_eq!(c.events.len(), events.len() - 2);
        assert!(c
            .stopped
            .unwrap()
            .starts_with(&format!("byte {k}: unknown record kind")));
        // An unusable header is an error naming the byte.
        assert!(read_binary(b"PTMMLOG\0\x02\0\0\0")
            .unwrap_err()
            .starts_with("byte 8"));
        assert!(read_binary(b"hello").unwrap_err().starts_with("byte 0"));
        assert!(read_binary(&data[..30]).unwrap_err().starts_with("byte 28"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
