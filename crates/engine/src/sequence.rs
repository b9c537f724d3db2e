//! The run sequence, one for local and remote runs: where the sides run differs (network
//! namespaces on this machine, [`crate::runner`]; two testbed agents, the testbed crate's
//! `remote`), the order does not.
//!
//! Once every flow's tunnel is up (Pantheon's `test.py`, reference `pantheon.md` §2.4):
//!
//! 1. the side that runs first (the scheme's `run_first`, usually the receiver) of every flow;
//! 2. `first_side_setup` for them alone;
//! 3. the other side of every flow, `interval` apart, given the first side's tunnel address;
//!    the runtime counts from the first of them (Pantheon's `Start at:`);
//! 4. `runtime`, then `End at:`.
//!
//! The sides are checked all along ([`Sides::check`]): a side that failed, or Ctrl-C, stops the
//! run with the reason.

use std::time::{Duration, Instant};

use crate::plan::{utc_now, ExperimentPlan};
use crate::runner::RunRecord;
use crate::schemes::{Scheme, Side};

/// The port schemes use inside the tunnel, local and remote runs alike.
pub const SCHEME_PORT: u16 = 50_000;

/// Where a run's sides run.
pub trait Sides {
    /// Errors if the run must stop: a side failed (a process exited early, a node reported a
    /// failure), a node does not answer, or the run was interrupted (Ctrl-C / SIGTERM).
    fn check(&mut self) -> anyhow::Result<()>;
    /// Starts `side` of flow `flow` (1-based). `peer`: for the side that runs second, the
    /// tunnel address of the flow's first side; `None` for the first side. Returns remarks for
    /// the run record.
    fn start(&mut self, side: Side, flow: u16, peer: Option<String>)
        -> anyhow::Result<Vec<String>>;
    /// The tunnel address `side` of flow `flow` (1-based) has.
    fn address(&self, side: Side, flow: u16) -> String;
    /// How often the sides are checked.
    fn poll(&self) -> Duration;
}

/// Runs steps 1–4 of the module docs for `plan`'s flows of `scheme` on `sides`; records the
/// start and end times and the sides' remarks in `record`; reports progress (0–1) through the
/// runtime. Errors with the reason the run stopped early.
pub fn run_sequence(
    plan: &ExperimentPlan,
    scheme: &Scheme,
    sides: &mut dyn Sides,
    record: &mut RunRecord,
    progress: &dyn Fn(f64),
) -> anyhow::Result<()> {
    let [first, second] = scheme.start_order();
    for flow in 1..=plan.flows {
        record.notes.extend(sides.start(first, flow, None)?);
    }
    sleep_checked(sides, plan.first_side_setup)?;
    let start = Instant::now();
    record.start = Some(utc_now());
    for flow in 1..=plan.flows {
        if flow > 1 {
            sleep_checked(sides, plan.interval)?;
        }
        let peer = sides.address(first, flow);
        record.notes.extend(sides.start(second, flow, Some(peer))?);
    }
    while start.elapsed() < plan.runtime {
        sides.check()?;
        progress(start.elapsed().as_secs_f64() / plan.runtime.as_secs_f64());
        std::thread::sleep(sides.poll());
    }
    record.end = Some(utc_now());
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    /// One start: the side, its flow, the flow's address (if any) and when, since `t0`.
    type Start = (Side, u16, Option<String>, Duration);

    /// Sides that record what was started, and fail from a given start on.
    struct Recorded {
        started: RefCell<Vec<Start>>,
        t0: Instant,
        fail_after: usize,
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
            side: Side,
            flow: u16,
            peer: Option<String>,
        ) -> anyhow::Result<Vec<String>> {
            let at = self.t0.elapsed();
            self.started.borrow_mut().push((side, flow, peer, at));
            Ok(vec![format!("{side:?} {flow} started")])
        }
        fn address(&self, side: Side, flow: u16) -> String {
            format!("{side:?}-{flow}")
        }
        fn poll(&self) -> Duration {
            Duration::from_millis(5)
        }
    }

    fn scheme(run_first: &str) -> Scheme {
        let toml = format!(
            "name = \"x\"\nlabel = \"X\"\ncolor = \"red\"\nmarker = \"o\"\n\
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
        let mut sides = Recorded {
            started: RefCell::default(),
            t0: Instant::now(),
            fail_after: usize::MAX,
        };
        let mut record = RunRecord::new("x", 1);
        let t0 = Instant::now();
        run_sequence(&plan, &scheme("receiver"), &mut sides, &mut record, &|_| {}).unwrap();
        let total = t0.elapsed();
        let started = sides.started.into_inner();
        let what: Vec<(Side, u16, Option<String>)> = started
            .iter()
            .map(|(s, f, p, _)| (*s, *f, p.clone()))
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
        // The second sides come after the setup, `interval` apart; the runtime counts from
        // the first of them, so the interval is inside it.
        let at = |i: usize| started[i].3;
        assert!(at(2) >= Duration::from_millis(40), "{:?}", at(2));
        assert!(
            at(3) - at(2) >= Duration::from_millis(60),
            "{:?}",
            at(3) - at(2)
        );
        assert!(total >= Duration::from_millis(140), "{total:?}");
        assert_eq!(record.notes.len(), 4);
        assert!(record.start.is_some() && record.end.is_some());
    }

    #[test]
    fn a_failing_side_stops_the_run_with_its_reason_and_no_end_time() {
        let plan = ExperimentPlan {
            first_side_setup: Duration::from_millis(10),
            runtime: Duration::from_secs(30),
            ..ExperimentPlan::default()
        };
        let mut sides = Recorded {
            started: RefCell::default(),
            t0: Instant::now(),
            fail_after: 1,
        };
        let mut record = RunRecord::new("x", 1);
        let e =
            run_sequence(&plan, &scheme("sender"), &mut sides, &mut record, &|_| {}).unwrap_err();
        assert_eq!(e.to_string(), "receiver of flow 1 exited early");
        // Sender first here; the receiver was started, then the check failed at once.
        let started = sides.started.into_inner();
        assert_eq!(started[0].0, Side::Sender);
        assert_eq!(started.len(), 2);
        assert!(record.end.is_none());
    }
}
