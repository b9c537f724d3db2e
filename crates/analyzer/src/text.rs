//! Pantheon's and Mahimahi's text logs, so that runs from Pantheon's public archive and from
//! real Mahimahi are analysed by the same code as ours (reference `pantheon.md` §3.3, §4.1–4.2;
//! `mahimahi.md` §2.4).
//!
//! - **Tunnel logs** (`mm-tunnelclient`/`mm-tunnelserver --ingress-log= --egress-log=`, and
//!   `pantheon-tunnel --log-format pantheon`): a header `# '<argv>'… ingress: <epoch ms>` (or
//!   `egress:`), then `<ms since init> - <uid> - <size>` per packet. [`parse_tunnel_log`].
//! - **Link logs**: Pantheon's merged `<cc>_datalink_run<N>.log` (`# init timestamp: X`, then
//!   `ts + size [flow]`, `ts - size delay [flow]`, `ts # 1500`) and Mahimahi's mm-link logs
//!   (`# mahimahi mm-link …` header — its `# command line:` may span several lines — then
//!   `T + LEN`, `T - LEN DELAY`, `T # 1504`, `T d NPKTS NBYTES`). One parser reads both:
//!   [`parse_link_log`]. An untagged line belongs to flow 0, as in Pantheon's `tunnel_graph.py`.
//!
//! Parsing is sans-IO (bytes in, columns out), one pass, no allocation per line. A line that
//! does not parse ends the events: what precedes it is kept and [`TunnelTextLog::stopped`] /
//! [`LinkTextLog::stopped`] names the file and line, so a truncated log still gives numbers.

/// An unusable log (its header), naming the file and line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}: {message}")]
pub struct TextLogError {
    /// The file.
    pub file: String,
    /// 1-based line.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

/// Which side of a tunnel endpoint a tunnel log records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TunnelSide {
    /// Datagrams received from the peer (written to the TUN device).
    Ingress,
    /// Packets read from the TUN device and sent to the peer.
    Egress,
}

/// A tunnel text log: one column per field, in file order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TunnelTextLog {
    /// Ingress or egress (from the header; `None` only for an empty default).
    pub side: Option<TunnelSide>,
    /// The header's initial timestamp, ms since the Unix epoch.
    pub init_ms: f64,
    /// ms since `init_ms`.
    pub t_ms: Vec<f64>,
    /// Packet UIDs.
    pub uid: Vec<u64>,
    /// Outer datagram sizes, bytes (inner IP length + 36).
    pub size: Vec<u64>,
    /// Where and why reading stopped before the end (`file:line: …`), if it did.
    pub stopped: Option<String>,
}

/// A link log (Pantheon merged or Mahimahi mm-link): events by kind, columns in file order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LinkTextLog {
    /// `# init timestamp:`, ms since the Unix epoch (`None` if the header lacks it).
    pub init_ms: Option<f64>,
    /// Mahimahi's `# base timestamp:` (ms since init when the trace clock started), if given.
    pub base_ms: Option<f64>,
    /// `+` lines: flow (0 when untagged), time (ms since init) and size.
    pub arrivals: Events,
    /// `-` lines, with `delay_ms`.
    pub departures: Events,
    /// `-` lines' delay field, ms (one-way delay in a merged log; time in the link in an
    /// mm-link log).
    pub delay_ms: Vec<f64>,
    /// `#` lines: time and size (1500 in a merged log, 1504 in an mm-link log).
    pub opportunities: Events,
    /// Packets dropped by the queue (`d` lines of an mm-link log).
    pub dropped_packets: u64,
    /// Cross traffic's departures (`c-` lines, ours: `mm-link --uplink-cross-traffic`):
    /// time and size; never a scheme's.
    pub cross_departures: Events,
    /// Cross-traffic arrivals the queue refused (`cd` lines).
    pub cross_dropped_packets: u64,
    /// Departures that left carrying CE (`m` lines, ours: a marking queue's marks).
    pub marked_packets: u64,
    /// The link's queue over time, from its arrivals, departures and drops (the scheme's and
    /// cross traffic's): one sample per millisecond with events ([`QueueSamples`]).
    pub queue: QueueSamples,
    /// Where and why reading stopped before the end (`file:line: …`), if it did.
    pub stopped: Option<String>,
}

/// Columns of one kind of event.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Events {
    /// Flow id, 0 when the line has no tag.
    pub flow: Vec<u32>,
    /// ms since the log's init timestamp.
    pub t_ms: Vec<f64>,
    /// bytes.
    pub size: Vec<u64>,
}

/// A link's queue over time: arrivals (`+`, `c+`) add a packet and its bytes, departures
/// (`-`, `c-`) and drops (`d`, `cd`: their packets and bytes) take them away. One sample per
/// millisecond that has events (Mahimahi logs whole milliseconds), taken after its last event
/// at that event's time, so that a fast link's log gives a bounded series. Packets partly
/// delivered over several opportunities count as queued until their departure line.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct QueueSamples {
    /// ms since the log's init timestamp.
    pub t_ms: Vec<f64>,
    /// Packets in the queue after the sample's events.
    pub packets: Vec<i64>,
    /// Bytes in the queue after them.
    pub bytes: Vec<i64>,
    /// The running (packets, bytes).
    now: (i64, i64),
}

impl QueueSamples {
    /// The queue changed by `packets` and `bytes` at `t_ms`.
    fn change(&mut self, t_ms: f64, packets: i64, bytes: i64) {
        self.now = (self.now.0 + packets, self.now.1 + bytes);
        let same_ms = self
            .t_ms
            .last()
            .is_some_and(|&last| last.floor() == t_ms.floor());
        if same_ms {
            let i = self.t_ms.len() - 1;
            (self.t_ms[i], self.packets[i], self.bytes[i]) = (t_ms, self.now.0, self.now.1);
        } else {
            self.t_ms.push(t_ms);
            self.packets.push(self.now.0);
            self.bytes.push(self.now.1);
        }
    }
}

impl Events {
    fn push(&mut self, flow: u32, t_ms: f64, size: u64) {
        self.flow.push(flow);
        self.t_ms.push(t_ms);
        self.size.push(size);
    }

    /// Number of events.
    pub fn len(&self) -> usize {
        self.t_ms.len()
    }

    /// True when there is none.
    pub fn is_empty(&self) -> bool {
        self.t_ms.is_empty()
    }
}

/// Lines of `data` with their 1-based numbers, and whether each ended with `\n`.
fn lines(data: &[u8]) -> impl Iterator<Item = (usize, &[u8], bool)> {
    let mut rest = data;
    let mut n = 0;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        n += 1;
        Some(match rest.iter().position(|&b| b == b'\n') {
            Some(i) => {
                let line = &rest[..i];
                rest = &rest[i + 1..];
                (n, line, true)
            }
            None => {
                let line = rest;
                rest = &[];
                (n, line, false)
            }
        })
    })
}

fn num<T: std::str::FromStr>(field: Option<&[u8]>) -> Option<T> {
    std::str::from_utf8(field?).ok()?.parse().ok()
}

/// Why parsing stopped at `line`: a cut last line or a bad one.
fn stop_reason(file: &str, line: usize, text: &[u8], complete: bool) -> String {
    let shown = String::from_utf8_lossy(&text[..text.len().min(60)]);
    if complete {
        format!("{file}:{line}: cannot parse {shown:?}; the lines before it are kept")
    } else {
        format!("{file}:{line}: truncated last line {shown:?}; the lines before it are kept")
    }
}

/// Parses a Pantheon tunnel log. Errors only if the first line is not the tunnel header.
pub fn parse_tunnel_log(data: &[u8], file: &str) -> Result<TunnelTextLog, TextLogError> {
    let mut it = lines(data);
    let header_error = |message: &str| TextLogError {
        file: file.to_owned(),
        line: 1,
        message: message.to_owned(),
    };
    let (_, header, _) = it.next().ok_or_else(|| header_error("empty file"))?;
    let header = std::str::from_utf8(header).map_err(|_| header_error("header is not UTF-8"))?;
    let (head, init) = header
        .strip_prefix("# ")
        .and_then(|h| h.rsplit_once(": "))
        .ok_or_else(|| header_error("not a tunnel log header (`# '…' ingress: <ms>`)"))?;
    let side = if head.ends_with(" ingress") || head == "ingress" {
        TunnelSide::Ingress
    } else if head.ends_with(" egress") || head == "egress" {
        TunnelSide::Egress
    } else {
        return Err(header_error("header names neither ingress nor egress"));
    };
    let init_ms: f64 = init
        .trim()
        .parse()
        .map_err(|_| header_error(&format!("initial timestamp {init:?} is not a number")))?;
    let mut log = TunnelTextLog {
        side: Some(side),
        init_ms,
        ..TunnelTextLog::default()
    };
    let cap = data.len() / 24;
    log.t_ms.reserve(cap);
    log.uid.reserve(cap);
    log.size.reserve(cap);
    for (n, line, complete) in it {
        // `<ts> - <uid> - <size>`
        let mut f = line.split(|&b| b == b' ');
        let parsed = (|| {
            let t: f64 = num(f.next())?;
            (f.next()? == b"-").then_some(())?;
            let uid: u64 = num(f.next())?;
            (f.next()? == b"-").then_some(())?;
            let size: u64 = num(f.next())?;
            f.next().is_none().then_some((t, uid, size))
        })();
        match parsed {
            Some((t, uid, size)) => {
                log.t_ms.push(t);
                log.uid.push(uid);
                log.size.push(size);
            }
            None => {
                log.stopped = Some(stop_reason(file, n, line, complete));
                break;
            }
        }
    }
    Ok(log)
}

/// One event line of a link log, its time and size/count aside.
enum LinkEvent {
    /// `+`, flow.
    Arrival(u32),
    /// `-`, delay (ms) and flow.
    Departure(f64, u32),
    /// `#`.
    Opportunity,
    /// `d` (count in the size slot), bytes.
    Drop(u64),
    /// `c+`: a cross-traffic arrival.
    CrossArrival,
    /// `c-`: a cross-traffic departure (its delay is read and dropped).
    CrossDeparture,
    /// `cd`: cross-traffic arrivals refused (count in the size slot), bytes.
    CrossDrop(u64),
    /// `m`: the departure before it carried CE (ECN).
    Marked,
}

/// Parses a Pantheon merged link log or a Mahimahi mm-link log. Never fails: a missing init
/// timestamp is `None`, and a line that does not parse ends the events (see
/// [`LinkTextLog::stopped`]).
pub fn parse_link_log(data: &[u8], file: &str) -> LinkTextLog {
    let mut p = LinkLogParser::new(file);
    p.feed(data);
    p.finish()
}

/// Reads a link log in 1 MiB pieces through [`LinkLogParser`], so that only the columns are
/// held, never the whole file. Errors only if the file cannot be read.
pub fn read_link_log(path: &std::path::Path) -> std::io::Result<LinkTextLog> {
    use std::io::Read;
    let mut file = std::fs::File::open(path)?;
    let mut p = LinkLogParser::new(&path.display().to_string());
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 || !p.feed(&buf[..n]) {
            return Ok(p.finish());
        }
    }
}

/// The link-log parser as a state machine fed with pieces of the file in order (sans-IO; the
/// pieces may cut lines anywhere).
#[derive(Debug)]
pub struct LinkLogParser {
    log: LinkTextLog,
    file: String,
    /// Lines seen so far.
    line: usize,
    /// Inside a multi-line `# command line:` header.
    open_quotes: bool,
    /// The start of a line cut by the end of the last piece.
    partial: Vec<u8>,
    /// A line did not parse: nothing more is read.
    stopped: bool,
}

impl LinkLogParser {
    /// A parser for `file` (named in stop reasons).
    pub fn new(file: &str) -> LinkLogParser {
        LinkLogParser {
            log: LinkTextLog::default(),
            file: file.to_owned(),
            line: 0,
            open_quotes: false,
            partial: Vec::new(),
            stopped: false,
        }
    }

    /// Parses the complete lines of the next piece; false once a line did not parse.
    pub fn feed(&mut self, mut data: &[u8]) -> bool {
        if !self.partial.is_empty() {
            let Some(i) = data.iter().position(|&b| b == b'\n') else {
                self.partial.extend_from_slice(data);
                return !self.stopped;
            };
            let mut line = std::mem::take(&mut self.partial);
            line.extend_from_slice(&data[..i]);
            data = &data[i + 1..];
            self.one(&line, true);
        }
        for (_, line, complete) in lines(data) {
            if self.stopped {
                break;
            }
            if complete {
                self.one(line, true);
            } else {
                self.partial.extend_from_slice(line);
            }
        }
        !self.stopped
    }

    /// The log, after the last line (one without a final newline is parsed as cut if it does
    /// not parse).
    pub fn finish(mut self) -> LinkTextLog {
        if !self.stopped && !self.partial.is_empty() {
            let line = std::mem::take(&mut self.partial);
            self.one(&line, false);
        }
        self.log
    }

    fn one(&mut self, line: &[u8], complete: bool) {
        if self.stopped {
            return;
        }
        self.line += 1;
        let quotes = || line.iter().filter(|&&b| b == b'\'').count() % 2 == 1;
        if self.open_quotes {
            self.open_quotes ^= quotes();
            return;
        }
        let log = &mut self.log;
        if line.first() == Some(&b'#') {
            let text = String::from_utf8_lossy(line);
            if let Some(v) = text.strip_prefix("# init timestamp:") {
                log.init_ms = v.trim().parse().ok();
            } else if let Some(v) = text.strip_prefix("# base timestamp:") {
                log.base_ms = v.trim().parse().ok();
            } else if text.starts_with("# command line:") {
                self.open_quotes = quotes();
            }
            return;
        }
        let mut f = line.split(|&b| b == b' ');
        // Every field is read and the line checked whole before anything is recorded.
        let parsed = (|| {
            let t: f64 = num(f.next())?;
            let kind = f.next()?;
            let a: u64 = num(f.next())?;
            let event = match kind {
                b"+" => LinkEvent::Arrival(num(f.next()).unwrap_or(0)),
                b"-" => {
                    let delay: f64 = num(f.next())?;
                    LinkEvent::Departure(delay, num(f.next()).unwrap_or(0))
                }
                b"#" => LinkEvent::Opportunity,
                b"d" => LinkEvent::Drop(num(f.next())?),
                b"c+" => LinkEvent::CrossArrival,
                b"c-" => {
                    let _delay: f64 = num(f.next())?;
                    LinkEvent::CrossDeparture
                }
                b"cd" => LinkEvent::CrossDrop(num(f.next())?),
                b"m" => LinkEvent::Marked,
                _ => return None,
            };
            f.next().is_none().then_some((t, a, event))
        })();
        // A packet's or a drop's bytes, as the queue's change.
        let signed = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        match parsed {
            Some((t, a, LinkEvent::Arrival(flow))) => {
                log.arrivals.push(flow, t, a);
                log.queue.change(t, 1, signed(a));
            }
            Some((t, a, LinkEvent::Departure(delay, flow))) => {
                log.departures.push(flow, t, a);
                log.delay_ms.push(delay);
                log.queue.change(t, -1, -signed(a));
            }
            Some((t, a, LinkEvent::Opportunity)) => log.opportunities.push(0, t, a),
            Some((t, a, LinkEvent::Drop(bytes))) => {
                log.dropped_packets += a;
                log.queue.change(t, -signed(a), -signed(bytes));
            }
            Some((t, a, LinkEvent::CrossArrival)) => log.queue.change(t, 1, signed(a)),
            Some((t, a, LinkEvent::CrossDeparture)) => {
                log.cross_departures.push(0, t, a);
                log.queue.change(t, -1, -signed(a));
            }
            Some((t, a, LinkEvent::CrossDrop(bytes))) => {
                log.cross_dropped_packets += a;
                log.queue.change(t, -signed(a), -signed(bytes));
            }
            Some((_, _, LinkEvent::Marked)) => log.marked_packets += 1,
            None => {
                log.stopped = Some(stop_reason(&self.file, self.line, line, complete));
                self.stopped = true;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tunnel_log_header_records_and_truncation() {
        let text = b"# '/usr/local/bin/mm-tunnelclient' '--egress-log=/d/e.log' egress: 1795311354099.748\n\
                     1705.446 - 0 - 120\n1909.540 - 1 - 1500\n";
        let log = parse_tunnel_log(text, "e.log").unwrap();
        assert_eq!(log.side, Some(TunnelSide::Egress));
        assert_eq!(log.init_ms, 1795311354099.748);
        assert_eq!(log.t_ms, [1705.446, 1909.540]);
        assert_eq!(log.uid, [0, 1]);
        assert_eq!(log.size, [120, 1500]);
        assert_eq!(log.stopped, None);
        // A cut that leaves an unparsable line is named with its line number.
        let cut =
            parse_tunnel_log(b"# 'x' ingress: 5.5\n1.0 - 0 - 10\n2.0 - 1 -", "i.log").unwrap();
        assert_eq!(cut.uid, [0]);
        assert!(cut
            .stopped
            .unwrap()
            .starts_with("i.log:3: truncated last line"));
        let bad = parse_tunnel_log(
            b"# 'x' ingress: 5.5\n1.0 - 0 - 10\nhello\n3.0 - 2 - 10\n",
            "i",
        );
        let bad = bad.unwrap();
        assert_eq!(bad.uid, [0]);
        assert!(bad
            .stopped
            .unwrap()
            .starts_with("i:3: cannot parse \"hello\""));
        // Headers that are not a tunnel log's are errors naming line 1.
        for h in [
            &b""[..],
            b"1.0 - 0 - 10\n",
            b"# 'x' sideways: 5\n",
            b"# 'x' ingress: soon\n",
        ] {
            let e = parse_tunnel_log(h, "f").unwrap_err();
            assert_eq!((e.file.as_str(), e.line), ("f", 1), "{e}");
        }
    }

    #[test]
    fn the_truncated_last_line_of_a_complete_record_is_still_read() {
        // A last line without its newline but complete is a record (files need not end in \n).
        let log = parse_tunnel_log(b"# 'x' ingress: 0\n1.0 - 0 - 10", "f").unwrap();
        assert_eq!((log.uid.len(), log.stopped), (1, None));
    }

    #[test]
    fn merged_pantheon_log_with_flows_and_capacity() {
        let text = b"# init timestamp: 1500000000000.000\n\
                     0.000 # 1500\n1.000 + 1536 1\n1.000 + 1536 2\n12.500 - 1536 11.500 1\n\
                     13.000 # 1500\n20.000 + 100\n25.000 - 100 5.000\n";
        let log = parse_link_log(text, "cubic_datalink_run1.log");
        assert_eq!(log.init_ms, Some(1500000000000.0));
        assert_eq!(log.arrivals.flow, [1, 2, 0]);
        assert_eq!(log.arrivals.size, [1536, 1536, 100]);
        assert_eq!(log.departures.flow, [1, 0]);
        assert_eq!(log.departures.t_ms, [12.5, 25.0]);
        assert_eq!(log.delay_ms, [11.5, 5.0]);
        assert_eq!(log.opportunities.t_ms, [0.0, 13.0]);
        assert_eq!(log.stopped, None);
        // A bad line in the middle stops there and keeps the rest before it.
        let log = parse_link_log(
            b"# init timestamp: 1\n1 + 10 1\n2 - 10 1 1 extra\n3 + 10\n",
            "m",
        );
        assert_eq!(
            (log.arrivals.len(), log.departures.len(), log.delay_ms.len()),
            (1, 0, 0)
        );
        assert!(log.stopped.unwrap().starts_with("m:3: cannot parse"));
    }

    #[test]
    fn real_mahimahi_log_with_a_multi_line_command_header() {
        // The first 3000 lines of a real `mm-link --uplink-log` (shared/data/samples).
        let data = std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/fixtures/logs/mahimahi_mm-link_uplink_droptail50.log"
        ))
        .unwrap();
        let log = parse_link_log(&data, "up.log");
        assert_eq!(log.stopped, None);
        assert_eq!(log.init_ms, Some(1795311537227.0));
        assert_eq!(log.base_ms, Some(42.0));
        assert_eq!(log.opportunities.t_ms[0], 43.0);
        assert!(log.opportunities.size.iter().all(|&s| s == 1504));
        assert_eq!(*log.departures.t_ms.last().unwrap(), 1399.0);
        assert_eq!(*log.delay_ms.last().unwrap(), 44.0);
        // Every line after the 9 header lines (the command line spans 4) is one event.
        let events = log.arrivals.len() + log.departures.len() + log.opportunities.len();
        let drops = data
            .split(|&b| b == b'\n')
            .filter(|l| l.windows(3).any(|w| w == b" d "))
            .count();
        assert_eq!(events + drops, 3000 - 9);
    }

    /// Cross traffic's marked lines (ours) are read as such, never as the scheme's packets.
    #[test]
    fn cross_traffic_lines_are_kept_apart() {
        let log = parse_link_log(
            b"# init timestamp: 5\n1 + 1504\n1 c+ 1504\n1 c+ 1504\n1 cd 1 1504\n2 # 1504\n\
              2 - 1504 1\n3 # 1504\n3 c- 1504 2\n",
            "up.log",
        );
        assert_eq!(log.stopped, None);
        assert_eq!((log.arrivals.len(), log.departures.len()), (1, 1));
        assert_eq!(log.cross_departures.t_ms, [3.0]);
        assert_eq!((log.dropped_packets, log.cross_dropped_packets), (0, 1));
        assert_eq!(log.marked_packets, 0);
        // The queue: at 1 ms three arrivals and one refused (2 packets, 3008 bytes), then a
        // departure at 2 ms and at 3 ms; one sample per millisecond, after its last event.
        assert_eq!(log.queue.t_ms, [1.0, 2.0, 3.0]);
        assert_eq!(log.queue.packets, [2, 1, 0]);
        assert_eq!(log.queue.bytes, [3008, 1504, 0]);
        // A CE-marked departure is a departure followed by its `m` line.
        let log = parse_link_log(
            b"# init timestamp: 5\n1 + 1504\n2 # 1504\n2 - 1504 1\n2 m 1504\n",
            "up.log",
        );
        assert_eq!(log.stopped, None);
        assert_eq!((log.departures.len(), log.marked_packets), (1, 1));
    }

    #[test]
    fn pieces_cut_anywhere_parse_as_the_whole() {
        let data = std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/fixtures/logs/mahimahi_mm-link_uplink_droptail50.log"
        ))
        .unwrap();
        let whole = parse_link_log(&data, "up.log");
        for piece in [1, 7, 100, 4096] {
            let mut p = LinkLogParser::new("up.log");
            for chunk in data.chunks(piece) {
                assert!(p.feed(chunk));
            }
            assert_eq!(p.finish(), whole, "pieces of {piece} bytes");
        }
        // A bad line stops the parser wherever the cut falls, naming the same line.
        let bad = b"# init timestamp: 1\n1 + 10\n2 x 10\n3 + 10\n";
        let mut p = LinkLogParser::new("m");
        let mut fed = true;
        for chunk in bad.chunks(3) {
            fed &= p.feed(chunk);
        }
        assert!(!fed);
        let log = p.finish();
        assert_eq!(log.arrivals.len(), 1);
        assert!(log.stopped.unwrap().starts_with("m:3: cannot parse"));
    }
}
