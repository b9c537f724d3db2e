//! Reading one run's packet logs into Polars frames, from any of the sources a researcher has:
//!
//! 1. our binary tunnel logs (`*.ptlog`, below);
//! 2. Pantheon's merged `<scheme>_datalink_run<N>.log` (its public archive keeps these), read
//!    with [`crate::text::parse_link_log`]; its delays are already clock-corrected;
//! 3. Mahimahi's `<scheme>_mm_datalink_run<N>.log` alone (Pantheon's `-f 0` runs, flow 0).
//!
//! Whatever the source, a link log `<scheme>_mm_datalink_run<N>.log` beside it gives the link's
//! capacity (its `#` lines). Pantheon's raw tunnel text logs (one pair per flow) are read by
//! [`from_tunnel_text`], with clock offsets applied as `merge_tunnel_logs.py` applies them.
//!
//! A run with *k* flows has, per flow, four binary logs named as Pantheon names its text logs:
//! `<scheme>_datalink_run<N>_flow<i>.egress.ptlog` (the sender side's egress: packets entering
//! the path), `…_datalink_run<N>_flow<i>.ingress.ptlog` (the receiver side's ingress: packets
//! leaving it) and the two `acklink` logs of the reverse direction. Timestamps of all logs of a
//! run are put on one axis: ms since the earliest log base, each log shifted by its own base
//! time and by its measured clock offset, as Pantheon's `merge_tunnel_logs.py` does.

use std::path::{Path, PathBuf};

use polars::prelude::*;
use tunnel::log::read_log_with;

use crate::text::{LinkTextLog, TunnelTextLog};

/// Errors of ingest.
#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    /// A log could not be read at all.
    #[error(transparent)]
    Log(#[from] tunnel::log::ReadError),
    /// No datalink logs for this scheme and run.
    #[error("no datalink logs for {scheme} run {run} in {dir}")]
    Missing {
        /// Scheme name.
        scheme: String,
        /// Run id.
        run: u32,
        /// Results directory.
        dir: String,
    },
    /// Frame construction failed.
    #[error("polars: {0}")]
    Polars(#[from] PolarsError),
    /// A text log could not be read.
    #[error("{file}: {message}")]
    Io {
        /// The file.
        file: String,
        /// The OS error.
        message: String,
    },
    /// A text log's header is unusable.
    #[error(transparent)]
    Text(#[from] crate::text::TextLogError),
}

/// File name of one log: `<scheme>_<direction>_run<N>_flow<i>.<kind>.ptlog`.
pub fn log_name(scheme: &str, direction: &str, run: u32, flow: u16, kind: &str) -> String {
    format!("{scheme}_{direction}_run{run}_flow{flow}.{kind}.ptlog")
}

/// Datalink packets of one run: arrivals into the path and departures from it.
#[derive(Debug, Clone)]
pub struct RunFrames {
    /// Columns `flow` (u32), `t_ms` (f64, ms since `init_ms`), `size` (u64, bytes).
    pub arrivals: DataFrame,
    /// Columns `flow`, `t_ms`, `size` and `delay` (f64, one-way delay in ms; null for a packet
    /// whose sending was not logged), for packets received at the far end.
    pub departures: DataFrame,
    /// The link's delivery opportunities, columns `t_ms` and `size` (bytes a packet of the
    /// opportunity carries: 1500), when a link log exists.
    pub opportunities: Option<DataFrame>,
    /// The link's queue over time, columns `t_ms`, `packets` and `bytes` (one sample per
    /// millisecond with events: [`crate::text::QueueSamples`]), when a link log exists.
    pub queue: Option<DataFrame>,
    /// The run's common time origin: ms since the Unix epoch (Pantheon's "init timestamp").
    pub init_ms: f64,
    /// Problems worth showing that leave the numbers standing (unmatched packets, duplicate
    /// UIDs dropped…), never hidden.
    pub warnings: Vec<String>,
    /// Why the numbers of these logs cannot be believed: a log missing or truncated, logs
    /// whose headers say they are not a sent/received pair, nothing logged as sent. A run with
    /// problems is reported invalid and not counted.
    pub problems: Vec<String>,
    /// Whether the logs' clocks were corrected.
    pub clock_offsets: ClockOffsets,
}

impl RunFrames {
    /// The run's metrics ([`crate::metrics::run_stats`] of these frames).
    pub fn stats(&self) -> polars::prelude::PolarsResult<crate::metrics::RunStats> {
        crate::metrics::run_stats(
            &self.arrivals,
            &self.departures,
            self.opportunities.as_ref(),
        )
    }

    /// When flow `flow`'s first packet entered the path and its last packet of at least
    /// `min_size` bytes left it, ms since the Unix epoch: a transfer that is its own flow
    /// seen from the tunnel (`min_size` leaves out the bare ACKs and FIN that follow the
    /// data). `None` if the flow has no such packets.
    pub fn flow_span(&self, flow: u32, min_size: u64) -> PolarsResult<Option<(f64, f64)>> {
        let packets = |df: &DataFrame| -> PolarsResult<Vec<(f64, u64)>> {
            let (f, t, s) = (
                df.column("flow")?.u32()?,
                df.column("t_ms")?.f64()?,
                df.column("size")?.u64()?,
            );
            Ok(f.iter()
                .zip(t.iter())
                .zip(s.iter())
                .filter_map(|((f, t), s)| (f? == flow).then_some((t?, s?)))
                .collect())
        };
        let first = packets(&self.arrivals)?
            .into_iter()
            .map(|(t, _)| t)
            .min_by(f64::total_cmp);
        let last = packets(&self.departures)?
            .into_iter()
            .filter(|&(_, s)| s >= min_size)
            .map(|(t, _)| t)
            .max_by(f64::total_cmp);
        Ok(first
            .zip(last)
            .map(|(a, b)| (a + self.init_ms, b + self.init_ms)))
    }

    /// Packets (arrivals and departures) logged later than `end_ms`, ms since `init_ms`: a
    /// run logs nothing once it has ended, so these say that a clock or a log is wrong.
    pub fn packets_after(&self, end_ms: f64) -> PolarsResult<u64> {
        let mut n = 0;
        for df in [&self.arrivals, &self.departures] {
            let t = df.column("t_ms")?.f64()?;
            n += t.iter().flatten().filter(|&t| t > end_ms).count() as u64;
        }
        Ok(n)
    }

    /// (bytes that left the path, bytes its emulated link could carry: its opportunities, 1500
    /// bytes each), when a link log gave the opportunities. No run delivers more than its
    /// link offered: more says that the logs are wrong.
    pub fn delivered_and_offered(&self) -> PolarsResult<Option<(u64, u64)>> {
        let Some(opportunities) = &self.opportunities else {
            return Ok(None);
        };
        let bytes = |df: &DataFrame| -> PolarsResult<u64> {
            Ok(df.column("size")?.u64()?.sum().unwrap_or(0))
        };
        Ok(Some((bytes(&self.departures)?, bytes(opportunities)?)))
    }
}

/// Clock correction of a run's logs: one-way delays between two machines are only right when
/// each log's clock offset (NTP) was measured and applied.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum ClockOffsets {
    /// No log carries an offset (a local run: one clock, none needed).
    #[default]
    None,
    /// Every log's offset was applied.
    Applied,
    /// Some logs lack an offset (named here): their delays are uncorrected.
    Missing(Vec<String>),
}

/// The problem of a log that stops before its end (`why`: where and why reading stopped).
fn truncated(why: &str) -> String {
    format!("truncated log: {why}")
}

/// Finds the datalink (egress, ingress) log pairs of `scheme` run `run` in `dir`, by flow.
pub fn find_datalink_logs(dir: &Path, scheme: &str, run: u32) -> Vec<(u16, PathBuf, PathBuf)> {
    let mut out = Vec::new();
    for flow in 1..=u16::MAX {
        let egress = dir.join(log_name(scheme, "datalink", run, flow, "egress"));
        let ingress = dir.join(log_name(scheme, "datalink", run, flow, "ingress"));
        if !egress.exists() && !ingress.exists() {
            break;
        }
        out.push((flow, egress, ingress));
    }
    out
}

/// Name of Pantheon's merged datalink log of a run: `<scheme>_datalink_run<N>.log`.
pub fn merged_log_name(scheme: &str, run: u32) -> String {
    format!("{scheme}_datalink_run{run}.log")
}

/// Name of the mm-link uplink log of a run: `<scheme>_mm_datalink_run<N>.log`.
pub fn link_log_name(scheme: &str, run: u32) -> String {
    format!("{scheme}_mm_datalink_run{run}.log")
}

/// A link log, streamed ([`crate::text::read_link_log`]).
fn read_link(path: &Path) -> Result<LinkTextLog, IngestError> {
    crate::text::read_link_log(path).map_err(|e| IngestError::Io {
        file: path.display().to_string(),
        message: e.to_string(),
    })
}

fn read_file(path: &Path) -> Result<Vec<u8>, IngestError> {
    std::fs::read(path).map_err(|e| IngestError::Io {
        file: path.display().to_string(),
        message: e.to_string(),
    })
}

/// Pantheon's raw tunnel logs of one run, per flow: `<scheme>_datalink_run<N>_flow<i>_uid<uuid>
/// .log.egress` (sender side) and `….log.ingress` (receiver side), as its `tmp/` keeps them.
pub fn find_tunnel_text_logs(dir: &Path, scheme: &str, run: u32) -> Vec<(u32, PathBuf, PathBuf)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let names: Vec<String> = entries
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    let mut out = Vec::new();
    for flow in 1u32.. {
        let prefix = format!("{scheme}_datalink_run{run}_flow{flow}_");
        let find = |suffix: &str| {
            names
                .iter()
                .find(|n| n.starts_with(&prefix) && n.ends_with(suffix))
                .map(|n| dir.join(n))
        };
        match (find(".log.egress"), find(".log.ingress")) {
            (Some(e), Some(i)) => out.push((flow, e, i)),
            _ => break,
        }
    }
    out
}

/// The clock offsets Pantheon recorded for a run, in ms: (datalink egress log's, datalink
/// ingress log's), from `Local clock offset: X ms` / `Remote clock offset: Y ms` in
/// `<scheme>_stats_run<N>.log` and `sender_side` in `pantheon_metadata.json` (sender remote →
/// egress gets the remote offset, ingress the local one; and the other way round), applied only
/// when both were measured, as Pantheon's `process_tunnel_logs`. `None` without both.
pub fn pantheon_clock_offsets(dir: &Path, scheme: &str, run: u32) -> Option<(f64, f64)> {
    let stats = std::fs::read_to_string(dir.join(format!("{scheme}_stats_run{run}.log"))).ok()?;
    let offset = |key: &str| {
        stats.lines().find_map(|l| {
            l.trim()
                .strip_prefix(key)?
                .trim()
                .strip_suffix("ms")?
                .trim()
                .parse::<f64>()
                .ok()
        })
    };
    let (local, remote) = (
        offset("Local clock offset:")?,
        offset("Remote clock offset:")?,
    );
    let meta = crate::results::Metadata::read(dir).ok()?;
    Some(if meta.sender() == crate::results::Node::Local {
        (local, remote)
    } else {
        (remote, local)
    })
}

/// Reads the datalink packets of `scheme` run `run` in `dir` from the first source present:
/// our binary logs, Pantheon's merged datalink log, Pantheon's raw tunnel logs (with the clock
/// offsets of [`pantheon_clock_offsets`]), or the mm-link log alone (flow 0); and the link's
/// capacity from the mm-link log when there is one.
pub fn read_run(dir: &Path, scheme: &str, run: u32) -> Result<RunFrames, IngestError> {
    let link_log = dir.join(link_log_name(scheme, run));
    let merged = dir.join(merged_log_name(scheme, run));
    let pairs = find_datalink_logs(dir, scheme, run);
    let raw = find_tunnel_text_logs(dir, scheme, run);
    let mut frames = if !pairs.is_empty() {
        read_binary_run(&pairs)?
    } else if merged.exists() {
        let log = read_link(&merged)?;
        let mut frames = from_link_text(log)?;
        // Pantheon's merge applied the offsets its stats log records.
        if pantheon_clock_offsets(dir, scheme, run).is_some() {
            frames.clock_offsets = ClockOffsets::Applied;
        }
        frames
    } else if !raw.is_empty() {
        let offsets = pantheon_clock_offsets(dir, scheme, run);
        let mut logs = Vec::new();
        for (flow, e, i) in &raw {
            let parse = |p: &PathBuf| -> Result<TunnelTextLog, IngestError> {
                Ok(crate::text::parse_tunnel_log(
                    &read_file(p)?,
                    &p.display().to_string(),
                )?)
            };
            logs.push((*flow, parse(e)?, parse(i)?));
        }
        let (eo, io) = offsets.unwrap_or((0.0, 0.0));
        let flows: Vec<_> = logs.iter().map(|(f, e, i)| (*f, e, eo, i, io)).collect();
        let mut frames = from_tunnel_text(&flows)?;
        if offsets.is_none() {
            frames.clock_offsets = ClockOffsets::Missing(vec![format!(
                "{}_stats_run{run}.log has no local and remote clock offsets",
                scheme
            )]);
        }
        frames
    } else if link_log.exists() {
        from_link_text(read_link(&link_log)?)?
    } else {
        return Err(IngestError::Missing {
            scheme: scheme.into(),
            run,
            dir: dir.display().to_string(),
        });
    };
    if frames.opportunities.is_none() && link_log.exists() {
        let log = read_link(&link_log)?;
        if let Some(why) = &log.stopped {
            frames.problems.push(truncated(why));
        }
        frames.opportunities = opportunities_frame(&log)?;
        frames.queue = queue_frame(&log)?;
    }
    Ok(frames)
}

/// Frames of a merged Pantheon datalink log or of an mm-link log. Opportunities count 1500
/// bytes each, as Pantheon's merge writes them (Mahimahi's 1504 less its 4-byte header).
/// The log's columns move into the frames (no copy).
pub fn from_link_text(log: LinkTextLog) -> Result<RunFrames, IngestError> {
    let (opportunities, queue) = (opportunities_frame(&log)?, queue_frame(&log)?);
    let problems: Vec<String> = log.stopped.iter().map(|s| truncated(s)).collect();
    let mut warnings = Vec::new();
    if log.init_ms.is_none() {
        warnings.push("no `# init timestamp:` line: times are relative only".into());
    }
    let (e, d) = (log.arrivals, log.departures);
    Ok(RunFrames {
        arrivals: df!("flow" => e.flow, "t_ms" => e.t_ms, "size" => e.size)?,
        departures: df!(
            "flow" => d.flow, "t_ms" => d.t_ms, "size" => d.size, "delay" => log.delay_ms
        )?,
        opportunities,
        queue,
        init_ms: log.init_ms.unwrap_or(0.0),
        warnings,
        problems,
        // Pantheon's merge already applied the offsets it had.
        clock_offsets: ClockOffsets::None,
    })
}

fn queue_frame(log: &LinkTextLog) -> PolarsResult<Option<DataFrame>> {
    let q = &log.queue;
    if q.t_ms.is_empty() {
        return Ok(None);
    }
    Ok(Some(
        df!("t_ms" => &q.t_ms, "packets" => &q.packets, "bytes" => &q.bytes)?,
    ))
}

fn opportunities_frame(log: &LinkTextLog) -> PolarsResult<Option<DataFrame>> {
    let o = &log.opportunities;
    if o.is_empty() {
        return Ok(None);
    }
    let size: Vec<u64> = o
        .size
        .iter()
        .map(|&s| if s == 1504 { 1500 } else { s })
        .collect();
    Ok(Some(df!("t_ms" => &o.t_ms, "size" => size)?))
}

/// Frames of one run from Pantheon's raw tunnel text logs: per flow the sender's egress log,
/// the receiver's ingress log and their clock offsets in ms (`merge_tunnel_logs.py single
/// -e-clock-offset -i-clock-offset`: each added to its log's initial timestamp).
pub fn from_tunnel_text(
    flows: &[(u32, &TunnelTextLog, f64, &TunnelTextLog, f64)],
) -> Result<RunFrames, IngestError> {
    let base = |l: &TunnelTextLog, off: f64| l.init_ms + off;
    let init_ms = flows
        .iter()
        .flat_map(|&(_, e, eo, i, io)| [base(e, eo), base(i, io)])
        .fold(f64::INFINITY, f64::min);
    let mut problems = Vec::new();
    for &(flow, egress, _, ingress, _) in flows {
        use crate::text::TunnelSide;
        for (log, want) in [(egress, TunnelSide::Egress), (ingress, TunnelSide::Ingress)] {
            if log.side.is_some_and(|s| s != want) {
                let (is, says) = match want {
                    TunnelSide::Egress => ("egress", "ingress"),
                    TunnelSide::Ingress => ("ingress", "egress"),
                };
                problems.push(format!(
                    "flow {flow}: the {is} log's header says {says} (swapped or mismatched logs)"
                ));
            }
        }
        problems.extend(
            egress
                .stopped
                .iter()
                .chain(&ingress.stopped)
                .map(|s| truncated(s)),
        );
    }
    let shift = |l: &TunnelTextLog, off: f64| base(l, off) - init_ms;
    let total = |pick: fn(&(u32, &TunnelTextLog, f64, &TunnelTextLog, f64)) -> usize| {
        flows.iter().map(pick).sum::<usize>()
    };
    let mut m = Matcher::with_capacity(total(|f| f.1.uid.len()), total(|f| f.3.uid.len()));
    for &(flow, egress, e_off, _, _) in flows {
        let s = shift(egress, e_off);
        for k in 0..egress.uid.len() {
            m.arrival(
                flow,
                s + egress.t_ms[k],
                egress.size[k],
                egress.uid[k],
                NO_ECN,
            );
        }
        m.end_flow();
    }
    for &(flow, _, _, ingress, i_off) in flows {
        let s = shift(ingress, i_off);
        for k in 0..ingress.uid.len() {
            m.departure(
                flow,
                s + ingress.t_ms[k],
                ingress.size[k],
                ingress.uid[k],
                NO_ECN,
            );
        }
    }
    let applied = flows.iter().any(|f| f.2 != 0.0 || f.4 != 0.0);
    let offsets = if applied {
        ClockOffsets::Applied
    } else {
        ClockOffsets::None
    };
    m.finish(init_ms, problems, offsets)
}

/// The packets of one run matched on (flow, UID), as `merge_tunnel_logs.py` matches them:
/// every flow's arrivals first ([`Matcher::arrival`], then [`Matcher::end_flow`] after each
/// flow's log), then the departures, each given its one-way delay (departure − arrival time)
/// through a per-flow UID index; a departure never logged as sent gets no delay. Used for our
/// binary logs and for Pantheon's tunnel text logs alike.
struct Matcher {
    a_flow: Vec<u32>,
    a_t: Vec<f64>,
    a_size: Vec<u64>,
    /// UIDs of the arrivals added since the last `end_flow`, and where they start.
    pending: Vec<u64>,
    pending_base: usize,
    /// Per flow (a run has a few: a short list is cheaper per packet than a hash map).
    index: Vec<(u32, UidIndex)>,
    d_flow: Vec<u32>,
    d_t: Vec<f64>,
    d_size: Vec<u64>,
    /// NaN when unknown (turned into nulls at the end).
    d_delay: Vec<f64>,
    unmatched: usize,
    /// Positions of arrivals that repeat a UID of their flow (dropped at the end).
    repeated_arrivals: Vec<usize>,
    /// Departures that repeat a UID already matched (dropped).
    repeated_departures: usize,
    /// ECN codepoint bits of each arrival and departure as logged, [`NO_ECN`] when not
    /// recorded; and each departure's codepoint when it was sent.
    a_ecn: Vec<u8>,
    d_ecn: Vec<u8>,
    d_sent_ecn: Vec<u8>,
    /// Whether any record carried its ECN codepoint (version-2 logs): only then do the frames
    /// get their `ecn` columns.
    any_ecn: bool,
}

/// [`Matcher`]'s mark for a packet whose ECN codepoint was not recorded.
const NO_ECN: u8 = u8::MAX;

/// The codepoint's two bits, or [`NO_ECN`].
fn ecn_bits(ecn: Option<tunnel::ecn::Codepoint>) -> u8 {
    ecn.map_or(NO_ECN, |c| c.bits())
}

/// A column of codepoint bits (UInt32: the narrowest integer type of our Polars build), null
/// where [`NO_ECN`].
fn ecn_column(name: &str, bits: Vec<u8>) -> Column {
    UInt32Chunked::from_iter_options(
        name.into(),
        bits.into_iter()
            .map(|b| (b != NO_ECN).then_some(u32::from(b))),
    )
    .into_column()
}

impl Matcher {
    /// Columns sized for this many arrivals and departures (no growth by doubling).
    fn with_capacity(arrivals: usize, departures: usize) -> Matcher {
        Matcher {
            a_flow: Vec::with_capacity(arrivals),
            a_t: Vec::with_capacity(arrivals),
            a_size: Vec::with_capacity(arrivals),
            pending: Vec::new(),
            pending_base: 0,
            index: Vec::new(),
            d_flow: Vec::with_capacity(departures),
            d_t: Vec::with_capacity(departures),
            d_size: Vec::with_capacity(departures),
            d_delay: Vec::with_capacity(departures),
            unmatched: 0,
            repeated_arrivals: Vec::new(),
            repeated_departures: 0,
            a_ecn: Vec::with_capacity(arrivals),
            d_ecn: Vec::with_capacity(departures),
            d_sent_ecn: Vec::with_capacity(departures),
            any_ecn: false,
        }
    }

    /// A packet that entered the path at `t` ms with ECN bits `ecn` ([`NO_ECN`]: unknown).
    fn arrival(&mut self, flow: u32, t: f64, size: u64, uid: u64, ecn: u8) {
        self.a_flow.push(flow);
        self.a_t.push(t);
        self.a_size.push(size);
        self.a_ecn.push(ecn);
        self.any_ecn |= ecn != NO_ECN;
        self.pending.push(uid);
    }

    /// Indexes the arrivals added since the last call: one flow's log.
    fn end_flow(&mut self) {
        let uids = std::mem::take(&mut self.pending);
        if let Some(&flow) = self.a_flow.get(self.pending_base) {
            self.index.retain(|(f, _)| *f != flow);
            let index = UidIndex::new(&uids, self.pending_base, &mut self.repeated_arrivals);
            self.index.push((flow, index));
        }
        self.pending_base = self.a_t.len();
    }

    /// A packet that left the path at `t` ms with ECN bits `ecn`. A UID whose arrival was
    /// already matched is a repeat: dropped and counted.
    fn departure(&mut self, flow: u32, t: f64, size: u64, uid: u64, ecn: u8) {
        let sent = match self.index.iter_mut().find(|(f, _)| *f == flow) {
            Some((_, index)) => match index.take(uid) {
                Lookup::Sent(i) => Some(i),
                Lookup::Repeat => {
                    self.repeated_departures += 1;
                    return;
                }
                Lookup::Unknown => None,
            },
            None => None,
        };
        self.d_flow.push(flow);
        self.d_t.push(t);
        self.d_size.push(size);
        self.d_delay
            .push(sent.map_or(f64::NAN, |i| t - self.a_t[i]));
        self.d_ecn.push(ecn);
        self.d_sent_ecn.push(sent.map_or(NO_ECN, |i| self.a_ecn[i]));
        self.any_ecn |= ecn != NO_ECN;
        self.unmatched += usize::from(sent.is_none());
    }

    /// The frames; the index is dropped before they are built.
    fn finish(
        mut self,
        init_ms: f64,
        problems: Vec<String>,
        clock_offsets: ClockOffsets,
    ) -> Result<RunFrames, IngestError> {
        drop(std::mem::take(&mut self.index));
        let mut warnings = Vec::new();
        let repeats = self.repeated_arrivals.len() + self.repeated_departures;
        if repeats > 0 {
            warnings.push(tunnel::log::duplicates_warning(repeats as u64));
            self.drop_repeated_arrivals();
        }
        if self.unmatched > 0 {
            warnings.push(format!(
                "{} received packets were never logged as sent (no one-way delay)",
                self.unmatched
            ));
        }
        let delay = Float64Chunked::from_iter_options(
            "delay".into(),
            self.d_delay.into_iter().map(|d| (!d.is_nan()).then_some(d)),
        );
        let mut arrivals = vec![
            Column::new("flow".into(), self.a_flow),
            Column::new("t_ms".into(), self.a_t),
            Column::new("size".into(), self.a_size),
        ];
        let mut departures = vec![
            Column::new("flow".into(), self.d_flow),
            Column::new("t_ms".into(), self.d_t),
            Column::new("size".into(), self.d_size),
            delay.into_column(),
        ];
        if self.any_ecn {
            arrivals.push(ecn_column("ecn", self.a_ecn));
            departures.push(ecn_column("ecn", self.d_ecn));
            departures.push(ecn_column("sent_ecn", self.d_sent_ecn));
        }
        Ok(RunFrames {
            arrivals: DataFrame::new_infer_height(arrivals)?,
            departures: DataFrame::new_infer_height(departures)?,
            opportunities: None,
            queue: None,
            init_ms,
            warnings,
            problems,
            clock_offsets,
        })
    }

    /// Removes the arrivals that repeat a UID (the first of each stays).
    fn drop_repeated_arrivals(&mut self) {
        let mut drop = std::mem::take(&mut self.repeated_arrivals);
        drop.sort_unstable();
        fn retain_others<T>(v: &mut Vec<T>, drop: &[usize]) {
            let mut k = 0;
            v.retain(|_| {
                k += 1;
                drop.binary_search(&(k - 1)).is_err()
            });
        }
        retain_others(&mut self.a_flow, &drop);
        retain_others(&mut self.a_t, &drop);
        retain_others(&mut self.a_size, &drop);
        retain_others(&mut self.a_ecn, &drop);
    }
}

/// What a departure's UID is to its flow's index.
enum Lookup {
    /// Sent: the arrival's position, now matched.
    Sent(usize),
    /// Sent, and matched to an earlier departure already.
    Repeat,
    /// Never logged as sent.
    Unknown,
}

/// Where each sent packet's arrival time is, by UID, for one flow: a dense table when the
/// flow's UIDs are nearly consecutive (our tunnel numbers them), a hash map otherwise.
enum UidIndex {
    Dense { first: u64, slots: Vec<u32> },
    Sparse(std::collections::HashMap<u64, u32>),
}

impl UidIndex {
    /// Slot of a UID whose arrival was matched already.
    const MATCHED: u32 = u32::MAX - 1;

    /// Indexes `uids` (positions `base..` in the arrival columns). A UID given again keeps its
    /// first position; the repeats' positions are added to `repeats`.
    fn new(uids: &[u64], base: usize, repeats: &mut Vec<usize>) -> UidIndex {
        let (lo, hi) = uids
            .iter()
            .fold((u64::MAX, 0), |(lo, hi), &u| (lo.min(u), hi.max(u)));
        let range = hi.saturating_sub(lo).saturating_add(1);
        if !uids.is_empty() && range <= 2 * uids.len() as u64 + 1024 {
            let mut slots = vec![u32::MAX; range as usize];
            for (i, &u) in uids.iter().enumerate() {
                let slot = &mut slots[(u - lo) as usize];
                if *slot == u32::MAX {
                    *slot = (base + i) as u32;
                } else {
                    repeats.push(base + i);
                }
            }
            UidIndex::Dense { first: lo, slots }
        } else {
            let mut m = std::collections::HashMap::with_capacity(uids.len());
            for (i, &u) in uids.iter().enumerate() {
                match m.entry(u) {
                    std::collections::hash_map::Entry::Vacant(v) => {
                        v.insert((base + i) as u32);
                    }
                    std::collections::hash_map::Entry::Occupied(_) => repeats.push(base + i),
                }
            }
            UidIndex::Sparse(m)
        }
    }

    /// Looks `uid` up and marks it matched.
    fn take(&mut self, uid: u64) -> Lookup {
        let slot = match self {
            UidIndex::Dense { first, slots } => uid
                .checked_sub(*first)
                .and_then(|k| slots.get_mut(k as usize))
                .filter(|i| **i != u32::MAX),
            UidIndex::Sparse(m) => m.get_mut(&uid),
        };
        match slot {
            None => Lookup::Unknown,
            Some(i) if *i == Self::MATCHED => Lookup::Repeat,
            Some(i) => Lookup::Sent(std::mem::replace(i, Self::MATCHED) as usize),
        }
    }
}

/// Reads our binary datalink logs (egress, ingress per flow), streaming: records go straight
/// into columns, each departure is matched to its arrival through a per-flow UID index, and
/// neither a whole file nor a record list is held. Peak memory ≈ 20 bytes per arrival + 28 per
/// departure + the index (4–8 bytes per arrival), against 48 bytes of logs per delivered packet;
/// logs that record ECN codepoints (version 2) add 1 byte per arrival and 2 per departure while
/// matching, and their UInt32 `ecn` columns (4 per arrival, 8 per departure) once built.
fn read_binary_run(pairs: &[(u16, PathBuf, PathBuf)]) -> Result<RunFrames, IngestError> {
    let mut problems = Vec::new();
    // Headers first: every log's base time and clock offset set the common origin.
    let mut logs = Vec::new();
    for (flow, egress, ingress) in pairs {
        let mut headers = Vec::new();
        for (path, is_arrival) in [(egress, true), (ingress, false)] {
            if !path.exists() {
                problems.push(format!("flow {flow}: {} is missing", path.display()));
                continue;
            }
            let header = tunnel::log::read_header(path)?;
            headers.push(header);
            // Records in the file, to size the columns once.
            let records = std::fs::metadata(path).map_or(0, |m| {
                (m.len() as usize).saturating_sub(tunnel::log::HEADER_LEN) / tunnel::log::RECORD_LEN
            });
            if is_arrival && records == 0 {
                problems.push(format!(
                    "flow {flow}: nothing logged as sent in {}",
                    path.display()
                ));
            }
            logs.push((path, is_arrival, header, records));
        }
        if let [e, i] = headers[..] {
            problems.extend(
                tunnel::log::pair_problems(&e, &i)
                    .into_iter()
                    .map(|p| format!("flow {flow}: {p}")),
            );
        }
    }
    let without: Vec<String> = logs
        .iter()
        .filter(|l| l.2.clock_offset_ns.is_none())
        .map(|l| l.0.display().to_string())
        .collect();
    let clock_offsets = if without.is_empty() {
        ClockOffsets::Applied
    } else if without.len() == logs.len() {
        ClockOffsets::None
    } else {
        ClockOffsets::Missing(without)
    };
    let corrected = |h: &tunnel::log::Header| h.base_realtime_ns + h.clock_offset_ns.unwrap_or(0);
    let min_base = logs.iter().map(|l| corrected(&l.2)).min().unwrap_or(0);
    let count =
        |arrival: bool| -> usize { logs.iter().filter(|l| l.1 == arrival).map(|l| l.3).sum() };
    let mut m = Matcher::with_capacity(count(true), count(false));
    // Arrivals (egress logs) first, so that every departure finds its flow's index.
    for arrivals in [true, false] {
        for (path, _, header, _) in logs.iter().filter(|l| l.1 == arrivals) {
            let shift = (corrected(header) - min_base) as f64 / 1e6;
            // A drifting clock (offsets measured before and after a remote run): the offset
            // grows by `drift` ns per second of the log.
            let scale = 1.0 + header.clock_drift_ppb as f64 * 1e-9;
            let mut n = 0;
            let (_, stop) = read_log_with(path, |r| {
                let t = shift + r.t_ns as f64 / 1e6 * scale;
                let (flow, size, ecn) = (u32::from(r.flow), u64::from(r.size), ecn_bits(r.ecn));
                if arrivals {
                    m.arrival(flow, t, size, r.uid, ecn);
                } else {
                    m.departure(flow, t, size, r.uid, ecn);
                }
                n += 1;
            })?;
            if arrivals {
                m.end_flow();
            }
            if let Some(stop) = stop {
                problems.push(truncated(&format!(
                    "{}: read {n} records, stopped at {stop}",
                    path.display()
                )));
            }
        }
    }
    m.finish(min_base as f64 / 1e6, problems, clock_offsets)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::run_stats;
    use crate::text::parse_tunnel_log;

    fn fixture(name: &str) -> Vec<u8> {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/logs/");
        std::fs::read(format!("{dir}{name}")).unwrap()
    }

    use tunnel::ecn::Codepoint;
    use tunnel::log::{Direction, Header, Kind, Role};

    /// The header of a flow-1 datalink log written by `role`.
    fn header(role: Role, kind: Kind) -> Header {
        Header {
            role,
            kind,
            flow: 1,
            direction: Direction::Datalink,
            base_realtime_ns: 1_795_000_000_000_000_000,
            clock_offset_ns: None,
            clock_drift_ppb: 0,
        }
    }

    /// Writes cubic run `run`'s flow-1 datalink logs into `dir` with the given headers:
    /// `sent` and `received` are (time ns, UID) records of 1500 bytes. Returns their paths.
    fn write_pair(
        dir: &Path,
        run: u32,
        headers: (Header, Header),
        sent: &[(u64, u64)],
        received: &[(u64, u64)],
    ) -> (PathBuf, PathBuf) {
        let no_ecn = |r: &[(u64, u64)]| r.iter().map(|&(t, u)| (t, u, None)).collect::<Vec<_>>();
        write_pair_ecn(dir, run, headers, &no_ecn(sent), &no_ecn(received))
    }

    /// [`write_pair`] with each record's ECN codepoint: (time ns, UID, codepoint).
    fn write_pair_ecn(
        dir: &Path,
        run: u32,
        headers: (Header, Header),
        sent: &[(u64, u64, Option<Codepoint>)],
        received: &[(u64, u64, Option<Codepoint>)],
    ) -> (PathBuf, PathBuf) {
        use tunnel::log::{LogFormat, LogWriter, Record};
        let mut paths = Vec::new();
        for (kind, header, records) in [
            ("egress", headers.0, sent),
            ("ingress", headers.1, received),
        ] {
            let path = dir.join(log_name("cubic", "datalink", run, 1, kind));
            let mut w = LogWriter::create(&path, &header, &LogFormat::Binary).unwrap();
            for &(t_ns, uid, ecn) in records {
                let r = Record {
                    t_ns,
                    uid,
                    size: 1500,
                    flow: 1,
                    kind: header.kind,
                    ecn,
                };
                w.push(&r).unwrap();
            }
            w.flush().unwrap();
            paths.push(path);
        }
        (paths[0].clone(), paths[1].clone())
    }

    fn pair_headers() -> (Header, Header) {
        (
            header(Role::Client, Kind::Egress),
            header(Role::Server, Kind::Ingress),
        )
    }

    #[test]
    fn analyze_and_tunnel_check_give_the_same_p95_on_one_log() {
        let dir = std::env::temp_dir().join(format!("p95-agree-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // 13 packets with one-way delays 1..13 ms: Pantheon's index round(0.95·12) = 11 gives
        // 12 ms, the nearest rank ceil(0.95·13) gives 13 ms, so a second definition shows.
        let sent: Vec<(u64, u64)> = (0..13).map(|i| (i * 10_000_000, i)).collect();
        let received: Vec<(u64, u64)> = (0..13)
            .map(|i| (i * 10_000_000 + (i + 1) * 1_000_000, i))
            .collect();
        let (egress_path, ingress_path) = write_pair(&dir, 1, pair_headers(), &sent, &received);
        let analyzed = read_run(&dir, "cubic", 1).unwrap().stats().unwrap();
        let checked = tunnel::log::check_pair(
            &tunnel::log::read_log(&egress_path).unwrap(),
            &tunnel::log::read_log(&ingress_path).unwrap(),
        );
        std::fs::remove_dir_all(&dir).unwrap();
        let p95 = analyzed.total.p95_delay_ms.unwrap();
        assert!((p95 - 12.0).abs() < 1e-6, "{p95}");
        assert!((checked.p95_delay_ms - p95).abs() < 1e-6, "{checked:?}");
    }

    #[test]
    fn ecn_codepoints_are_counted_as_sent_and_delivered_with_bleaching() {
        let dir = std::env::temp_dir().join(format!("ingest-ecn-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // 10 packets sent ECT(0); uid 9 lost; uids 2 and 5 marked CE on the path, uid 7
        // delivered Not-ECT (bleached).
        let sent: Vec<_> = (0..10)
            .map(|i| (i * 1_000_000, i, Some(Codepoint::Ect0)))
            .collect();
        let received: Vec<_> = (0..9)
            .map(|i| {
                let cp = match i {
                    2 | 5 => Codepoint::Ce,
                    7 => Codepoint::NotEct,
                    _ => Codepoint::Ect0,
                };
                (i * 1_000_000 + 5_000_000, i, Some(cp))
            })
            .collect();
        write_pair_ecn(&dir, 1, pair_headers(), &sent, &received);
        let frames = read_run(&dir, "cubic", 1).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        let ecn = frames.stats().unwrap().flows[&1].ecn.unwrap();
        assert_eq!((ecn.sent.ect0, ecn.sent.ecn_capable()), (10, 10));
        let d = ecn.delivered;
        assert_eq!((d.not_ect, d.ect0, d.ect1, d.ce), (1, 6, 0, 2));
        assert_eq!(d.ce_fraction(), Some(0.25));
        assert_eq!(ecn.bleached, 1);
        // Logs without the field give no counts (and no columns).
        let dir = std::env::temp_dir().join(format!("ingest-no-ecn-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        write_pair(&dir, 1, pair_headers(), &[(0, 0)], &[(1_000_000, 0)]);
        let frames = read_run(&dir, "cubic", 1).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(frames.departures.column("ecn").is_err());
        assert_eq!(frames.stats().unwrap().flows[&1].ecn, None);
    }

    #[test]
    fn logs_are_checked_before_they_are_believed() {
        let dir = std::env::temp_dir().join(format!("ingest-checks-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // 100 packets 1 ms apart, each 5 ms in the path, uid 7 lost.
        let sent: Vec<(u64, u64)> = (0..100).map(|i| (i * 1_000_000, i)).collect();
        let received: Vec<(u64, u64)> = sent
            .iter()
            .filter(|r| r.1 != 7)
            .map(|&(t, u)| (t + 5_000_000, u))
            .collect();
        write_pair(&dir, 1, pair_headers(), &sent, &received);
        let clean = read_run(&dir, "cubic", 1).unwrap();
        assert!(clean.problems.is_empty() && clean.warnings.is_empty());
        // Times: the last departure is at 104 ms.
        assert_eq!(clean.packets_after(200.0).unwrap(), 0);
        assert_eq!(clean.packets_after(102.5).unwrap(), 2);
        assert_eq!(clean.delivered_and_offered().unwrap(), None);
        let want = clean.stats().unwrap().total;
        // Every record logged twice, on either side: the same numbers as the clean logs, a
        // duplicate warning, and `pantheon-tunnel check` counts the repeats the same way.
        let twice =
            |r: &[(u64, u64)]| -> Vec<(u64, u64)> { r.iter().flat_map(|&x| [x, x]).collect() };
        for (run, s, r) in [
            (2, twice(&sent), received.clone()),
            (3, sent.clone(), twice(&received)),
        ] {
            let (e, i) = write_pair(&dir, run, pair_headers(), &s, &r);
            let frames = read_run(&dir, "cubic", run).unwrap();
            assert!(frames.problems.is_empty(), "{:?}", frames.problems);
            let dup = tunnel::log::duplicates_warning(if run == 2 { 100 } else { 99 });
            assert_eq!(frames.warnings, [dup], "run {run}");
            let got = frames.stats().unwrap().total;
            assert_eq!(
                (got.arrived, got.departed, got.tput_mbps, got.loss),
                (want.arrived, want.departed, want.tput_mbps, want.loss),
                "run {run}"
            );
            let checked = tunnel::log::check_pair(
                &tunnel::log::read_log(&e).unwrap(),
                &tunnel::log::read_log(&i).unwrap(),
            );
            assert_eq!(
                (checked.duplicates, checked.lost),
                (if run == 2 { 100 } else { 99 }, 1)
            );
        }
        // Swapped logs (each header says the other kind) and an acklink log paired with a
        // datalink one: problems, so the run is invalid.
        let (e, i) = pair_headers();
        let swapped = (i, e);
        write_pair(&dir, 4, swapped, &received, &sent);
        let p = read_run(&dir, "cubic", 4).unwrap().problems;
        assert!(p.iter().any(|p| p.contains("swapped")), "{p:?}");
        let acklink = Header {
            direction: Direction::Acklink,
            ..i
        };
        write_pair(&dir, 5, (e, acklink), &sent, &received);
        let p = read_run(&dir, "cubic", 5).unwrap().problems;
        assert!(p.iter().any(|p| p.contains("acklink")), "{p:?}");
        // A truncated log and a missing one.
        let (_, ingress) = write_pair(&dir, 6, pair_headers(), &sent, &received);
        let len = std::fs::metadata(&ingress).unwrap().len();
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&ingress)
            .unwrap();
        f.set_len(len - 3).unwrap();
        let p = read_run(&dir, "cubic", 6).unwrap().problems;
        assert!(p.iter().any(|p| p.starts_with("truncated log:")), "{p:?}");
        std::fs::remove_file(&ingress).unwrap();
        let p = read_run(&dir, "cubic", 6).unwrap().problems;
        assert!(p.iter().any(|p| p.contains("is missing")), "{p:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_pantheon_archive_run_reads_from_its_merged_log_with_capacity() {
        let dir = std::env::temp_dir().join(format!("ingest-merged-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // Two flows; opportunities of 1500 B every ms from 0 to 10 ms.
        let mut text = String::from("# init timestamp: 1500000000000.000\n");
        for t in 0..=10 {
            text.push_str(&format!("{t}.000 # 1500\n"));
        }
        text.push_str(
            "0.500 + 1500 1\n0.600 + 1500 2\n1.000 - 1500 0.500 1\n5.000 - 1500 4.400 2\n\
             6.000 + 1500 1\n",
        );
        std::fs::write(dir.join("cubic_datalink_run1.log"), text).unwrap();
        let frames = read_run(&dir, "cubic", 1).unwrap();
        assert_eq!(frames.init_ms, 1500000000000.0);
        assert!(frames.warnings.is_empty(), "{:?}", frames.warnings);
        // Two packets delivered of eleven opportunities; the last departure at 5 ms.
        assert_eq!(
            frames.delivered_and_offered().unwrap(),
            Some((3000, 11 * 1500))
        );
        assert_eq!(frames.packets_after(5.5).unwrap(), 1); // the arrival at 6 ms
        let s = run_stats(
            &frames.arrivals,
            &frames.departures,
            frames.opportunities.as_ref(),
        )
        .unwrap();
        // Pantheon's capacity: all 11 opportunities' bits over first → last (10 ms).
        assert_eq!(s.capacity_mbps, Some(11.0 * 12_000.0 / 10_000.0));
        // Total: 3000 B departed over 1 → 5 ms; p95 of [0.5, 4.4] = 4.4; 1 of 3 packets lost.
        assert!((s.total.tput_mbps - 3000.0 * 8.0 / 4000.0).abs() < 1e-9);
        assert_eq!(s.total.p95_delay_ms, Some(4.4));
        assert!((s.total.loss - 1.0 / 3.0).abs() < 1e-12);
        assert_eq!(s.flows[&1].loss, 0.5);
        assert_eq!(s.flows[&2].p95_delay_ms, Some(4.4));
        // No log at all: an error naming the run.
        let e = read_run(&dir, "bbr", 1).unwrap_err().to_string();
        assert!(e.contains("bbr run 1"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn pantheon_tunnel_text_logs_match_on_uid_across_two_clocks() {
        // The first 2000 packets of a real pantheon-tunnel run: client egress (sender) and
        // server ingress (receiver), whose initial timestamps differ by 116.513 ms.
        let egress = parse_tunnel_log(&fixture("pantheon-tunnel_client_egress.log"), "e").unwrap();
        let ingress =
            parse_tunnel_log(&fixture("pantheon-tunnel_server_ingress.log"), "i").unwrap();
        let frames = from_tunnel_text(&[(1, &egress, 0.0, &ingress, 0.0)]).unwrap();
        assert_eq!(frames.init_ms, 1795311353983.235);
        let s = run_stats(&frames.arrivals, &frames.departures, None).unwrap();
        // Over veth with no emulator the one-way delay is a fraction of a millisecond.
        let (min, p95) = (s.total.min_delay_ms.unwrap(), s.total.p95_delay_ms.unwrap());
        assert!(
            (0.0..1.0).contains(&min) && min <= p95 && p95 < 5.0,
            "{min} {p95}"
        );
        assert_eq!(s.total.negative_delays, 0);
        assert_eq!(s.total.arrived, 2000);
        // A clock offset moves every delay by that much (merge_tunnel_logs.py's -i-clock-offset).
        let shifted = from_tunnel_text(&[(1, &egress, 0.0, &ingress, 10.0)]).unwrap();
        let s2 = run_stats(&shifted.arrivals, &shifted.departures, None).unwrap();
        assert!((s2.total.min_delay_ms.unwrap() - min - 10.0).abs() < 1e-6);
    }

    #[test]
    fn pantheon_raw_tunnel_logs_with_the_stats_logs_clock_offsets() {
        let dir = std::env::temp_dir().join(format!("ingest-raw-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let uid = "uid7f3e";
        std::fs::write(
            dir.join(format!("cubic_datalink_run1_flow1_{uid}.log.egress")),
            fixture("pantheon-tunnel_client_egress.log"),
        )
        .unwrap();
        std::fs::write(
            dir.join(format!("cubic_datalink_run1_flow1_{uid}.log.ingress")),
            fixture("pantheon-tunnel_server_ingress.log"),
        )
        .unwrap();
        // Without recorded offsets: read, flagged as missing.
        let plain = read_run(&dir, "cubic", 1).unwrap();
        assert!(matches!(plain.clock_offsets, ClockOffsets::Missing(_)));
        let min = |f: &RunFrames| {
            run_stats(&f.arrivals, &f.departures, None)
                .unwrap()
                .total
                .min_delay_ms
                .unwrap()
        };
        // Sender remote (Pantheon's local-mode wiring): egress gets the remote offset (+3 ms),
        // ingress the local one (−2 ms) → every delay 5 ms shorter.
        std::fs::write(
            dir.join("pantheon_metadata.json"),
            r#"{"sender_side": "remote"}"#,
        )
        .unwrap();
        std::fs::write(
            dir.join("cubic_stats_run1.log"),
            "Start at: x\nEnd at: y\nLocal clock offset: -2.0 ms\nRemote clock offset: 3.0 ms\n",
        )
        .unwrap();
        assert_eq!(pantheon_clock_offsets(&dir, "cubic", 1), Some((3.0, -2.0)));
        let corrected = read_run(&dir, "cubic", 1).unwrap();
        assert_eq!(corrected.clock_offsets, ClockOffsets::Applied);
        assert!((min(&plain) - min(&corrected) - 5.0).abs() < 1e-6);
        std::fs::write(
            dir.join("pantheon_metadata.json"),
            r#"{"sender_side": "local"}"#,
        )
        .unwrap();
        assert_eq!(pantheon_clock_offsets(&dir, "cubic", 1), Some((-2.0, 3.0)));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
