//! A results directory's description, `pantheon_metadata.json`, as one typed value: written
//! by the run (`pantheon run local`/`remote`), read back by the analysis, the comparison and
//! the calibration with the same type.
//!
//! Pantheon writes `vars(args)` there (`pantheon.md` §2.6): `cc_schemes`, `run_times`,
//! `runtime`, `flows`, `interval`, `mode`, `sender_side`, the traces' basenames, the mm strings,
//! `*_desc`, `*_if`, `ntp_addr`, `git_summary`… We write the same keys with the same meaning and
//! add ours (the emulator as parsed, the seed, the scheme versions of the machine that ran the
//! runs). A key this type does not know — one of Pantheon's, or a later version's — is kept in
//! [`Metadata::other`] and written back unchanged, so reading and writing loses nothing.
//!
//! Files are written as Pantheon writes its JSON ([`write_json`]): keys sorted, four-space
//! indentation.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The file's name in a results directory.
pub const METADATA_FILE: &str = "pantheon_metadata.json";
/// The run records' file in a results directory (ours: how each run ended, its notes).
pub const RUNS_FILE: &str = "pantheon_runs.json";

/// Why a JSON file of a results directory could not be read or written ([`read_json`],
/// [`crate::perf::Perf::write`]); each names the file.
#[derive(Debug, thiserror::Error)]
pub enum JsonFileError {
    /// The file cannot be read (missing, or unreadable).
    #[error("read {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The system's error.
        source: std::io::Error,
    },
    /// The file is not what it should hold (serde says where: line and column).
    #[error("parse {path}: {source}")]
    Parse {
        /// The file.
        path: String,
        /// The parser's error.
        source: serde_json::Error,
    },
    /// The file cannot be written.
    #[error("write {path}: {source}")]
    Write {
        /// The file.
        path: String,
        /// The system's error.
        source: std::io::Error,
    },
}

/// Reads the JSON file `path` as a `T`. Errors: [`JsonFileError::Read`],
/// [`JsonFileError::Parse`].
pub fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, JsonFileError> {
    let text = std::fs::read_to_string(path).map_err(|source| JsonFileError::Read {
        path: path.display().to_string(),
        source,
    })?;
    serde_json::from_str(&text).map_err(|source| JsonFileError::Parse {
        path: path.display().to_string(),
        source,
    })
}

/// Why [`Metadata::read`] failed.
#[derive(Debug, thiserror::Error)]
pub enum MetadataError {
    /// The directory has no metadata file.
    #[error(
        "{0} has no pantheon_metadata.json: not a results directory (give the --data-dir of a \
         `pantheon run`)"
    )]
    NotResults(String),
    /// The file exists but cannot be read, or is not valid metadata.
    #[error(transparent)]
    File(#[from] JsonFileError),
}

/// Where a run happened: Pantheon's `mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Both sides on this machine, through the emulator (`test.py local`).
    Local,
    /// Between two machines over a real path (`test.py remote`).
    Remote,
}

/// One of the two nodes of a remote run: Pantheon's `local` (the machine the harness runs on)
/// or `remote`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Node {
    /// The node of the harness (`--local-agent`).
    Local,
    /// The other node.
    Remote,
}

impl Node {
    /// The other node.
    pub fn other(self) -> Node {
        match self {
            Node::Local => Node::Remote,
            Node::Remote => Node::Local,
        }
    }

    /// `local` / `remote`, as in Pantheon's flags and keys (`local_desc`, `remote_if`…).
    pub fn name(self) -> &'static str {
        match self {
            Node::Local => "local",
            Node::Remote => "remote",
        }
    }
}

/// What a node of a remote run said about itself when the experiment started.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeSummary {
    /// The name its agent was started with.
    pub node: String,
    /// Its host name.
    pub hostname: String,
    /// `uname -sr`.
    pub kernel: String,
    /// Its `pantheon-agent` version.
    pub version: String,
    /// The sysctls Pantheon's report lists (`net.core.default_qdisc`, buffer sizes…).
    pub sysctls: BTreeMap<String, String>,
}

fn one() -> u32 {
    1
}

fn one_flow() -> u16 {
    1
}

fn thirty() -> f64 {
    30.0
}

/// One flow of a mix.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowSpec {
    /// Scheme name (a descriptor of the scheme library).
    pub scheme: String,
    /// When the flow's second side starts: seconds after the run starts (Pantheon's
    /// `Start at:`, the start of the first flow); default 0.
    #[serde(default)]
    pub start: f64,
    /// When the flow is stopped: seconds after the run starts; `None`: it runs to the end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop: Option<f64>,
    /// Extra one-way delay for this flow only, milliseconds, added in each direction before the
    /// shared bottleneck (so flows of different RTTs can compete); default 0.
    #[serde(default)]
    pub delay: f64,
    /// What the flow sends (`bytes=1000000`, `poisson,load=0.5,size=web`, `page`; the
    /// `workload` crate's spec); `None`: full throttle (`bulk`), Pantheon's only workload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload: Option<String>,
}

impl FlowSpec {
    /// A flow of `scheme` from the start to the end, with no extra delay.
    pub fn new(scheme: &str) -> FlowSpec {
        FlowSpec {
            scheme: scheme.to_owned(),
            start: 0.0,
            stop: None,
            delay: 0.0,
            workload: None,
        }
    }

    /// The flow in the short form of `--mix` (`bbr@10-40+60`, `cubic(page)`).
    pub fn short(&self) -> String {
        let mut s = self.scheme.clone();
        if self.start > 0.0 || self.stop.is_some() {
            s.push_str(&format!("@{}", self.start));
        }
        if let Some(stop) = self.stop {
            s.push_str(&format!("-{stop}"));
        }
        if self.delay > 0.0 {
            s.push_str(&format!("+{}", self.delay));
        }
        if let Some(w) = &self.workload {
            s.push_str(&format!("({w})"));
        }
        s
    }
}

/// A mixed run's flows, in flow order (flow 1 first).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Mix {
    /// The name its results are filed under: Pantheon's `test-name`, the key of the run in
    /// `pantheon_perf.json` and the prefix of its log files (as a scheme name is for a run of one
    /// scheme).
    pub name: String,
    /// The flows, flow 1 first.
    pub flows: Vec<FlowSpec>,
}

impl Mix {
    /// The schemes of the mix, each once, in flow order.
    pub fn schemes(&self) -> Vec<String> {
        let mut seen = Vec::new();
        for f in &self.flows {
            if !seen.contains(&f.scheme) {
                seen.push(f.scheme.clone());
            }
        }
        seen
    }
}

/// `pantheon_metadata.json`. Durations are in seconds, as Pantheon's flags give them. Fields
/// absent from a file read back take Pantheon's defaults (one run of 30 s, one flow).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Metadata {
    /// The schemes, sorted by name (Pantheon's key). In a mixed experiment, the mixes' names
    /// (Pantheon's `test-name`): each is filed like a scheme.
    #[serde(default)]
    pub cc_schemes: Vec<String>,
    /// The flows of a mixed experiment (`--mix`, `--config-file`), each with its scheme, start,
    /// stop and extra delay; absent for runs of one scheme (ours: Pantheon's config path kept
    /// no such record).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mix: Option<Mix>,
    /// A results directory of the mix's schemes each alone on the same emulator: the solo
    /// figures of the throughput ratio and harm (`--baseline`; ours).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<String>,
    /// The order they ran in (ours; shuffled with `--random-order`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub run_order: Vec<String>,
    /// Runs per scheme.
    #[serde(default = "one")]
    pub run_times: u32,
    /// Id of the first run.
    #[serde(default = "one")]
    pub start_run_id: u32,
    /// Duration of each run, s.
    #[serde(default = "thirty")]
    pub runtime: f64,
    /// Flows per run.
    #[serde(default = "one_flow")]
    pub flows: u16,
    /// Time between flow starts, s.
    #[serde(default)]
    pub interval: f64,
    /// `--random-order` (written always, as Pantheon's `vars(args)` does).
    #[serde(default)]
    pub random_order: bool,
    /// Wait after starting the first side, s (ours).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_side_setup: Option<f64>,
    /// Local or remote; absent in some of Pantheon's archives.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<Mode>,
    /// The program that ran the experiment (`pantheon-rs 0.1.0`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub harness: Option<String>,
    /// UTC time the experiment started, as Pantheon prints times.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generated_at: Option<String>,
    /// The version of each scheme (by name) on the machine that ran its senders, recorded when
    /// the experiment started ([`Metadata::scheme_version`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub scheme_versions: BTreeMap<String, String>,

    // Local runs: the emulated path.
    /// `--uplink-trace`, as a basename.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uplink_trace: Option<String>,
    /// `--downlink-trace`, as a basename.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub downlink_trace: Option<String>,
    /// `--prepend-mm-cmds`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prepend_mm_cmds: Option<String>,
    /// `--extra-mm-link-args`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extra_mm_link_args: Option<String>,
    /// `--append-mm-cmds`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub append_mm_cmds: Option<String>,
    /// The emulator as Mahimahi would be invoked (ours).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub emulator_command: Option<String>,
    /// The emulated path as a value (ours): `emulator_command` with every trace named by the
    /// SHA-256 of its content (`sha256:…`), so that the same path compares equal wherever its
    /// traces lie — what `--append` compares (a moved or copied results directory, a trace
    /// given once relative and once absolute).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub emulator_identity: Option<String>,
    /// `--emulator`: the preset the path came from (ours).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub emulator_preset: Option<String>,
    /// Seed of the emulator's random loss (ours).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// Longest wait for in-flight packets after a run, s (ours).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drain_timeout: Option<f64>,
    /// `--workload`: what every flow of a run of single schemes sends (the `workload` crate's
    /// spec); absent: full throttle. A mix's flows carry their own (ours).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload: Option<String>,
    /// The emulated bottleneck's mean rate, uplink (sender → receiver), Mbit/s: what a
    /// workload's offered load and slowdown are measured against (ours).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uplink_mbps: Option<f64>,
    /// Prefix of the run's network namespaces (ours).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub netns_prefix: Option<String>,
    /// The runs ran without root, inside a user namespace of their own (ours; see the
    /// engine's `rootless` module): the tunnel's socket buffers were clamped to
    /// `net.core.rmem_max`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub rootless: bool,
    /// The runs were simulated (`pantheon run sim`): QUIC flows and the emulator on a virtual
    /// clock, logs whose clock starts at the Unix epoch (ours).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub simulated: bool,
    /// Simulated runs: the hosts' latency between the path and the QUIC endpoints (`run sim
    /// --host-latency`: `ideal`, `measured` or `MIN+MEAN` µs; ours).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_latency: Option<String>,

    // Remote runs.
    /// `--sender`: the node that ran the senders.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sender_side: Option<Node>,
    /// `--tunnel-server`: the node whose tunnel endpoint listened.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_side: Option<Node>,
    /// `--ntp-addr`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ntp_addr: Option<String>,
    /// `--local-desc`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_desc: Option<String>,
    /// `--remote-desc`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote_desc: Option<String>,
    /// `--local-if`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_if: Option<String>,
    /// `--remote-if`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote_if: Option<String>,
    /// `--local-addr`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_addr: Option<String>,
    /// `--remote-addr`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote_addr: Option<String>,
    /// `--local-agent` (ours).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_agent: Option<String>,
    /// The remote agent's address (ours).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote_agent: Option<String>,
    /// Time the receiver's node kept receiving after the sender stopped, s (ours).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drain: Option<f64>,
    /// A run whose clock offset moved more than this was flagged, ms (ours).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_clock_move_ms: Option<f64>,
    /// The local node, as it described itself (ours).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_node: Option<NodeSummary>,
    /// The remote node (ours).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote_node: Option<NodeSummary>,

    /// Every invocation that wrote runs into this directory, in order (ours: `pantheon run
    /// --append` adds one). Absent in a directory written once: its runs are `cc_schemes` ×
    /// `start_run_id..start_run_id + run_times`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub invocations: Vec<Invocation>,

    /// Every other key, kept as read: Pantheon's (`git_summary`…) and the parsed emulator
    /// (`emulator`).
    #[serde(flatten)]
    pub other: BTreeMap<String, Value>,
}

/// One invocation of `pantheon run` into a results directory: which runs it made.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Invocation {
    /// UTC time it started, as Pantheon prints times.
    #[serde(default)]
    pub generated_at: Option<String>,
    /// Its schemes, in run order.
    pub schemes: Vec<String>,
    /// Id of its first run.
    pub start_run_id: u32,
    /// Its runs per scheme.
    pub run_times: u32,
    /// Seed of the emulator's random loss, if it had an emulator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// Its runs' duration, s (`--runtime`; invocations may differ); `None` in directories
    /// written before it was recorded: the metadata's `runtime`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<f64>,
}

impl Default for Metadata {
    /// The metadata of an empty file: no schemes, Pantheon's defaults for the rest.
    fn default() -> Metadata {
        serde_json::from_str("{}").expect("every field has a default")
    }
}

impl Metadata {
    /// The workload of flow `flow` (1-based) of the runs filed under `name`: the mix's flow's,
    /// or `--workload` for a run of one scheme; `None` for full throttle.
    pub fn flow_workload(&self, name: &str, flow: usize) -> Option<&str> {
        match &self.mix {
            Some(m) if m.name == name => m.flows.get(flow.checked_sub(1)?)?.workload.as_deref(),
            _ => self.workload.as_deref(),
        }
    }

    /// Reads `dir/pantheon_metadata.json`. Errors: the file is missing (the message says `dir`
    /// is not a results directory) or is not valid metadata (file and serde's line/column).
    pub fn read(dir: &Path) -> Result<Metadata, MetadataError> {
        match read_json(&dir.join(METADATA_FILE)) {
            Err(JsonFileError::Read { source, .. })
                if source.kind() == std::io::ErrorKind::NotFound =>
            {
                Err(MetadataError::NotResults(dir.display().to_string()))
            }
            read => Ok(read?),
        }
    }

    /// Writes `dir/pantheon_metadata.json` ([`write_json`]'s format).
    pub fn write(&self, dir: &Path) -> std::io::Result<()> {
        let value = serde_json::to_value(self).map_err(std::io::Error::other)?;
        write_json(&dir.join(METADATA_FILE), &value)
    }

    /// This metadata's own invocation (the runs its top-level keys describe).
    pub fn invocation(&self) -> Invocation {
        Invocation {
            generated_at: self.generated_at.clone(),
            schemes: if self.run_order.is_empty() {
                self.cc_schemes.clone()
            } else {
                self.run_order.clone()
            },
            start_run_id: self.start_run_id,
            run_times: self.run_times,
            seed: self.seed,
            runtime: Some(self.runtime),
        }
    }

    /// The planned duration of run `run_id` of `scheme`, s: the runtime of the invocation that
    /// made it (appended invocations may give another `--runtime`), else `runtime`.
    pub fn runtime_of(&self, scheme: &str, run_id: u32) -> f64 {
        self.invocations
            .iter()
            .rev()
            .find(|i| {
                i.schemes.iter().any(|s| s == scheme)
                    && run_id >= i.start_run_id
                    && run_id - i.start_run_id < i.run_times
            })
            .and_then(|i| i.runtime)
            .unwrap_or(self.runtime)
    }

    /// The directory's runs as (scheme, run id), sorted: those of every invocation, or, for a
    /// directory written once (Pantheon's too), `cc_schemes` × `start_run_id..+run_times`.
    /// Run ids beyond `u32::MAX` are not runs: a count that would overflow stops there.
    pub fn runs(&self) -> Vec<(String, u32)> {
        let own = [self.invocation()];
        let invocations = if self.invocations.is_empty() {
            &own[..]
        } else {
            &self.invocations[..]
        };
        let mut runs: Vec<(String, u32)> = invocations
            .iter()
            .flat_map(|i| {
                let ids = i.start_run_id..i.start_run_id.saturating_add(i.run_times);
                i.schemes
                    .iter()
                    .flat_map(move |s| ids.clone().map(move |id| (s.clone(), id)))
            })
            .collect();
        runs.sort();
        runs.dedup();
        runs
    }

    /// `later` (the metadata of an invocation that appends runs to this directory) merged into
    /// this one: the invocations of both, the union of the schemes, the run counts covering
    /// every run (`start_run_id` the least, `run_times` the most of any scheme); the other keys
    /// stay this one's (the first invocation's).
    pub fn merged(&self, later: &Metadata) -> Metadata {
        let mut m = self.clone();
        if m.invocations.is_empty() {
            m.invocations.push(self.invocation());
        }
        m.invocations.push(later.invocation());
        let runs = m.runs();
        let mut schemes: Vec<String> = runs.iter().map(|(s, _)| s.clone()).collect();
        schemes.dedup();
        m.run_times = schemes
            .iter()
            .map(|s| runs.iter().filter(|(r, _)| r == s).count() as u32)
            .max()
            .unwrap_or(0);
        m.start_run_id = runs.iter().map(|&(_, id)| id).min().unwrap_or(1);
        m.run_order = schemes.clone();
        m.cc_schemes = schemes;
        for (k, v) in &later.scheme_versions {
            m.scheme_versions
                .entry(k.clone())
                .or_insert_with(|| v.clone());
        }
        m
    }

    /// The description of `node` (`--local-desc`/`--remote-desc`), if given.
    pub fn desc(&self, node: Node) -> Option<&str> {
        match node {
            Node::Local => self.local_desc.as_deref(),
            Node::Remote => self.remote_desc.as_deref(),
        }
    }

    /// The interface of `node` (`--local-if`/`--remote-if`), if given.
    pub fn interface(&self, node: Node) -> Option<&str> {
        match node {
            Node::Local => self.local_if.as_deref(),
            Node::Remote => self.remote_if.as_deref(),
        }
    }

    /// The node that ran the senders (`local` when not recorded, Pantheon's default).
    pub fn sender(&self) -> Node {
        self.sender_side.unwrap_or(Node::Local)
    }

    /// The version of `scheme` recorded when it ran, if the run recorded one (results
    /// directories of pantheon-rs before 0.1.0's scheme versions, and Pantheon's, do not).
    pub fn scheme_version(&self, scheme: &str) -> Option<&str> {
        self.scheme_versions.get(scheme).map(String::as_str)
    }
}

/// Writes `value` to `path` as Pantheon writes its JSON (`json.dump(sort_keys=True,
/// indent=4)`): keys sorted at every level, four-space indentation, a final newline. The file
/// is replaced whole ([`crate::files::write_atomic`]: written under a temporary name, then
/// renamed) or not at all.
pub fn write_json(path: &Path, value: &Value) -> std::io::Result<()> {
    let mut out = Vec::new();
    let fmt = serde_json::ser::PrettyFormatter::with_indent(b"    ");
    let mut ser = serde_json::Serializer::with_formatter(&mut out, fmt);
    sorted(value)
        .serialize(&mut ser)
        .map_err(std::io::Error::other)?;
    out.push(b'\n');
    crate::files::write_atomic(path, &out)
}

/// `value` with the keys of every object in sorted order (whatever map serde_json was built
/// with).
fn sorted(value: &Value) -> Value {
    match value {
        Value::Object(m) => {
            let by_key: BTreeMap<&String, &Value> = m.iter().collect();
            Value::Object(
                by_key
                    .into_iter()
                    .map(|(k, v)| (k.clone(), sorted(v)))
                    .collect(),
            )
        }
        Value::Array(a) => Value::Array(a.iter().map(sorted).collect()),
        v => v.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pantheons_own_metadata_reads_with_defaults_and_keeps_unknown_keys() {
        // As Pantheon's `test.py remote` writes it (ints where we write floats).
        let text = r#"{
            "cc_schemes": ["bbr", "cubic"], "run_times": 5, "runtime": 30, "flows": 1,
            "interval": 0, "mode": "remote", "sender_side": "remote", "ntp_addr": "x",
            "git_summary": "branch: master @ abc", "remote_desc": "AWS India"
        }"#;
        let m: Metadata = serde_json::from_str(text).unwrap();
        assert_eq!(m.run_times, 5);
        assert_eq!(m.start_run_id, 1);
        // A count beyond u32 is refused, not wrapped to 0 runs (the error gives line, column).
        let e = serde_json::from_str::<Metadata>(r#"{"run_times": 4294967296}"#).unwrap_err();
        assert!(e.to_string().contains("4294967296") && e.line() == 1, "{e}");
        assert_eq!(m.runtime, 30.0);
        assert_eq!(m.mode, Some(Mode::Remote));
        assert_eq!(m.sender(), Node::Remote);
        assert_eq!(m.desc(Node::Remote), Some("AWS India"));
        assert_eq!(m.desc(Node::Local), None);
        assert_eq!(m.other["git_summary"], "branch: master @ abc");
        assert_eq!(m.scheme_version("bbr"), None);
        // Written back, the unknown key is still there.
        let back = serde_json::to_value(&m).unwrap();
        assert_eq!(back["git_summary"], "branch: master @ abc");
        assert_eq!(back["sender_side"], "remote");
    }

    #[test]
    fn appended_invocations_are_merged_and_their_runs_listed() {
        let first = Metadata {
            cc_schemes: vec!["cubic".into()],
            run_times: 2,
            generated_at: Some("first".into()),
            ..Metadata::default()
        };
        assert_eq!(first.runs(), [("cubic".into(), 1), ("cubic".into(), 2)]);
        let later = Metadata {
            cc_schemes: vec!["bbr".into(), "cubic".into()],
            run_order: vec!["cubic".into(), "bbr".into()],
            start_run_id: 3,
            run_times: 1,
            runtime: 5.0,
            generated_at: Some("later".into()),
            ..Metadata::default()
        };
        let m = first.merged(&later);
        // Each run is judged against its own invocation's runtime.
        assert_eq!(m.runtime_of("cubic", 2), 30.0);
        assert_eq!(m.runtime_of("cubic", 3), 5.0);
        assert_eq!(m.runtime_of("bbr", 3), 5.0);
        assert_eq!(
            m.runs(),
            [
                ("bbr".into(), 3),
                ("cubic".into(), 1),
                ("cubic".into(), 2),
                ("cubic".into(), 3)
            ]
        );
        assert_eq!(m.cc_schemes, ["bbr", "cubic"]);
        assert_eq!((m.start_run_id, m.run_times), (1, 3));
        assert_eq!(m.invocations.len(), 2);
        assert_eq!(m.invocations[1].generated_at.as_deref(), Some("later"));
        // A third appends to the list; a huge count stops at u32::MAX instead of wrapping.
        let huge = Metadata {
            cc_schemes: vec!["x".into()],
            start_run_id: u32::MAX,
            run_times: u32::MAX,
            ..Metadata::default()
        };
        assert_eq!(m.merged(&huge).invocations.len(), 3);
        assert_eq!(huge.runs(), []);
    }

    #[test]
    fn written_keys_are_sorted_and_round_trip() {
        let dir = std::env::temp_dir().join(format!("pt-meta-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut m = Metadata {
            cc_schemes: vec!["cubic".into()],
            mode: Some(Mode::Local),
            runtime: 10.0,
            ..Metadata::default()
        };
        m.scheme_versions
            .insert("cubic".into(), "iperf 3.12; kernel tcp_cubic".into());
        m.other
            .insert("emulator".into(), serde_json::json!([{"b": 1, "a": 2}]));
        m.write(&dir).unwrap();
        let text = std::fs::read_to_string(dir.join(METADATA_FILE)).unwrap();
        let keys: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("    \""))
            .map(|l| l.trim().split('"').nth(1).unwrap())
            .collect();
        let mut sorted_keys = keys.clone();
        sorted_keys.sort();
        assert_eq!(keys, sorted_keys);
        assert!(text.find("\"a\": 2").unwrap() < text.find("\"b\": 1").unwrap());
        assert_eq!(Metadata::read(&dir).unwrap(), m);
        let missing = Metadata::read(&dir.join("nope")).unwrap_err().to_string();
        assert!(missing.contains("not a results directory"), "{missing}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
