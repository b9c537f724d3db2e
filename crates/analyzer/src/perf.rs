//! A results directory's metrics, `pantheon_perf.json`, as one typed value: written once by
//! the analysis (`pantheon analyze`, the end of every `pantheon run`), read by the comparison,
//! the calibration, the sweep's table and the daemon's archive with this same type.
//!
//! Pantheon's `plot.py` writes `{cc: {run_id: flow_data}}` (`pantheon.md` §4.4), `flow_data`
//! being `{"all": {"tput", "delay", "loss"}, "1": {…}, …}`: throughput in Mbit/s, the
//! 95th-percentile one-way delay in ms, the loss rate as a fraction. We write the same keys
//! with the same units and add ours beside them ([`FlowPerf`], [`RunPerf`]). Reading is
//! tolerant: a key this type does not know is ignored and a missing one takes its default
//! (`None`, empty), so Pantheon's files and those of earlier versions of ours read; only a
//! value of the wrong shape (a throughput that is a string) is an error, naming the file and
//! serde's line and column.
//!
//! Files are written as Pantheon writes its JSON ([`crate::results::write_json`]): keys sorted,
//! four-space indentation.

use std::collections::BTreeMap;
use std::path::Path;

use serde::de::Error as _;
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::results::{read_json, write_json, JsonFileError};
use crate::stats::Percentiles;

/// The file's name in a results directory.
pub const PERF_FILE: &str = "pantheon_perf.json";

/// `pantheon_perf.json`: for each scheme (or mix, by its name), for each run id, that run's
/// metrics.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Perf {
    /// Scheme → run id → the run's metrics.
    pub schemes: BTreeMap<String, BTreeMap<u32, RunPerf>>,
}

/// One run's whole-run figures ([`RunPerf::all`]) when it has all three of Pantheon's.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RunTotal {
    /// Average throughput, Mbit/s.
    pub tput_mbps: f64,
    /// 95th-percentile one-way delay, ms.
    pub delay_ms: f64,
    /// Loss rate, fraction 0–1 (as Pantheon writes it).
    pub loss: f64,
}

impl Perf {
    /// Reads `dir/pantheon_perf.json`. Errors: [`JsonFileError::Read`] (e.g. missing: not
    /// analysed yet), [`JsonFileError::Parse`].
    pub fn read(dir: &Path) -> Result<Perf, JsonFileError> {
        read_json(&dir.join(PERF_FILE))
    }

    /// Parses the text of a perf file.
    pub fn parse(text: &str) -> Result<Perf, serde_json::Error> {
        serde_json::from_str(text)
    }

    /// Writes `dir/pantheon_perf.json` (keys sorted, written beside and renamed over).
    pub fn write(&self, dir: &Path) -> Result<(), JsonFileError> {
        let path = dir.join(PERF_FILE);
        let failed = |source| JsonFileError::Write {
            path: path.display().to_string(),
            source,
        };
        let value = serde_json::to_value(self).map_err(|e| failed(std::io::Error::other(e)))?;
        write_json(&path, &value).map_err(failed)
    }

    /// Every run with whole-run figures, scheme by scheme, runs in id order: `(scheme, run
    /// id, totals)`. Invalid runs and runs without all three figures are left out.
    pub fn totals(&self) -> impl Iterator<Item = (&str, u32, RunTotal)> {
        self.schemes.iter().flat_map(|(scheme, runs)| {
            runs.iter()
                .filter_map(move |(id, r)| Some((scheme.as_str(), *id, r.total()?)))
        })
    }
}

/// One run's entry: `{"all": {…}, "1": {…}, …}` as Pantheon; ours add `"competition"` (a
/// mixed run), `"flags"` (the run's warnings, when there are any) and, for a run whose logs
/// are not to be believed, `"valid": false` (then no figures).
#[derive(Debug, Clone, PartialEq)]
pub struct RunPerf {
    /// `false`: the run ended normally but its logs are not to be believed (written only
    /// then; absent reads as `true`).
    pub valid: bool,
    /// All flows together (`"all"`).
    pub all: Option<FlowPerf>,
    /// Each flow by its 1-based id (keys `"1"`, `"2"`, …).
    pub flows: BTreeMap<u32, FlowPerf>,
    /// How the flows of a mixed run shared the bottleneck.
    pub competition: Option<CompetitionPerf>,
    /// The run's warnings (clock offsets, disagreeing logs…), as the summary prints them.
    pub flags: Vec<String>,
}

impl Default for RunPerf {
    fn default() -> RunPerf {
        RunPerf {
            valid: true,
            all: None,
            flows: BTreeMap::new(),
            competition: None,
            flags: Vec::new(),
        }
    }
}

impl RunPerf {
    /// Its whole-run figures, if valid and all three are known.
    pub fn total(&self) -> Option<RunTotal> {
        let all = self.all.as_ref().filter(|_| self.valid)?;
        Some(RunTotal {
            tput_mbps: all.tput?,
            delay_ms: all.delay?,
            loss: all.loss?,
        })
    }
}

impl Serialize for RunPerf {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        for (id, flow) in &self.flows {
            m.serialize_entry(&id.to_string(), flow)?;
        }
        if let Some(all) = &self.all {
            m.serialize_entry("all", all)?;
        }
        if let Some(c) = &self.competition {
            m.serialize_entry("competition", c)?;
        }
        if !self.flags.is_empty() {
            m.serialize_entry("flags", &self.flags)?;
        }
        if !self.valid {
            m.serialize_entry("valid", &false)?;
        }
        m.end()
    }
}

impl<'de> Deserialize<'de> for RunPerf {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<RunPerf, D::Error> {
        /// The named keys; the rest holds the flows (numeric keys) and keys we do not know.
        #[derive(Deserialize)]
        struct Raw {
            #[serde(default = "yes")]
            valid: bool,
            #[serde(default)]
            all: Option<FlowPerf>,
            #[serde(default)]
            competition: Option<CompetitionPerf>,
            #[serde(default)]
            flags: Vec<String>,
            #[serde(flatten)]
            rest: BTreeMap<String, Value>,
        }
        fn yes() -> bool {
            true
        }
        let raw = Raw::deserialize(d)?;
        let mut flows = BTreeMap::new();
        for (key, value) in raw.rest {
            let Ok(id) = key.parse::<u32>() else {
                continue;
            };
            let flow = FlowPerf::deserialize(value)
                .map_err(|e| D::Error::custom(format_args!("flow \"{key}\": {e}")))?;
            flows.insert(id, flow);
        }
        Ok(RunPerf {
            valid: raw.valid,
            all: raw.all,
            flows,
            competition: raw.competition,
            flags: raw.flags,
        })
    }
}

/// One flow's figures (or all flows', `"all"`): Pantheon's three, ours beside them, and for a
/// flow of a mix or one with a workload, what that adds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FlowPerf {
    /// Average throughput, Mbit/s.
    #[serde(default)]
    pub tput: Option<f64>,
    /// 95th-percentile one-way delay, ms (`null` when no packet was matched).
    #[serde(default)]
    pub delay: Option<f64>,
    /// Loss rate, fraction 0–1.
    #[serde(default)]
    pub loss: Option<f64>,
    /// Smallest one-way delay, ms (ours).
    #[serde(default)]
    pub min_delay: Option<f64>,
    /// 95th-percentile queueing delay (one-way delay above the flow's minimum), ms (ours).
    #[serde(default)]
    pub queueing_delay: Option<f64>,
    /// A flow of a mix: its scheme, times and comparison with its scheme alone.
    #[serde(flatten)]
    pub competing: Option<CompetingPerf>,
    /// A flow with a workload: its transfers.
    #[serde(flatten)]
    pub work: Option<WorkPerf>,
    /// Its packets' ECN codepoints, when the logs recorded them (ours; absent otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ecn: Option<EcnPerf>,
}

/// A flow's `"ecn"` object: its packets that left the path by codepoint (`not_ect`, `ect0`,
/// `ect1`, `ce` — `ce` counts the marks of the path's queues), the CE fraction of the
/// ECN-capable ones (0–1, `null` when none was), the same counts as they entered the path
/// (`sent`), and `bleached`: packets sent ECN-capable and delivered Not-ECT (the path cleared
/// their ECN field). From [`crate::metrics::EcnCounts`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct EcnPerf {
    /// Packets delivered, by codepoint.
    #[serde(flatten)]
    pub delivered: Codepoints,
    /// CE ÷ ECN-capable packets delivered.
    pub ce_fraction: Option<f64>,
    /// Packets sent, by codepoint.
    pub sent: Codepoints,
    /// Packets sent ECN-capable and delivered Not-ECT.
    pub bleached: u64,
}

/// Packets by ECN codepoint (RFC 3168 / RFC 9331; [`tunnel::ecn::Codepoint`]), under these
/// names in `pantheon_perf.json`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Codepoints {
    /// `00`: not ECN-capable.
    pub not_ect: u64,
    /// `10`: ECT(0), classic ECN.
    pub ect0: u64,
    /// `01`: ECT(1), L4S.
    pub ect1: u64,
    /// `11`: Congestion Experienced (marked on the path).
    pub ce: u64,
}

impl Codepoints {
    /// Packets that were ECN-capable (ECT(0), ECT(1) or CE).
    pub fn ecn_capable(&self) -> u64 {
        self.ect0 + self.ect1 + self.ce
    }

    /// CE ÷ ECN-capable packets, 0–1; `None` when none was ECN-capable.
    pub fn ce_fraction(&self) -> Option<f64> {
        let capable = self.ecn_capable();
        (capable > 0).then(|| self.ce as f64 / capable as f64)
    }
}

/// What a flow of a mix adds to its [`FlowPerf`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompetingPerf {
    /// Its scheme.
    pub scheme: String,
    /// When the mix started it, seconds after the run's start.
    #[serde(default)]
    pub start: f64,
    /// When the mix stopped it, seconds after the run's start (`null`: at the end).
    #[serde(default)]
    pub stop: Option<f64>,
    /// When it started by its logs, seconds after the run's start.
    #[serde(default)]
    pub measured_start: Option<f64>,
    /// Its own extra one-way delay, ms.
    #[serde(default)]
    pub extra_delay: f64,
    /// Throughput in the mix ÷ alone (with a solo baseline; seed 002's throughput ratio).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tput_ratio: Option<f64>,
    /// Harm to its throughput (Ware et al.; with a solo baseline).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tput_harm: Option<f64>,
    /// Harm to its p95 one-way delay (with a solo baseline).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_harm: Option<f64>,
}

/// How the flows of a mixed run shared the bottleneck (`"competition"`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct CompetitionPerf {
    /// Jain's index of the flows' mean throughputs while all were active.
    pub jain: Option<f64>,
    /// Jain's index in each second of that interval.
    pub jain_per_s: Vec<Option<f64>>,
    /// Seconds until the index stays ≥ 0.9.
    pub convergence_time: Option<f64>,
    /// The interval where every flow was active, seconds `[from, to]`.
    pub all_active: Option<[f64; 2]>,
    /// Each flow's mean throughput over that interval, Mbit/s, in flow order (`null`: no whole
    /// second of it).
    pub tput_all_active: Vec<Option<f64>>,
    /// Each flow's throughput in each second of it, Mbit/s (flow-major).
    pub tput_per_s: Vec<Vec<f64>>,
    /// Per scheme of the mix: its flows, their throughput and share.
    pub per_scheme: BTreeMap<String, SchemeShare>,
}

/// One scheme's part of a mixed run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SchemeShare {
    /// Its flows in the mix.
    pub flows: usize,
    /// Their throughput while all flows were active, Mbit/s (`null`: no whole second of it).
    pub tput_all_active: Option<f64>,
    /// Its share of the total throughput then, fraction 0–1.
    pub share: Option<f64>,
}

/// What a flow with a workload adds to its [`FlowPerf`] (the `workload` crate's metrics).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkPerf {
    /// The workload's spec (`bytes=1000000`, `poisson,load=0.5,size=web`, `page`).
    pub workload: String,
    /// How its transfers ended.
    #[serde(default)]
    pub transfers: TransferCounts,
    /// The flow completion time of each completed transfer, ms, in transfer id order.
    #[serde(default)]
    pub fct_ms: Vec<f64>,
    /// Each completed transfer's slowdown (FCT ÷ the idle path's), when the path was known.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub slowdown: Vec<f64>,
    /// FCT and slowdown by transfer size.
    #[serde(default)]
    pub fct_by_size: Vec<SizeBucket>,
    /// Each completed page's load time, ms (page workloads).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_load_ms: Option<Vec<f64>>,
    /// Pages started and completed (page workloads).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pages: Option<PageCounts>,
    /// The load the workload offered, fraction of the bottleneck.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offered_load: Option<f64>,
    /// Transfers drawn from the workload's schedule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drawn_transfers: Option<u64>,
    /// The load they make, fraction of the bottleneck.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drawn_load: Option<f64>,
    /// A single transfer's FCT as the tunnel saw it (first to last data packet), ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tunnel_fct_ms: Option<f64>,
}

/// How a workload's transfers ended.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TransferCounts {
    /// Started by the sender.
    pub started: u64,
    /// Received whole.
    pub completed: u64,
    /// Given up.
    pub aborted: u64,
    /// Still going at the run's end.
    pub unfinished: u64,
}

/// Page loads started and completed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PageCounts {
    /// Started.
    pub started: u64,
    /// Completed.
    pub completed: u64,
}

/// One transfer-size bucket of a workload flow.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SizeBucket {
    /// The bucket's label (`≤ 10 KB`…).
    pub size: String,
    /// Completed transfers in it.
    pub count: u64,
    /// Their FCTs, ms.
    pub fct_ms: Percentiles,
    /// Their slowdowns, when the idle path was known.
    #[serde(default)]
    pub slowdown: Option<Percentiles>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A perf file as Pantheon's `plot.py` writes it (keys it has, nothing of ours).
    const PANTHEON: &str = r#"{
        "cubic": {"1": {"all": {"tput": 95.1, "delay": 52.3, "loss": 0.0012},
                        "1": {"tput": 95.1, "delay": 52.3, "loss": 0.0012}},
                  "2": {"all": {"tput": 94.0, "delay": 50.0, "loss": 0.001}}},
        "vegas": {"1": {"all": {"tput": 40.0, "delay": 21.0, "loss": 0.0}}}
    }"#;

    #[test]
    fn pantheons_file_reads_with_its_three_figures_per_run() {
        let perf = Perf::parse(PANTHEON).unwrap();
        let totals: Vec<_> = perf.totals().collect();
        assert_eq!(totals.len(), 3);
        assert_eq!(
            totals[0],
            (
                "cubic",
                1,
                RunTotal {
                    tput_mbps: 95.1,
                    delay_ms: 52.3,
                    loss: 0.0012
                }
            )
        );
        assert_eq!(totals[2].0, "vegas");
        let run = &perf.schemes["cubic"][&1];
        assert!(run.valid);
        assert_eq!(run.flows[&1].tput, Some(95.1));
        assert_eq!(run.flows[&1].min_delay, None);
        assert!(run.flows[&1].competing.is_none() && run.flows[&1].work.is_none());
    }

    #[test]
    fn unknown_keys_are_ignored_and_missing_ones_take_defaults() {
        let text = r#"{"cubic": {"1": {"all": {"tput": 3.0, "loss": 0.0, "jitter": 4},
                                       "future": {"x": 1}, "flags": ["late"]},
                                 "3": {"valid": false, "flags": ["clock"]}}}"#;
        let perf = Perf::parse(text).unwrap();
        let r1 = &perf.schemes["cubic"][&1];
        assert_eq!(r1.all.as_ref().unwrap().delay, None);
        assert_eq!(r1.flags, ["late"]);
        assert!(r1.flows.is_empty());
        // No delay: no whole-run figures; invalid: none either.
        assert_eq!(perf.totals().count(), 0);
        assert!(!perf.schemes["cubic"][&3].valid);
    }

    #[test]
    fn a_mix_whose_flows_never_shared_a_whole_second_reads_back() {
        // What the analysis wrote for such a run (seen): throughputs over no second are null.
        let text = r#"{"cubic-bbr": {"1": {"all": {"tput": 2.4, "delay": 57.0, "loss": 0.0},
            "competition": {"all_active": null, "convergence_time": null, "jain": null,
                            "jain_per_s": [], "tput_all_active": [null, null],
                            "tput_per_s": [],
                            "per_scheme": {"bbr": {"flows": 1, "share": null,
                                                   "tput_all_active": null}}}}}}"#;
        let perf = Perf::parse(text).unwrap();
        let c = perf.schemes["cubic-bbr"][&1].competition.as_ref().unwrap();
        assert_eq!(c.tput_all_active, [None, None]);
        assert_eq!(c.per_scheme["bbr"].tput_all_active, None);
        assert_eq!(perf.totals().count(), 1);
    }

    #[test]
    fn a_value_of_the_wrong_shape_is_an_error_that_names_the_flow() {
        let e = Perf::parse(r#"{"cubic": {"1": {"2": {"tput": "fast"}}}}"#).unwrap_err();
        assert!(e.to_string().contains("flow \"2\""), "{e}");
        assert!(Perf::parse(r#"{"cubic": {"one": {}}}"#).is_err());
    }

    #[test]
    fn a_flow_s_ecn_object_round_trips_and_is_absent_without_codepoints() {
        let counts = EcnPerf {
            sent: Codepoints {
                ect0: 1000,
                ..Codepoints::default()
            },
            delivered: Codepoints {
                ect0: 950,
                ce: 50,
                ..Codepoints::default()
            },
            ce_fraction: Some(0.05),
            bleached: 0,
        };
        let flow = FlowPerf {
            tput: Some(9.5),
            ecn: Some(counts),
            ..FlowPerf::default()
        };
        let v = serde_json::to_value(&flow).unwrap();
        assert_eq!(v["ecn"]["ce"], 50);
        assert_eq!(v["ecn"]["ect0"], 950);
        assert_eq!(v["ecn"]["not_ect"], 0);
        assert_eq!(v["ecn"]["ce_fraction"], 0.05);
        assert_eq!(v["ecn"]["sent"]["ect0"], 1000);
        assert_eq!(v["ecn"]["bleached"], 0);
        let back: FlowPerf = serde_json::from_value(v).unwrap();
        assert_eq!(back, flow);
        let plain = serde_json::to_value(FlowPerf::default()).unwrap();
        assert!(plain.get("ecn").is_none(), "{plain}");
    }

    fn mixed_run() -> RunPerf {
        let flow = |scheme: &str, start: f64| FlowPerf {
            tput: Some(10.0),
            delay: Some(30.0),
            loss: Some(0.0),
            min_delay: Some(20.0),
            queueing_delay: None,
            competing: Some(CompetingPerf {
                scheme: scheme.into(),
                start,
                stop: None,
                measured_start: Some(start + 0.01),
                extra_delay: 0.0,
                tput_ratio: Some(0.5),
                tput_harm: Some(0.5),
                delay_harm: None,
            }),
            work: None,
            ecn: None,
        };
        let mut flows = BTreeMap::new();
        flows.insert(1, flow("cubic", 0.0));
        let mut second = flow("ledbat", 5.0);
        second.work = Some(WorkPerf {
            workload: "bytes=1000000".into(),
            transfers: TransferCounts {
                started: 1,
                completed: 1,
                ..TransferCounts::default()
            },
            fct_ms: vec![812.5],
            slowdown: vec![],
            fct_by_size: vec![SizeBucket {
                size: "100 KB–1 MB".into(),
                count: 1,
                fct_ms: Percentiles {
                    p50: 812.5,
                    p95: 812.5,
                    p99: 812.5,
                },
                slowdown: None,
            }],
            page_load_ms: None,
            pages: None,
            offered_load: None,
            drawn_transfers: None,
            drawn_load: None,
            tunnel_fct_ms: Some(810.0),
        });
        flows.insert(2, second);
        let mut per_scheme = BTreeMap::new();
        per_scheme.insert(
            "cubic".into(),
            SchemeShare {
                flows: 1,
                tput_all_active: Some(10.0),
                share: Some(0.5),
            },
        );
        RunPerf {
            valid: true,
            all: Some(FlowPerf {
                tput: Some(20.0),
                ..FlowPerf::default()
            }),
            flows,
            competition: Some(CompetitionPerf {
                jain: Some(1.0),
                jain_per_s: vec![Some(1.0), None],
                convergence_time: Some(0.0),
                all_active: Some([5.0, 30.0]),
                tput_all_active: vec![Some(10.0), None],
                tput_per_s: vec![vec![10.0], vec![10.0]],
                per_scheme,
            }),
            flags: vec!["late start".into()],
        }
    }

    #[test]
    fn what_is_written_reads_back_the_same() {
        let mut perf = Perf::default();
        let mut runs = BTreeMap::new();
        runs.insert(1, mixed_run());
        runs.insert(
            10,
            RunPerf {
                valid: false,
                flags: vec!["logs disagree".into()],
                ..RunPerf::default()
            },
        );
        perf.schemes.insert("cubic-ledbat".into(), runs);
        let dir = std::env::temp_dir().join(format!("perf-roundtrip-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        perf.write(&dir).unwrap();
        let back = Perf::read(&dir).unwrap();
        let text = std::fs::read_to_string(dir.join(PERF_FILE)).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(back, perf);
        // Pantheon's layout: run ids and flow ids are string keys; absent figures are null,
        // absent extras are left out.
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["cubic-ledbat"]["1"]["2"]["workload"], "bytes=1000000");
        assert_eq!(v["cubic-ledbat"]["1"]["1"]["queueing_delay"], Value::Null);
        assert!(v["cubic-ledbat"]["1"]["1"].get("delay_harm").is_none());
        assert!(v["cubic-ledbat"]["1"]["1"].get("workload").is_none());
        assert_eq!(v["cubic-ledbat"]["10"]["valid"], false);
        assert!(v["cubic-ledbat"]["10"].get("all").is_none());
    }

    #[test]
    fn a_missing_file_says_which() {
        let e = Perf::read(Path::new("/nonexistent-results")).unwrap_err();
        assert!(
            e.to_string()
                .contains("/nonexistent-results/pantheon_perf.json"),
            "{e}"
        );
    }
}
