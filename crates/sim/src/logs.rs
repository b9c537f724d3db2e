//! The sinks of a simulated run: its logs in files named and formatted as a real run's (so
//! `pantheon analyze` reads them unchanged), or in memory.

use std::collections::BTreeMap;
use std::io;
use std::path::PathBuf;

use emucal::linklog::LinkLogWriter;
use emucal::mm::{EmulatedPath, LinkDirection};
use emucal::stage::LinkEvent;
use tunnel::capture::{capture_path, interface_name, Capture};
use tunnel::log::{Direction, Header, Kind, LogFormat, LogWriter, Record, Role};

use crate::run::Sink;

/// The Unix time, ns, a simulated run's clock starts at: its logs' base time. Fixed (the Unix
/// epoch), so that a run's logs depend on its seed alone, wherever and whenever it is
/// simulated.
pub const SIM_EPOCH_NS: i64 = 0;

/// Which tunnel endpoint writes a log: the client (the sender's side) sends datalink and
/// receives acklink packets; the server, the reverse.
pub fn role(direction: Direction, kind: Kind) -> Role {
    match (direction, kind) {
        (Direction::Datalink, Kind::Egress) | (Direction::Acklink, Kind::Ingress) => Role::Client,
        _ => Role::Server,
    }
}

/// The four tunnel logs of each flow and the mm-link logs the path names, as binary files;
/// with a capture, a pcapng beside each tunnel log, as a real run's `--capture` writes.
pub struct FileSink {
    tunnel: BTreeMap<(u16, u8, u8), LogWriter>,
    captures: BTreeMap<(u16, u8, u8), Capture>,
    links: BTreeMap<(u8, usize), LinkLogWriter>,
}

impl FileSink {
    /// Creates the files: for flows `1..=flows` each of (datalink, acklink) × (ingress, egress)
    /// at `name(direction, kind, flow)` (e.g. `cubic_datalink_run1_flow1.egress.ptlog`), with
    /// `capture` (a snap length, bytes) its pcapng beside it (`tunnel::capture`), and every
    /// mm-link log `path` names. Errors name the file.
    pub fn create(
        path: &EmulatedPath,
        flows: u16,
        name: &dyn Fn(Direction, Kind, u16) -> PathBuf,
        capture: Option<u32>,
    ) -> io::Result<FileSink> {
        let named = |e: io::Error, file: &std::path::Path| {
            io::Error::new(e.kind(), format!("create {}: {e}", file.display()))
        };
        let mut tunnel = BTreeMap::new();
        let mut captures = BTreeMap::new();
        for flow in 1..=flows {
            for direction in [Direction::Datalink, Direction::Acklink] {
                for kind in [Kind::Ingress, Kind::Egress] {
                    let file = name(direction, kind, flow);
                    let header = Header {
                        role: role(direction, kind),
                        kind,
                        flow,
                        direction,
                        base_realtime_ns: SIM_EPOCH_NS,
                        clock_offset_ns: None,
                        clock_drift_ppb: 0,
                    };
                    let w = LogWriter::create(&file, &header, &LogFormat::Binary)
                        .map_err(|e| named(e, &file))?;
                    let key = (flow, direction as u8, kind as u8);
                    tunnel.insert(key, w);
                    if let Some(snaplen) = capture {
                        let file = capture_path(&file);
                        let interface = interface_name(direction.as_str(), kind.as_str(), flow);
                        let inbound = kind == Kind::Ingress;
                        let c = Capture::create(&file, &interface, snaplen, SIM_EPOCH_NS, inbound)
                            .map_err(|e| named(e, &file))?;
                        captures.insert(key, c);
                    }
                }
            }
        }
        let mut links = BTreeMap::new();
        for direction in [LinkDirection::Uplink, LinkDirection::Downlink] {
            for (stage, link) in path.pipeline(direction, 0).1 {
                let file = link
                    .direction(direction)
                    .log
                    .expect("logged links have a file");
                let w = LinkLogWriter::create(file, link, direction, SIM_EPOCH_NS as u64)?;
                links.insert((direction as u8, stage), w);
            }
        }
        Ok(FileSink {
            tunnel,
            captures,
            links,
        })
    }

    /// Writes what is buffered to the files and closes the captures.
    pub fn finish(mut self) -> io::Result<()> {
        self.tunnel.values_mut().try_for_each(LogWriter::flush)?;
        self.links.values_mut().try_for_each(LinkLogWriter::flush)?;
        for capture in std::mem::take(&mut self.captures).into_values() {
            capture.finish()?;
        }
        Ok(())
    }
}

impl Sink for FileSink {
    fn packet(&mut self, direction: Direction, record: &Record, inner: &[u8]) -> io::Result<()> {
        let key = (record.flow, direction as u8, record.kind as u8);
        if let Some(c) = self.captures.get_mut(&key) {
            c.packet(record.t_ns, inner, record.uid);
        }
        match self.tunnel.get_mut(&key) {
            Some(w) => w.push(record),
            None => Ok(()),
        }
    }

    fn link_events(
        &mut self,
        direction: LinkDirection,
        stage: usize,
        events: &[LinkEvent],
    ) -> io::Result<()> {
        match self.links.get_mut(&(direction as u8, stage)) {
            Some(w) => w.write(events),
            None => Ok(()),
        }
    }
}

/// Every record in memory, in the order written: (direction, record); link events counted.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct MemorySink {
    /// The tunnel records.
    pub packets: Vec<(Direction, Record)>,
    /// Link events seen.
    pub link_events: usize,
}

impl Sink for MemorySink {
    fn packet(&mut self, direction: Direction, record: &Record, _inner: &[u8]) -> io::Result<()> {
        self.packets.push((direction, *record));
        Ok(())
    }

    fn link_events(
        &mut self,
        _direction: LinkDirection,
        _stage: usize,
        events: &[LinkEvent],
    ) -> io::Result<()> {
        self.link_events += events.len();
        Ok(())
    }
}
