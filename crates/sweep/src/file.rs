//! The sweep file (`SWEEP.toml`): what to evaluate, read with serde so that a misspelt or
//! misplaced key is an error naming it (with its line).
//!
//! ```toml
//! name = "scavenger"        # names the results directory (results/sweep-scavenger)
//! runtime = 30              # seconds per run
//! runs = 1                  # runs of every (environment, mix)
//! seed = 1                  # run r of every point gets seed + r - 1 (emulator, workloads)
//! simulate = false          # true: points run in simulated time (`pantheon run sim`)
//!
//! [environments]            # the product of every list given
//! rate_mbps = [10, 20, 50, 100]     # constant-rate link, both directions
//! rtt_ms = [20, 60, 100]            # minimum RTT: mm-delay rtt/2 (must be even)
//! buffer_bdp = [0.5, 2]             # DropTail queue each way, in BDPs (or buffer_packets)
//! loss = [0]                        # uplink i.i.d. loss rate (mm-loss uplink)
//! emulators = ["nepal-aws-india"]   # and named emulators (`pantheon emulators`), as they are
//! link_args = "--uplink-queue=dualpi2 --uplink-queue-args=limit=1000"  # more mm-link arguments
//!
//! [mixes]
//! primaries = ["cubic", "bbr"]      # each primary against each contender: "PRIMARY CONTENDER"
//! contenders = ["ledbat", "cubic"]
//! list = ["cubic bbr@10"]           # more mixes, in `--mix` form
//! solo = true                       # each primary alone too (the throughput ratio's baseline)
//!
//! [heatmap]                         # a heatmap per mix of `value` over `x` × `y`
//! value = "tput_ratio"              # jain, tput_ratio, tput_harm or delay_harm
//! x = "rate_mbps"                   # rate_mbps, rtt_ms, buffer_bdp, buffer_packets, loss
//! y = "rtt_ms"
//!
//! [slurm]                           # `--executor slurm` (flags override): docs/slurm.md
//! partition = "batch"               # sbatch --partition
//! time = "0:10:00"                  # sbatch --time, per array task
//! cpus_per_task = 2                 # sbatch --cpus-per-task (default 2: the tunnel and a scheme)
//! pack = 1                          # points per array task (sites that limit array sizes)
//! sbatch_args = ["--qos=short"]     # more sbatch options, as given
//! ```

use serde::{Deserialize, Serialize};

/// A sweep file as written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SweepFile {
    /// The sweep's name: letters, digits, `-`, `_`.
    pub name: String,
    /// Seconds of every run (`--runtime`); default 30.
    #[serde(default = "default_runtime")]
    pub runtime: f64,
    /// Runs of each (environment, mix); default 1.
    #[serde(default = "default_runs")]
    pub runs: u32,
    /// Seed of the emulators' random choices and the flows' workload draws: run `r` of every
    /// (environment, mix) gets `seed + r − 1`, so the mixes compare on the same draws; default 1.
    #[serde(default = "default_runs_seed")]
    pub seed: u64,
    /// Points simulated on a virtual clock (`pantheon run sim`, docs/simulation.md) instead of
    /// run in real time; default false.
    #[serde(default)]
    pub simulate: bool,
    /// `--capture` for every point: its tunnels write a pcapng beside each log keeping this
    /// many bytes of each packet (`capture = 128`; docs/results.md); default none.
    #[serde(default)]
    pub capture: Option<u32>,
    /// The environments.
    pub environments: Environments,
    /// The flow mixes.
    pub mixes: Mixes,
    /// The heatmaps' axes and value.
    #[serde(default)]
    pub heatmap: Heatmap,
    /// How `--executor slurm` submits the points (flags override each key).
    #[serde(default)]
    pub slurm: SlurmSection,
}

/// `[slurm]`: the job array's options for `--executor slurm`; each is overridden by the flag
/// of the same name.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlurmSection {
    /// `sbatch --partition`; default the site's default partition.
    pub partition: Option<String>,
    /// `sbatch --time`, the limit of each array task (`MM`, `HH:MM:SS`, `D-HH`); default the
    /// partition's.
    pub time: Option<String>,
    /// `sbatch --cpus-per-task`; default 2 (a point runs the tunnel, the emulator and the
    /// schemes' two sides).
    pub cpus_per_task: Option<u32>,
    /// Points run one after another by each array task, for sites that limit array sizes or
    /// the number of jobs; default 1.
    pub pack: Option<u32>,
    /// More `sbatch` options, each as one argument (`"--qos=short"`).
    #[serde(default)]
    pub sbatch_args: Vec<String>,
}

fn default_runtime() -> f64 {
    30.0
}

fn default_runs() -> u32 {
    1
}

fn default_runs_seed() -> u64 {
    1
}

/// The environments: the product of the grid's lists (rate × RTT × buffer × loss), then the
/// named emulators.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Environments {
    /// Link rate both ways, Mbit/s (a constant-rate trace).
    #[serde(default)]
    pub rate_mbps: Vec<f64>,
    /// Minimum round-trip time, ms: `mm-delay` of half of it; even.
    #[serde(default)]
    pub rtt_ms: Vec<u32>,
    /// DropTail queue each way, in bandwidth-delay products (BDP = rate × RTT of 1500-byte
    /// packets, at least 2 packets).
    #[serde(default)]
    pub buffer_bdp: Vec<f64>,
    /// DropTail queue each way, packets (instead of `buffer_bdp`).
    #[serde(default)]
    pub buffer_packets: Vec<u32>,
    /// Uplink random loss rate, 0–1 (`mm-loss uplink`); default `[0]`.
    #[serde(default)]
    pub loss: Vec<f64>,
    /// Named emulators of the library (`pantheon emulators`), each one environment.
    #[serde(default)]
    pub emulators: Vec<String>,
    /// More mm-link arguments for every grid cell, as `--extra-mm-link-args` takes them, after
    /// the buffer's DropTail queues (so they may replace one): another queue discipline
    /// (`--uplink-queue=dualpi2 --uplink-queue-args=limit=1000`), the delivery
    /// (`--uplink-delivery=even`), cross traffic. Checked when the sweep is planned.
    #[serde(default)]
    pub link_args: String,
}

/// The flow mixes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Mixes {
    /// Primary schemes: flow 1 of each pair.
    #[serde(default)]
    pub primaries: Vec<String>,
    /// Contenders: flow 2 of each pair, started with the primary.
    #[serde(default)]
    pub contenders: Vec<String>,
    /// More mixes in the `--mix` form (`"cubic bbr@10 ledbat@20-40"`).
    #[serde(default)]
    pub list: Vec<String>,
    /// Run each primary alone as well, in every environment (the solo baseline of the
    /// throughput ratio and harm); default true.
    #[serde(default = "yes")]
    pub solo: bool,
}

fn yes() -> bool {
    true
}

/// A heatmap per mix: `value` (median over runs and the other axes) over `x` × `y`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Heatmap {
    /// `jain`, `tput_ratio`, `tput_harm` or `delay_harm` (of flow 1).
    #[serde(default = "default_value")]
    pub value: String,
    /// An environment axis: `rate_mbps`, `rtt_ms`, `buffer_bdp`, `buffer_packets` or `loss`.
    #[serde(default = "default_x")]
    pub x: String,
    /// Another environment axis.
    #[serde(default = "default_y")]
    pub y: String,
}

fn default_value() -> String {
    "jain".into()
}
fn default_x() -> String {
    "rate_mbps".into()
}
fn default_y() -> String {
    "rtt_ms".into()
}

impl Default for Heatmap {
    fn default() -> Heatmap {
        Heatmap {
            value: default_value(),
            x: default_x(),
            y: default_y(),
        }
    }
}

/// The values a heatmap can show.
pub const HEATMAP_VALUES: [&str; 4] = ["jain", "tput_ratio", "tput_harm", "delay_harm"];
/// The environment axes a heatmap can span.
pub const AXES: [&str; 5] = [
    "rate_mbps",
    "rtt_ms",
    "buffer_bdp",
    "buffer_packets",
    "loss",
];

impl SweepFile {
    /// Reads and parses sweep file `path` ([`SweepFile::parse`]), if it is a regular file of
    /// at most 1 MiB (a FIFO or a device is refused by type, never read).
    pub fn load(path: &std::path::Path) -> anyhow::Result<SweepFile> {
        let text = analyzer::files::read_regular_text(path, "a sweep file", 1 << 20)?;
        SweepFile::parse(&text, &path.display().to_string())
    }

    /// Reads a sweep file; `file` names it in errors, which give the key and line.
    pub fn parse(text: &str, file: &str) -> anyhow::Result<SweepFile> {
        let f: SweepFile = toml::from_str(text).map_err(|e| anyhow::anyhow!("{file}: {e}"))?;
        f.check().map_err(|e| anyhow::anyhow!("{file}: {e}"))?;
        Ok(f)
    }

    /// Checks what serde cannot: names, ranges, and that the grid is whole.
    fn check(&self) -> Result<(), String> {
        let ok_name = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
        if self.name.is_empty() || !self.name.chars().all(ok_name) {
            return Err(format!(
                "name: `{}` must be letters, digits, `-` or `_`",
                self.name
            ));
        }
        if !(self.runtime.is_finite() && self.runtime >= 1.0) {
            return Err(format!("runtime: {} s must be at least 1", self.runtime));
        }
        if self.runs == 0 {
            return Err("runs: must be at least 1".into());
        }
        if let Some(c) = self.capture {
            engine::plan::check_capture(c).map_err(|e| format!("capture: {e}"))?;
        }
        let e = &self.environments;
        let grid = !(e.rate_mbps.is_empty() && e.rtt_ms.is_empty())
            || !e.buffer_bdp.is_empty()
            || !e.buffer_packets.is_empty();
        if grid {
            if e.rate_mbps.is_empty() || e.rtt_ms.is_empty() {
                return Err("environments: a grid needs both rate_mbps and rtt_ms".into());
            }
            if !e.buffer_bdp.is_empty() && !e.buffer_packets.is_empty() {
                return Err("environments: give buffer_bdp or buffer_packets, not both".into());
            }
        } else if e.emulators.is_empty() {
            return Err("environments: give a grid (rate_mbps, rtt_ms, …) or emulators".into());
        }
        if let Some(r) = e.rate_mbps.iter().find(|r| !(r.is_finite() && **r > 0.0)) {
            return Err(format!("environments.rate_mbps: {r} must be positive"));
        }
        if let Some(r) = e.rtt_ms.iter().find(|r| **r % 2 == 1) {
            return Err(format!(
                "environments.rtt_ms: {r} must be even (the one-way delay is rtt/2 whole ms)"
            ));
        }
        if let Some(b) = e.buffer_bdp.iter().find(|b| !(b.is_finite() && **b > 0.0)) {
            return Err(format!("environments.buffer_bdp: {b} must be positive"));
        }
        if let Some(l) = e.loss.iter().find(|l| !(0.0..1.0).contains(*l)) {
            return Err(format!("environments.loss: {l} must be in [0, 1)"));
        }
        let m = &self.mixes;
        if m.primaries.is_empty() != m.contenders.is_empty() {
            return Err("mixes: primaries and contenders go together".into());
        }
        if m.primaries.is_empty() && m.list.is_empty() {
            return Err("mixes: give primaries and contenders, or list".into());
        }
        if self.slurm.cpus_per_task == Some(0) || self.slurm.pack == Some(0) {
            return Err("slurm: cpus_per_task and pack must be at least 1".into());
        }
        let h = &self.heatmap;
        if !HEATMAP_VALUES.contains(&h.value.as_str()) {
            return Err(format!(
                "heatmap.value: `{}` is not one of {}",
                h.value,
                HEATMAP_VALUES.join(", ")
            ));
        }
        for (key, axis) in [("heatmap.x", &h.x), ("heatmap.y", &h.y)] {
            if !AXES.contains(&axis.as_str()) {
                return Err(format!("{key}: `{axis}` is not one of {}", AXES.join(", ")));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
name = "t"
[environments]
rate_mbps = [10, 20]
rtt_ms = [40]
buffer_bdp = [1]
[mixes]
primaries = ["cubic"]
contenders = ["ledbat"]
"#;

    #[test]
    fn a_small_file_reads_with_its_defaults() {
        let f = SweepFile::parse(GOOD, "t.toml").unwrap();
        assert_eq!((f.runtime, f.runs, f.seed), (30.0, 1, 1));
        assert!(f.mixes.solo);
        assert_eq!(f.heatmap, Heatmap::default());
    }

    #[test]
    fn bad_files_name_the_key() {
        for (edit, want) in [
            (
                ("rtt_ms = [40]", "rtt_ms = [41]"),
                "environments.rtt_ms: 41",
            ),
            (("rtt_ms = [40]", "rtt = [40]"), "unknown field `rtt`"),
            (("name = \"t\"", "name = \"a b\""), "name: `a b`"),
            (
                ("contenders = [\"ledbat\"]", ""),
                "primaries and contenders",
            ),
            (
                ("buffer_bdp = [1]", "buffer_bdp = [1]\nbuffer_packets = [5]"),
                "not both",
            ),
            (
                ("buffer_bdp = [1]", "buffer_bdp = [1]\nloss = [1.5]"),
                "loss: 1.5",
            ),
            (
                ("[mixes]", "[heatmap]\nx = \"speed\"\n[mixes]"),
                "heatmap.x: `speed`",
            ),
            (
                ("rate_mbps = [10, 20]", "rate_mbps = [10, \"x\"]"),
                "rate_mbps",
            ),
            (
                ("[mixes]", "[slurm]\npack = 0\n[mixes]"),
                "slurm: cpus_per_task and pack",
            ),
            (
                ("[mixes]", "[slurm]\nqueue = \"x\"\n[mixes]"),
                "unknown field `queue`",
            ),
        ] {
            let text = GOOD.replace(edit.0, edit.1);
            let err = SweepFile::parse(&text, "t.toml").unwrap_err().to_string();
            assert!(err.starts_with("t.toml: "), "{err}");
            assert!(err.contains(want), "{edit:?}: {err}");
        }
    }
}
