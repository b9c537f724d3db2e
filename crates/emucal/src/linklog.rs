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

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::mm::{LinkDirection, LinkShell};
use crate::stage::{LinkEvent, MS, OPPORTUNITY_BYTES};

/// Quotes one argument as Mahimahi's log header does: `'arg'`, with `'` written `'\''`.
pub fn quote(arg: &str) -> String {
    format!("'{}'", arg.replace('\'', r"'\''"))
}

/// The header lines of one direction's log (each ending in `\n`).
///
/// `init_epoch_ms`: wall-clock time of the emulator's start, ms since the Unix epoch.
pub fn header(
    link: &LinkShell,
    direction: LinkDirection,
    log_path: &Path,
    init_epoch_ms: u64,
) -> String {
    let (_, queue, _, trace_path) = link.direction(direction);
    let argv: Vec<String> = link.argv.iter().map(|a| quote(a)).collect();
    let mut h = format!(
        "# mahimahi mm-link ({}) [{}] > {}\n# command line: {}\n# queue: {}\n\
         # init timestamp: {init_epoch_ms}\n# base timestamp: 0\n",
        direction.title(),
        trace_path.display(),
        log_path.display(),
        argv.join(" "),
        queue.describe(),
    );
    if !link.enclosing_prefix.is_empty() {
        h.push_str(&format!("# mahimahi config: {}\n", link.enclosing_prefix));
    }
    h
}

/// Appends one event's line to `out` (`T + LEN`, `T d N B`, `T # 1504`, `T - LEN DELAY`).
pub fn format_event(event: &LinkEvent, out: &mut Vec<u8>) {
    // Writing into a Vec cannot fail.
    let _ = match *event {
        LinkEvent::Arrival { t, bytes } => writeln!(out, "{} + {bytes}", t / MS),
        LinkEvent::Drop { t, packets, bytes } => {
            writeln!(out, "{} d {packets} {bytes}", t / MS)
        }
        LinkEvent::Opportunity { t } => writeln!(out, "{} # {OPPORTUNITY_BYTES}", t / MS),
        LinkEvent::Departure { t, bytes, arrival } => {
            writeln!(out, "{} - {bytes} {}", t / MS, t / MS - arrival / MS)
        }
    };
}

/// One direction's log file, written in large blocks.
#[derive(Debug)]
pub struct LinkLogWriter {
    path: PathBuf,
    out: BufWriter<File>,
    line: Vec<u8>,
}

impl LinkLogWriter {
    /// Creates `path` and writes the header. Errors name the file.
    pub fn create(
        path: &Path,
        link: &LinkShell,
        direction: LinkDirection,
        init_epoch_ms: u64,
    ) -> io::Result<LinkLogWriter> {
        let file = File::create(path).map_err(|e| named(path, e))?;
        let mut out = BufWriter::with_capacity(1 << 20, file);
        out.write_all(header(link, direction, path, init_epoch_ms).as_bytes())
            .map_err(|e| named(path, e))?;
        Ok(LinkLogWriter {
            path: path.to_owned(),
            out,
            line: Vec::with_capacity(64),
        })
    }

    /// Appends events.
    pub fn write(&mut self, events: &[LinkEvent]) -> io::Result<()> {
        for e in events {
            self.line.clear();
            format_event(e, &mut self.line);
            self.out.write_all(&self.line)?;
        }
        Ok(())
    }

    /// Writes what is buffered; errors name the file.
    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush().map_err(|e| named(&self.path, e))
    }
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
        let Shell::Link(link) = &chain.shells[1] else {
            panic!()
        };
        let h = header(
            link,
            LinkDirection::Uplink,
            Path::new("/data/up.log"),
            1795311537227,
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
        let path = crate::mm::EmulatedPath::from_chain(chain.shells.clone(), &words);
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
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
