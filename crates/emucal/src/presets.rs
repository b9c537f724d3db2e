//! The emulator library: named paths, usable as `pantheon run local --emulator NAME` and
//! `pantheon shell --emulator NAME`, and listed by `pantheon emulators`.
//!
//! - **Calibrated** (`reference/pantheon.md` §5, observatory's `experiments.yml`): the six
//!   emulators the Pantheon paper fitted to real paths (rate, one-way delay, uplink DropTail
//!   size, uplink loss, constant or Poisson delivery). Pantheon gave the cellular ones
//!   Poisson traces (`0.57mbps-poisson`); here their links deliver as a Poisson process at that
//!   mean rate (`--uplink-delivery=poisson`), the memoryless model the paper describes.
//! - **Pathological**, Pantheon's: `policer-<R>mbps-<RTT>ms` exactly as Pantheon built its
//!   "token-bucket policers" — an R Mbit/s constant trace with 1-packet DropTail queues both
//!   ways and `mm-delay RTT/2`.
//! - **Pathological**, ours: `token-bucket-<R>mbps-<RTT>ms`, a real token-bucket policer
//!   (`pt-policer`, bucket = 10 ms at R) in front of a link 4× faster; `ack-aggregation-<N>ms`
//!   (ACKs released every N ms on a 50 Mbit/s, 40 ms RTT path); `buffer-<F>bdp`
//!   (DropTail of F × BDP on a 50 Mbit/s, 40 ms RTT path, F from 0.1 to 1).
//! - **Imported** ([`library`]): preset files in the user's emulator library
//!   ([`library_dir`]), such as the iBoxNet network profiles `pantheon emulators import`
//!   writes there ([`from_ibox`]), each labelled with its country and link type.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::calibrate::Candidate;
use crate::emulator::Emulator;
use crate::mm::{Delivery, LinkDirection, LinkShell, Shell};
use crate::queue::QueueSpec;
use crate::stage::OPPORTUNITY_BYTES;

/// One named emulator: a constant trace rate and the emulator around it.
///
/// Its file form (JSON, as `pantheon calibrate` writes `calibration/emulator.json`) keeps the
/// emulator as Pantheon's flags, text a person reads and edits: `{"name", "description",
/// "rate_mbps", "prepend" (--prepend-mm-cmds), "link_args" (--extra-mm-link-args)}`; reading
/// it checks the rate and parses the flags.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "PresetFile", into = "PresetFile")]
pub struct Preset {
    /// Its name (`nepal-aws-india`).
    pub name: String,
    /// What it models, for listings.
    pub description: String,
    /// Rate of the constant trace used in both directions, Mbit/s (the uplink's alone when
    /// `downlink_rate_mbps` is given).
    pub rate_mbps: f64,
    /// Rate of the downlink's constant trace, Mbit/s, where it differs (an iBoxNet profile's
    /// two directions, [`crate::ibox`]).
    pub downlink_rate_mbps: Option<f64>,
    /// The emulator, its mm-link's traces named as [`Preset::traces`] says, relative
    /// ([`Preset::emulator_in`] places them).
    pub emulator: Emulator,
    /// What it is, for filtering a library: `source` (`iBoxNet`), `country`, `link_type`,
    /// `measurement_node`; empty for the built-in presets.
    pub labels: BTreeMap<String, String>,
}

/// [`Preset`]'s file form.
#[derive(serde::Serialize, serde::Deserialize)]
struct PresetFile {
    name: String,
    description: String,
    rate_mbps: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    downlink_rate_mbps: Option<f64>,
    prepend: String,
    link_args: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    labels: BTreeMap<String, String>,
}

impl TryFrom<PresetFile> for Preset {
    type Error = String;

    fn try_from(f: PresetFile) -> Result<Preset, String> {
        let down_mbps = f.downlink_rate_mbps.unwrap_or(f.rate_mbps);
        crate::trace::Trace::constant_rate(f.rate_mbps)?;
        crate::trace::Trace::constant_rate(down_mbps)?;
        let up = PathBuf::from(trace_file_name(f.rate_mbps));
        let down = PathBuf::from(trace_file_name(down_mbps));
        let emulator = Emulator::from_pantheon_flags(&f.prepend, &up, &down, &f.link_args, "")
            .map_err(|e| e.to_string())?;
        Ok(Preset {
            name: f.name,
            description: f.description,
            rate_mbps: f.rate_mbps,
            downlink_rate_mbps: f.downlink_rate_mbps,
            emulator,
            labels: f.labels,
        })
    }
}

impl From<Preset> for PresetFile {
    fn from(p: Preset) -> PresetFile {
        let flags = p.emulator.pantheon_flags();
        let (prepend, link_args) = flags
            .map(|f| (f.prepend_mm_cmds, f.extra_mm_link_args))
            .unwrap_or_default();
        PresetFile {
            name: p.name,
            description: p.description,
            rate_mbps: p.rate_mbps,
            downlink_rate_mbps: p.downlink_rate_mbps,
            prepend,
            link_args,
            labels: p.labels,
        }
    }
}

fn trace_file_name(rate_mbps: f64) -> String {
    format!("{rate_mbps}mbps.trace")
}

impl Candidate {
    /// This emulator as a named preset (usable as `--emulator`).
    pub fn to_preset(&self, name: &str, description: &str) -> Preset {
        Preset {
            name: name.into(),
            description: description.into(),
            rate_mbps: self.rate_mbps,
            downlink_rate_mbps: None,
            emulator: self.emulator(Path::new(&trace_file_name(self.rate_mbps))),
            labels: BTreeMap::new(),
        }
    }
}

impl Preset {
    /// File name of its (uplink's) trace (`100.42mbps.trace`), written with
    /// `Trace::constant_rate`.
    pub fn trace_file_name(&self) -> String {
        trace_file_name(self.rate_mbps)
    }

    /// The constant-rate traces its emulator reads, to be written where it runs: (file name,
    /// Mbit/s), one, or two when the downlink's rate differs.
    pub fn traces(&self) -> Vec<(String, f64)> {
        let mut t = vec![(self.trace_file_name(), self.rate_mbps)];
        if let Some(down) = self.downlink_rate_mbps.filter(|d| *d != self.rate_mbps) {
            t.push((trace_file_name(down), down));
        }
        t
    }

    /// Its emulator with the trace in `dir` (where the caller writes it).
    pub fn emulator_in(&self, dir: &Path) -> Emulator {
        self.emulator.with_traces_in(dir)
    }

    /// A preset of `shells` around an mm-link of a constant `rate_mbps` trace with `link`'s
    /// options.
    fn new(
        name: String,
        description: String,
        rate_mbps: f64,
        shells: Vec<Shell>,
        link: LinkShell,
    ) -> Preset {
        let trace = PathBuf::from(trace_file_name(rate_mbps));
        let mut shells = shells;
        shells.push(Shell::Link(Box::new(LinkShell {
            uplink_trace: trace.clone(),
            downlink_trace: trace,
            ..link
        })));
        Preset {
            name,
            description,
            rate_mbps,
            downlink_rate_mbps: None,
            emulator: Emulator::new(shells),
            labels: BTreeMap::new(),
        }
    }
}

/// Pantheon's calibrated emulators of real paths (the paper's Table 2, `emucal`'s five
/// parameters): name, path, rate Mbit/s, one-way delay ms, uplink loss, uplink DropTail
/// packets, Poisson deliveries.
const CALIBRATED: &[(&str, &str, f64, u32, f64, u32, bool)] = &[
    (
        "nepal-aws-india",
        "Nepal → AWS India (wired)",
        0.57,
        28,
        0.0477,
        14,
        true,
    ),
    (
        "mexico-cellular-aws-california",
        "Mexico cellular → AWS California",
        2.64,
        88,
        0.0,
        130,
        true,
    ),
    (
        "aws-brazil-colombia-cellular",
        "AWS Brazil → Colombia cellular",
        3.04,
        130,
        0.0,
        426,
        true,
    ),
    (
        "india-aws-india",
        "India → AWS India (wired)",
        100.42,
        27,
        0.0,
        173,
        false,
    ),
    (
        "aws-korea-china",
        "AWS Korea → China (wired)",
        77.72,
        51,
        0.0006,
        94,
        false,
    ),
    (
        "aws-california-mexico",
        "AWS California → Mexico (wired)",
        114.68,
        45,
        0.0,
        450,
        false,
    ),
];

/// Every preset, calibrated ones first.
pub fn presets() -> Vec<Preset> {
    let mut all = calibrated();
    // mm-link's defaults; Preset::new sets the traces.
    let no_options = LinkShell::new(PathBuf::new(), PathBuf::new());
    all.extend(policers(&no_options));
    all.extend(ack_aggregation(&no_options));
    all.extend(buffers(&no_options));
    all
}

/// The presets of [`CALIBRATED`].
fn calibrated() -> Vec<Preset> {
    let mut all = Vec::new();
    for &(name, path, rate_mbps, delay_ms, loss, queue_packets, is_poisson) in CALIBRATED {
        let candidate = Candidate {
            rate_mbps,
            delay_ms,
            queue_packets,
            loss,
            delivery: if is_poisson {
                Delivery::Poisson
            } else {
                Delivery::Trace
            },
            cross_mbps: 0.0,
            host_buffer_bytes: 0,
        };
        let description = format!(
            "Pantheon's calibrated emulator of {path}: {rate_mbps} Mbit/s {}, {}, uplink \
             DropTail {queue_packets} packets",
            if is_poisson { "Poisson" } else { "constant" },
            candidate
                .emulator(Path::new(""))
                .pantheon_flags()
                .expect("a candidate has an mm-link")
                .prepend_mm_cmds
        );
        all.push(candidate.to_preset(name, &description));
    }
    all
}

/// Pantheon's policer emulators (1-packet queues) and token-bucket policers, at 12, 60 and
/// 108 Mbit/s and RTTs of 20 and 100 ms; `no_options`: mm-link's defaults.
fn policers(no_options: &LinkShell) -> Vec<Preset> {
    let mut all = Vec::new();
    for rtt in [20u64, 100] {
        for rate in [12u64, 60, 108] {
            let delay = Shell::Delay { ms: rtt / 2 };
            all.push(Preset::new(
                format!("policer-{rate}mbps-{rtt}ms"),
                format!(
                    "Pantheon's policer emulator: {rate} Mbit/s constant, 1-packet DropTail \
                     queues both ways, RTT {rtt} ms"
                ),
                rate as f64,
                vec![delay.clone()],
                LinkShell {
                    uplink_queue: QueueSpec::droptail_packets(1),
                    downlink_queue: QueueSpec::droptail_packets(1),
                    ..no_options.clone()
                },
            ));
            let burst = rate * 1_000_000 / 8 / 100; // 10 ms at the rate, bytes
            let policer = |direction| Shell::Policer {
                direction,
                rate_mbps: rate as f64,
                burst_bytes: burst,
            };
            all.push(Preset::new(
                format!("token-bucket-{rate}mbps-{rtt}ms"),
                format!(
                    "token-bucket policer of {rate} Mbit/s with a {burst}-byte bucket (10 ms) \
                     on a {} Mbit/s link, RTT {rtt} ms",
                    rate * 4
                ),
                (rate * 4) as f64,
                vec![
                    delay,
                    policer(LinkDirection::Uplink),
                    policer(LinkDirection::Downlink),
                ],
                no_options.clone(),
            ));
        }
    }
    all
}

/// ACK aggregation every 5 and 20 ms on a 50 Mbit/s, 40 ms path.
fn ack_aggregation(no_options: &LinkShell) -> Vec<Preset> {
    let mut all = Vec::new();
    for every_ms in [5u64, 20] {
        all.push(Preset::new(
            format!("ack-aggregation-{every_ms}ms"),
            format!(
                "ACK aggregation: downlink packets released every {every_ms} ms, 50 Mbit/s \
                 constant, RTT 40 ms"
            ),
            50.0,
            vec![
                Shell::Delay { ms: 20 },
                Shell::Aggregate {
                    direction: LinkDirection::Downlink,
                    interval_ms: every_ms as f64,
                },
            ],
            no_options.clone(),
        ));
    }
    all
}

/// Uplink DropTail buffers of 0.1, 0.25, 0.5 and 1 BDP on a 50 Mbit/s, 40 ms path.
fn buffers(no_options: &LinkShell) -> Vec<Preset> {
    let mut all = Vec::new();
    // BDP of 50 Mbit/s × 40 ms in 1504-byte packets.
    let bdp_packets = 50e6 * 0.040 / 8.0 / OPPORTUNITY_BYTES as f64;
    for fraction in [0.1, 0.25, 0.5, 1.0] {
        let packets = (bdp_packets * fraction).round() as u64;
        all.push(Preset::new(
            format!("buffer-{fraction}bdp"),
            format!(
                "{fraction} × BDP buffer: uplink DropTail {packets} packets, 50 Mbit/s \
                 constant, RTT 40 ms"
            ),
            50.0,
            vec![Shell::Delay { ms: 20 }],
            LinkShell {
                uplink_queue: QueueSpec::droptail_packets(packets),
                ..no_options.clone()
            },
        ));
    }
    all
}

/// The preset called `name` — built in, else `<name>.json` in the library ([`library_dir`]) —
/// or the preset file at path `name` (JSON with the fields of [`Preset`], as `pantheon
/// calibrate` writes `calibration/emulator.json`, or an iBoxNet network profile,
/// [`from_ibox`]); the error lists the built-in names, or says what is wrong with the file.
pub fn find(name: &str) -> Result<Preset, String> {
    let file = Path::new(name);
    if name.ends_with(".json") || file.is_file() {
        return read_file(file);
    }
    let all = presets();
    if let Some(p) = all.iter().find(|p| p.name == name) {
        return Ok(p.clone());
    }
    let in_library = library_dir().join(format!("{name}.json"));
    if is_plain_name(name) && in_library.is_file() {
        return read_file(&in_library);
    }
    let names: Vec<&str> = all.iter().map(|p| p.name.as_str()).collect();
    Err(format!(
        "no emulator named `{name}` (`pantheon emulators` describes them, with those imported \
         into {}; a path to a preset file such as calibration/emulator.json works too): {}",
        library_dir().display(),
        names.join(", ")
    ))
}

/// A preset file: our preset JSON or an iBoxNet profile. Errors name the file.
fn read_file(file: &Path) -> Result<Preset, String> {
    let name = file.display().to_string();
    let value = read_json(file)?;
    if crate::ibox::is_profile_value(&value) {
        return from_ibox(&value, file);
    }
    serde_json::from_value(value).map_err(|e| format!("{name}: not an emulator preset: {e}"))
}

/// The JSON of a preset or profile file (a regular file of at most [`MAX_PRESET_BYTES`]);
/// errors name the file.
pub fn read_json(file: &Path) -> Result<serde_json::Value, String> {
    let text = analyzer::files::read_regular_text(file, "an emulator file", MAX_PRESET_BYTES)
        .map_err(|e| format!("read emulator file {}: {}", e.path, e.reason))?;
    serde_json::from_str(&text).map_err(|e| format!("{}: not JSON: {e}", file.display()))
}

/// The largest preset or profile file read, bytes (a published iBoxNet profile is ~1 kB).
pub const MAX_PRESET_BYTES: u64 = 16 << 20;

/// The iBoxNet profile `value`, read from `file`, as a preset ([`crate::ibox::import`]): its
/// traces named by rate, labelled `source` = `iBoxNet`, its `link_type` and
/// `measurement_node`, and `country` — the directory it sits in when the file is at
/// `<country>/<link type>/network-profile-N.json` as in the published set (`united-states`
/// for node `stanford`), else its measurement node.
pub fn from_ibox(value: &serde_json::Value, file: &Path) -> Result<Preset, String> {
    let name = file.display().to_string();
    let p = crate::ibox::import_value(value, &name, |mbps| trace_file_name(mbps).into())?;
    let word = |k: &str| value[k].as_str().unwrap_or("unknown").to_owned();
    let dirs: Vec<String> = file
        .parent()
        .into_iter()
        .flat_map(|d| d.iter().rev().take(2))
        .map(|c| c.to_string_lossy().into_owned())
        .collect();
    let country = match dirs.as_slice() {
        [link_type, country] if *link_type == word("link_type") => country.clone(),
        _ => word("measurement_node"),
    };
    let labels = BTreeMap::from([
        ("source".to_owned(), "iBoxNet".to_owned()),
        ("country".to_owned(), country),
        ("link_type".to_owned(), word("link_type")),
        ("measurement_node".to_owned(), word("measurement_node")),
    ]);
    Ok(Preset {
        name: p.name,
        description: p.description,
        rate_mbps: p.uplink_mbps,
        downlink_rate_mbps: Some(p.downlink_mbps).filter(|d| *d != p.uplink_mbps),
        emulator: p.emulator,
        labels,
    })
}

/// True for a name that is a file name of its own in the library: letters, digits, `.`, `-`
/// and `_`, not starting with `.` (no `/`, no `..`: a name never reaches outside the library).
pub fn is_plain_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
}

/// The user's emulator library, where `pantheon emulators import` writes presets (one
/// `<name>.json` each) and `--emulator NAME` finds them: `$PANTHEON_EMULATORS_HOME`, else
/// `$HOME/.cache/pantheon-rs/emulators`.
pub fn library_dir() -> PathBuf {
    std::env::var_os("PANTHEON_EMULATORS_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let home = std::env::var_os("HOME").unwrap_or_else(|| "/root".into());
            PathBuf::from(home).join(".cache/pantheon-rs/emulators")
        })
}

/// The presets of the library at `dir`, sorted by name, and a message for each `*.json` there
/// that is not one (file and reason). No directory: none.
pub fn library(dir: &Path) -> (Vec<Preset>, Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return (Vec::new(), Vec::new());
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    let (mut found, mut problems) = (Vec::new(), Vec::new());
    for f in files {
        match read_file(&f) {
            Ok(p) => found.push(p),
            Err(e) => problems.push(e),
        }
    }
    found.sort_by(|a, b| a.name.cmp(&b.name));
    (found, problems)
}

/// True if every `key=value` of `filters` is among `preset`'s labels (values compared without
/// case); no filter: every preset.
pub fn matches(preset: &Preset, filters: &[(&str, &str)]) -> bool {
    filters.iter().all(|(k, v)| {
        preset
            .labels
            .get(*k)
            .is_some_and(|l| l.eq_ignore_ascii_case(v))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mm::{parse_chain, Delivery, LinkDirection, Shell};
    use crate::queue::QueueSpec;

    /// An iBoxNet profile file is found as a preset with a trace per direction (the rates
    /// differ), and its preset file form carries it whole.
    #[test]
    fn an_ibox_profile_file_is_a_preset_with_two_traces() {
        let dir = std::env::temp_dir().join(format!("presets-ibox-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("network-profile-3.json");
        let side = |kbps: u32, packets: u32, ms: u32, cross: &str| {
            format!(
                r#"{{"bottleneck_bandwidth": {kbps}, "buffer_size_bytes": 1,
                  "buffer_size_packets": {packets}, "propagation_delay": {ms},
                  "cross_traffic_pattern": [{cross}]}}"#
            )
        };
        let profile = format!(
            r#"{{"measurement_node": "x", "link_type": "wired", "data_flow_direction": "upload",
               "config": {{"uplink": {}, "downlink": {}}}}}"#,
            side(5000, 30, 12, "1000, 0"),
            side(100000, 10000, 0, "")
        );
        std::fs::write(&file, profile).unwrap();
        let p = find(file.to_str().unwrap()).unwrap();
        assert_eq!(p.name, "ibox-x-wired-3");
        assert_eq!(
            p.traces(),
            [("5mbps.trace".into(), 5.0), ("100mbps.trace".into(), 100.0)]
        );
        let json = serde_json::to_string(&p).unwrap();
        assert!(json.contains("\"downlink_rate_mbps\":100"), "{json}");
        assert_eq!(serde_json::from_str::<Preset>(&json).unwrap(), p);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn every_preset_parses_and_names_are_unique() {
        let dir = std::env::temp_dir().join(format!("presets-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let all = presets();
        assert_eq!(all.len(), 6 + 12 + 2 + 4);
        let mut names: Vec<&str> = all.iter().map(|p| p.name.as_str()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), all.len());
        for p in &all {
            let trace = dir.join(p.trace_file_name());
            let t = crate::trace::Trace::constant_rate(p.rate_mbps).unwrap();
            std::fs::write(&trace, t.to_text()).unwrap();
            let emulator = p.emulator_in(&dir);
            let path = emulator.load().unwrap();
            assert_eq!(path.shells.len(), emulator.shells.len(), "{}", p.name);
            // Its words are Mahimahi's, and read back as the same emulator.
            let chain = parse_chain(&emulator.words()).unwrap();
            assert!(chain.command.is_empty(), "{}", p.name);
            assert_eq!(chain.shells, emulator.shells, "{}", p.name);
            // So is its file form.
            let json = serde_json::to_string(p).unwrap();
            assert_eq!(&serde_json::from_str::<Preset>(&json).unwrap(), p);
        }
        // The Nepal emulator is the paper's: 0.57 Mbit/s Poisson, 28 ms, 4.77 % loss, 14 pkts.
        let nepal = find("nepal-aws-india").unwrap();
        let shells = &nepal.emulator.shells;
        assert!(matches!(shells[0], Shell::Delay { ms: 28 }));
        assert!(matches!(shells[1], Shell::Loss { rate, .. } if rate == 0.0477));
        let Shell::Link(l) = &shells[2] else {
            panic!("mm-link third")
        };
        assert_eq!(
            l.direction(LinkDirection::Uplink).delivery,
            Delivery::Poisson
        );
        assert!(matches!(l.uplink_queue, QueueSpec::DropTail(_)));
        assert_eq!(l.uplink_queue.describe(), "droptail [packets=14]");
        let flags = |name: &str| find(name).unwrap().emulator.pantheon_flags().unwrap();
        assert_eq!(
            flags("buffer-1bdp").extra_mm_link_args,
            "--uplink-queue=droptail --uplink-queue-args=packets=166"
        );
        assert_eq!(
            flags("token-bucket-12mbps-20ms").prepend_mm_cmds,
            "mm-delay 10 pt-policer uplink 12 15000 pt-policer downlink 12 15000"
        );
        assert_eq!(
            flags("policer-60mbps-100ms").extra_mm_link_args,
            "--uplink-queue=droptail --uplink-queue-args=packets=1 --downlink-queue=droptail \
             --downlink-queue-args=packets=1"
        );
        // A preset file, as `pantheon calibrate` writes one.
        let file = dir.join("emulator.json");
        let fitted = crate::calibrate::Candidate {
            rate_mbps: 24.02,
            delay_ms: 30,
            queue_packets: 63,
            loss: 0.0,
            delivery: Delivery::Trace,
            cross_mbps: 0.0,
            host_buffer_bytes: 0,
        }
        .to_preset("calibrated", "fitted");
        let json = serde_json::to_value(&fitted).unwrap();
        assert_eq!(json["prepend"], "mm-delay 30");
        assert_eq!(
            json["link_args"],
            "--uplink-queue=droptail --uplink-queue-args=packets=63"
        );
        std::fs::write(&file, json.to_string()).unwrap();
        assert_eq!(find(file.to_str().unwrap()).unwrap(), fitted);
        std::fs::write(
            &file,
            r#"{"name": "x", "description": "", "rate_mbps": 10, "prepend": "mm-delay x", "link_args": ""}"#,
        )
        .unwrap();
        let e = find(file.to_str().unwrap()).unwrap_err();
        assert!(
            e.contains("not an emulator preset") && e.contains("`x`"),
            "{e}"
        );
        std::fs::write(&file, r#"{"name": "x"}"#).unwrap();
        let e = find(file.to_str().unwrap()).unwrap_err();
        assert!(e.contains("not an emulator preset"), "{e}");
        let e = find("nepal").unwrap_err();
        assert!(
            e.contains("nepal-aws-india") && e.contains("`nepal`"),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
