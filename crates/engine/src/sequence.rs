//! The run sequence, one for local and remote runs: where the sides run differs (network
//! namespaces on this machine, [`crate::runner`]; two testbed agents, the testbed crate's
//! `remote`), the order does not.
//!
//! Once every flow's tunnel is up (Pantheon's `test.py`, reference `pantheon.md` §2.4):
//!
//! 1. the side that runs first (its scheme's `run_first`, usually the receiver) of every flow;
//! 2. `first_side_setup` for them alone;
//! 3. the other side of each flow at the flow's start time, given the first side's tunnel
//!    address: `interval` apart for Pantheon's `--flows N` of one scheme, the times of a mix
//!    ([`crate::mix`]) otherwise; the runtime counts from the run's start (Pantheon's
//!    `Start at:`), which is when a flow with start time 0 starts;
//! 4. a flow of a mix with a stop time is stopped then (both sides ended: [`Sides::stop`]);
//! 5. `runtime`, then `End at:` — or earlier, once every flow's workload has ended by itself
//!    (`bytes=N` transfers, all acknowledged: [`Sides::finished`]).
//!
//! The sides are checked all along ([`Sides::check`]): a side that failed, or Ctrl-C, stops the
//! run with the reason. Starts and stops are made when due, not at the next poll: the wait
//! before each is cut to it.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context;
use emucal::mm::EmulatedPath;
use emucal::stage::FlowDelay;
use sim::frame::tunnel_port;

use crate::plan::{utc_now, ExperimentPlan};
use crate::record::RunRecord;
use crate::schemes::{Registry, Scheme, Side};
use workload::Workload;

/// The port schemes use inside the tunnel, local and remote runs alike.
pub const SCHEME_PORT: u16 = 50_000;

/// One flow of a run, as the sequence starts and stops it.
#[derive(Debug, Clone)]
pub struct RunFlow<'a> {
    /// The flow's scheme.
    pub scheme: &'a Scheme,
    /// When its second side starts, after the run's start.
    pub start: Duration,
    /// When both its sides are ended, after the run's start; `None`: at the end of the run.
    pub stop: Option<Duration>,
    /// Extra one-way delay of this flow alone, in each direction before the bottleneck
    /// (a mix's `+DELAY`); zero for Pantheon's flows.
    pub delay: Duration,
    /// What it sends (`--workload`, or a mix's flow's); bulk by default.
    pub workload: Workload,
}

/// What one run is, whoever runs it (this machine's namespaces, two testbed agents, the
/// simulator): the name its files and record are filed under (a scheme's, or a mix's), its
/// flows, its id, and a tag unique among the runs going on (its namespaces' and tunnels' names).
#[derive(Debug, Clone, Copy)]
pub struct RunSpec<'a> {
    /// The scheme's name, or the mix's (`cubic-bbr`).
    pub name: &'a str,
    /// Its flows, in flow id order (flow 1 first).
    pub flows: &'a [RunFlow<'a>],
    /// Its run id (`_run<N>` of its files).
    pub run_id: u32,
    /// Unique among the runs going on (`<prefix>-<n>`).
    pub tag: &'a str,
}

/// Pantheon's flows of one run of one scheme: `plan.flows` flows of `scheme`, started
/// `plan.interval` apart from the run's start, all running to its end, each with the plan's
/// `--workload` (checked by the plan: bulk if it does not parse).
pub fn flows_of<'a>(plan: &ExperimentPlan, scheme: &'a Scheme) -> Vec<RunFlow<'a>> {
    let workload = plan
        .workload
        .as_deref()
        .and_then(|w| Workload::parse(w).ok())
        .unwrap_or_default();
    (0..u32::from(plan.flows))
        .map(|i| RunFlow {
            scheme,
            start: plan.interval * i,
            stop: None,
            delay: Duration::ZERO,
            workload: workload.clone(),
        })
        .collect()
}

/// The flows of a run of `plan` filed under `name`: the mix's if `name` is the mix's, else
/// Pantheon's `flows` flows of scheme `name`, `interval` apart ([`flows_of`]). Errors if
/// a scheme is not in `registry`.
pub fn run_flows<'r>(
    plan: &ExperimentPlan,
    name: &str,
    registry: &'r Registry,
) -> anyhow::Result<Vec<RunFlow<'r>>> {
    let secs = |s: f64| Duration::try_from_secs_f64(s).context("a flow's start, stop or delay");
    match &plan.mix {
        Some(mix) if mix.name == name => mix
            .flows
            .iter()
            .map(|f| {
                Ok(RunFlow {
                    scheme: registry.get(&f.scheme)?,
                    start: secs(f.start)?,
                    stop: f.stop.map(secs).transpose()?,
                    delay: secs(f.delay / 1000.0)?,
                    workload: f
                        .workload
                        .as_deref()
                        .map_or(Ok(Workload::Bulk), Workload::parse)?,
                })
            })
            .collect(),
        _ => Ok(flows_of(plan, registry.get(name)?)),
    }
}

/// Where a run's sides run.
pub trait Sides {
    /// Errors if the run must stop: a side failed (a process exited early, a node reported a
    /// failure), a node does not answer, or the run was interrupted (Ctrl-C / SIGTERM). The
    /// sides of a flow that was stopped ([`Sides::stop`]) are not checked.
    fn check(&mut self) -> anyhow::Result<()>;
    /// Starts `side` of `run_flow` (its scheme with its workload) as flow `flow` (1-based).
    /// `peer`: for the side that runs second, the tunnel address of the flow's first side;
    /// `None` for the first side. Returns remarks for the run record.
    fn start(
        &mut self,
        run_flow: &RunFlow,
        side: Side,
        flow: u16,
        peer: Option<String>,
    ) -> anyhow::Result<Vec<String>>;
    /// Whether flow `flow`'s workload has ended by itself: its sender exited successfully
    /// after its transfers were acknowledged (`bytes=N`). When every flow of a run has, the
    /// run ends. Default: never.
    fn finished(&self, _flow: u16) -> bool {
        false
    }
    /// Ends both sides of flow `flow` before the run ends (a mix's stop time); its tunnel stays.
    fn stop(&mut self, flow: u16) -> anyhow::Result<()>;
    /// The tunnel address `side` of flow `flow` (1-based) has.
    fn address(&self, side: Side, flow: u16) -> String;
    /// How often the sides are checked.
    fn poll(&self) -> Duration;
}

/// What the sequence does at a time of the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    /// Start the second side of a flow (index into the flows).
    Start(usize),
    /// End both sides of a flow.
    Stop(usize),
}

/// The starts and stops of `flows`, in time order (a flow's start before its stop).
fn events(flows: &[RunFlow]) -> Vec<(Duration, Event)> {
    let mut ev: Vec<(Duration, Event)> = flows
        .iter()
        .enumerate()
        .flat_map(|(i, f)| {
            std::iter::once((f.start, Event::Start(i))).chain(f.stop.map(|s| (s, Event::Stop(i))))
        })
        .collect();
    ev.sort();
    ev
}

/// Runs steps 1–5 of the module docs for `flows` on `sides`; records the start and end times
/// and the sides' remarks in `record`; reports progress (0–1) through the runtime. Errors with
/// the reason the run stopped early.
pub fn run_sequence(
    plan: &ExperimentPlan,
    flows: &[RunFlow],
    sides: &mut dyn Sides,
    record: &mut RunRecord,
    progress: &dyn Fn(f64),
) -> anyhow::Result<()> {
    let flow_id = |i: usize| u16::try_from(i + 1).expect("at most u16::MAX flows");
    for (i, f) in flows.iter().enumerate() {
        let [first, _] = f.scheme.start_order();
        record
            .notes
            .extend(sides.start(f, first, flow_id(i), None)?);
    }
    let ends_by_itself = flows.iter().all(|f| f.workload.ends_by_itself());
    sleep_checked(sides, plan.first_side_setup)?;
    let start = Instant::now();
    record.start = Some(utc_now());
    record.planned_s = Some(plan.runtime.as_secs_f64());
    // The longest the loop overslept its wait: a harness that was stopped (SIGSTOP),
    // suspended or starved of CPU did not run its sides or its tunnels then.
    let mut stalled = Duration::ZERO;
    let mut pending = events(flows).into_iter().peekable();
    loop {
        while let Some(&(at, event)) = pending.peek() {
            if start.elapsed() < at || at >= plan.runtime {
                break;
            }
            pending.next();
            match event {
                Event::Start(i) => {
                    let [first, second] = flows[i].scheme.start_order();
                    let peer = sides.address(first, flow_id(i));
                    let notes = sides.start(&flows[i], second, flow_id(i), Some(peer))?;
                    record.notes.extend(notes);
                }
                Event::Stop(i) => sides.stop(flow_id(i))?,
            }
        }
        let elapsed = start.elapsed();
        if elapsed >= plan.runtime {
            break;
        }
        sides.check()?;
        if ends_by_itself
            && pending.peek().is_none()
            && (0..flows.len()).all(|i| sides.finished(flow_id(i)))
        {
            record.notes.push(format!(
                "every flow's workload ended by itself, {:.2} s into the run",
                start.elapsed().as_secs_f64()
            ));
            break;
        }
        progress(elapsed.as_secs_f64() / plan.runtime.as_secs_f64());
        let next = pending
            .peek()
            .map_or(plan.runtime, |&(at, _)| at.min(plan.runtime));
        let wait = next.saturating_sub(start.elapsed()).min(sides.poll());
        let slept = Instant::now();
        std::thread::sleep(wait);
        stalled = stalled.max(slept.elapsed().saturating_sub(wait));
    }
    record.end = Some(utc_now());
    record.wall_s = Some(start.elapsed().as_secs_f64());
    record.stalled_s = Some(stalled.as_secs_f64());
    progress(1.0);
    Ok(())
}

/// Waits `d`, checking the sides every [`Sides::poll`] (and once at the end).
pub fn sleep_checked(sides: &mut dyn Sides, d: Duration) -> anyhow::Result<()> {
    let end = Instant::now() + d;
    loop {
        sides.check()?;
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(());
        }
        std::thread::sleep(left.min(sides.poll()));
    }
}

/// File names of one run's files in the data directory.
pub fn log_path(
    dir: &Path,
    scheme: &str,
    direction: &str,
    run: u32,
    flow: u16,
    kind: &str,
) -> PathBuf {
    dir.join(analyzer::ingest::log_name(
        scheme, direction, run, flow, kind,
    ))
}

/// `path` with each of `flows`' extra one-way delay (a mix's `+DELAY`) on that flow's packets,
/// found by its tunnel port ([`tunnel_port`]): what a real and a simulated run both emulate.
pub fn with_flow_delays(path: &EmulatedPath, flows: &[RunFlow]) -> EmulatedPath {
    let delays: Vec<FlowDelay> = (1..)
        .zip(flows)
        .filter(|(_, f)| !f.delay.is_zero())
        .map(|(i, f)| FlowDelay {
            udp_port: tunnel_port(i),
            delay_ns: f.delay.as_nanos() as u64,
        })
        .collect();
    path.with_flow_delays(&delays)
}

/// Pantheon's `--uplink-log`/`--downlink-log` of mm-link for run `run_id` of `scheme` in
/// `dir`: `<cc>_mm_datalink_run<N>.log` (the sender is inside, so data is uplink) and
/// `<cc>_mm_acklink_run<N>.log`.
pub fn link_log_paths(dir: &Path, scheme: &str, run_id: u32) -> (PathBuf, PathBuf) {
    (
        dir.join(format!("{scheme}_mm_datalink_run{run_id}.log")),
        dir.join(format!("{scheme}_mm_acklink_run{run_id}.log")),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    /// One start or stop: the scheme (`None` for a stop), the side, its flow, the flow's
    /// address (if any) and when, since `t0`.
    type Start = (Option<String>, Side, u16, Option<String>, Duration);

    /// Sides that record what was started and stopped, and fail from a given start on.
    struct Recorded {
        started: RefCell<Vec<Start>>,
        t0: Instant,
        fail_after: usize,
        /// What [`Sides::finished`] says of every flow.
        finished: bool,
    }

    impl Recorded {
        fn new(fail_after: usize) -> Recorded {
            Recorded {
                started: RefCell::default(),
                t0: Instant::now(),
                fail_after,
                finished: false,
            }
        }
    }

    impl Sides for Recorded {
        fn check(&mut self) -> anyhow::Result<()> {
            if self.started.borrow().len() > self.fail_after {
                anyhow::bail!("receiver of flow 1 exited early");
            }
            Ok(())
        }
        fn start(
            &mut self,
            run_flow: &RunFlow,
            side: Side,
            flow: u16,
            peer: Option<String>,
        ) -> anyhow::Result<Vec<String>> {
            let at = self.t0.elapsed();
            let name = Some(run_flow.scheme.name.clone());
            self.started.borrow_mut().push((name, side, flow, peer, at));
            Ok(vec![format!("{side:?} {flow} started")])
        }
        fn stop(&mut self, flow: u16) -> anyhow::Result<()> {
            let at = self.t0.elapsed();
            self.started
                .borrow_mut()
                .push((None, Side::Sender, flow, None, at));
            Ok(())
        }
        fn address(&self, side: Side, flow: u16) -> String {
            format!("{side:?}-{flow}")
        }
        fn poll(&self) -> Duration {
            Duration::from_millis(200)
        }
        fn finished(&self, _flow: u16) -> bool {
            self.finished
        }
    }

    fn scheme(name: &str, run_first: &str) -> Scheme {
        let toml = format!(
            "name = \"{name}\"\nlabel = \"X\"\ncolor = \"red\"\nmarker = \"o\"\n\
             run_first = \"{run_first}\"\n\
             [sender]\ncommand = [\"s\", \"{{ip}}\", \"{{port}}\"]\n\
             [receiver]\ncommand = [\"r\", \"{{port}}\"]\n"
        );
        toml::from_str(&toml).expect("a valid descriptor")
    }

    #[test]
    fn first_sides_then_second_sides_interval_apart_then_the_runtime() {
        let plan = ExperimentPlan {
            flows: 2,
            first_side_setup: Duration::from_millis(40),
            interval: Duration::from_millis(60),
            runtime: Duration::from_millis(100),
            ..ExperimentPlan::default()
        };
        let mut sides = Recorded::new(usize::MAX);
        let mut record = RunRecord::new("x", 1);
        let t0 = Instant::now();
        let x = scheme("x", "receiver");
        run_sequence(
            &plan,
            &flows_of(&plan, &x),
            &mut sides,
            &mut record,
            &|_| {},
        )
        .unwrap();
        let total = t0.elapsed();
        let started = sides.started.into_inner();
        let what: Vec<(Side, u16, Option<String>)> = started
            .iter()
            .map(|(_, s, f, p, _)| (*s, *f, p.clone()))
            .collect();
        use Side::{Receiver, Sender};
        assert_eq!(
            what,
            [
                (Receiver, 1, None),
                (Receiver, 2, None),
                (Sender, 1, Some("Receiver-1".into())),
                (Sender, 2, Some("Receiver-2".into())),
            ]
        );
        // The second sides come after the setup, `interval` apart by the schedule (each at
        // its offset from the run's start, which is at least the setup after t0: the first
        // may be recorded a little after its time, so the measured gap may be a hair short of
        // the interval — 59.9 ms seen in CI); the runtime counts from the run's start, so the
        // interval is inside it.
        let at = |i: usize| started[i].4;
        assert!(at(2) >= Duration::from_millis(40), "{:?}", at(2));
        assert!(at(3) >= Duration::from_millis(40 + 60), "{:?}", at(3));
        assert!(at(3) > at(2), "{:?} then {:?}", at(2), at(3));
        assert!(total >= Duration::from_millis(140), "{total:?}");
        assert_eq!(record.notes.len(), 4);
        assert!(record.start.is_some() && record.end.is_some());
    }

    #[test]
    fn a_mix_starts_and_stops_each_flow_at_its_time_not_at_the_next_poll() {
        let plan = ExperimentPlan {
            first_side_setup: Duration::from_millis(20),
            runtime: Duration::from_millis(300),
            ..ExperimentPlan::default()
        };
        let (cubic, ledbat) = (scheme("cubic", "receiver"), scheme("ledbat", "sender"));
        let ms = Duration::from_millis;
        let flows = [
            RunFlow {
                scheme: &cubic,
                start: ms(0),
                stop: None,
                delay: Duration::ZERO,
                workload: Workload::Bulk,
            },
            RunFlow {
                scheme: &ledbat,
                start: ms(130),
                stop: Some(ms(210)),
                delay: Duration::ZERO,
                workload: Workload::Bulk,
            },
            RunFlow {
                scheme: &cubic,
                start: ms(70),
                stop: None,
                delay: Duration::ZERO,
                workload: Workload::Bulk,
            },
        ];
        let mut sides = Recorded::new(usize::MAX);
        let mut record = RunRecord::new("mix", 1);
        run_sequence(&plan, &flows, &mut sides, &mut record, &|_| {}).unwrap();
        let started = sides.started.into_inner();
        let name = |s: &str| Some(s.to_owned());
        use Side::{Receiver, Sender};
        let what: Vec<(Option<String>, Side, u16)> = started
            .iter()
            .map(|(n, s, f, _, _)| (n.clone(), *s, *f))
            .collect();
        // Each flow's first side (ledbat's is its sender) at once; then the second sides and
        // the stop in time order.
        assert_eq!(
            what,
            [
                (name("cubic"), Receiver, 1),
                (name("ledbat"), Sender, 2),
                (name("cubic"), Receiver, 3),
                (name("cubic"), Sender, 1),
                (name("cubic"), Sender, 3),
                (name("ledbat"), Receiver, 2),
                (None, Sender, 2),
            ]
        );
        assert_eq!(started[5].3.as_deref(), Some("Sender-2"));
        // Each at its time after the run's start (flow 1's second side), though the sides are
        // polled only every 200 ms (40 ms of slack for a loaded machine). Flow 1's second side
        // is recorded a moment after the run's start (0.1 ms seen in CI), so an event on time
        // may measure that much under its due time: 1 ms allowed.
        let run_start = started[3].4;
        for (i, due) in [(4, 70), (5, 130), (6, 210)] {
            let late = started[i].4 - run_start;
            assert!(
                late + ms(1) >= ms(due) && late < ms(due + 40),
                "event {i} at {late:?}, due at {due} ms"
            );
        }
    }

    #[test]
    fn a_run_ends_when_every_flow_has_ended_by_itself_and_not_before() {
        let mut plan = ExperimentPlan {
            first_side_setup: Duration::from_millis(10),
            runtime: Duration::from_secs(30),
            ..ExperimentPlan::default()
        };
        let x = scheme("x", "receiver");
        let mut flows = flows_of(&plan, &x);
        flows[0].workload = Workload::Bytes(1_000_000);
        let mut sides = Recorded::new(usize::MAX);
        sides.finished = true;
        let mut record = RunRecord::new("x", 1);
        let t0 = Instant::now();
        run_sequence(&plan, &flows, &mut sides, &mut record, &|_| {}).unwrap();
        assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
        assert!(record.end.is_some());
        assert!(record.notes.last().unwrap().contains("ended by itself"));
        // A bulk flow beside it keeps the run going to its end.
        plan.runtime = Duration::from_millis(300);
        flows.push(flows_of(&plan, &x).remove(0));
        let t0 = Instant::now();
        let mut record = RunRecord::new("x", 2);
        run_sequence(&plan, &flows, &mut sides, &mut record, &|_| {}).unwrap();
        assert!(
            t0.elapsed() >= Duration::from_millis(310),
            "{:?}",
            t0.elapsed()
        );
        assert!(!record.notes.iter().any(|n| n.contains("ended by itself")));
    }

    #[test]
    fn a_failing_side_stops_the_run_with_its_reason_and_no_end_time() {
        let plan = ExperimentPlan {
            first_side_setup: Duration::from_millis(10),
            runtime: Duration::from_secs(30),
            ..ExperimentPlan::default()
        };
        let mut sides = Recorded::new(1);
        let mut record = RunRecord::new("x", 1);
        let x = scheme("x", "sender");
        let e = run_sequence(
            &plan,
            &flows_of(&plan, &x),
            &mut sides,
            &mut record,
            &|_| {},
        )
        .unwrap_err();
        assert_eq!(e.to_string(), "receiver of flow 1 exited early");
        // Sender first here; the receiver was started, then the check failed at once.
        let started = sides.started.into_inner();
        assert_eq!(started[0].1, Side::Sender);
        assert_eq!(started.len(), 2);
        assert!(record.end.is_none());
    }
}
