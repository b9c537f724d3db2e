//! The testbed file of `pantheon serve` (TOML): the nodes, the experiment matrix and the
//! schedule.
//!
//! ```toml
//! credentials = "creds"          # the directory of `pantheon node credentials`
//! ntp_addr = "10.0.0.1:123"      # optional: NTP server every node measures its offset to
//! call_timeout = 90              # optional: longest wait for an agent's answer, s
//!
//! [[node]]
//! name = "stanford"              # [a-z0-9-], unique
//! agent = "10.0.1.2:7070"        # its pantheon-agent
//! address = "100.64.0.1"         # optional: where the other node's tunnel dials it
//! interface = "eth0"             # optional: the tunnel binds to it
//! link = "wired"                 # or "cellular" (a pair is cellular if either node is)
//! description = "AWS California"
//!
//! [matrix]
//! schemes = ["cubic", "bbr"]
//! flows = [1, 3]                 # one experiment per entry: 1 flow, and 3 flows
//! interval = 10                  # s between the flows' starts
//! runtime = 30                   # s
//! runs = { wired = 10, cellular = 3 }
//! both_directions = true
//!
//! [schedule]
//! every = 86400                  # s between tournaments (a round-robin over all node pairs)
//! ```
//!
//! Relative paths are relative to the file. Errors name the file and, for TOML errors, the
//! line and column.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context};
use engine::plan::{seconds, MAX_RUNTIME};
use serde::Deserialize;

/// A node's kind of access link, as Pantheon's results were split (wired runs 10 times,
/// cellular 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LinkType {
    /// Ethernet or better.
    Wired,
    /// A cellular modem somewhere on the path.
    Cellular,
}

impl LinkType {
    /// `wired` or `cellular`.
    pub fn as_str(self) -> &'static str {
        match self {
            LinkType::Wired => "wired",
            LinkType::Cellular => "cellular",
        }
    }
}

/// One testbed node.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeConfig {
    /// Unique name, `[a-z0-9-]`, at most 32 characters.
    pub name: String,
    /// Its agent, `host[:port]` (port 7070 by default).
    pub agent: String,
    /// The address the other node's tunnel client dials when this node is the tunnel server
    /// (default: the agent's host).
    pub address: Option<std::net::Ipv4Addr>,
    /// Interface its tunnel binds to (and whose MTU it takes).
    pub interface: Option<String>,
    /// Its access link.
    #[serde(default = "wired")]
    pub link: LinkType,
    /// Free text for the reports ("AWS California", "Stanford (Wi-Fi)").
    #[serde(default)]
    pub description: String,
}

fn wired() -> LinkType {
    LinkType::Wired
}

impl NodeConfig {
    /// How reports name the node (Pantheon's `--local-desc` / `--remote-desc`): its name, then
    /// its description in parentheses if it has one — `gcp-tokyo (GCP Tokyo)`, `lab-b`.
    pub fn label(&self) -> String {
        match self.description.as_str() {
            "" => self.name.clone(),
            d => format!("{} ({d})", self.name),
        }
    }
}

/// Runs per scheme by link type.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunsPerLink {
    /// Runs per scheme of a wired pair (Pantheon: 10).
    #[serde(default = "ten")]
    pub wired: u32,
    /// Runs per scheme of a pair with a cellular node (Pantheon: 3).
    #[serde(default = "three")]
    pub cellular: u32,
}

fn ten() -> u32 {
    10
}
fn three() -> u32 {
    3
}

impl Default for RunsPerLink {
    fn default() -> Self {
        RunsPerLink {
            wired: 10,
            cellular: 3,
        }
    }
}

impl RunsPerLink {
    /// Runs per scheme over a link of type `link`.
    pub fn of(&self, link: LinkType) -> u32 {
        match link {
            LinkType::Wired => self.wired,
            LinkType::Cellular => self.cellular,
        }
    }
}

/// What each pair of nodes runs (Pantheon's: every scheme, single flow and 3 flows 10 s apart,
/// 10 runs on wired paths and 3 on cellular ones, both directions, random scheme order).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MatrixConfig {
    /// Schemes, by registry name.
    pub schemes: Vec<String>,
    /// Flows per run: one experiment per entry.
    #[serde(default = "one_and_three")]
    pub flows: Vec<u16>,
    /// Time between the flows' starts, s.
    #[serde(default = "ten_f")]
    pub interval: f64,
    /// Duration of each run, s.
    #[serde(default = "thirty")]
    pub runtime: f64,
    /// Runs per scheme.
    #[serde(default)]
    pub runs: RunsPerLink,
    /// Run each pair in both directions (each node as the sender once).
    #[serde(default = "yes")]
    pub both_directions: bool,
    /// Shuffle the scheme order of each experiment.
    #[serde(default = "yes")]
    pub random_order: bool,
}

fn one_and_three() -> Vec<u16> {
    vec![1, 3]
}
fn ten_f() -> f64 {
    10.0
}
fn thirty() -> f64 {
    30.0
}
fn yes() -> bool {
    true
}

/// When tournaments start.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScheduleConfig {
    /// Time between the starts of two tournaments, s (a tournament still running when the next
    /// is due delays it: experiments never pile up).
    pub every: f64,
}

/// The whole testbed file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TestbedConfig {
    /// Directory of the credentials the agents were started with.
    pub credentials: PathBuf,
    /// NTP server (`host[:port]`) whose offsets correct the logs; none: logs uncorrected.
    pub ntp_addr: Option<String>,
    /// Longest wait for one agent call, s (a stalled agent fails its run after this).
    #[serde(default = "ninety")]
    pub call_timeout: f64,
    /// The nodes, at least two.
    #[serde(rename = "node")]
    pub nodes: Vec<NodeConfig>,
    /// What every pair runs.
    pub matrix: MatrixConfig,
    /// When.
    pub schedule: ScheduleConfig,
}

fn ninety() -> f64 {
    90.0
}

impl TestbedConfig {
    /// Reads and checks `path`; relative paths in it become relative to its directory.
    /// Errors: unreadable file, TOML syntax or unknown key (with line and column), fewer than
    /// two nodes, duplicate or malformed node names, empty scheme list, non-positive durations.
    pub fn load(path: &Path) -> anyhow::Result<TestbedConfig> {
        let text = analyzer::files::read_regular_text(path, "a testbed file", 1 << 20)?;
        let mut c = TestbedConfig::parse(&text).with_context(|| path.display().to_string())?;
        if c.credentials.is_relative() {
            let base = path.parent().unwrap_or(Path::new("."));
            c.credentials = base.join(&c.credentials);
        }
        Ok(c)
    }

    /// Parses and checks a testbed file's text (see [`TestbedConfig::load`]).
    pub fn parse(text: &str) -> anyhow::Result<TestbedConfig> {
        let c: TestbedConfig = toml::from_str(text).map_err(|e| anyhow::anyhow!("{e}"))?;
        if c.nodes.len() < 2 {
            bail!(
                "a testbed needs at least two [[node]]s, found {}",
                c.nodes.len()
            );
        }
        for (i, n) in c.nodes.iter().enumerate() {
            crate::agent::check_name(&n.name, 32, "node name")
                .map_err(|e| anyhow::anyhow!("node {}: {e}", i + 1))?;
            if c.nodes[..i].iter().any(|m| m.name == n.name) {
                bail!("node name {:?} is used twice", n.name);
            }
        }
        let m = &c.matrix;
        if m.schemes.is_empty() {
            bail!("[matrix] schemes is empty");
        }
        if m.flows.is_empty() || m.flows.contains(&0) {
            bail!(
                "[matrix] flows must list flow counts ≥ 1, got {:?}",
                m.flows
            );
        }
        // Bounded so that no clock arithmetic overflows: a run or an agent's answer within a
        // day, a schedule within a year.
        let year = Duration::from_secs(365 * 86_400);
        for (v, what, max) in [
            (m.runtime, "[matrix] runtime", MAX_RUNTIME),
            (c.schedule.every, "[schedule] every", year),
            (c.call_timeout, "call_timeout", MAX_RUNTIME),
        ] {
            if seconds(v, what, max)?.is_zero() {
                bail!("{what} must be a positive number of seconds, got {v}");
            }
        }
        seconds(m.interval, "[matrix] interval", MAX_RUNTIME)?;
        Ok(c)
    }

    /// The node named `name`.
    pub fn node(&self, name: &str) -> Option<&NodeConfig> {
        self.nodes.iter().find(|n| n.name == name)
    }

    /// [`TestbedConfig::call_timeout`] as a duration.
    pub fn call_timeout(&self) -> Duration {
        Duration::from_secs_f64(self.call_timeout)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
credentials = "creds"
[[node]]
name = "a"
agent = "10.0.0.1"
[[node]]
name = "b"
agent = "10.0.0.2:7071"
link = "cellular"
[matrix]
schemes = ["cubic"]
[schedule]
every = 3600
"#;

    #[test]
    fn defaults_are_pantheons_matrix() {
        let c = TestbedConfig::parse(GOOD).unwrap();
        assert_eq!(c.nodes[1].link, LinkType::Cellular);
        assert_eq!(c.matrix.flows, vec![1, 3]);
        assert_eq!(c.matrix.runs.of(LinkType::Wired), 10);
        assert_eq!(c.matrix.runs.of(LinkType::Cellular), 3);
        assert_eq!((c.matrix.interval, c.matrix.runtime), (10.0, 30.0));
        assert!(c.matrix.both_directions && c.matrix.random_order);
        assert_eq!(c.call_timeout(), Duration::from_secs(90));
        assert_eq!(c.nodes[0].label(), "a");
        let c = TestbedConfig::parse(&GOOD.replace(
            "name = \"b\"",
            "name = \"b\"\ndescription = \"AWS California\"",
        ))
        .unwrap();
        assert_eq!(c.nodes[1].label(), "b (AWS California)");
    }

    #[test]
    fn errors_say_what_is_wrong_and_where() {
        let e = TestbedConfig::parse(&GOOD.replace("every = 3600", "every = 3600\nevry = 1"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("evry") && e.contains("line"), "{e}");
        let e = TestbedConfig::parse(&GOOD.replace("name = \"b\"", "name = \"a\""))
            .unwrap_err()
            .to_string();
        assert!(e.contains("\"a\" is used twice"), "{e}");
        let e = TestbedConfig::parse(&GOOD.replace("every = 3600", "every = 0"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("[schedule] every"), "{e}");
        let e = TestbedConfig::parse(&GOOD.replace("schemes = [\"cubic\"]", "schemes = []"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("schemes is empty"), "{e}");
    }
}
