//! Flags → a validated, immutable [`ExperimentPlan`]; its JSON form is
//! `pantheon_metadata.json` (Pantheon's keys, plus ours).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context};
use emucal::mm::EmulatedPath;
use emucal::trace::Trace;
use serde_json::{json, Value};

use crate::schemes::Registry;

/// Everything a local experiment needs, checked before anything starts.
#[derive(Debug, Clone)]
pub struct ExperimentPlan {
    /// Scheme names in run order.
    pub schemes: Vec<String>,
    /// Runs per scheme.
    pub run_times: u32,
    /// Id of the first run.
    pub start_run_id: u32,
    /// Duration of each run (from the second side's start).
    pub runtime: Duration,
    /// Flows per run.
    pub flows: u16,
    /// Time between flow starts.
    pub interval: Duration,
    /// Wait after starting the first side.
    pub first_side_setup: Duration,
    /// Longest wait for in-flight packets to leave the path after the run.
    pub drain_timeout: Duration,
    /// Shuffled scheme order.
    pub random_order: bool,
    /// Results directory.
    pub data_dir: PathBuf,
    /// Seed of the emulator's loss generators (runs differ by run id).
    pub seed: u64,
    /// `--uplink-trace`.
    pub uplink_trace: PathBuf,
    /// `--downlink-trace`.
    pub downlink_trace: PathBuf,
    /// `--prepend-mm-cmds`.
    pub prepend_mm_cmds: String,
    /// `--append-mm-cmds`.
    pub append_mm_cmds: String,
    /// `--extra-mm-link-args`.
    pub extra_mm_link_args: String,
    /// Extra scheme descriptors directory.
    pub schemes_dir: Option<PathBuf>,
}

impl ExperimentPlan {
    /// Checks the plan against the registry and parses the emulated path (traces included),
    /// so that a malformed trace or unknown shell fails before any run starts.
    pub fn validate(&self, registry: &Registry) -> anyhow::Result<EmulatedPath> {
        self.check(registry)?;
        Ok(EmulatedPath::from_pantheon_flags(
            &self.prepend_mm_cmds,
            &self.uplink_trace,
            &self.downlink_trace,
            &self.extra_mm_link_args,
            &self.append_mm_cmds,
        )?)
    }

    /// The checks of local and remote runs alike: schemes known, durations and flows sane.
    pub fn check(&self, registry: &Registry) -> anyhow::Result<()> {
        if self.schemes.is_empty() {
            bail!("no schemes given: use --schemes \"cubic bbr\" or --all");
        }
        for s in &self.schemes {
            registry.get(s)?;
        }
        if self.runtime.is_zero() {
            bail!("--runtime must be positive");
        }
        if self.flows == 0 {
            bail!("--flows must be at least 1 (running without the tunnel is not supported yet)");
        }
        if self.interval * u32::from(self.flows - 1) > self.runtime {
            bail!("(flows − 1) × interval exceeds the runtime");
        }
        Ok(())
    }

    /// `pantheon_metadata.json`: Pantheon's keys (`cc_schemes`, `run_times`, `runtime`,
    /// `flows`, `interval`, `mode`, traces as basenames, the mm strings…) and ours.
    pub fn metadata(&self, path: &EmulatedPath) -> Value {
        let base = |p: &Path| p.file_name().map(|f| f.to_string_lossy().into_owned());
        let mut m = self.common_metadata();
        m.insert("mode", json!("local"));
        m.insert("uplink_trace", json!(base(&self.uplink_trace)));
        m.insert("downlink_trace", json!(base(&self.downlink_trace)));
        for (k, v) in [
            ("prepend_mm_cmds", &self.prepend_mm_cmds),
            ("append_mm_cmds", &self.append_mm_cmds),
            ("extra_mm_link_args", &self.extra_mm_link_args),
        ] {
            if !v.is_empty() {
                m.insert(k, json!(v));
            }
        }
        m.insert("emulator_command", json!(path.command_line));
        m.insert("emulator", json!(path.shells));
        m.insert("seed", json!(self.seed));
        m.insert("drain_timeout", json!(self.drain_timeout.as_secs_f64()));
        json!(m)
    }

    /// The keys of `pantheon_metadata.json` that local and remote runs share (`mode` and the
    /// path's keys are the caller's).
    pub fn common_metadata(&self) -> BTreeMap<&'static str, Value> {
        let mut m = BTreeMap::new();
        let mut sorted = self.schemes.clone();
        sorted.sort();
        m.insert("cc_schemes", json!(sorted));
        m.insert("run_order", json!(self.schemes));
        m.insert("run_times", json!(self.run_times));
        m.insert("start_run_id", json!(self.start_run_id));
        m.insert("runtime", json!(self.runtime.as_secs_f64()));
        m.insert("flows", json!(self.flows));
        m.insert("interval", json!(self.interval.as_secs_f64()));
        m.insert("random_order", json!(self.random_order));
        m.insert(
            "first_side_setup",
            json!(self.first_side_setup.as_secs_f64()),
        );
        m.insert(
            "harness",
            json!(format!("pantheon-rs {}", env!("CARGO_PKG_VERSION"))),
        );
        m.insert("generated_at", json!(crate::runner::utc_now()));
        m
    }
}

/// Writes JSON with 4-space indentation and sorted keys, as Pantheon writes its metadata.
pub fn write_json(path: &Path, value: &Value) -> anyhow::Result<()> {
    use serde::Serialize;
    let mut out = Vec::new();
    let fmt = serde_json::ser::PrettyFormatter::with_indent(b"    ");
    let mut ser = serde_json::Serializer::with_formatter(&mut out, fmt);
    value.serialize(&mut ser)?;
    out.push(b'\n');
    std::fs::write(path, out).with_context(|| format!("write {}", path.display()))
}

/// Writes a constant-rate trace of `mbps` Mbit/s to `path`; errors name the file.
pub fn write_constant_trace(path: &Path, mbps: f64) -> anyhow::Result<()> {
    let t = Trace::constant_rate(mbps).map_err(anyhow::Error::msg)?;
    std::fs::write(path, t.to_text()).with_context(|| format!("write {}", path.display()))
}
