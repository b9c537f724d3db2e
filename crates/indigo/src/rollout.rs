//! Rollouts: one Indigo flow over a training emulator in simulated time ([`sim`]), its
//! decisions recorded with the oracle's labels; and the oracle's ideal window per emulator.
//!
//! The oracle of a constant link knows its ideal window: the bandwidth-delay product
//! ([`bdp_packets`]). A calibrated emulator (Poisson delivery, random loss, a finite queue)
//! has no such formula, so, as the paper does, the oracle searches near the BDP in simulation
//! for the best fixed window ([`search_window`]): the window a teacher holds for a whole run
//! that gives the highest power (throughput ÷ p95 one-way delay).

use std::collections::HashMap;
use std::io;
use std::sync::Arc;

use emucal::mm::{EmulatedPath, LinkDirection, Shell};
use emucal::schedule::ScheduleKind;
use emucal::stage::LinkEvent;
use sim::run::{simulate, FlowSpec, HostLatency, SimConfig, SimError, Sink};
use tunnel::log::{Direction, Kind, Record};

use crate::controller::{bdp_packets, Decision, IndigoFactory, Recorder, Teacher};
use crate::policy::Frozen;

/// An emulator of the training set: its name (a preset's, a file's or the synthetic set's
/// `RATEmbps-DELAYms`), the path, and the oracle's ideal window for one flow, packets.
#[derive(Debug, Clone)]
pub struct TrainingEmulator {
    /// How the training log and the progress name it.
    pub name: String,
    /// The emulated path (traces loaded).
    pub path: EmulatedPath,
    /// The oracle's window, packets.
    pub ideal_cwnd: f64,
}

/// The round-trip time of `path` without queueing, ms: twice the sum of its `mm-delay`s, plus
/// its one-direction `pt-delay`s once and its delay schedules' first values once.
pub fn base_rtt_ms(path: &EmulatedPath) -> f64 {
    path.shells
        .iter()
        .map(|s| match s {
            Shell::Delay { ms } => 2.0 * *ms as f64,
            Shell::OneWayDelay { ms, .. } => *ms as f64,
            Shell::Schedule {
                kind: ScheduleKind::Delay,
                schedule,
                ..
            } => schedule.at(0),
            _ => 0.0,
        })
        .sum::<f64>()
}

/// The bandwidth-delay product of `path` for one flow, packets: its uplink bottleneck's mean
/// rate × its base RTT; `None` without a bottleneck (delay and loss only).
pub fn path_bdp(path: &EmulatedPath) -> Option<f64> {
    path.uplink_mbps()
        .map(|mbps| bdp_packets(mbps, base_rtt_ms(path), 1))
}

/// What a simulated flow achieved, measured as the tunnel would log it: flow 1's datalink
/// packets, egress to ingress.
#[derive(Debug, Default, Clone, serde::Serialize, serde::Deserialize)]
pub struct Meter {
    sent: HashMap<u64, u64>,
    delays_ms: Vec<f64>,
    bytes: u64,
    first_ns: Option<u64>,
    last_ns: u64,
}

impl Meter {
    /// Throughput, Mbit/s: bytes delivered between the first and the last delivery, as
    /// Pantheon's analysis computes it; 0 before two deliveries.
    pub fn tput_mbps(&self) -> f64 {
        match self.first_ns {
            Some(f) if self.last_ns > f => {
                self.bytes as f64 * 8.0 / (self.last_ns - f) as f64 * 1e3
            }
            _ => 0.0,
        }
    }

    /// The 95th percentile of the one-way delays, ms (nearest rank); `None` without any.
    pub fn p95_delay_ms(&self) -> Option<f64> {
        let mut d = self.delays_ms.clone();
        d.sort_by(f64::total_cmp);
        tunnel::log::percentile_nearest(&d, 0.95)
    }

    /// Kleinrock's power: throughput (Mbit/s) ÷ p95 delay (s); 0 without deliveries.
    pub fn power(&self) -> f64 {
        self.p95_delay_ms()
            .filter(|d| *d > 0.0)
            .map_or(0.0, |d| self.tput_mbps() / (d / 1e3))
    }
}

impl Sink for Meter {
    fn packet(&mut self, direction: Direction, r: &Record, _inner: &[u8]) -> io::Result<()> {
        if direction != Direction::Datalink || r.flow != 1 {
            return Ok(());
        }
        match r.kind {
            Kind::Egress => {
                self.sent.insert(r.uid, r.t_ns);
            }
            Kind::Ingress => {
                if let Some(s) = self.sent.remove(&r.uid) {
                    self.delays_ms.push(r.t_ns.saturating_sub(s) as f64 / 1e6);
                }
                self.bytes += u64::from(r.size);
                self.first_ns.get_or_insert(r.t_ns);
                self.last_ns = r.t_ns;
            }
        }
        Ok(())
    }

    fn link_events(&mut self, _: LinkDirection, _: usize, _: &[LinkEvent]) -> io::Result<()> {
        Ok(())
    }
}

/// One rollout's result: the flow's decisions (each with the oracle's action) and what it
/// achieved.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Rollout {
    /// The decisions, in order.
    pub decisions: Vec<Decision>,
    /// Throughput and delay of the flow.
    pub meter: Meter,
}

/// How rollouts run: their length and the hosts' latency.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Conditions {
    /// Simulated seconds of each rollout.
    pub secs: u64,
    /// The latency the hosts add to each packet ([`HostLatency`]). [`HostLatency::MEASURED`]
    /// (this kind of machine's) gives the policy the noise its RTT samples carry in real time;
    /// [`HostLatency::NONE`], ideal hosts.
    pub host: HostLatency,
}

impl Conditions {
    /// Rollouts of `secs` simulated seconds between ideal hosts.
    pub fn ideal(secs: u64) -> Conditions {
        Conditions {
            secs,
            host: HostLatency::NONE,
        }
    }
}

/// Runs one flow over `emulator` in simulated time (`run`: how long, which hosts) with Indigo
/// deciding: the `policy` (none: the oracle alone), the oracle followed at a share `beta` of
/// the decisions, draws of the path, the hosts and the mixture from `seed`.
pub fn rollout(
    emulator: &TrainingEmulator,
    policy: Option<Arc<Frozen>>,
    beta: f64,
    run: Conditions,
    seed: u64,
) -> Result<Rollout, SimError> {
    let recorder = Recorder::default();
    let factory = IndigoFactory {
        policy,
        teacher: Some(Teacher {
            ideal_cwnd: emulator.ideal_cwnd,
            beta,
            seed,
        }),
        recorder: Some(recorder.clone()),
    };
    let config = SimConfig {
        path: &emulator.path,
        flows: vec![FlowSpec {
            cc: Arc::new(factory),
            start_ns: 0,
            stop_ns: None,
            l4s: false,
        }],
        seed,
        end_ns: run.secs * 1_000_000_000,
        drain_ns: 0,
        max_udp_payload: sim::quic::MAX_UDP_PAYLOAD,
        host: run.host,
        host_seed: seed,
    };
    let mut meter = Meter::default();
    simulate(&config, &mut meter, &mut |_| true)?;
    // The client's controller is built first and decides; the server's sends only ACKs
    // (quinn-proto gives both ends the factory), so the longest list is the sender's.
    let mut lists = std::mem::take(&mut *recorder.lock().expect("the recorder's lock"));
    lists.sort_by_key(|l| std::cmp::Reverse(l.len()));
    let decisions = lists.into_iter().next().unwrap_or_default();
    Ok(Rollout { decisions, meter })
}

/// Where rollouts run: here ([`Local`]), or elsewhere (the CLI's Slurm job steps).
pub trait Runner: Send + Sync {
    /// [`rollout`] over `emulators[i]` (`i` numbers it in the training set the caller was
    /// given, for a runner that rebuilds the set elsewhere).
    fn rollout(
        &self,
        i: usize,
        emulator: &TrainingEmulator,
        policy: Option<Arc<Frozen>>,
        beta: f64,
        run: Conditions,
        seed: u64,
    ) -> Result<Rollout, SimError>;
}

/// Rollouts in this process (threads of [`rollout_all`]).
pub struct Local;

impl Runner for Local {
    fn rollout(
        &self,
        _: usize,
        emulator: &TrainingEmulator,
        policy: Option<Arc<Frozen>>,
        beta: f64,
        run: Conditions,
        seed: u64,
    ) -> Result<Rollout, SimError> {
        rollout(emulator, policy, beta, run, seed)
    }
}

/// Rolls out `policy` (at DAgger's `beta`) over every emulator (`run`: how long, which hosts),
/// `jobs` at a time, emulator `i` with seed `seed(i)`; `done(k, n)` after each of the `n`
/// rollouts, each run by `runner`. The results are in the emulators' order; the first failure
/// is returned with its emulator's index.
#[allow(clippy::too_many_arguments)]
pub fn rollout_all(
    runner: &dyn Runner,
    emulators: &[TrainingEmulator],
    policy: Option<Arc<Frozen>>,
    beta: f64,
    run: Conditions,
    jobs: usize,
    seed: &(dyn Fn(usize) -> u64 + Sync),
    done: &mut dyn FnMut(usize, usize),
) -> Result<Vec<Rollout>, (usize, SimError)> {
    let mut out: Vec<Option<Rollout>> = vec![None; emulators.len()];
    let next = std::sync::atomic::AtomicUsize::new(0);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::scope(|s| {
        for _ in 0..jobs.clamp(1, emulators.len().max(1)) {
            let (tx, policy, next) = (tx.clone(), policy.clone(), &next);
            s.spawn(move || loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(e) = emulators.get(i) else { break };
                let r = runner.rollout(i, e, policy.clone(), beta, run, seed(i));
                let failed = r.is_err();
                if tx.send((i, r)).is_err() || failed {
                    // Failing: take the others' emulators so that they stop too.
                    next.store(emulators.len(), std::sync::atomic::Ordering::Relaxed);
                    break;
                }
            });
        }
        drop(tx);
        let mut first_error = None;
        for (k, (i, r)) in rx.iter().enumerate() {
            match r {
                Ok(r) => out[i] = Some(r),
                Err(e) => {
                    first_error.get_or_insert((i, e));
                }
            }
            done(k + 1, emulators.len());
        }
        first_error.map_or(Ok(()), Err)
    })?;
    Ok(out.into_iter().flatten().collect())
}

/// How a policy alone did over one emulator.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Evaluation {
    /// The emulator.
    pub emulator: String,
    /// Its uplink's mean rate, Mbit/s (`None`: no bottleneck).
    pub capacity_mbps: Option<f64>,
    /// Its one-way delay without queueing, ms.
    pub base_delay_ms: f64,
    /// The flow's throughput, Mbit/s.
    pub tput_mbps: f64,
    /// The flow's p95 one-way delay, ms.
    pub p95_delay_ms: Option<f64>,
}

impl Evaluation {
    /// Throughput ÷ capacity (0–1; `None` without a bottleneck).
    pub fn utilization(&self) -> Option<f64> {
        self.capacity_mbps
            .filter(|c| *c > 0.0)
            .map(|c| self.tput_mbps / c)
    }

    /// p95 one-way delay ÷ the one-way delay without queueing (1: no queue); `None` without
    /// a delay.
    pub fn delay_ratio(&self) -> Option<f64> {
        Some(self.p95_delay_ms? / self.base_delay_ms.max(1e-3))
    }

    /// Normalized power: utilization ÷ delay ratio; 1 is a full link without a queue. `None`
    /// without a bottleneck or a delay.
    pub fn normalized_power(&self) -> Option<f64> {
        Some(self.utilization()? / self.delay_ratio()?.max(1e-9))
    }

    /// `rollout`'s over `emulator`.
    pub fn of(emulator: &TrainingEmulator, rollout: &Rollout) -> Evaluation {
        Evaluation {
            emulator: emulator.name.clone(),
            capacity_mbps: emulator.path.uplink_mbps(),
            base_delay_ms: base_rtt_ms(&emulator.path) / 2.0,
            tput_mbps: rollout.meter.tput_mbps(),
            p95_delay_ms: rollout.meter.p95_delay_ms(),
        }
    }
}

/// The mean over `evaluations` of `f` (those without a value count as 0); 0 without any.
pub fn mean(evaluations: &[Evaluation], f: impl Fn(&Evaluation) -> Option<f64>) -> f64 {
    evaluations.iter().filter_map(f).sum::<f64>() / evaluations.len().max(1) as f64
}

/// The geometric mean over `evaluations` of their [`Evaluation::normalized_power`] (each at
/// least 10⁻⁶, so that one starved flow weighs but does not zero the whole); 0 without any.
pub fn score(evaluations: &[Evaluation]) -> f64 {
    let logs: Vec<f64> = evaluations
        .iter()
        .filter_map(Evaluation::normalized_power)
        .map(|p| p.max(1e-6).ln())
        .collect();
    if logs.is_empty() {
        return 0.0;
    }
    (logs.iter().sum::<f64>() / logs.len() as f64).exp()
}

/// The policy alone (β = 0) over every emulator (`run`: how long, which hosts), `jobs` at a
/// time, seed `seed`, run by `runner`.
pub fn evaluate(
    runner: &dyn Runner,
    emulators: &[TrainingEmulator],
    policy: Arc<Frozen>,
    run: Conditions,
    jobs: usize,
    seed: u64,
    done: &mut dyn FnMut(usize, usize),
) -> Result<Vec<Evaluation>, (usize, SimError)> {
    let seed = move |i: usize| seed ^ ((i as u64) << 8);
    let rollouts = rollout_all(runner, emulators, Some(policy), 0.0, run, jobs, &seed, done)?;
    Ok(emulators
        .iter()
        .zip(&rollouts)
        .map(|(e, r)| Evaluation::of(e, r))
        .collect())
}

/// The oracle's best fixed window for `path`, packets, and its power: of the windows
/// `bdp × f` for `f` in `factors`, the one whose teacher-held run of `secs` seconds (seed
/// `seed`, ideal hosts: the oracle knows the link, not the hosts) has the highest
/// [`Meter::power`]. `None` without a bottleneck.
pub fn search_window(
    name: &str,
    path: &EmulatedPath,
    factors: &[f64],
    secs: u64,
    seed: u64,
) -> Result<Option<(f64, f64)>, SimError> {
    let Some(bdp) = path_bdp(path) else {
        return Ok(None);
    };
    let mut best: Option<(f64, f64)> = None;
    for f in factors {
        let e = TrainingEmulator {
            name: name.to_owned(),
            path: path.clone(),
            ideal_cwnd: (bdp * f).max(crate::state::MIN_CWND),
        };
        let power = rollout(&e, None, 1.0, Conditions::ideal(secs), seed)?
            .meter
            .power();
        if best.is_none_or(|b| power > b.1) {
            best = Some((e.ideal_cwnd, power));
        }
    }
    Ok(best)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn constant_path(
        dir: &std::path::Path,
        mbps: u32,
        delay_ms: u64,
        extra: &str,
    ) -> EmulatedPath {
        std::fs::create_dir_all(dir).unwrap();
        // One 1500-byte opportunity per ms per 12 Mbit/s: `mbps / 12` lines of the same ms.
        let t = dir.join(format!("{mbps}.trace"));
        let per_ms = (mbps / 12).max(1);
        let text: String = (0..per_ms).map(|_| "1\n").collect();
        std::fs::write(&t, text).unwrap();
        let t = t.display().to_string();
        let shells =
            emucal::mm::parse_shells(&format!("mm-delay {delay_ms} mm-link {t} {t} {extra}"))
                .unwrap();
        EmulatedPath::load(shells, vec![]).unwrap()
    }

    #[test]
    fn the_bdp_of_a_path_is_its_rate_times_twice_its_delays() {
        let dir = std::env::temp_dir().join(format!("indigo-bdp-{}", std::process::id()));
        let p = constant_path(&dir, 24, 20, "");
        assert_eq!(base_rtt_ms(&p), 40.0);
        // 24 Mbit/s × 40 ms = 120 000 bytes = 80 packets.
        assert!(
            (path_bdp(&p).unwrap() - 80.0).abs() < 0.5,
            "{:?}",
            path_bdp(&p)
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_oracle_fills_the_link_with_the_small_queue_of_its_band() {
        let dir = std::env::temp_dir().join(format!("indigo-oracle-{}", std::process::id()));
        let p = constant_path(&dir, 12, 20, "");
        let e = TrainingEmulator {
            name: "12mbps-20ms".into(),
            ideal_cwnd: path_bdp(&p).unwrap(),
            path: p.clone(),
        };
        let r = rollout(&e, None, 1.0, Conditions::ideal(5), 1).unwrap();
        assert!(r.meter.tput_mbps() > 10.5, "{}", r.meter.tput_mbps());
        // p95 one-way delay: the 20 ms path and the queue of the oracle's band, 44–54 packets
        // for a BDP of 40 (`keep_band`): 4–14 packets of 1 ms each at 12 Mbit/s.
        let d = r.meter.p95_delay_ms().unwrap();
        assert!((22.0..35.0).contains(&d), "{d} ms");
        // A decision per 10 ms over most of the 5 s, each labelled and followed.
        assert!(r.decisions.len() > 400, "{}", r.decisions.len());
        assert!(r.decisions.iter().all(|x| x.oracle == Some(x.taken)));
        // The fixed-window search lands near the BDP (40 packets here).
        let (w, _) = search_window("12", &p, &[0.5, 1.0, 2.0], 5, 1)
            .unwrap()
            .unwrap();
        assert!((w - 40.0).abs() < 1.0, "{w}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
