//! Calibration: the Pantheon paper's five-parameter emulator and the Bayesian search that fits
//! it to a real path (paper §5; reference `pantheon.md` §5).
//!
//! # The model
//!
//! A [`Candidate`] emulator is `mm-delay D [mm-loss uplink L] mm-link R R
//! --uplink-queue=droptail --uplink-queue-args=packets=Q` with a constant trace of R Mbit/s in
//! both directions, or deliveries as a Poisson process of that mean rate
//! (`--uplink-delivery=poisson`, the paper's model of cellular paths). Five parameters: the
//! bottleneck rate, the one-way propagation delay, the uplink DropTail size, the uplink i.i.d.
//! loss rate and the delivery process — exactly the knobs of Pantheon's calibrated emulators
//! ([`crate::presets`] builds those six with [`Candidate::emulator`] too).
//!
//! # The search
//!
//! The objective is the *replication error* of a candidate (DESIGN.md): run the target's
//! schemes over it and average the relative errors of their median throughput and median p95
//! delay. It is measured, hence noisy, and each measurement costs whole runs, so the search is
//! Bayesian optimisation: a Gaussian-process surrogate of the error and expected improvement
//! to pick the next candidates ([`Search`], on the `egobox-ego` crate's ask-and-tell
//! interface). The delivery process is not a dimension: the caller runs one search with
//! constant and one with Poisson deliveries and keeps the better, as the paper did.
//!
//! Search space, from what the target's packet logs show ([`Bounds::from_observations`],
//! Pantheon's heuristics): delay ∈ [0, 2 · median minimum one-way delay], rate ∈ [0.5 · median,
//! 2 · maximum] of the per-run peak 500 ms throughput, queue ∈ [10, 1.5 · most packets in flight],
//! loss ∈ [0, clamp(4 · median loss, 0.1, 0.5)]. Delay and queue are integers (mm-delay takes
//! whole milliseconds, DropTail whole packets) and searched as such; loss is searched on a
//! square-root scale, because loss-based TCP's throughput goes as 1/√p (Mathis et al.) and a
//! linear axis would crowd the interesting 0–1 % into the first few percent of the range.
//!
//! This module is sans-IO: it proposes candidates and is told their errors; running them is
//! the caller's (`pantheon calibrate`).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

#[cfg(feature = "search")]
use egobox_ego::{EgorServiceApi, EgorServiceBuilder, InfillStrategy, XType};
#[cfg(feature = "search")]
use egobox_moe::MixintGpMixtureParams;
#[cfg(feature = "search")]
use ndarray::{Array2, Axis};

use analyzer::stats::median;

use crate::cross::CrossTraffic;
use crate::emulator::Emulator;
use crate::host::{HostLimits, HostSide, TcpMem};
use crate::mm::{Delivery, LinkDirection, LinkShell, Shell};
use crate::queue::QueueSpec;

/// The smallest end-host buffer searched, bytes (64 KiB: a window of 44 full packets).
pub const MIN_HOST_BUFFER: u64 = 64 << 10;

/// Errors of the calibration model and search.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CalibrateError {
    /// A search bound is empty, negative or not finite.
    #[error("bad search bounds: {0}")]
    Bounds(String),
    /// A search-log line could not be read; `line` is 1-based.
    #[error("search log line {line}: {message}")]
    Log {
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// The optimiser refused its configuration.
    #[error("optimiser: {0}")]
    Optimiser(String),
}

/// One emulator of the five-parameter model.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Candidate {
    /// Bottleneck rate in both directions, Mbit/s of 1500-byte opportunities (0.01 Mbit/s
    /// steps, so that its trace is short).
    pub rate_mbps: f64,
    /// One-way propagation delay in each direction, ms (`mm-delay`).
    pub delay_ms: u32,
    /// Uplink DropTail size, packets (the downlink queue is unbounded, as in Pantheon's).
    pub queue_packets: u32,
    /// Uplink i.i.d. loss rate, fraction 0–1 (`mm-loss uplink`); 0 = no loss shell.
    pub loss: f64,
    /// Constant-rate trace, or Poisson deliveries at that mean rate.
    #[serde(
        serialize_with = "delivery_name",
        deserialize_with = "delivery_from_name"
    )]
    pub delivery: Delivery,
    /// Non-reactive cross traffic on the uplink, Mbit/s (`--uplink-cross-traffic`,
    /// [`crate::cross`]); 0 = none. Searched only when [`Bounds::cross_mbps`] is given.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cross_mbps: f64,
    /// The end hosts' TCP buffer maximum, bytes: `pt-host both` with `tcp_rmem` and `tcp_wmem`
    /// up to it ([`Candidate::host_shell`]); 0 = the machine's own. Searched only when
    /// [`Bounds::host_buffer_bytes`] is given.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub host_buffer_bytes: u64,
}

fn is_zero(x: &f64) -> bool {
    *x == 0.0
}

fn is_zero_u64(x: &u64) -> bool {
    *x == 0
}

fn delivery_name<S: serde::Serializer>(d: &Delivery, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(delivery_str(*d))
}

fn delivery_from_name<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Delivery, D::Error> {
    let s = <String as serde::Deserialize>::deserialize(d)?;
    parse_delivery(&s).ok_or_else(|| {
        serde::de::Error::custom(format!(
            "delivery `{s}`: expected constant, poisson or even"
        ))
    })
}

/// `constant`, `poisson` or `even`, as search logs and presets name them.
pub fn delivery_str(d: Delivery) -> &'static str {
    match d {
        Delivery::Trace => "constant",
        Delivery::Poisson => "poisson",
        Delivery::Even => "even",
    }
}

/// Parses `constant`, `poisson` or `even`.
pub fn parse_delivery(s: &str) -> Option<Delivery> {
    match s {
        "constant" => Some(Delivery::Trace),
        "poisson" => Some(Delivery::Poisson),
        "even" => Some(Delivery::Even),
        _ => None,
    }
}

impl Candidate {
    /// This candidate as an emulator with `trace` (a constant trace of `rate_mbps`) both ways:
    /// `mm-delay D`, with loss `mm-loss uplink L` (L to six decimals, the search's resolution),
    /// then `mm-link` with the uplink DropTail and, for Poisson deliveries, Poisson deliveries
    /// both ways, and cross traffic on the uplink at `cross_mbps` (to 0.001 Mbit/s) if any.
    pub fn emulator(&self, trace: &Path) -> Emulator {
        let mut shells: Vec<Shell> = self.host_shell().into_iter().collect();
        shells.push(Shell::Delay {
            ms: self.delay_ms.into(),
        });
        if self.loss > 0.0 {
            shells.push(Shell::Loss {
                direction: LinkDirection::Uplink,
                rate: (self.loss * 1e6).round() / 1e6,
            });
        }
        let mut link = LinkShell::new(trace.to_owned(), trace.to_owned());
        link.uplink_queue = QueueSpec::droptail_packets(self.queue_packets.into());
        link.uplink_delivery = self.delivery;
        link.downlink_delivery = self.delivery;
        if self.cross_mbps > 0.0 {
            link.uplink_cross = CrossTraffic::constant((self.cross_mbps * 1e3).round() / 1e3).ok();
        }
        shells.push(Shell::Link(Box::new(link)));
        Emulator::new(shells)
    }

    /// Its end hosts, when it sets them: `pt-host both tcp_rmem=4096,D,B tcp_wmem=4096,D',B`
    /// with B = `host_buffer_bytes` and Linux's defaults as the defaults (87 380 and 16 384
    /// bytes, or B if smaller).
    pub fn host_shell(&self) -> Option<Shell> {
        let max = self.host_buffer_bytes;
        let mem = |default: u64| TcpMem {
            min: 4096.min(max),
            default: default.min(max),
            max,
        };
        (max > 0).then(|| Shell::Host {
            side: HostSide::Both,
            limits: HostLimits {
                tcp_rmem: Some(mem(87_380)),
                tcp_wmem: Some(mem(16_384)),
            },
        })
    }

    /// One-line description: `24.00 Mbit/s constant, 30 ms, 60 packets, loss 0.5000 %`, and
    /// `, cross traffic 8.00 Mbit/s`, `, host buffers 2048 KiB` when it has them.
    pub fn describe(&self) -> String {
        let mut s = format!(
            "{:.2} Mbit/s {}, {} ms, {} packets, loss {:.4} %",
            self.rate_mbps,
            delivery_str(self.delivery),
            self.delay_ms,
            self.queue_packets,
            self.loss * 100.0
        );
        if self.cross_mbps > 0.0 {
            let _ = write!(s, ", cross traffic {:.2} Mbit/s", self.cross_mbps);
        }
        if self.host_buffer_bytes > 0 {
            let _ = write!(s, ", host buffers {} KiB", self.host_buffer_bytes / 1024);
        }
        s
    }
}

/// Loss with enough digits for the search's resolution and none beyond.
fn fmt_loss(loss: f64) -> String {
    let s = format!("{loss:.6}");
    s.trim_end_matches('0').trim_end_matches('.').to_owned()
}

/// The search space. Each range is inclusive.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Bounds {
    /// Rate, Mbit/s.
    pub rate_mbps: (f64, f64),
    /// One-way delay, ms.
    pub delay_ms: (u32, u32),
    /// Uplink DropTail size, packets.
    pub queue_packets: (u32, u32),
    /// Uplink loss rate, fraction.
    pub loss: (f64, f64),
    /// Uplink cross traffic, Mbit/s: a fifth dimension when given; `None`: none searched
    /// (every candidate without).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cross_mbps: Option<(f64, f64)>,
    /// End hosts' TCP buffer maximum, bytes, searched on a log₂ scale when given; `None`: the
    /// machine's own (or `--hosts`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_buffer_bytes: Option<(u64, u64)>,
}

/// What a target path's runs show, the inputs of [`Bounds::from_observations`]; one value per
/// run in each list.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Observations {
    /// Smallest one-way delay of each run, ms.
    pub min_delay_ms: Vec<f64>,
    /// Largest 500 ms-bin throughput of each run, Mbit/s.
    pub peak_tput_mbps: Vec<f64>,
    /// Most packets in flight (sent, not yet received) at any ms of each run.
    pub max_in_flight: Vec<f64>,
    /// Loss rate of each run, fraction.
    pub loss: Vec<f64>,
}

fn max(x: &[f64]) -> Option<f64> {
    x.iter().copied().filter(|v| v.is_finite()).reduce(f64::max)
}

impl Bounds {
    /// Pantheon's search-space heuristics (branch `greg-find-optimization-limits`):
    /// delay ∈ [0, 2 · median min one-way delay], rate ∈ [0.5 · median peak, 2 · max peak],
    /// queue ∈ [10, 1.5 · max in flight], loss ∈ [0, clamp(4 · median loss, 0.1, 0.5)].
    /// Errors if a list is empty or the result is degenerate.
    pub fn from_observations(o: &Observations) -> Result<Bounds, CalibrateError> {
        let need = |x: Option<f64>, what: &str| {
            x.ok_or_else(|| CalibrateError::Bounds(format!("no {what} observed in the target")))
        };
        let min_delay = need(median(&o.min_delay_ms), "one-way delay")?;
        let peak_med = need(median(&o.peak_tput_mbps), "throughput")?;
        let peak_max = need(max(&o.peak_tput_mbps), "throughput")?;
        let in_flight = need(max(&o.max_in_flight), "packets in flight")?;
        let loss_med = median(&o.loss).unwrap_or(0.0);
        let b = Bounds {
            rate_mbps: (round_rate(0.5 * peak_med), round_rate(2.0 * peak_max)),
            delay_ms: (0, (2.0 * min_delay).ceil().max(1.0) as u32),
            queue_packets: (10, ((1.5 * in_flight).ceil() as u32).max(11)),
            loss: (0.0, (4.0 * loss_med).clamp(0.1, 0.5)),
            cross_mbps: None,
            host_buffer_bytes: None,
        };
        b.check()?;
        Ok(b)
    }

    /// Errors unless every range is finite, non-negative and non-empty, the rate's lower end
    /// is positive and loss stays below 1.
    pub fn check(&self) -> Result<(), CalibrateError> {
        let (r0, r1) = self.rate_mbps;
        let (l0, l1) = self.loss;
        let bad = |m: String| Err(CalibrateError::Bounds(m));
        if !(r0.is_finite() && r1.is_finite() && r0 > 0.0 && r0 < r1) {
            return bad(format!("rate {r0}–{r1} Mbit/s: need 0 < low < high"));
        }
        if self.delay_ms.0 >= self.delay_ms.1 {
            return bad(format!("delay {:?} ms: need low < high", self.delay_ms));
        }
        if self.queue_packets.0 < 1 || self.queue_packets.0 >= self.queue_packets.1 {
            return bad(format!(
                "queue {:?} packets: need 1 ≤ low < high",
                self.queue_packets
            ));
        }
        if !(l0.is_finite() && l1.is_finite() && 0.0 <= l0 && l0 < l1 && l1 < 1.0) {
            return bad(format!("loss {l0}–{l1}: need 0 ≤ low < high < 1"));
        }
        if let Some((c0, c1)) = self.cross_mbps {
            if !(c0.is_finite() && c1.is_finite() && 0.0 <= c0 && c0 < c1 && c1 < r1) {
                return bad(format!(
                    "cross traffic {c0}–{c1} Mbit/s: need 0 ≤ low < high < the highest rate"
                ));
            }
        }
        if let Some((h0, h1)) = self.host_buffer_bytes {
            if !(MIN_HOST_BUFFER <= h0 && h0 < h1) {
                return bad(format!(
                    "host buffers {h0}–{h1} bytes: need {MIN_HOST_BUFFER} ≤ low < high"
                ));
            }
        }
        Ok(())
    }

    /// The bounds in the optimiser's coordinates: rate, delay (int), queue (int), √loss, and
    /// cross traffic when searched.
    #[cfg(feature = "search")]
    fn xtypes(&self) -> Vec<XType> {
        let mut x = vec![
            XType::Float(self.rate_mbps.0, self.rate_mbps.1),
            XType::Int(self.delay_ms.0 as i32, self.delay_ms.1 as i32),
            XType::Int(self.queue_packets.0 as i32, self.queue_packets.1 as i32),
            XType::Float(self.loss.0.sqrt(), self.loss.1.sqrt()),
        ];
        if let Some((c0, c1)) = self.cross_mbps {
            x.push(XType::Float(c0, c1));
        }
        if let Some((h0, h1)) = self.host_buffer_bytes {
            x.push(XType::Float((h0 as f64).log2(), (h1 as f64).log2()));
        }
        x
    }

    /// Each dimension's range in the optimiser's coordinates ([`Bounds::xtypes`]' order).
    #[cfg(feature = "search")]
    fn limits(&self) -> Vec<[f64; 2]> {
        let mut l = vec![
            [self.rate_mbps.0, self.rate_mbps.1],
            [f64::from(self.delay_ms.0), f64::from(self.delay_ms.1)],
            [
                f64::from(self.queue_packets.0),
                f64::from(self.queue_packets.1),
            ],
            [self.loss.0.sqrt(), self.loss.1.sqrt()],
        ];
        if let Some((c0, c1)) = self.cross_mbps {
            l.push([c0, c1]);
        }
        if let Some((h0, h1)) = self.host_buffer_bytes {
            l.push([(h0 as f64).log2(), (h1 as f64).log2()]);
        }
        l
    }

    /// `c` moved inside the bounds (a resumed log or a heuristic guess may lie outside).
    pub fn clamp(&self, c: Candidate) -> Candidate {
        Candidate {
            rate_mbps: round_rate(c.rate_mbps.clamp(self.rate_mbps.0, self.rate_mbps.1)),
            delay_ms: c.delay_ms.clamp(self.delay_ms.0, self.delay_ms.1),
            queue_packets: c
                .queue_packets
                .clamp(self.queue_packets.0, self.queue_packets.1),
            // Loss in steps of 10⁻⁶ (a tiny float would print as `mm-loss uplink 0`).
            loss: (c.loss.clamp(self.loss.0, self.loss.1) * 1e6).round() / 1e6,
            delivery: c.delivery,
            // Cross traffic in 0.01 Mbit/s steps, as the rate.
            cross_mbps: match self.cross_mbps {
                Some((c0, c1)) => (c.cross_mbps.clamp(c0, c1) * 100.0).round() / 100.0,
                None => 0.0,
            },
            // Buffers in whole KiB.
            host_buffer_bytes: match self.host_buffer_bytes {
                Some((h0, h1)) => c.host_buffer_bytes.clamp(h0, h1).div_ceil(1024) * 1024,
                None => 0,
            },
        }
    }
}

/// Rates in 0.01 Mbit/s steps (short traces; finer is below what runs can tell apart).
fn round_rate(mbps: f64) -> f64 {
    ((mbps * 100.0).round() / 100.0).max(0.01)
}

/// `c` in the optimiser's coordinates within `b` ([`Bounds::xtypes`]).
#[cfg(feature = "search")]
fn to_x(c: &Candidate, b: &Bounds) -> Vec<f64> {
    let mut x = vec![
        c.rate_mbps,
        f64::from(c.delay_ms),
        f64::from(c.queue_packets),
        c.loss.sqrt(),
    ];
    if b.cross_mbps.is_some() {
        x.push(c.cross_mbps);
    }
    if let Some((_, h1)) = b.host_buffer_bytes {
        // A candidate of an earlier log without buffers ran with the machine's: large.
        let bytes = if c.host_buffer_bytes > 0 {
            c.host_buffer_bytes
        } else {
            h1
        };
        x.push((bytes as f64).log2());
    }
    x
}

#[cfg(feature = "search")]
fn from_x(x: &[f64], delivery: Delivery, b: &Bounds) -> Candidate {
    let mut optional = x[4..].iter().copied();
    // Each optional dimension takes the next coordinate only if it is searched.
    let cross_mbps = b.cross_mbps.and_then(|_| optional.next()).unwrap_or(0.0);
    let host_buffer_bytes = b
        .host_buffer_bytes
        .and_then(|_| optional.next())
        .map_or(0, |l| l.exp2().round() as u64);
    b.clamp(Candidate {
        rate_mbps: x[0],
        delay_ms: x[1].round().max(0.0) as u32,
        queue_packets: x[2].round().max(1.0) as u32,
        loss: x[3].max(0.0).powi(2),
        delivery,
        cross_mbps,
        host_buffer_bytes,
    })
}

/// One measured candidate: a line of the search log.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Evaluation {
    /// The emulator.
    pub candidate: Candidate,
    /// Replication error's throughput part, percent (`None` if the evaluation failed).
    pub tput_error_pct: Option<f64>,
    /// Its delay part, percent.
    pub delay_error_pct: Option<f64>,
    /// The replication error, percent: the objective.
    pub overall_error_pct: Option<f64>,
    /// Per scheme: (median throughput Mbit/s, median p95 one-way delay ms) over the emulator.
    pub schemes: BTreeMap<String, (f64, f64)>,
    /// Why it failed, if it did.
    pub failure: Option<String>,
}

impl Evaluation {
    /// The search-log line: Pantheon's `bw=…,delay=…,uplink_queue=…,tput_loss=…,delay_loss=…,
    /// overall_loss=…` (its `parse_search_log.py` reads these keys), then ours: `uplink_loss`,
    /// `delivery`, `uplink_cross` (Mbit/s, when not 0), `host_buffer` (bytes, when set),
    /// `<scheme>.tput`, `<scheme>.delay` and,
    /// for a failed evaluation, `failed` (commas in the reason become semicolons). No trailing
    /// newline.
    pub fn to_line(&self) -> String {
        let c = &self.candidate;
        let mut s = format!(
            "bw={:.2},delay={},uplink_queue={},uplink_loss={},delivery={}",
            c.rate_mbps,
            c.delay_ms,
            c.queue_packets,
            fmt_loss(c.loss),
            delivery_str(c.delivery)
        );
        if c.cross_mbps > 0.0 {
            let _ = write!(s, ",uplink_cross={:.2}", c.cross_mbps);
        }
        if c.host_buffer_bytes > 0 {
            let _ = write!(s, ",host_buffer={}", c.host_buffer_bytes);
        }
        for (k, v) in [
            ("tput_loss", self.tput_error_pct),
            ("delay_loss", self.delay_error_pct),
            ("overall_loss", self.overall_error_pct),
        ] {
            if let Some(v) = v {
                let _ = write!(s, ",{k}={v:.4}");
            }
        }
        for (scheme, (t, d)) in &self.schemes {
            let _ = write!(s, ",{scheme}.tput={t:.4},{scheme}.delay={d:.4}");
        }
        if let Some(f) = &self.failure {
            let _ = write!(s, ",failed={}", f.replace([',', '\n'], ";"));
        }
        s
    }

    /// Parses a line written by [`Evaluation::to_line`]; `line_no` (1-based) names it in errors.
    pub fn parse_line(line: &str, line_no: usize) -> Result<Evaluation, CalibrateError> {
        let err = |message: String| CalibrateError::Log {
            line: line_no,
            message,
        };
        let mut fields = BTreeMap::new();
        let mut failure = None;
        for part in line.trim().split(',') {
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| err(format!("`{part}` is not key=value")))?;
            if k == "failed" {
                // The reason is the rest of the line.
                failure = Some(line.split_once(",failed=").map_or(v, |x| x.1).to_owned());
                break;
            }
            fields.insert(k.to_owned(), v.to_owned());
        }
        let num = |k: &str| -> Result<f64, CalibrateError> {
            let v = fields.get(k).ok_or_else(|| err(format!("no `{k}`")))?;
            v.parse::<f64>()
                .map_err(|_| err(format!("`{k}={v}` is not a number")))
        };
        let opt = |k: &str| fields.contains_key(k).then(|| num(k)).transpose();
        let delivery = match fields.get("delivery") {
            None => Delivery::Trace,
            Some(d) => parse_delivery(d)
                .ok_or_else(|| err(format!("`delivery={d}`: expected constant or poisson")))?,
        };
        let candidate = Candidate {
            rate_mbps: num("bw")?,
            delay_ms: num("delay")? as u32,
            queue_packets: num("uplink_queue")? as u32,
            loss: opt("uplink_loss")?.unwrap_or(0.0),
            delivery,
            cross_mbps: opt("uplink_cross")?.unwrap_or(0.0),
            host_buffer_bytes: opt("host_buffer")?.unwrap_or(0.0) as u64,
        };
        let mut schemes = BTreeMap::new();
        for k in fields.keys() {
            if let Some(scheme) = k.strip_suffix(".tput") {
                let d = num(&format!("{scheme}.delay"))?;
                schemes.insert(scheme.to_owned(), (num(k)?, d));
            }
        }
        Ok(Evaluation {
            candidate,
            tput_error_pct: opt("tput_loss")?,
            delay_error_pct: opt("delay_loss")?,
            overall_error_pct: opt("overall_loss")?,
            schemes,
            failure,
        })
    }
}

#[cfg(feature = "search")]
/// Bayesian optimisation of one delivery process's four parameters: tell it measured errors,
/// ask it for the next candidates.
pub struct Search {
    bounds: Bounds,
    delivery: Delivery,
    seed: u64,
    service: EgorServiceApi<MixintGpMixtureParams>,
    x: Vec<Vec<f64>>,
    y: Vec<f64>,
}

/// Errors of failed evaluations are told to the surrogate as this much worse than the worst
/// measured one (a failed run is a bad emulator, not a missing point).
#[cfg(feature = "search")]
const FAILURE_PENALTY: f64 = 1.5;

#[cfg(feature = "search")]
impl Search {
    /// A search over `bounds` with `delivery`, proposing `batch` candidates per
    /// [`Search::suggest`] (for parallel evaluations; qEI with the kriging believer); `seed`
    /// makes it reproducible.
    pub fn new(
        bounds: Bounds,
        delivery: Delivery,
        batch: usize,
        seed: u64,
    ) -> Result<Search, CalibrateError> {
        bounds.check()?;
        let service = EgorServiceBuilder::optimize()
            .configure(|c| {
                c.infill_strategy(InfillStrategy::LogEI)
                    .configure_qei(|q| q.batch(batch.max(1)))
                    .seed(seed)
            })
            .min_within_mixint_space(&bounds.xtypes())
            .map_err(|e| CalibrateError::Optimiser(e.to_string()))?;
        Ok(Search {
            bounds,
            delivery,
            seed,
            service,
            x: Vec::new(),
            y: Vec::new(),
        })
    }

    /// The bounds searched.
    pub fn bounds(&self) -> &Bounds {
        &self.bounds
    }

    /// `n` space-filling candidates (a Latin hypercube of the search space), the first ones
    /// replaced by `guesses` (moved inside the bounds).
    pub fn initial_design(&self, n: usize, guesses: &[Candidate]) -> Vec<Candidate> {
        use egobox_doe::{Lhs, SamplingMethod};
        use rand_xoshiro::rand_core::SeedableRng;
        if n == 0 {
            return Vec::new();
        }
        let limits = ndarray::arr2(&self.bounds.limits());
        // egobox-doe's Lhs never returns from a sample of one point (`--max-evals 1` spun
        // forever): draw two and keep the first.
        let lhs = Lhs::new(&limits)
            .with_rng(rand_xoshiro::Xoshiro256Plus::seed_from_u64(self.seed))
            .sample(n.max(2));
        let mut out: Vec<Candidate> = lhs
            .axis_iter(Axis(0))
            .take(n)
            .map(|row| from_x(&row.to_vec(), self.delivery, &self.bounds))
            .collect();
        for (slot, g) in out.iter_mut().zip(guesses) {
            *slot = self.bounds.clamp(Candidate {
                delivery: self.delivery,
                ..*g
            });
        }
        out
    }

    /// A point of the space drawn at random (seeded by the search's seed, the evaluations told
    /// and `k`): what the search measures instead of a suggestion already measured — the
    /// surrogate expects no improvement there, and the same candidate again would teach it
    /// nothing (the `--confirm` phase measures the best again, with other seeds).
    pub fn explore(&self, k: u64) -> Candidate {
        use egobox_doe::{Lhs, SamplingMethod};
        use rand_xoshiro::rand_core::SeedableRng;
        let draw = self.seed ^ (self.told() as u64 + k + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let lhs = Lhs::new(&ndarray::arr2(&self.bounds.limits()))
            .with_rng(rand_xoshiro::Xoshiro256Plus::seed_from_u64(draw))
            .sample(2);
        from_x(&lhs.row(0).to_vec(), self.delivery, &self.bounds)
    }

    /// Records a measured candidate; `error_pct` `None` = the evaluation failed.
    pub fn tell(&mut self, c: &Candidate, error_pct: Option<f64>) {
        self.x.push(to_x(c, &self.bounds));
        self.y.push(error_pct.unwrap_or(f64::NAN));
    }

    /// Evaluations told so far.
    pub fn told(&self) -> usize {
        self.x.len()
    }

    /// The next candidates (up to the batch size) by expected improvement; empty before any
    /// candidate was told. Failed evaluations count as [`FAILURE_PENALTY`] × the worst error.
    pub fn suggest(&self) -> Vec<Candidate> {
        let worst = self
            .y
            .iter()
            .copied()
            .filter(|v| v.is_finite())
            .reduce(f64::max);
        let Some(worst) = worst else {
            return Vec::new();
        };
        let dims = self.bounds.limits().len();
        let x = Array2::from_shape_fn((self.x.len(), dims), |(i, j)| self.x[i][j]);
        let y = Array2::from_shape_fn((self.y.len(), 1), |(i, _)| {
            let v = self.y[i];
            if v.is_finite() {
                v
            } else {
                worst * FAILURE_PENALTY
            }
        });
        let next = self.service.suggest(&x, &y);
        next.axis_iter(Axis(0))
            .map(|row| from_x(&row.to_vec(), self.delivery, &self.bounds))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The search space of the tests around [`hidden`]: the four network parameters only.
    fn four_parameters() -> Bounds {
        Bounds {
            rate_mbps: (12.0, 48.0),
            delay_ms: (0, 61),
            queue_packets: (10, 270),
            loss: (0.0, 0.1),
            cross_mbps: None,
            host_buffer_bytes: None,
        }
    }

    fn hidden() -> Candidate {
        Candidate {
            rate_mbps: 24.0,
            delay_ms: 30,
            queue_packets: 60,
            loss: 0.005,
            delivery: Delivery::Trace,
            cross_mbps: 0.0,
            host_buffer_bytes: 0,
        }
    }

    #[test]
    fn candidate_is_a_pantheon_emulator() {
        let c = hidden();
        let flags = |c: Candidate| c.emulator(Path::new("t")).pantheon_flags().unwrap();
        let f = flags(c);
        assert_eq!(f.prepend_mm_cmds, "mm-delay 30 mm-loss uplink 0.005");
        assert_eq!(
            f.extra_mm_link_args,
            "--uplink-queue=droptail --uplink-queue-args=packets=60"
        );
        assert_eq!(f.uplink_trace, Path::new("t"));
        let p = Candidate {
            loss: 0.0,
            delivery: Delivery::Poisson,
            ..c
        };
        let f = flags(p);
        assert_eq!(f.prepend_mm_cmds, "mm-delay 30");
        assert!(f
            .extra_mm_link_args
            .ends_with("--uplink-delivery=poisson --downlink-delivery=poisson"));
        // Loss to the search's resolution, six decimals, and no further.
        let fine = Candidate {
            loss: 0.012_345_678,
            ..c
        };
        assert_eq!(
            flags(fine).prepend_mm_cmds,
            "mm-delay 30 mm-loss uplink 0.012346"
        );
        assert_eq!(
            c.describe(),
            "24.00 Mbit/s constant, 30 ms, 60 packets, loss 0.5000 %"
        );
    }

    #[test]
    fn bounds_follow_pantheon_heuristics() {
        let o = Observations {
            min_delay_ms: vec![30.5, 31.0, 30.0],
            peak_tput_mbps: vec![20.0, 24.0, 23.0],
            max_in_flight: vec![100.0, 180.0],
            loss: vec![0.005, 0.006, 0.004],
        };
        let b = Bounds::from_observations(&o).unwrap();
        assert_eq!(b.delay_ms, (0, 61));
        assert_eq!(b.rate_mbps, (11.5, 48.0));
        assert_eq!(b.queue_packets, (10, 270));
        assert_eq!(b.loss, (0.0, 0.1)); // 4 × 0.005 clamped up to 0.1
        let lossy = Observations {
            loss: vec![0.2],
            ..o.clone()
        };
        assert_eq!(Bounds::from_observations(&lossy).unwrap().loss.1, 0.5);
        let empty = Observations {
            min_delay_ms: vec![],
            ..o
        };
        assert!(matches!(
            Bounds::from_observations(&empty),
            Err(CalibrateError::Bounds(m)) if m.contains("one-way delay")
        ));
    }

    /// `c` measured with 1 % of every error and no per-scheme figures.
    fn scored_one_pct(c: Candidate) -> Evaluation {
        Evaluation {
            candidate: c,
            tput_error_pct: Some(1.0),
            delay_error_pct: Some(1.0),
            overall_error_pct: Some(1.0),
            schemes: BTreeMap::new(),
            failure: None,
        }
    }

    /// A candidate with cross traffic carries it on its mm-link's uplink, says so, and its
    /// search-log line reads back; the bounds refuse cross traffic above the rates searched.
    #[test]
    fn cross_traffic_is_a_fifth_parameter_when_searched() {
        let c = Candidate {
            cross_mbps: 8.0,
            ..hidden()
        };
        let f = c.emulator(Path::new("t")).pantheon_flags().unwrap();
        assert!(
            f.extra_mm_link_args.ends_with("--uplink-cross-traffic=8"),
            "{}",
            f.extra_mm_link_args
        );
        assert!(c.describe().ends_with(", cross traffic 8.00 Mbit/s"));
        let e = scored_one_pct(c);
        assert!(
            e.to_line().contains(",uplink_cross=8.00,"),
            "{}",
            e.to_line()
        );
        assert_eq!(Evaluation::parse_line(&e.to_line(), 1).unwrap(), e);
        let mut b = four_parameters();
        assert_eq!(b.clamp(c).cross_mbps, 0.0, "not searched: none");
        b.cross_mbps = Some((0.0, 20.0));
        assert_eq!(
            b.clamp(Candidate {
                cross_mbps: 31.0,
                ..c
            })
            .cross_mbps,
            20.0
        );
        b.cross_mbps = Some((0.0, 50.0));
        assert!(b
            .check()
            .unwrap_err()
            .to_string()
            .contains("cross traffic 0–50"));
    }

    /// A candidate with end-host buffers carries them as a `pt-host` shell first; its log line
    /// reads back; in the optimiser's coordinates (log₂ bytes, after cross traffic) it maps
    /// back to itself.
    #[test]
    fn host_buffers_are_a_parameter_when_searched() {
        let c = Candidate {
            host_buffer_bytes: 2 << 20,
            cross_mbps: 4.0,
            ..hidden()
        };
        let f = c.emulator(Path::new("t")).pantheon_flags().unwrap();
        assert_eq!(
            f.prepend_mm_cmds,
            "pt-host both tcp_rmem=4096,87380,2097152 tcp_wmem=4096,16384,2097152 mm-delay 30 \
             mm-loss uplink 0.005"
        );
        assert!(c.describe().ends_with(", host buffers 2048 KiB"));
        let small = Candidate {
            host_buffer_bytes: 65536,
            ..c
        };
        let words = small.host_shell().unwrap().words().join(" ");
        assert_eq!(
            words,
            "pt-host both tcp_rmem=4096,65536,65536 tcp_wmem=4096,16384,65536"
        );
        let e = scored_one_pct(c);
        assert!(
            e.to_line().contains(",host_buffer=2097152"),
            "{}",
            e.to_line()
        );
        assert_eq!(Evaluation::parse_line(&e.to_line(), 1).unwrap(), e);
        let b = Bounds {
            cross_mbps: Some((0.0, 12.0)),
            host_buffer_bytes: Some((MIN_HOST_BUFFER, 64 << 20)),
            ..four_parameters()
        };
        assert_eq!(
            b.clamp(Candidate {
                host_buffer_bytes: 100_000,
                ..c
            })
            .host_buffer_bytes,
            100_352
        );
        #[cfg(feature = "search")]
        {
            let x = to_x(&c, &b);
            assert_eq!(x.len(), 6);
            assert_eq!(x[5], 21.0);
            assert_eq!(from_x(&x, Delivery::Trace, &b), c);
            let only_hosts = Bounds {
                cross_mbps: None,
                ..b
            };
            let x = to_x(&c, &only_hosts);
            assert_eq!((x.len(), x[4]), (5, 21.0));
            let back = from_x(&x, Delivery::Trace, &only_hosts);
            assert_eq!((back.cross_mbps, back.host_buffer_bytes), (0.0, 2 << 20));
        }
        let bad = Bounds {
            host_buffer_bytes: Some((1024, 1 << 20)),
            ..b
        };
        assert!(bad
            .check()
            .unwrap_err()
            .to_string()
            .contains("host buffers 1024"));
    }

    #[test]
    fn search_log_lines_round_trip_and_errors_name_the_line() {
        let mut schemes = BTreeMap::new();
        schemes.insert("cubic".to_owned(), (3.41, 31.2));
        schemes.insert("bbr".to_owned(), (22.9, 58.7));
        let e = Evaluation {
            candidate: hidden(),
            tput_error_pct: Some(1.5),
            delay_error_pct: Some(2.5),
            overall_error_pct: Some(2.0),
            schemes,
            failure: None,
        };
        let line = e.to_line();
        assert!(line.starts_with("bw=24.00,delay=30,uplink_queue=60,uplink_loss=0.005"));
        assert!(line.contains(",tput_loss=1.5000,delay_loss=2.5000,overall_loss=2.0000"));
        assert_eq!(Evaluation::parse_line(&line, 1).unwrap(), e);
        let failed = Evaluation {
            tput_error_pct: None,
            delay_error_pct: None,
            overall_error_pct: None,
            schemes: BTreeMap::new(),
            failure: Some("bbr: run 1 failed; exited early".into()),
            ..e.clone()
        };
        let fl = Evaluation {
            failure: Some("bbr: run 1 failed, exited early".into()),
            ..failed.clone()
        }
        .to_line();
        assert_eq!(Evaluation::parse_line(&fl, 2).unwrap(), failed);
        // Pantheon's own lines (no delivery, no loss) still read.
        let old = Evaluation::parse_line(
            "bw=114.68,delay=45,uplink_queue=450,tput_loss=3,delay_loss=5,overall_loss=4",
            3,
        )
        .unwrap();
        assert_eq!(old.candidate.delivery, Delivery::Trace);
        assert_eq!(old.overall_error_pct, Some(4.0));
        let bad = Evaluation::parse_line("bw=abc,delay=1,uplink_queue=2", 7).unwrap_err();
        assert_eq!(
            bad.to_string(),
            "search log line 7: `bw=abc` is not a number"
        );
    }

    #[cfg(feature = "search")]
    /// The search finds the minimum of a smooth stand-in for the replication error (distance
    /// to the hidden emulator) within a small budget, integers and the √loss axis included;
    /// with cross traffic searched, a fifth axis.
    #[test]
    fn search_converges_on_a_synthetic_objective() {
        let b = four_parameters();
        converges(b, hidden(), 20);
        let with_cross = Bounds {
            cross_mbps: Some((0.0, 12.0)),
            ..b
        };
        converges(
            with_cross,
            Candidate {
                cross_mbps: 6.0,
                ..hidden()
            },
            35,
        );
    }

    #[cfg(feature = "search")]
    fn converges(b: Bounds, h: Candidate, rounds: usize) {
        let f = |c: &Candidate| {
            100.0
                * (((c.rate_mbps - h.rate_mbps) / 36.0).powi(2)
                    + ((f64::from(c.delay_ms) - 30.0) / 61.0).powi(2)
                    + ((f64::from(c.queue_packets) - 60.0) / 260.0).powi(2)
                    + ((c.loss.sqrt() - h.loss.sqrt()) / 0.316).powi(2)
                    + ((c.cross_mbps - h.cross_mbps) / 12.0).powi(2))
                .sqrt()
        };
        let mut s = Search::new(b, Delivery::Trace, 1, 7).unwrap();
        for c in s.initial_design(6, &[]) {
            assert_eq!(c, b.clamp(c), "initial design inside the bounds");
            s.tell(&c, Some(f(&c)));
        }
        let first_best = s.y.iter().copied().fold(f64::INFINITY, f64::min);
        let mut best = first_best;
        for _ in 0..rounds {
            let next = s.suggest();
            assert_eq!(next.len(), 1);
            for c in next {
                best = best.min(f(&c));
                s.tell(&c, Some(f(&c)));
            }
        }
        assert!(
            best < 5.0 && best < first_best,
            "best {best}, after the design {first_best}"
        );
    }
}
