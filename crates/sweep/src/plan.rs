//! A sweep frozen into numbered points: `sweep_plan.json` in the results directory. A point
//! is one experiment (one run of one mix in one environment), the unit that is run, skipped
//! when done, and re-run when it failed, whatever runs it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context};
use emucal::emulator::Emulator;
use engine::experiment::{Local, ResultsDir};
use engine::plan::{
    seconds, ExperimentPlan, Reuse, DRAIN_TIMEOUT_S, FIRST_SIDE_SETUP_S, MAX_RUNTIME,
};
use serde::{Deserialize, Serialize};

use crate::file::SweepFile;

/// The frozen plan's file in the results directory.
pub const PLAN_FILE: &str = "sweep_plan.json";
/// Bytes of the packet a BDP is counted in (a full-MTU IP packet).
pub const BDP_PACKET_BYTES: f64 = 1500.0;

/// One environment: a grid cell (constant-rate link, RTT, DropTail buffer, loss) or a named
/// emulator.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Environment {
    /// Link rate both ways, Mbit/s (grid cells).
    pub rate_mbps: Option<f64>,
    /// Minimum RTT, ms (grid cells).
    pub rtt_ms: Option<u32>,
    /// The buffer in BDPs, when the grid gave it so.
    pub buffer_bdp: Option<f64>,
    /// The DropTail buffer each way, packets (grid cells; from `buffer_bdp` when given so).
    pub buffer_packets: Option<u32>,
    /// Uplink random loss rate.
    pub loss: f64,
    /// A named emulator of the library.
    pub emulator: Option<String>,
    /// More mm-link arguments of a grid cell (the sweep file's `link_args`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub link_args: String,
}

impl Environment {
    /// A short unique label: `20mbps-40ms-1bdp`, `20mbps-40ms-66pkts-loss0.01`, or the
    /// emulator's name.
    pub fn label(&self) -> String {
        if let Some(e) = &self.emulator {
            return e.clone();
        }
        let mut s = format!(
            "{}mbps-{}ms",
            self.rate_mbps.unwrap_or(0.0),
            self.rtt_ms.unwrap_or(0)
        );
        match (self.buffer_bdp, self.buffer_packets) {
            (Some(b), _) => s.push_str(&format!("-{b}bdp")),
            (None, Some(p)) => s.push_str(&format!("-{p}pkts")),
            _ => {}
        }
        if self.loss > 0.0 {
            s.push_str(&format!("-loss{}", self.loss));
        }
        s
    }

    /// The trace file of a grid cell, in `traces` (`20mbps.trace`).
    fn trace(&self, traces: &Path) -> Option<PathBuf> {
        self.rate_mbps
            .map(|r| traces.join(format!("{r}mbps.trace")))
    }

    /// The emulated path of a grid cell, its trace in `traces`: `mm-delay RTT/2`, `mm-loss
    /// uplink LOSS` when there is loss, and mm-link over the constant-rate trace both ways with
    /// a DropTail queue of `buffer_packets` each way when the cell has a buffer (else infinite,
    /// as mm-link's default), then the cell's `link_args`. `Ok(None)` for a named emulator
    /// ([`engine::experiment::preset`]); errors if `link_args` are not mm-link's.
    pub fn emulator(&self, traces: &Path) -> Result<Option<Emulator>, emucal::mm::MmError> {
        let Some(trace) = self.trace(traces) else {
            return Ok(None);
        };
        let mut prepend = format!("mm-delay {}", self.rtt_ms.unwrap_or(0) / 2);
        if self.loss > 0.0 {
            prepend.push_str(&format!(" mm-loss uplink {}", self.loss));
        }
        let mut link_args = String::new();
        if let Some(p) = self.buffer_packets {
            link_args = format!(
                "--uplink-queue=droptail --uplink-queue-args=packets={p} \
                 --downlink-queue=droptail --downlink-queue-args=packets={p}"
            );
        }
        link_args.push(' ');
        link_args.push_str(&self.link_args);
        Emulator::from_pantheon_flags(&prepend, &trace, &trace, &link_args, "").map(Some)
    }
}

/// `buffer` BDPs of a `rate_mbps` link with `rtt_ms` of RTT, in 1500-byte packets (rounded,
/// at least 2).
pub fn bdp_packets(rate_mbps: f64, rtt_ms: u32, buffer: f64) -> u32 {
    let bytes = rate_mbps * 1e6 / 8.0 * f64::from(rtt_ms) / 1e3;
    ((bytes * buffer / BDP_PACKET_BYTES).round() as u32).max(2)
}

/// One point: one run of one mix in one environment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Point {
    /// Its number, from 1.
    pub id: u32,
    /// Index of its environment in [`SweepPlan::environments`].
    pub env: usize,
    /// The mix in `--mix` form (a solo run is a mix of one flow).
    pub mix: String,
    /// A primary alone: a baseline of the throughput ratio.
    pub solo: bool,
    /// Flow 1's scheme when the mix is a (primary, contender) pair.
    pub primary: Option<String>,
    /// Flow 2's scheme when the mix is a pair.
    pub contender: Option<String>,
    /// Which run of this (environment, mix), from 1 (its run id in its results).
    pub run: u32,
    /// The run's seed (the emulator's random choices, the flows' workload draws): the sweep's
    /// `seed + run − 1`, the same for every environment and mix, so that the mixes of one run
    /// see the same loss draws and load the same pages (common random numbers) and differ by
    /// the mix alone.
    pub seed: u64,
}

/// A sweep file frozen into points.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepPlan {
    /// The sweep file it was made from.
    pub file: SweepFile,
    /// The environments, in the order of the points.
    pub environments: Vec<Environment>,
    /// The points, by id (point `i` at index `i − 1`).
    pub points: Vec<Point>,
    /// Extra scheme descriptors the points use (`--schemes-dir`, absolute), when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schemes_dir: Option<PathBuf>,
}

impl SweepPlan {
    /// Expands a sweep file: every environment × every mix (pairs, the list, solo primaries)
    /// × every run, numbered in that order.
    pub fn new(file: &SweepFile) -> SweepPlan {
        let environments = environments(file);
        let m = &file.mixes;
        let mut mixes: Vec<(String, bool, Option<String>, Option<String>)> = Vec::new();
        for p in &m.primaries {
            for c in &m.contenders {
                mixes.push((format!("{p} {c}"), false, Some(p.clone()), Some(c.clone())));
            }
        }
        mixes.extend(m.list.iter().map(|l| (l.clone(), false, None, None)));
        if m.solo {
            mixes.extend(m.primaries.iter().map(|p| (p.clone(), true, None, None)));
        }
        let mut points = Vec::new();
        for env in 0..environments.len() {
            for (mix, solo, primary, contender) in &mixes {
                for run in 1..=file.runs {
                    let id = points.len() as u32 + 1;
                    points.push(Point {
                        id,
                        env,
                        mix: mix.clone(),
                        solo: *solo,
                        primary: primary.clone(),
                        contender: contender.clone(),
                        run,
                        seed: file.seed + u64::from(run) - 1,
                    });
                }
            }
        }
        SweepPlan {
            file: file.clone(),
            environments,
            points,
            schemes_dir: None,
        }
    }

    /// Point `id`; errors if there is none.
    pub fn point(&self, id: u32) -> anyhow::Result<&Point> {
        self.points
            .get((id as usize).wrapping_sub(1))
            .with_context(|| format!("no point {id}: the sweep has {}", self.points.len()))
    }

    /// The directory of the traces the grid's links use.
    pub fn traces_dir(dir: &Path) -> PathBuf {
        dir.join("traces")
    }

    /// Writes the plan and the grid's traces into `dir` (created), or, if `dir` holds a plan
    /// already, checks it is this one (the same points: a sweep is resumed, never mixed with
    /// another) and writes it again (a new `[slurm]` section or `--schemes-dir` is taken).
    pub fn freeze(&self, dir: &Path) -> anyhow::Result<()> {
        let path = dir.join(PLAN_FILE);
        if path.exists() {
            let old = SweepPlan::load(dir)?;
            if old.points != self.points || old.environments != self.environments {
                bail!(
                    "{} holds another sweep ({} points; this one has {}): give another --out, \
                     or remove it",
                    dir.display(),
                    old.points.len(),
                    self.points.len()
                );
            }
        }
        let traces = SweepPlan::traces_dir(dir);
        std::fs::create_dir_all(&traces).with_context(|| format!("create {}", traces.display()))?;
        for env in &self.environments {
            if let (Some(trace), Some(rate)) = (env.trace(&traces), env.rate_mbps) {
                if !trace.exists() {
                    engine::plan::write_constant_trace(&trace, rate)?;
                }
            }
        }
        let text = serde_json::to_string_pretty(self)?;
        let tmp = dir.join(format!("{PLAN_FILE}.tmp"));
        std::fs::write(&tmp, text).with_context(|| format!("write {}", tmp.display()))?;
        std::fs::rename(&tmp, &path).with_context(|| format!("write {}", path.display()))
    }

    /// Reads the plan of results directory `dir`.
    pub fn load(dir: &Path) -> anyhow::Result<SweepPlan> {
        let path = dir.join(PLAN_FILE);
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("read {} (is it a sweep's directory?)", path.display()))?;
        serde_json::from_str(&text).with_context(|| format!("read {}", path.display()))
    }

    /// Checks that every scheme of every mix is in `registry` (and can be simulated, in a
    /// simulated sweep) and every named emulator in the library; errors name the mix or the
    /// emulator.
    pub fn check(&self, registry: &engine::schemes::Registry) -> anyhow::Result<()> {
        let mut seen: Vec<&str> = Vec::new();
        for p in &self.points {
            if seen.contains(&p.mix.as_str()) {
                continue;
            }
            let mix =
                engine::mix::parse_short(&p.mix).with_context(|| format!("mix `{}`", p.mix))?;
            for s in mix.schemes() {
                let scheme = registry
                    .get(&s)
                    .with_context(|| format!("mix `{}`", p.mix))?;
                if self.file.simulate {
                    scheme
                        .check_simulated()
                        .with_context(|| format!("mix `{}`: simulate = true", p.mix))?;
                }
            }
            seen.push(&p.mix);
        }
        for e in self.environments.iter().filter_map(|e| e.emulator.as_ref()) {
            emucal::presets::find(e).map_err(|m| anyhow::anyhow!("environments.emulators: {m}"))?;
        }
        if let Some(cell) = self.environments.iter().find(|e| e.emulator.is_none()) {
            cell.emulator(Path::new("traces"))
                .map_err(|m| anyhow::anyhow!("environments.link_args: {m}"))?;
        }
        Ok(())
    }

    /// The experiment of point `p` of the sweep in `dir`, its results going to `data_dir`:
    /// `pantheon run local --mix MIX --run-times 1 --start-run-id RUN --seed SEED` (or `run
    /// sim` in a simulated sweep) over the point's environment, `pantheon run local`'s
    /// defaults for the rest. Errors: a mix or runtime the sweep's check would have refused,
    /// an unknown named emulator.
    pub fn experiment(&self, dir: &Path, p: &Point, data_dir: &Path) -> anyhow::Result<Local> {
        let mix = engine::mix::parse_short(&p.mix).with_context(|| format!("mix `{}`", p.mix))?;
        let env = &self.environments[p.env];
        let cell = env
            .emulator(&Self::traces_dir(dir))
            .with_context(|| format!("environment {}: link_args", env.label()))?;
        let (emulator, write_traces) = match (&env.emulator, cell) {
            (Some(name), _) => engine::experiment::preset(name, data_dir)?,
            (None, Some(emulator)) => (emulator, Vec::new()),
            (None, None) => bail!("environment {} has no rate and no emulator", env.label()),
        };
        let plan = ExperimentPlan {
            schemes: vec![mix.name.clone()],
            run_times: 1,
            runtime: seconds(self.file.runtime, "runtime", MAX_RUNTIME)?,
            first_side_setup: Duration::from_secs_f64(FIRST_SIDE_SETUP_S),
            drain_timeout: Duration::from_secs_f64(DRAIN_TIMEOUT_S),
            data_dir: data_dir.to_owned(),
            seed: p.seed,
            emulator: Some(emulator),
            schemes_dir: self.schemes_dir.clone(),
            mix: Some(mix),
            simulate: self.file.simulate,
            capture: self.file.capture,
            ..ExperimentPlan::default()
        };
        Ok(Local {
            plan,
            dir: ResultsDir {
                reuse: Reuse::Refuse,
                start_run_id: Some(p.run),
                wait_lock: false,
            },
            write_traces,
            preset: env.emulator.clone(),
            baseline: None,
        })
    }
}

/// The environments of a sweep file: the grid's product, then the named emulators.
fn environments(file: &SweepFile) -> Vec<Environment> {
    let e = &file.environments;
    let losses = if e.loss.is_empty() {
        vec![0.0]
    } else {
        e.loss.clone()
    };
    let mut out = Vec::new();
    for &rate in &e.rate_mbps {
        for &rtt in &e.rtt_ms {
            let buffers: Vec<(Option<f64>, Option<u32>)> = if !e.buffer_bdp.is_empty() {
                e.buffer_bdp
                    .iter()
                    .map(|&b| (Some(b), Some(bdp_packets(rate, rtt, b))))
                    .collect()
            } else if !e.buffer_packets.is_empty() {
                e.buffer_packets.iter().map(|&p| (None, Some(p))).collect()
            } else {
                vec![(None, None)]
            };
            for (buffer_bdp, buffer_packets) in buffers {
                for &loss in &losses {
                    out.push(Environment {
                        rate_mbps: Some(rate),
                        rtt_ms: Some(rtt),
                        buffer_bdp,
                        buffer_packets,
                        loss,
                        emulator: None,
                        link_args: e.link_args.clone(),
                    });
                }
            }
        }
    }
    out.extend(e.emulators.iter().map(|name| Environment {
        rate_mbps: None,
        rtt_ms: None,
        buffer_bdp: None,
        buffer_packets: None,
        loss: 0.0,
        emulator: Some(name.clone()),
        link_args: String::new(),
    }));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file() -> SweepFile {
        SweepFile::parse(
            r#"
name = "t"
runs = 2
seed = 10
[environments]
rate_mbps = [20, 50]
rtt_ms = [40]
buffer_bdp = [0.5, 2]
emulators = ["nepal-aws-india"]
[mixes]
primaries = ["cubic", "bbr"]
contenders = ["ledbat"]
list = ["cubic cubic+60"]
"#,
            "t.toml",
        )
        .unwrap()
    }

    #[test]
    fn bdp_in_packets() {
        // 20 Mbit/s × 40 ms = 100 000 bytes = 66.7 packets of 1500 bytes.
        assert_eq!(bdp_packets(20.0, 40, 1.0), 67);
        assert_eq!(bdp_packets(20.0, 40, 0.5), 33);
        assert_eq!(bdp_packets(10.0, 20, 16.0), 267);
        assert_eq!(bdp_packets(1.0, 2, 0.5), 2);
    }

    #[test]
    fn points_are_environments_times_mixes_times_runs() {
        let plan = SweepPlan::new(&file());
        // 2 rates × 1 RTT × 2 buffers + 1 emulator = 5 environments; mixes: 2 pairs, 1 listed,
        // 2 solo primaries = 5; 2 runs each.
        assert_eq!(plan.environments.len(), 5);
        assert_eq!(plan.points.len(), 5 * 5 * 2);
        let labels: Vec<String> = plan.environments.iter().map(Environment::label).collect();
        assert_eq!(
            labels,
            [
                "20mbps-40ms-0.5bdp",
                "20mbps-40ms-2bdp",
                "50mbps-40ms-0.5bdp",
                "50mbps-40ms-2bdp",
                "nepal-aws-india"
            ]
        );
        let p = plan.point(1).unwrap();
        assert_eq!(
            (p.env, p.mix.as_str(), p.run, p.seed),
            (0, "cubic ledbat", 1, 10)
        );
        assert_eq!(p.primary.as_deref(), Some("cubic"));
        let p = plan.point(2).unwrap();
        assert_eq!((p.mix.as_str(), p.run, p.seed), ("cubic ledbat", 2, 11));
        let p = plan.point(7).unwrap();
        assert_eq!((p.mix.as_str(), p.solo, p.seed), ("cubic", true, 10));
        // Run r of every environment and mix shares one seed (common random numbers).
        for p in &plan.points {
            assert_eq!(p.seed, 10 + u64::from(p.run) - 1, "point {}", p.id);
        }
        assert!(plan.point(51).is_err() && plan.point(0).is_err());
        let ids: Vec<u32> = plan.points.iter().map(|p| p.id).collect();
        assert_eq!(ids, (1..=50).collect::<Vec<_>>());
    }

    #[test]
    fn a_point_is_the_experiment_run_local_would_run_over_its_environment() {
        let plan = SweepPlan::new(&file());
        let dir = Path::new("/s");
        let x = plan
            .experiment(dir, plan.point(3).unwrap(), Path::new("/s/tmp"))
            .unwrap();
        let p = &x.plan;
        assert_eq!(
            (p.schemes.as_slice(), p.run_times, p.runtime.as_secs_f64()),
            (&["bbr-ledbat".to_owned()][..], 1, 30.0)
        );
        assert_eq!((x.dir.start_run_id, p.seed), (Some(1), 10));
        assert_eq!(p.data_dir, Path::new("/s/tmp"));
        // The same path as `run local`'s flags give it (what points ran over before they
        // were typed), and its command line for people.
        let emulator = p.emulator.clone().unwrap();
        let trace = Path::new("/s/traces/20mbps.trace");
        let queue = "--uplink-queue=droptail --uplink-queue-args=packets=33 \
                     --downlink-queue=droptail --downlink-queue-args=packets=33";
        assert_eq!(
            emulator,
            Emulator::from_pantheon_flags("mm-delay 20", trace, trace, queue, "").unwrap()
        );
        assert_eq!(
            emulator.command_line(),
            format!("mm-delay 20 mm-link {0} {0} {queue}", trace.display())
        );
        let lossy = Environment {
            rate_mbps: Some(12.5),
            rtt_ms: Some(41),
            buffer_bdp: None,
            buffer_packets: None,
            loss: 0.013,
            emulator: None,
            link_args: String::new(),
        };
        let t = Path::new("/t/12.5mbps.trace");
        assert_eq!(
            lossy.emulator(Path::new("/t")).unwrap().unwrap(),
            Emulator::from_pantheon_flags("mm-delay 20 mm-loss uplink 0.013", t, t, "", "")
                .unwrap()
        );
        // `link_args` go after the buffer's queues: DualPI2 with even delivery.
        let l4s = Environment {
            buffer_packets: Some(33),
            link_args: "--uplink-queue=dualpi2 --uplink-queue-args=limit=1000 \
                        --uplink-delivery=even"
                .into(),
            ..lossy.clone()
        };
        let line = l4s
            .emulator(Path::new("/t"))
            .unwrap()
            .unwrap()
            .command_line();
        assert!(
            line.contains("--uplink-queue=dualpi2 --uplink-queue-args=limit=1000,")
                && line.contains("--downlink-queue=droptail --downlink-queue-args=packets=33")
                && line.contains("--uplink-delivery=even"),
            "{line}"
        );
        let typo = Environment {
            link_args: "--uplink-queue=dualpi3".into(),
            ..lossy
        };
        let err = typo.emulator(Path::new("/t")).unwrap_err().to_string();
        assert!(err.contains("dualpi3"), "{err}");
        let last = plan.points.last().unwrap();
        let x = plan.experiment(dir, last, Path::new("/t")).unwrap();
        assert_eq!(x.preset.as_deref(), Some("nepal-aws-india"));
        assert_eq!(x.write_traces.len(), 1);
        assert!(x.write_traces[0].0.starts_with("/t"));
    }

    #[test]
    fn the_shipped_scavenger_sweep_is_seed_002s_evaluation() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../sweeps/scavenger.toml");
        let f = SweepFile::parse(&std::fs::read_to_string(path).unwrap(), path).unwrap();
        let plan = SweepPlan::new(&f);
        plan.check(&engine::schemes::Registry::load(None).unwrap())
            .unwrap();
        assert!(plan.environments.len() >= 24);
        let pairs: Vec<&str> = plan.points[..20].iter().map(|p| p.mix.as_str()).collect();
        for want in [
            "cubic ledbat",
            "cubic proteus_s",
            "bbr lp",
            "bbr cubic",
            "tquic_copa ledbat",
            "quic_bbr3 proteus_s",
            "quic_bbr3",
        ] {
            assert!(pairs.contains(&want), "{want} not in {pairs:?}");
        }
        // 4 primaries × 4 contenders, and each primary alone.
        assert_eq!(plan.points.len(), plan.environments.len() * 20);
    }

    #[test]
    fn unknown_schemes_and_emulators_are_named() {
        let registry = engine::schemes::Registry::load(None).unwrap();
        let mut f = file();
        f.mixes.list = vec!["cubic nosuch@5".into()];
        let err = format!("{:#}", SweepPlan::new(&f).check(&registry).unwrap_err());
        assert!(
            err.contains("mix `cubic nosuch@5`") && err.contains("nosuch"),
            "{err}"
        );
        let mut f = file();
        f.environments.emulators = vec!["atlantis".into()];
        let err = format!("{:#}", SweepPlan::new(&f).check(&registry).unwrap_err());
        assert!(
            err.contains("environments.emulators") && err.contains("atlantis"),
            "{err}"
        );
    }

    #[test]
    fn a_plan_is_frozen_once_and_another_refused() {
        let dir = tempfile::tempdir().unwrap();
        let plan = SweepPlan::new(&file());
        plan.freeze(dir.path()).unwrap();
        assert!(dir.path().join("traces/50mbps.trace").exists());
        assert_eq!(SweepPlan::load(dir.path()).unwrap(), plan);
        plan.freeze(dir.path()).unwrap();
        let mut other = file();
        other.runs = 3;
        let err = SweepPlan::new(&other).freeze(dir.path()).unwrap_err();
        assert!(err
            .to_string()
            .contains("holds another sweep (50 points; this one has 75)"));
    }
}
