//! Pantheon's metrics, computed with Polars (definitions: `DESIGN.md`, reference
//! `pantheon.md` §4.3, i.e. `tunnel_graph.py`):
//!
//! - **average throughput** of a flow = bits departed ÷ (last − first departure time), Mbit/s;
//!   no warm-up trimming;
//! - **one-way delay** of a packet = departure time − arrival time (matched on the UID), ms;
//!   the figure is the 95th percentile with "nearest" interpolation, index round(0.95·(n−1)) of
//!   the sorted delays (numpy's `interpolation='nearest'`, except that an exact .5 rounds away
//!   from zero here and to even there);
//! - **loss rate** = 1 − bytes departed ÷ bytes arrived (byte-weighted);
//! - the **total** uses every packet of the run, through the same code with all flows merged;
//! - **capacity** (when a link log gives the opportunities) = Σ opportunity bits ÷ (last −
//!   first opportunity time), Mbit/s; **utilisation** = total throughput ÷ capacity;
//! - **ECN** (ours; logs that record the codepoint): packets by codepoint as sent and as
//!   delivered, the CE fraction of the ECN-capable packets delivered, and the packets *bleached*
//!   on the path (sent ECN-capable, delivered Not-ECT).

use std::collections::{BTreeMap, BTreeSet};

use polars::prelude::*;
use serde::Serialize;

/// Metrics of one flow, or of all flows of a run together.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct FlowStats {
    /// Average throughput, Mbit/s.
    pub tput_mbps: f64,
    /// 95th-percentile one-way delay, ms (None when no packet was matched).
    pub p95_delay_ms: Option<f64>,
    /// Smallest one-way delay, ms (the path's propagation delay, roughly).
    pub min_delay_ms: Option<f64>,
    /// 95th-percentile *queueing* delay, ms: one-way delay minus the minimum of the packet's
    /// own flow (ours, beside Pantheon's absolute figure). It is immune to a constant clock
    /// offset between two machines, so it stays meaningful when the absolute delay of a
    /// remote run is not (Pantheon issue #71).
    pub p95_queueing_delay_ms: Option<f64>,
    /// Loss rate, fraction 0–1.
    pub loss: f64,
    /// Packets that entered the path.
    pub arrived: u64,
    /// Packets that left it.
    pub departed: u64,
    /// First → last departure, ms.
    pub duration_ms: f64,
    /// Packets with a negative one-way delay (a clock problem; counted, never hidden).
    pub negative_delays: u64,
    /// ECN codepoints of the flow's packets, when its logs recorded them (our tunnel's logs
    /// since format version 2); `None` otherwise.
    pub ecn: Option<EcnCounts>,
}

pub use crate::perf::Codepoints;

/// Counts the codepoint bits of a UInt32 column (nulls left out).
fn count_codepoints(bits: &UInt32Chunked) -> Codepoints {
    let mut c = Codepoints::default();
    for b in bits.iter().flatten() {
        match tunnel::ecn::Codepoint::from_bits(b as u8) {
            tunnel::ecn::Codepoint::NotEct => c.not_ect += 1,
            tunnel::ecn::Codepoint::Ect0 => c.ect0 += 1,
            tunnel::ecn::Codepoint::Ect1 => c.ect1 += 1,
            tunnel::ecn::Codepoint::Ce => c.ce += 1,
        }
    }
    c
}

/// What the ECN field of a flow's packets says: as they entered the path (the sender's
/// tunnel endpoint read them), as they left it (after the far endpoint applied the outer
/// header's marks, RFC 6040), and how many lost their ECN capability on the way.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct EcnCounts {
    /// Packets that entered the path, by codepoint.
    pub sent: Codepoints,
    /// Packets that left it, by codepoint: `ce` counts the marks of the path's queues.
    pub delivered: Codepoints,
    /// Packets sent ECT(0)/ECT(1)/CE and delivered Not-ECT: the path *bleached* their ECN
    /// field (a middlebox clearing it), so their transport cannot hear marks.
    pub bleached: u64,
}

impl EcnCounts {
    /// The counts of a flow's arrivals and departures whose frames have `ecn` columns (UInt32
    /// codepoint bits, null where unknown; and `sent_ecn` in departures: each one's codepoint
    /// when it was sent); `None` when they do not (logs without the field).
    pub fn of(
        arrivals: Option<&DataFrame>,
        departures: Option<&DataFrame>,
    ) -> PolarsResult<Option<EcnCounts>> {
        let column = |df: Option<&DataFrame>, name: &str| -> PolarsResult<Option<UInt32Chunked>> {
            match df.map(|d| d.column(name)) {
                Some(Ok(c)) => Ok(Some(c.u32()?.clone())),
                _ => Ok(None),
            }
        };
        let (sent, delivered, sent_of_delivered) = (
            column(arrivals, "ecn")?,
            column(departures, "ecn")?,
            column(departures, "sent_ecn")?,
        );
        if sent.is_none() && delivered.is_none() {
            return Ok(None);
        }
        let bleached = match (&delivered, &sent_of_delivered) {
            (Some(d), Some(s)) => d
                .iter()
                .zip(s.iter())
                .filter(|&(d, s)| d == Some(0) && s.is_some_and(|s| s != 0))
                .count() as u64,
            _ => 0,
        };
        Ok(Some(EcnCounts {
            sent: sent.as_ref().map(count_codepoints).unwrap_or_default(),
            delivered: delivered.as_ref().map(count_codepoints).unwrap_or_default(),
            bleached,
        }))
    }
}

/// Metrics of one run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunStats {
    /// All flows together.
    pub total: FlowStats,
    /// Per flow id.
    pub flows: BTreeMap<u32, FlowStats>,
    /// Average capacity of the link, Mbit/s, when its opportunities are known.
    pub capacity_mbps: Option<f64>,
}

impl RunStats {
    /// Total throughput ÷ capacity, 0–1 (`None` without a capacity).
    pub fn utilization(&self) -> Option<f64> {
        self.capacity_mbps
            .filter(|c| *c > 0.0)
            .map(|c| self.total.tput_mbps / c)
    }
}

/// Average capacity from opportunities (columns `t_ms`, `size`): Σ bits ÷ (last − first time),
/// Mbit/s; `None` for fewer than two opportunities (Pantheon: 0).
pub fn capacity_mbps(opportunities: &DataFrame) -> PolarsResult<Option<f64>> {
    if opportunities.height() < 2 {
        return Ok(None);
    }
    let t = opportunities.column("t_ms")?.f64()?;
    let (first, last) = (t.min().unwrap_or(0.0), t.max().unwrap_or(0.0));
    let bytes = opportunities
        .column("size")?
        .cast(&DataType::Float64)?
        .f64()?
        .sum()
        .unwrap_or(0.0);
    Ok((last > first).then(|| throughput_mbps(bytes, last - first)))
}

/// Computes [`RunStats`] from arrival frames (columns `flow`, `t_ms`, `size`), departure
/// frames (the same and `delay`, ms, null when unknown) and, if known, the link's
/// opportunities (`t_ms`, `size`).
pub fn run_stats(
    arrivals: &DataFrame,
    departures: &DataFrame,
    opportunities: Option<&DataFrame>,
) -> PolarsResult<RunStats> {
    let arr = by_flow(arrivals)?;
    let dep = by_flow(departures)?;
    let mut flows = BTreeMap::new();
    // Queueing delays: each packet's delay above its own flow's minimum, kept for the total.
    let mut queueing_all = Float64Chunked::from_vec("qdelay".into(), Vec::new());
    for flow in arr
        .keys()
        .chain(dep.keys())
        .copied()
        .collect::<BTreeSet<u32>>()
    {
        let delays = match dep.get(&flow) {
            Some(d) => known_delays(d)?,
            None => Float64Chunked::from_vec("delay".into(), Vec::new()),
        };
        let queueing = match delays.min() {
            Some(min) => &delays - min,
            None => delays.clone(),
        };
        queueing_all.append(&queueing)?;
        let stats = flow_stats(arr.get(&flow), dep.get(&flow), &delays, &queueing)?;
        flows.insert(flow, stats);
    }
    // With one flow the total is that flow (same packets): no second pass over them.
    let total = if flows.len() == 1 {
        *flows.values().next().expect("one flow")
    } else if arrivals.height() == 0 && departures.height() == 0 {
        flow_stats(None, None, &queueing_all, &queueing_all)?
    } else {
        let delays = known_delays(departures)?;
        flow_stats(Some(arrivals), Some(departures), &delays, &queueing_all)?
    };
    let capacity_mbps = match opportunities {
        Some(o) => capacity_mbps(o)?,
        None => None,
    };
    Ok(RunStats {
        total,
        flows,
        capacity_mbps,
    })
}

/// The rows of `df` per value of its `flow` column (rows without a flow are left out).
pub(crate) fn by_flow(df: &DataFrame) -> PolarsResult<BTreeMap<u32, DataFrame>> {
    let mut out = BTreeMap::new();
    if df.height() == 0 {
        return Ok(out);
    }
    let mut df = df.clone();
    let flow = df.column("flow")?.cast(&DataType::UInt32)?;
    df.with_column(flow)?;
    for part in df.partition_by(["flow"], true)? {
        if let Some(flow) = part.column("flow")?.u32()?.get(0) {
            out.insert(flow, part);
        }
    }
    Ok(out)
}

/// The bytes of the packets of `df` (column `size`) and the span of their times (column
/// `t_ms`: last − first, ms); zeros for no frame or no packet.
pub(crate) fn bytes_and_span(df: Option<&DataFrame>) -> PolarsResult<(f64, f64)> {
    let Some(df) = df else {
        return Ok((0.0, 0.0));
    };
    let bytes = df.column("size")?.u64()?.sum().unwrap_or(0) as f64;
    let t = df.column("t_ms")?.f64()?;
    let span = match (t.max(), t.min()) {
        (Some(last), Some(first)) => last - first,
        _ => 0.0,
    };
    Ok((bytes, span))
}

/// The one-way delays of `departures` that are known (column `delay` without its nulls), ms.
fn known_delays(departures: &DataFrame) -> PolarsResult<Float64Chunked> {
    let delay = departures.column("delay")?.f64()?;
    delay.filter(&delay.is_not_null())
}

/// The metrics of one flow (or of all flows together) from its arrivals and departures,
/// `delays` (its known one-way delays) and `queueing` (each of those above its own flow's
/// minimum).
fn flow_stats(
    arrivals: Option<&DataFrame>,
    departures: Option<&DataFrame>,
    delays: &Float64Chunked,
    queueing: &Float64Chunked,
) -> PolarsResult<FlowStats> {
    let (ab, _) = bytes_and_span(arrivals)?;
    let (db, duration_ms) = bytes_and_span(departures)?;
    let p95 = |c: &Float64Chunked| c.quantile(0.95, QuantileMethod::Nearest);
    Ok(FlowStats {
        tput_mbps: throughput_mbps(db, duration_ms),
        p95_delay_ms: p95(delays)?,
        min_delay_ms: delays.min(),
        p95_queueing_delay_ms: p95(queueing)?,
        loss: if ab > 0.0 {
            (1.0 - db / ab).max(0.0)
        } else {
            0.0
        },
        arrived: arrivals.map_or(0, |df| df.height() as u64),
        departed: departures.map_or(0, |df| df.height() as u64),
        duration_ms,
        negative_delays: delays.iter().flatten().filter(|&d| d < 0.0).count() as u64,
        ecn: EcnCounts::of(arrivals, departures)?,
    })
}

/// What a run shows of its path's shape, for calibration bounds (reference `pantheon.md` §5).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PathShape {
    /// Largest throughput of any `bin_ms` bin of departures (all flows), Mbit/s.
    pub peak_tput_mbps: f64,
    /// Most packets in flight at once: each departed packet with a known one-way delay d,
    /// departing at t, was in flight over [t − d, t) (lost packets are not counted).
    pub max_in_flight: u64,
}

/// [`PathShape`] of a run's departures (columns `t_ms`, `size`, `delay`), with bins of
/// `bin_ms` counted from the first departure.
pub fn path_shape(departures: &DataFrame, bin_ms: f64) -> PolarsResult<PathShape> {
    let t = departures.column("t_ms")?.f64()?;
    let first = t.min().unwrap_or(0.0);
    let size = departures.column("size")?.u64()?;
    // Bits per bin; times are ≥ first, so the truncation is the floor.
    let mut bins: BTreeMap<u64, f64> = BTreeMap::new();
    for (t, size) in t.iter().zip(size.iter()) {
        if let (Some(t), Some(size)) = (t, size) {
            *bins.entry(((t - first) / bin_ms) as u64).or_default() += size as f64;
        }
    }
    let peak_bytes = bins.values().copied().fold(0.0, f64::max);
    // Sweep over (start, +1) and (end, −1) events; ends sort before starts at equal times.
    let delay = departures.column("delay")?.f64()?;
    let mut events: Vec<(f64, i64)> = Vec::with_capacity(2 * t.len());
    for i in 0..t.len() {
        if let (Some(t), Some(d)) = (t.get(i), delay.get(i)) {
            events.push((t - d.max(0.0), 1));
            events.push((t, -1));
        }
    }
    events.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let (mut now, mut most) = (0i64, 0i64);
    for (_, step) in events {
        now += step;
        most = most.max(now);
    }
    Ok(PathShape {
        peak_tput_mbps: throughput_mbps(peak_bytes, bin_ms),
        max_in_flight: most as u64,
    })
}

/// When a flow was active, ms on the frames' clock.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct FlowTimes {
    /// Its first packet into the path (the sender's first packet: the flow's start).
    pub first_arrival_ms: f64,
    /// Its first packet out of the path.
    pub first_departure_ms: f64,
    /// Its last packet out of the path.
    pub last_departure_ms: f64,
}

/// [`FlowTimes`] of every flow that has both arrivals and departures, by flow id, from
/// arrival and departure frames (columns `flow`, `t_ms`).
pub fn flow_times(
    arrivals: &DataFrame,
    departures: &DataFrame,
) -> PolarsResult<BTreeMap<u32, FlowTimes>> {
    let span = |df: &DataFrame| -> PolarsResult<BTreeMap<u32, (f64, f64)>> {
        let mut out = BTreeMap::new();
        for (flow, part) in by_flow(df)? {
            let t = part.column("t_ms")?.f64()?;
            if let (Some(first), Some(last)) = (t.min(), t.max()) {
                out.insert(flow, (first, last));
            }
        }
        Ok(out)
    };
    let arr = span(arrivals)?;
    Ok(span(departures)?
        .into_iter()
        .filter_map(|(flow, (first, last))| {
            Some((
                flow,
                FlowTimes {
                    first_arrival_ms: arr.get(&flow)?.0,
                    first_departure_ms: first,
                    last_departure_ms: last,
                },
            ))
        })
        .collect())
}

/// Mbit/s of `bytes` departed over `duration_ms` (0 for an empty window, as Pantheon).
pub fn throughput_mbps(bytes: f64, duration_ms: f64) -> f64 {
    if duration_ms > 0.0 {
        bytes * 8.0 / (1000.0 * duration_ms)
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_shape_finds_the_peak_bin_and_the_most_packets_in_flight() {
        // Three packets of 1000 bytes: two depart in bin 0, one in bin 1 (500 ms bins); the
        // first two overlap in flight (100–150 ms), the third flies alone.
        let dep = df!(
            "flow" => [1u32, 1, 1],
            "t_ms" => [150.0, 200.0, 900.0],
            "size" => [1000u64, 1000, 1000],
            "delay" => [Some(50.0), Some(100.0), None]
        )
        .unwrap();
        let s = path_shape(&dep, 500.0).unwrap();
        assert_eq!(s.max_in_flight, 2);
        assert!((s.peak_tput_mbps - 2000.0 * 8.0 / 500e3).abs() < 1e-12);
        // Back to back (one ends when the next starts) is one in flight, not two.
        let dep = df!(
            "flow" => [1u32, 1],
            "t_ms" => [100.0, 200.0],
            "size" => [1000u64, 1000],
            "delay" => [Some(100.0), Some(100.0)]
        )
        .unwrap();
        assert_eq!(path_shape(&dep, 500.0).unwrap().max_in_flight, 1);
    }

    fn arrivals_frame(flow: Vec<u32>, t_ms: Vec<f64>, size: Vec<u64>) -> DataFrame {
        df!("flow" => flow, "t_ms" => t_ms, "size" => size).unwrap()
    }

    fn departures_frame(
        flow: Vec<u32>,
        t_ms: Vec<f64>,
        size: Vec<u64>,
        delay: Vec<Option<f64>>,
    ) -> DataFrame {
        df!("flow" => flow, "t_ms" => t_ms, "size" => size, "delay" => delay).unwrap()
    }

    #[test]
    fn flow_times_are_each_flows_first_and_last_packets() {
        let arrivals = arrivals_frame(
            vec![1, 1, 2, 2, 3],
            vec![5.0, 1.0, 40.0, 30.0, 7.0],
            vec![1500; 5],
        );
        // Flow 3 never delivered anything: no times.
        let departures = departures_frame(
            vec![1, 2, 1, 2],
            vec![11.0, 35.0, 90.0, 41.0],
            vec![1500; 4],
            vec![None; 4],
        );
        let t = flow_times(&arrivals, &departures).unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!(
            t[&1],
            FlowTimes {
                first_arrival_ms: 1.0,
                first_departure_ms: 11.0,
                last_departure_ms: 90.0
            }
        );
        assert_eq!(
            (
                t[&2].first_arrival_ms,
                t[&2].first_departure_ms,
                t[&2].last_departure_ms
            ),
            (30.0, 35.0, 41.0)
        );
    }

    #[test]
    fn pantheon_definitions_on_a_tiny_run() {
        // Flow 1: 4 packets of 1500 B sent at 0,1,2,3 ms; uid 2 lost; others take 10,20,30 ms.
        // Flow 2: 2 packets of 100 B sent at 0 and 5, both received after 1 ms.
        let arrivals = arrivals_frame(
            vec![1, 1, 1, 1, 2, 2],
            vec![0.0, 1.0, 2.0, 3.0, 0.0, 5.0],
            vec![1500, 1500, 1500, 1500, 100, 100],
        );
        let departures = departures_frame(
            vec![1, 1, 1, 2, 2],
            vec![10.0, 21.0, 33.0, 1.0, 6.0],
            vec![1500, 1500, 1500, 100, 100],
            vec![Some(10.0), Some(20.0), Some(30.0), Some(1.0), Some(1.0)],
        );
        let s = run_stats(&arrivals, &departures, None).unwrap();
        let f1 = s.flows[&1];
        // 3 × 1500 B × 8 over 23 ms.
        assert!((f1.tput_mbps - 36_000.0 / 23_000.0).abs() < 1e-12);
        assert_eq!(f1.loss, 0.25);
        // Delays 10, 20, 30: nearest index round(0.95·2) = 2 → 30.
        assert_eq!(f1.p95_delay_ms, Some(30.0));
        assert_eq!(f1.min_delay_ms, Some(10.0));
        assert_eq!(f1.p95_queueing_delay_ms, Some(20.0));
        let f2 = s.flows[&2];
        assert_eq!(f2.loss, 0.0);
        assert!((f2.tput_mbps - 1600.0 / 5000.0).abs() < 1e-12);
        // Total: all departures over 1 → 33 ms; delays {10,20,30,1,1} → sorted
        // [1,1,10,20,30], index round(0.95·4) = 4 → 30.
        assert!((s.total.tput_mbps - 4700.0 * 8.0 / 32_000.0).abs() < 1e-12);
        assert_eq!(s.total.p95_delay_ms, Some(30.0));
        // Queueing delays, each over its own flow's minimum: {0,10,20} and {0,0} → sorted
        // [0,0,0,10,20] → 20 (over the total's minimum it would be 29).
        assert_eq!(s.total.p95_queueing_delay_ms, Some(20.0));
        assert!((s.total.loss - 1500.0 / 6200.0).abs() < 1e-12);
        assert_eq!((s.total.arrived, s.total.departed), (6, 5));
        assert_eq!(s.total.negative_delays, 0);
    }

    #[test]
    fn no_departures_is_total_loss() {
        let arrivals = arrivals_frame(vec![1], vec![0.0], vec![1500]);
        let departures = departures_frame(vec![], vec![], vec![], vec![]);
        let s = run_stats(&arrivals, &departures, None).unwrap();
        assert_eq!(s.flows[&1].loss, 1.0);
        assert_eq!(s.flows[&1].tput_mbps, 0.0);
        assert_eq!(s.total.loss, 1.0);
        assert_eq!(s.total.p95_delay_ms, None);
    }

    #[test]
    fn unknown_delays_are_left_out_and_capacity_gives_utilisation() {
        // Two departures; the second was never logged as sent (delay unknown): it counts for
        // throughput and loss but not for the delay percentile.
        let arrivals = arrivals_frame(vec![1], vec![0.0], vec![1000]);
        let departures = departures_frame(
            vec![1, 1],
            vec![5.0, 10.0],
            vec![1000, 1000],
            vec![Some(5.0), None],
        );
        // Opportunities of 1500 B at 0, 1, 2, 3 ms: Σ 6000 B over 3 ms = 16 Mbit/s.
        let opp =
            df!("t_ms" => [0.0, 1.0, 2.0, 3.0], "size" => [1500u64, 1500, 1500, 1500]).unwrap();
        let s = run_stats(&arrivals, &departures, Some(&opp)).unwrap();
        assert_eq!(s.total.p95_delay_ms, Some(5.0));
        assert_eq!(s.total.departed, 2);
        assert!((s.total.tput_mbps - 16000.0 / 5000.0).abs() < 1e-12);
        assert_eq!(s.capacity_mbps, Some(16.0));
        assert!((s.utilization().unwrap() - 0.2).abs() < 1e-12);
        let one = df!("t_ms" => [0.0], "size" => [1500u64]).unwrap();
        assert_eq!(capacity_mbps(&one).unwrap(), None);
    }
}

impl From<EcnCounts> for crate::perf::EcnPerf {
    fn from(c: EcnCounts) -> crate::perf::EcnPerf {
        crate::perf::EcnPerf {
            delivered: c.delivered,
            ce_fraction: c.delivered.ce_fraction(),
            sent: c.sent,
            bleached: c.bleached,
        }
    }
}
