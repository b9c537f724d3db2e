//! Simulated runs (`pantheon run sim`): a run's flows through the simulator ([`sim`]) on a
//! virtual clock, its logs and record where a real run puts them, so that analysis, reports,
//! comparison, calibration and sweeps read them unchanged.
//!
//! The timeline is a real run's (module docs of [`crate::runner`]): the emulator starts at
//! time 0, each flow's sender connects `first_side_setup` + its start later, the run lasts
//! `runtime` from the first sender's start, then the path drains for up to `drain_timeout`.
//! The emulator's seed is the real runner's (`plan.seed ^ run_id`), so a simulated run and a
//! real one of the same plan draw the same losses. The clock starts at the Unix epoch
//! (`sim::logs::SIM_EPOCH_NS`): "Start at" and "End at" are simulated times.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::Context;
use emucal::mm::EmulatedPath;
use sim::logs::{FileSink, SIM_EPOCH_NS};
use sim::run::{simulate, FlowSpec, SimConfig};

use crate::plan::ExperimentPlan;
use crate::record::{RunRecord, SimulationCost, INTERRUPTED};
use crate::sequence::{link_log_paths, log_path, with_flow_delays, RunSpec};

/// Simulates `run_spec` (its flows, filed under its name and run id) over `path`: logs in
/// `plan.data_dir` under the names of a real run, the record giving the simulation's cost
/// ([`SimulationCost`], also a note). `progress` is told the fraction of the runtime simulated
/// (0–1). Ctrl-C (the [`INTERRUPTED`] flag) stops it as
/// interrupted. Never panics on a failing flow; returns the record.
pub fn simulate_once(
    plan: &ExperimentPlan,
    path: &EmulatedPath,
    run_spec: &RunSpec,
    progress: &dyn Fn(f64),
) -> RunRecord {
    let mut record = RunRecord::new(run_spec.name, run_spec.run_id);
    let result = run(plan, path, run_spec, progress, &mut record);
    record.finish(result, &plan.data_dir, &[]);
    record
}

fn ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

fn run(
    plan: &ExperimentPlan,
    path: &EmulatedPath,
    run_spec: &RunSpec,
    progress: &dyn Fn(f64),
    record: &mut RunRecord,
) -> anyhow::Result<()> {
    let RunSpec {
        name,
        flows,
        run_id,
        ..
    } = *run_spec;
    let dir = &plan.data_dir;
    let setup = ns(plan.first_side_setup);
    let mut specs = Vec::new();
    for f in flows {
        let simulated = f.scheme.check_simulated()?;
        specs.push(FlowSpec {
            cc: simulated.factory()?,
            start_ns: setup + ns(f.start),
            stop_ns: f.stop.map(|s| setup + ns(s)),
            l4s: simulated.l4s(),
        });
    }
    let (up_log, down_log) = link_log_paths(dir, name, run_id);
    let path = with_flow_delays(path, flows).with_link_logs(up_log, down_log);
    let n = u16::try_from(flows.len()).context("too many flows")?;
    let mut sink = FileSink::create(
        &path,
        n,
        &|direction, kind, flow| {
            log_path(dir, name, direction.as_str(), run_id, flow, kind.as_str())
        },
        plan.capture,
    )?;
    let config = SimConfig {
        path: &path,
        flows: specs,
        seed: plan.seed ^ u64::from(run_id),
        end_ns: setup + ns(plan.runtime),
        drain_ns: ns(plan.drain_timeout),
        max_udp_payload: sim::quic::MAX_UDP_PAYLOAD,
        host: plan.host_latency,
        host_seed: u64::from(run_id),
    };
    let runtime = plan.runtime.as_secs_f64();
    let started = Instant::now();
    let outcome = simulate(&config, &mut sink, &mut |t| {
        progress(((t.saturating_sub(setup)) as f64 / 1e9 / runtime).min(1.0));
        !INTERRUPTED.load(Ordering::SeqCst)
    });
    let wall = started.elapsed();
    sink.finish().context("write the simulated run's logs")?;
    let outcome = outcome?;
    record.start = Some(sim_time(setup));
    record.end = Some(sim_time(config.end_ns));
    record.emulator_drops = outcome.dropped;
    let cost = SimulationCost {
        simulated_s: outcome.end_ns as f64 / 1e9,
        wall_s: wall.as_secs_f64(),
        datagrams: outcome.sent.0 + outcome.sent.1,
    };
    record.notes.push(cost.to_string());
    record.simulation = Some(cost);
    if !outcome.drained {
        record.notes.push(format!(
            "drain: packets were still in the path {:.1} s after the run",
            plan.drain_timeout.as_secs_f64()
        ));
    }
    Ok(())
}

/// `Thu 01 Jan 1970 00:00:01 +0000`: a simulated instant (ns after the simulated clock's
/// start) as the runner writes "Start at" (`plan::utc_now`).
fn sim_time(ns: u64) -> String {
    let t = SIM_EPOCH_NS.saturating_add(i64::try_from(ns).unwrap_or(i64::MAX));
    chrono::DateTime::from_timestamp_nanos(t)
        .format("%a %d %b %Y %H:%M:%S %z")
        .to_string()
}
