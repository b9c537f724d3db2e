//! A run over time, as Pantheon's `tunnel_graph.py` draws it (reference `pantheon.md` §4.3):
//! throughput in bins (500 ms by default) of the capacity, of each flow's ingress (packets
//! entering the path) and egress (packets leaving it), and every packet's one-way delay.
//!
//! Bins count from the first event of any kind (`first_ts`): bin = ⌊(t − first_ts) ÷ bin⌋; a
//! bin's value is its bits ÷ its length, Mbit/s.

use std::collections::BTreeMap;

use polars::prelude::*;

use crate::metrics::{by_flow, bytes_and_span, throughput_mbps, RunStats};

/// One flow over time.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FlowSeries {
    /// Ingress throughput per bin, Mbit/s (bins from 0 to the run's last).
    pub ingress: Vec<f64>,
    /// Egress throughput per bin, Mbit/s.
    pub egress: Vec<f64>,
    /// Mean ingress throughput (bits over first → last arrival), Mbit/s.
    pub ingress_mean: f64,
    /// Mean egress throughput (the flow's average throughput), Mbit/s.
    pub egress_mean: f64,
    /// Each received packet: seconds since `first_ts` and one-way delay (ms), in time order;
    /// packets without a known delay are left out.
    pub delays: Vec<(f64, f64)>,
    /// 95th-percentile one-way delay (nearest rank), ms.
    pub p95_delay_ms: Option<f64>,
    /// The received packets a queue marked CE (ECN), as `delays` (seconds, one-way delay in
    /// ms), in time order; empty when none was or the logs did not record ECN.
    pub ce_marks: Vec<(f64, f64)>,
}

/// A run over time.
#[derive(Debug, Clone, PartialEq)]
pub struct TimeSeries {
    /// Bin length, ms.
    pub bin_ms: f64,
    /// Time of the first event of any kind, ms (the frames' clock).
    pub first_ms: f64,
    /// Number of bins.
    pub bins: usize,
    /// Capacity per bin, Mbit/s, when the link's opportunities are known.
    pub capacity: Option<Vec<f64>>,
    /// Average capacity, Mbit/s.
    pub capacity_mean: Option<f64>,
    /// Per flow.
    pub flows: BTreeMap<u32, FlowSeries>,
}

/// Bits per bin of `df` (`t_ms`, `size`, and `flow` when `by_flow`), grouped by flow.
fn binned(
    df: &DataFrame,
    by_flow: bool,
    first_ms: f64,
    bin_ms: f64,
    bins: usize,
) -> PolarsResult<BTreeMap<u32, Vec<f64>>> {
    let t = df.column("t_ms")?.f64()?;
    let size = df.column("size")?.cast(&DataType::Float64)?;
    let size = size.f64()?;
    let flow = match by_flow {
        true => Some(df.column("flow")?.cast(&DataType::UInt32)?),
        false => None,
    };
    let flows: Box<dyn Iterator<Item = Option<u32>>> = match &flow {
        Some(f) => Box::new(f.u32()?.iter()),
        None => Box::new(std::iter::repeat(Some(0))),
    };
    let mut bytes: BTreeMap<u32, Vec<f64>> = BTreeMap::new();
    for ((f, t), size) in flows.zip(t.iter()).zip(size.iter()) {
        let (Some(f), Some(t), Some(size)) = (f, t, size) else {
            continue;
        };
        // Times are ≥ first_ms, so the truncation is the floor.
        let bin = ((t - first_ms) / bin_ms) as usize;
        let series = bytes.entry(f).or_insert_with(|| vec![0.0; bins]);
        if let Some(slot) = series.get_mut(bin) {
            *slot += size;
        }
    }
    for series in bytes.values_mut() {
        for v in series.iter_mut() {
            *v = throughput_mbps(*v, bin_ms);
        }
    }
    Ok(bytes)
}

/// Computes the time series of a run from its frames (see [`crate::ingest::RunFrames`]); the
/// legends' egress means, 95th percentiles and average capacity are the run's `stats` (the
/// same numbers as the stats text, not computed a second way).
pub fn time_series(
    arrivals: &DataFrame,
    departures: &DataFrame,
    opportunities: Option<&DataFrame>,
    stats: &RunStats,
    bin_ms: f64,
) -> PolarsResult<TimeSeries> {
    let times = |df: &DataFrame| -> PolarsResult<(f64, f64)> {
        let t = df.column("t_ms")?.f64()?;
        Ok((
            t.min().unwrap_or(f64::INFINITY),
            t.max().unwrap_or(f64::NEG_INFINITY),
        ))
    };
    let mut spans = vec![times(arrivals)?, times(departures)?];
    if let Some(o) = opportunities {
        spans.push(times(o)?);
    }
    let first_ms = spans.iter().map(|s| s.0).fold(f64::INFINITY, f64::min);
    let last_ms = spans.iter().map(|s| s.1).fold(f64::NEG_INFINITY, f64::max);
    let (first_ms, bins) = if first_ms.is_finite() && last_ms >= first_ms {
        (
            first_ms,
            ((last_ms - first_ms) / bin_ms).floor() as usize + 1,
        )
    } else {
        (0.0, 0)
    };
    let ingress = binned(arrivals, true, first_ms, bin_ms, bins)?;
    let egress = binned(departures, true, first_ms, bin_ms, bins)?;
    let capacity = match opportunities {
        Some(o) => binned(o, false, first_ms, bin_ms, bins)?.remove(&0),
        None => None,
    };
    let mut flows: BTreeMap<u32, FlowSeries> = BTreeMap::new();
    for (f, v) in ingress {
        flows.entry(f).or_default().ingress = v;
    }
    for (f, v) in egress {
        flows.entry(f).or_default().egress = v;
    }
    // Ingress means (Pantheon's legend; not a metric) and delays per flow.
    let arrivals_by_flow = by_flow(arrivals)?;
    let departures_by_flow = by_flow(departures)?;
    let ingress_mean = |flow: u32| -> PolarsResult<f64> {
        let (bytes, span) = bytes_and_span(arrivals_by_flow.get(&flow))?;
        Ok(throughput_mbps(bytes, span))
    };
    for (&f, series) in flows.iter_mut() {
        let (mut delays, mut ce_marks) = (Vec::new(), Vec::new());
        if let Some(d) = departures_by_flow.get(&f) {
            let (t, delay) = (d.column("t_ms")?.f64()?, d.column("delay")?.f64()?);
            let ce = match d.column("ecn") {
                Ok(c) => Some(c.u32()?.clone()),
                Err(_) => None,
            };
            let marked = |i: usize| {
                ce.as_ref()
                    .is_some_and(|c| c.get(i) == Some(u32::from(tunnel::ecn::Codepoint::Ce.bits())))
            };
            for (i, (t, d)) in t.iter().zip(delay.iter()).enumerate() {
                if let (Some(t), Some(d)) = (t, d) {
                    delays.push((t, d));
                    if marked(i) {
                        ce_marks.push((t, d));
                    }
                }
            }
        }
        delays.sort_by(|a, b| a.0.total_cmp(&b.0));
        ce_marks.sort_by(|a, b| a.0.total_cmp(&b.0));
        let flow_stats = stats.flows.get(&f);
        series.ingress_mean = ingress_mean(f)?;
        series.egress_mean = flow_stats.map_or(0.0, |s| s.tput_mbps);
        let since_first = |v: Vec<(f64, f64)>| -> Vec<(f64, f64)> {
            v.into_iter()
                .map(|(t, d)| ((t - first_ms) / 1000.0, d))
                .collect()
        };
        series.delays = since_first(delays);
        series.ce_marks = since_first(ce_marks);
        series.p95_delay_ms = flow_stats.and_then(|s| s.p95_delay_ms);
        for v in [&mut series.ingress, &mut series.egress] {
            v.resize(bins, 0.0);
        }
    }
    Ok(TimeSeries {
        bin_ms,
        first_ms,
        bins,
        capacity,
        capacity_mean: stats.capacity_mbps,
        flows,
    })
}

/// Writes a run's time series as two Parquet files (zstd) beside its plots, for a notebook
/// (issue 54; the schema is also in docs/results.md):
///
/// - `throughput`: one row per flow and bin of `ts` — `flow` (u32), `t_s` (f64, the bin's
///   start in seconds since the run's first event), `ingress_mbps` and `egress_mbps` (f64,
///   Mbit/s: the throughput plot's lines) and `capacity_mbps` (f64, the link's; null without a
///   link log);
/// - `delay`: one row per packet delivered, in the logs' order — `flow` (u32), `t_s` (f64, its
///   departure from the path, seconds since the run's first event), `size` (u32, bytes, as the
///   tunnel logged it), `delay_ms` (f64, one-way delay; null when its sending was not logged)
///   and `ecn` (u32, the codepoint it was delivered with: 0 Not-ECT, 1 ECT(1), 2 ECT(0), 3 CE;
///   null when the logs did not record ECN).
///
/// `departures`: the run's departures frame ([`crate::ingest::RunFrames::departures`]), on
/// the clock of `ts`. Errors name the file.
#[cfg(feature = "table")]
pub fn write_parquet(
    ts: &TimeSeries,
    departures: &DataFrame,
    throughput: &std::path::Path,
    delay: &std::path::Path,
) -> Result<(), crate::table::TableError> {
    use crate::table::{self, TableError, Values};
    let (mut flow, mut t_s) = (Vec::new(), Vec::new());
    let (mut ingress, mut egress, mut capacity) = (Vec::new(), Vec::new(), Vec::new());
    for (&f, series) in &ts.flows {
        for bin in 0..ts.bins {
            flow.push(f);
            t_s.push(Some(bin as f64 * ts.bin_ms / 1000.0));
            ingress.push(series.ingress.get(bin).copied());
            egress.push(series.egress.get(bin).copied());
            capacity.push(ts.capacity.as_ref().and_then(|c| c.get(bin).copied()));
        }
    }
    table::write_parquet(
        vec![
            ("flow", Values::U32(flow)),
            ("t_s", Values::F64(t_s)),
            ("ingress_mbps", Values::F64(ingress)),
            ("egress_mbps", Values::F64(egress)),
            ("capacity_mbps", Values::F64(capacity)),
        ],
        throughput,
    )?;
    // Per packet: the departures' own columns, renamed and retyped (no copy into rows).
    let frame = || -> PolarsResult<DataFrame> {
        let column = |name: &str| -> PolarsResult<Series> {
            Ok(departures.column(name)?.as_materialized_series().clone())
        };
        let ecn = match departures.column("ecn") {
            Ok(c) => c.as_materialized_series().cast(&DataType::UInt32)?,
            Err(_) => Series::full_null("ecn".into(), departures.height(), &DataType::UInt32),
        };
        DataFrame::new_infer_height(vec![
            column("flow")?.cast(&DataType::UInt32)?.into(),
            ((column("t_ms")? - ts.first_ms) / 1000.0)
                .with_name("t_s".into())
                .into(),
            column("size")?.cast(&DataType::UInt32)?.into(),
            column("delay")?.with_name("delay_ms".into()).into(),
            ecn.into(),
        ])
    };
    let mut packets = frame().map_err(|e| TableError::of(delay, e))?;
    table::write_parquet_frame(&mut packets, delay)
}

/// Writes the link's queue over time (`frames.queue`, [`crate::ingest::RunFrames::queue`]) as
/// Parquet to `path`: one row per millisecond with events — `t_s` (f64, seconds since the
/// run's first event, the clock of `ts` and of the other series), `packets` and `bytes` (i64,
/// in the uplink's queue after that millisecond's arrivals, departures and drops, cross
/// traffic's included). Errors name the file.
#[cfg(feature = "table")]
pub fn write_queue_parquet(
    ts: &TimeSeries,
    queue: &DataFrame,
    path: &std::path::Path,
) -> Result<(), crate::table::TableError> {
    use crate::table::{self, TableError};
    let frame = || -> PolarsResult<DataFrame> {
        let column = |name: &str| -> PolarsResult<Series> {
            Ok(queue.column(name)?.as_materialized_series().clone())
        };
        DataFrame::new_infer_height(vec![
            ((column("t_ms")? - ts.first_ms) / 1000.0)
                .with_name("t_s".into())
                .into(),
            column("packets")?.into(),
            column("bytes")?.into(),
        ])
    };
    let mut frame = frame().map_err(|e| TableError::of(path, e))?;
    table::write_parquet_frame(&mut frame, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bins_from_the_first_event_of_any_kind() {
        // Opportunities from t = 0; flow 1 sends 1500 B at 100 and 600 ms, both arrive 50 ms
        // later; flow 2 sends one packet of 500 B at 700 ms, lost. Bins of 500 ms.
        let arrivals = df!(
            "flow" => [1u32, 1, 2], "t_ms" => [100.0, 600.0, 700.0], "size" => [1500u64, 1500, 500]
        )
        .unwrap();
        let departures = df!(
            "flow" => [1u32, 1], "t_ms" => [150.0, 650.0], "size" => [1500u64, 1500],
            "delay" => [Some(50.0), Some(50.0)]
        )
        .unwrap();
        let opp = df!("t_ms" => [0.0, 499.0, 999.0], "size" => [1500u64, 1500, 1500]).unwrap();
        let stats = crate::metrics::run_stats(&arrivals, &departures, Some(&opp)).unwrap();
        let ts = time_series(&arrivals, &departures, Some(&opp), &stats, 500.0).unwrap();
        assert_eq!((ts.first_ms, ts.bins), (0.0, 2));
        // 1500 B in 500 ms = 0.024 Mbit/s.
        let one = 1500.0 * 8.0 / 500_000.0;
        assert_eq!(ts.capacity.as_deref(), Some(&[2.0 * one, one][..]));
        let f1 = &ts.flows[&1];
        assert_eq!(f1.ingress, [one, one]);
        assert_eq!(f1.egress, [one, one]);
        assert_eq!(f1.delays, [(0.15, 50.0), (0.65, 50.0)]);
        assert_eq!(f1.p95_delay_ms, Some(50.0));
        // Mean egress: 3000 B over 500 ms.
        assert!((f1.egress_mean - 3000.0 * 8.0 / 500_000.0).abs() < 1e-12);
        let f2 = &ts.flows[&2];
        assert_eq!(f2.ingress, [0.0, 500.0 * 8.0 / 500_000.0]);
        assert_eq!(f2.egress, [0.0, 0.0]);
        assert_eq!(f2.p95_delay_ms, None);
        assert!(f1.ce_marks.is_empty(), "no ecn column, no marks");
    }

    #[test]
    fn ce_marked_deliveries_are_kept_with_their_delays() {
        let arrivals = df!("flow" => [1u32, 1, 1], "t_ms" => [0.0, 10.0, 20.0],
            "size" => [1500u64, 1500, 1500], "ecn" => [2u32, 2, 2])
        .unwrap();
        let departures = df!("flow" => [1u32, 1, 1], "t_ms" => [30.0, 45.0, 70.0],
            "size" => [1500u64, 1500, 1500], "delay" => [Some(30.0), Some(35.0), Some(50.0)],
            "ecn" => [Some(2u32), Some(3), Some(3)], "sent_ecn" => [Some(2u32), Some(2), Some(2)])
        .unwrap();
        let stats = crate::metrics::run_stats(&arrivals, &departures, None).unwrap();
        let ts = time_series(&arrivals, &departures, None, &stats, 500.0).unwrap();
        assert_eq!(ts.flows[&1].ce_marks, [(0.045, 35.0), (0.07, 50.0)]);
        let ecn = stats.flows[&1].ecn.unwrap();
        assert_eq!(
            (ecn.sent.ect0, ecn.delivered.ect0, ecn.delivered.ce),
            (3, 1, 2)
        );
        assert_eq!(ecn.delivered.ce_fraction(), Some(2.0 / 3.0));
        assert_eq!(ecn.bleached, 0);
    }

    /// Issue 54: a run's time series read back from its Parquet files — the bins of the
    /// throughput plot per flow, and every delivered packet with its delay and codepoint.
    #[cfg(feature = "table")]
    #[test]
    fn parquet_series_read_back_as_written() {
        let arrivals = df!("flow" => [1u32, 1, 1], "t_ms" => [100.0, 110.0, 700.0],
            "size" => [1500u64, 1500, 1500], "ecn" => [2u32, 2, 2])
        .unwrap();
        let departures = df!("flow" => [1u32, 1], "t_ms" => [150.0, 760.0],
            "size" => [1500u64, 1500], "delay" => [Some(50.0), None],
            "ecn" => [Some(2u32), Some(3)], "sent_ecn" => [Some(2u32), Some(2)])
        .unwrap();
        let opp = df!("t_ms" => [100.0, 600.0], "size" => [1500u64, 1500]).unwrap();
        let stats = crate::metrics::run_stats(&arrivals, &departures, Some(&opp)).unwrap();
        let ts = time_series(&arrivals, &departures, Some(&opp), &stats, 500.0).unwrap();
        let dir = std::env::temp_dir().join(format!("series-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (tput, delay) = (dir.join("t.parquet"), dir.join("d.parquet"));
        write_parquet(&ts, &departures, &tput, &delay).unwrap();
        let read = |p: &std::path::Path| {
            ParquetReader::new(std::fs::File::open(p).unwrap())
                .finish()
                .unwrap()
        };
        let (t, d) = (read(&tput), read(&delay));
        // Logs without ECN: the column is there, all null.
        let plain = departures.drop_many(["ecn", "sent_ecn"]);
        write_parquet(&ts, &plain, &tput, &delay).unwrap();
        let no_ecn = read(&delay);
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(no_ecn.column("ecn").unwrap().null_count(), 2);
        let f64s = |df: &DataFrame, c: &str| -> Vec<Option<f64>> {
            df.column(c).unwrap().f64().unwrap().iter().collect()
        };
        let u32s = |df: &DataFrame, c: &str| -> Vec<Option<u32>> {
            df.column(c).unwrap().u32().unwrap().iter().collect()
        };
        // First event at 100 ms; bins [100, 600) and [600, 1100) ms. Bin 0: two packets in,
        // one out; bin 1: one in, one out; the link offered one 1500-byte packet in each.
        let one = 1500.0 * 8.0 / 500_000.0;
        assert_eq!(u32s(&t, "flow"), [Some(1), Some(1)]);
        assert_eq!(f64s(&t, "t_s"), [Some(0.0), Some(0.5)]);
        assert_eq!(f64s(&t, "ingress_mbps"), [Some(2.0 * one), Some(one)]);
        assert_eq!(f64s(&t, "egress_mbps"), [Some(one), Some(one)]);
        assert_eq!(f64s(&t, "capacity_mbps"), [Some(one), Some(one)]);
        assert_eq!(u32s(&d, "flow"), [Some(1), Some(1)]);
        assert_eq!(f64s(&d, "t_s"), [Some(0.05), Some(0.66)]);
        assert_eq!(u32s(&d, "size"), [Some(1500), Some(1500)]);
        assert_eq!(f64s(&d, "delay_ms"), [Some(50.0), None]);
        assert_eq!(u32s(&d, "ecn"), [Some(2), Some(3)]);
        // The link's queue, from a link log's lines, on the same clock (first event 100 ms).
        let log = crate::text::parse_link_log(
            b"# init timestamp: 5\n100 + 1504\n100 + 1504\n101 # 1504\n101 - 1504 1\n\
              102 + 1504\n102 d 1 1504\n",
            "up.log",
        );
        let frames = crate::ingest::from_link_text(log).unwrap();
        let q = dir.join("q.parquet");
        std::fs::create_dir_all(&dir).unwrap();
        write_queue_parquet(&ts, frames.queue.as_ref().unwrap(), &q).unwrap();
        let q = read(&q);
        let _ = std::fs::remove_dir_all(&dir);
        let i64s =
            |c: &str| -> Vec<Option<i64>> { q.column(c).unwrap().i64().unwrap().iter().collect() };
        assert_eq!(f64s(&q, "t_s"), [Some(0.0), Some(0.001), Some(0.002)]);
        assert_eq!(i64s("packets"), [Some(2), Some(1), Some(1)]);
        assert_eq!(i64s("bytes"), [Some(3008), Some(1504), Some(1504)]);
    }
}
