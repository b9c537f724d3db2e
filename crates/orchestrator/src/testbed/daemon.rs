//! The scheduling loop of `pantheon serve` and the execution of one archived experiment.
//!
//! Every tick (default 1 s) the daemon queues a tournament when one is due
//! ([`schedule::tournament_due`]), then starts every queued experiment whose two nodes are
//! free ([`schedule::pick`]), each on a thread of its own. An experiment runs its schemes'
//! runs one by one between its two agents ([`crate::remote`]: sender node = Pantheon's
//! `local`, receiver = `remote` and tunnel server), recording each run in the archive as it
//! starts and ends; then it is analysed (the report, `pantheon_perf.json`) and its metrics
//! archived. Runs already recorded are never run again: an experiment interrupted by a daemon
//! restart resumes at its first unrecorded run, in the same results directory.
//!
//! Failures stay where they happen: a run that fails is recorded as failed and the experiment
//! goes on; an agent that does not answer (down, or stalled past the call timeout) fails the
//! experiment, not the daemon, and frees its nodes for the next one.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use analyzer::perf::Perf;
use anyhow::{anyhow, Context};
use rand::seq::SliceRandom;
use rand::SeedableRng;

use super::archive::{self, stamp, Archive, NewExperiment, RunMetrics, SchemeStats, Status};
use super::config::{NodeConfig, TestbedConfig};
use super::schedule;
use crate::agent::auth::Credentials;
use crate::agent::client::AgentClient;
use crate::remote::{self, Descriptions, Node, Nodes, RemoteOptions};
use engine::experiment::{self, RunsOptions};
use engine::plan::{seconds, ExperimentPlan, MAX_RUNTIME};
use engine::record::{RunOutcome, RunRecord};
use engine::schemes::Registry;
use engine::sequence::RunSpec;

/// The daemon's state: its testbed, archive and which nodes are busy.
pub struct Daemon {
    config: TestbedConfig,
    archive: Arc<dyn Archive>,
    registry: Registry,
    results_dir: PathBuf,
    credentials: Credentials,
    busy: Mutex<BTreeSet<String>>,
    running: Mutex<Vec<std::thread::JoinHandle<()>>>,
    stop: AtomicBool,
}

/// An experiment asked for by hand (`pantheon submit`); `None`s take the matrix's values.
#[derive(Debug, Clone, Default)]
pub struct Submission {
    /// Sending node's name.
    pub sender: String,
    /// Receiving node's name.
    pub receiver: String,
    /// Schemes in run order (empty: the matrix's).
    pub schemes: Vec<String>,
    /// Flows per run.
    pub flows: Option<u16>,
    /// Runs per scheme.
    pub run_times: Option<u32>,
    /// Seconds per run.
    pub runtime_s: Option<f64>,
    /// Seconds between flows.
    pub interval_s: Option<f64>,
}

/// One line on the daemon's log (stderr), timestamped like the agent's.
pub fn log(message: &str) {
    crate::agent::log_as("pantheon serve", message);
}

impl Daemon {
    /// A daemon for `config`, archiving in `archive`, writing each experiment's results
    /// directory under `results_dir/<number>/`. Errors if the credentials cannot be read or
    /// `results_dir` created.
    pub fn new(
        config: TestbedConfig,
        archive: Arc<dyn Archive>,
        registry: Registry,
        results_dir: PathBuf,
    ) -> anyhow::Result<Arc<Daemon>> {
        let credentials = Credentials::load(&config.credentials, false)?;
        std::fs::create_dir_all(&results_dir)
            .with_context(|| format!("create {}", results_dir.display()))?;
        Ok(Arc::new(Daemon {
            config,
            archive,
            registry,
            results_dir,
            credentials,
            busy: Mutex::new(BTreeSet::new()),
            running: Mutex::new(Vec::new()),
            stop: AtomicBool::new(false),
        }))
    }

    /// The archive.
    pub fn archive(&self) -> &Arc<dyn Archive> {
        &self.archive
    }

    /// The testbed.
    pub fn config(&self) -> &TestbedConfig {
        &self.config
    }

    /// Nodes in an experiment now, sorted.
    pub fn busy_nodes(&self) -> Vec<String> {
        let busy = self.busy.lock().unwrap_or_else(|e| e.into_inner());
        busy.iter().cloned().collect()
    }

    /// Queues one experiment from `sender` to `receiver` (node names) outside the schedule;
    /// `None`s and empty `schemes` take the matrix's values. Returns its number. Errors: an
    /// unknown or identical node, an unknown scheme, zero flows or runs, a non-positive
    /// runtime.
    pub fn submit(&self, req: Submission) -> anyhow::Result<i64> {
        let m = &self.config.matrix;
        let node = |n: &str| {
            self.config.node(n).ok_or_else(|| {
                let known: Vec<&str> = self.config.nodes.iter().map(|n| n.name.as_str()).collect();
                anyhow!("no node {n:?} in the testbed (nodes: {})", known.join(", "))
            })
        };
        let (s, r) = (node(&req.sender)?, node(&req.receiver)?);
        if s.name == r.name {
            anyhow::bail!("sender and receiver are the same node {:?}", s.name);
        }
        let schemes = if req.schemes.is_empty() {
            m.schemes.clone()
        } else {
            req.schemes
        };
        for name in &schemes {
            self.registry.get(name)?;
        }
        let link = s.link.max(r.link);
        let spec = schedule::ExperimentSpec {
            sender: s.name.clone(),
            receiver: r.name.clone(),
            link,
            flows: req.flows.unwrap_or(m.flows[0]),
            run_times: req.run_times.unwrap_or(m.runs.of(link)),
        };
        let runtime_s = req.runtime_s.unwrap_or(m.runtime);
        if spec.flows == 0 || spec.run_times == 0 || runtime_s.is_nan() || runtime_s <= 0.0 {
            anyhow::bail!("flows, runs and runtime must be positive");
        }
        let e = NewExperiment {
            spec,
            schemes,
            runtime_s,
            interval_s: req.interval_s.unwrap_or(m.interval).max(0.0),
        };
        let id = self.archive.submit(&archive::now(), &e)?;
        log(&format!(
            "experiment {id} submitted: {} → {}",
            e.spec.sender, e.spec.receiver
        ));
        Ok(id)
    }

    /// After a restart: queues again what was running and stops the runs that were in
    /// progress on their agents, moving their files into `<results>/<n>/interrupted/<run>/`
    /// (best effort: an agent that is down has nothing to stop). Returns how many runs were
    /// interrupted.
    pub fn recover(&self) -> anyhow::Result<usize> {
        let interrupted = self.archive.recover()?;
        for i in &interrupted {
            log(&format!(
                "experiment {}: run {} was interrupted by a restart; stopping it on {} and {}",
                i.experiment, i.name, i.nodes[0], i.nodes[1]
            ));
            // What the run left on the nodes is kept beside the experiment's results, out of
            // the analysis' way.
            let keep = self
                .results_dir
                .join(i.experiment.to_string())
                .join("interrupted")
                .join(&i.name);
            for n in &i.nodes {
                let Some(node) = self.config.node(n) else {
                    continue;
                };
                let stopped = self.client(node).and_then(|c| {
                    c.stop_run(&i.name, Duration::ZERO)?;
                    std::fs::create_dir_all(&keep)
                        .with_context(|| format!("create {}", keep.display()))?;
                    c.fetch_logs(&i.name, &keep, true)
                });
                if let Err(e) = stopped {
                    log(&format!("  {n}: {e:#}"));
                }
            }
        }
        Ok(interrupted.len())
    }

    fn client(&self, node: &NodeConfig) -> anyhow::Result<AgentClient> {
        AgentClient::with_timeout(&node.agent, &self.credentials, self.config.call_timeout())
    }

    /// One scheduling step at `now`: queues a tournament if due, starts what can start.
    /// Returns the numbers of the experiments started.
    pub fn tick(self: &Arc<Self>, now: chrono::DateTime<chrono::Utc>) -> anyhow::Result<Vec<i64>> {
        self.queue_tournament_if_due(now)?;
        let mut busy = self.busy.lock().unwrap_or_else(|e| e.into_inner());
        let picked = schedule::pick(&self.archive.queued()?, &busy);
        let mut started = Vec::new();
        for id in picked {
            let Some(e) = self.archive.experiment(id)? else {
                continue;
            };
            let dir = self.results_dir.join(id.to_string());
            self.archive
                .set_running(id, &dir.display().to_string(), &stamp(now))?;
            busy.insert(e.sender.clone());
            busy.insert(e.receiver.clone());
            let me = Arc::clone(self);
            let handle = std::thread::Builder::new()
                .name(format!("experiment-{id}"))
                .spawn(move || me.run_experiment(id, &dir, &e))
                .context("start an experiment thread")?;
            self.running
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(handle);
            started.push(id);
        }
        Ok(started)
    }

    /// Queues the matrix's next tournament if one is due at `now` (its schemes shuffled when
    /// the matrix says so).
    fn queue_tournament_if_due(&self, now: chrono::DateTime<chrono::Utc>) -> anyhow::Result<()> {
        let last = self.archive.last_tournament()?;
        let (last_s, unfinished) = match &last {
            Some((id, at)) => (
                chrono::DateTime::parse_from_rfc3339(at)
                    .map(|t| t.timestamp_millis() as f64 / 1e3)
                    .ok(),
                self.archive.unfinished(*id)?,
            ),
            None => (None, 0),
        };
        let now_s = now.timestamp_millis() as f64 / 1e3;
        if !schedule::tournament_due(last_s, self.config.schedule.every, now_s, unfinished) {
            return Ok(());
        }
        let m = &self.config.matrix;
        let mut rng = rand::rngs::SmallRng::seed_from_u64(now.timestamp_millis() as u64);
        let experiments: Vec<NewExperiment> = schedule::tournament(&self.config)
            .into_iter()
            .map(|spec| {
                let mut schemes = m.schemes.clone();
                if m.random_order {
                    schemes.shuffle(&mut rng);
                }
                NewExperiment {
                    spec,
                    schemes,
                    runtime_s: m.runtime,
                    interval_s: m.interval,
                }
            })
            .collect();
        let t = self.archive.start_tournament(&stamp(now), &experiments)?;
        log(&format!(
            "tournament {t}: {} experiments queued",
            experiments.len()
        ));
        Ok(())
    }

    /// The thread of experiment `id` (`e`) into `dir`: [`Daemon::execute`], its end archived
    /// and logged (a shutdown leaves it running in the archive, to resume), its nodes freed.
    fn run_experiment(&self, id: i64, dir: &Path, e: &archive::Experiment) {
        log(&format!(
            "experiment {id}: {} → {}, {} flow(s), {} × {} run(s) → {}",
            e.sender,
            e.receiver,
            e.flows,
            e.schemes.join(" "),
            e.run_times,
            dir.display()
        ));
        // A bug that panics fails this experiment, not the daemon (and frees its nodes below).
        let result =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.execute(id, dir)))
                .unwrap_or_else(|_| Err(anyhow!("the experiment's thread panicked")));
        if self.stop.load(Ordering::SeqCst) {
            // Stopped by the daemon's shutdown: left running in the archive, so that the next
            // start resumes it.
            log(&format!("experiment {id}: paused by shutdown"));
        } else {
            let (status, error) = match &result {
                Ok(()) => (Status::Done, None),
                Err(err) => (Status::Failed, Some(format!("{err:#}"))),
            };
            if status == Status::Failed {
                let _ =
                    self.archive
                        .finish(id, status, error.as_deref(), &[], &[], &archive::now());
            }
            log(&format!(
                "experiment {id}: {}{}",
                status.as_str(),
                error.map(|e| format!(": {e}")).unwrap_or_default()
            ));
        }
        let mut busy = self.busy.lock().unwrap_or_else(|e| e.into_inner());
        busy.remove(&e.sender);
        busy.remove(&e.receiver);
    }

    /// Schedules every `tick` until [`Daemon::shutdown`]; then waits for the experiments in
    /// progress to pause (their current run ends early, as on Ctrl-C).
    pub fn run(self: &Arc<Self>, tick: Duration) {
        while !self.stop.load(Ordering::SeqCst) {
            if let Err(e) = self.tick(chrono::Utc::now()) {
                log(&format!("scheduling: {e:#}"));
            }
            self.running
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .retain(|h| !h.is_finished());
            let mut slept = Duration::ZERO;
            while slept < tick && !self.stop.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(50));
                slept += Duration::from_millis(50);
            }
        }
        let handles = std::mem::take(&mut *self.running.lock().unwrap_or_else(|e| e.into_inner()));
        for h in handles {
            let _ = h.join();
        }
    }

    /// Asks [`Daemon::run`] to stop (and the runs in progress to end early).
    pub fn shutdown(&self) {
        self.stop.store(true, Ordering::SeqCst);
        engine::runner::INTERRUPTED.store(true, Ordering::SeqCst);
    }

    /// Runs experiment `id` in `dir` (resuming after its recorded runs) and archives its
    /// analysis. Errors: unknown node, an agent that does not answer, analysis failure.
    fn execute(&self, id: i64, dir: &Path) -> anyhow::Result<()> {
        let e = self
            .archive
            .experiment(id)?
            .ok_or_else(|| anyhow!("experiment {id} is not in the archive"))?;
        let node = |name: &str| {
            self.config
                .node(name)
                .ok_or_else(|| anyhow!("node {name:?} is no longer in the testbed file"))
        };
        let (sn, rn) = (node(&e.sender)?, node(&e.receiver)?);
        let plan = ExperimentPlan {
            schemes: e.schemes.clone(),
            run_times: e.run_times,
            runtime: seconds(e.runtime_s, "runtime_s", MAX_RUNTIME)?,
            flows: e.flows,
            interval: seconds(e.interval_s, "interval_s", MAX_RUNTIME)?,
            drain_timeout: Duration::ZERO,
            data_dir: dir.to_owned(),
            seed: 0,
            ..ExperimentPlan::default()
        };
        plan.check(&self.registry)?;
        let opts = RemoteOptions {
            sender: Node::Local,
            tunnel_server: Node::Remote,
            local_addr: sn.address,
            remote_addr: rn.address,
            local_if: sn.interface.clone(),
            remote_if: rn.interface.clone(),
            ntp_addr: self.config.ntp_addr.clone(),
            ntp_samples: 4,
            max_clock_move_ns: 1_000_000,
            drain: Duration::from_secs(1),
        };
        let (local, remote_agent) = (self.client(sn)?, self.client(rn)?);
        remote::check_options(&opts, &remote_agent.host)?;
        let nodes = Nodes {
            local: &local,
            remote: &remote_agent,
        };
        let desc = Descriptions {
            local: Some(sn.label()),
            remote: Some(rn.label()),
        };
        remote::start_experiment(&plan, &opts, &nodes, &desc, None, &|w| {
            log(&format!("experiment {id}: {w}"))
        })?;
        let runs = RunsOptions {
            tag_prefix: format!("e{id}a{}", e.attempts),
            // Recorded before a restart: counted once.
            done: self
                .archive
                .runs(id)?
                .into_iter()
                .map(|r| (r.scheme, r.run))
                .collect(),
            stop_at_first_failure: false,
        };
        let ran = experiment::run_all(
            &plan,
            &self.registry,
            &runs,
            &|run, progress| self.run_one(id, &plan, &opts, &nodes, run, progress),
            &experiment::Quiet,
        )?;
        if ran.interrupted {
            // Ended by the shutdown: the run in progress is left `running` in the archive, so
            // that the restart runs it again.
            return Ok(());
        }
        let analysis = experiment::finish(&plan, &self.registry, ran)?.analysis;
        let (runs, stats) = archived_metrics(&analysis.perf);
        self.archive
            .finish(id, Status::Done, None, &runs, &stats, &archive::now())
    }

    /// Run `run` of experiment `id`, archived as it starts and ends and logged. Errors (the
    /// experiment ends before the run is recorded): an agent that does not answer (down, or
    /// stalled past the call timeout), an archive that cannot be written.
    fn run_one(
        &self,
        id: i64,
        plan: &ExperimentPlan,
        opts: &RemoteOptions,
        nodes: &Nodes,
        run: &RunSpec,
        progress: &dyn Fn(f64),
    ) -> anyhow::Result<RunRecord> {
        let (name, run_id) = (run.name, run.run_id);
        remote::wait_for_nodes(nodes, Duration::from_secs(10))
            .with_context(|| format!("before {name} run {run_id}"))?;
        self.archive.run_started(id, name, run_id, run.tag)?;
        let rec = remote::run_once_remote(plan, opts, nodes, run, progress);
        let outcome = match &rec.outcome {
            RunOutcome::Ok => Ok(()),
            RunOutcome::Failed { reason } => Err(reason.as_str()),
            // Ended by the shutdown: left `running`, so the restart runs it again.
            RunOutcome::Interrupted => return Ok(rec),
        };
        self.archive.run_finished(id, name, run_id, outcome)?;
        log(&format!(
            "experiment {id}: {name} run {run_id}: {}",
            match outcome {
                Ok(()) => "done".to_owned(),
                Err(r) => format!("FAILED: {r}"),
            }
        ));
        Ok(rec)
    }
}

/// Per-run metrics (all flows) and per-scheme means of an analysis's [`Perf`] (runs without
/// whole-run figures are left out; schemes without runs too).
pub fn archived_metrics(perf: &Perf) -> (Vec<RunMetrics>, Vec<SchemeStats>) {
    let runs: Vec<RunMetrics> = perf
        .totals()
        .map(|(scheme, run, t)| RunMetrics {
            scheme: scheme.to_owned(),
            run,
            tput_mbps: t.tput_mbps,
            delay_ms: t.delay_ms,
            loss: t.loss,
        })
        .collect();
    let stats = runs
        .chunk_by(|a, b| a.scheme == b.scheme)
        .map(|mine| {
            let n = mine.len() as f64;
            let mean = |f: fn(&RunMetrics) -> f64| mine.iter().map(f).sum::<f64>() / n;
            SchemeStats {
                scheme: mine[0].scheme.clone(),
                runs: mine.len() as u32,
                tput_mbps: mean(|m| m.tput_mbps),
                delay_ms: mean(|m| m.delay_ms),
                loss: mean(|m| m.loss),
            }
        })
        .collect();
    (runs, stats)
}
