//! iBoxNet network profiles as emulators (Ashok et al., "iBox: Internet in a Box", HotNets
//! 2020; the 430 profiles of `microsoft/internet-in-a-box`, `network-profiles/<country>/
//! <link type>/network-profile-N.json`, each learned from one of Pantheon's own runs).
//!
//! A profile gives each direction's `bottleneck_bandwidth` (kbit/s), `buffer_size_bytes` and
//! `buffer_size_packets` (MTU-sized packets), `propagation_delay` (ms, one way) and
//! `cross_traffic_pattern` (kbit/s in each of 30 seconds, replayed by a UDP sender), and
//! describes where it came from (`measurement_node`, `peer_cloud_server`,
//! `data_flow_direction`, `link_type`, `data_source_url`). As our emulator:
//!
//! ```text
//! pt-delay uplink P_up  pt-delay downlink P_down
//! mm-link R_up.trace R_down.trace --uplink-queue=droptail --uplink-queue-args=packets=B_up
//!     --downlink-queue=droptail --downlink-queue-args=packets=B_down
//!     --uplink-cross-traffic=X0,X1,…   (Mbit/s, repeating every 30 s)
//! ```
//!
//! The profile's README warns that only the measured direction (the data's, `upload` = our
//! uplink in every published profile) was learned; the other direction holds defaults (100
//! Mbit/s, 10 000 packets, 0 ms, no cross traffic). The preset's description says so.

use std::path::PathBuf;

use serde_json::Value;

use crate::cross::CrossTraffic;
use crate::emulator::Emulator;
use crate::mm::{LinkDirection, LinkShell, Shell};
use crate::queue::QueueSpec;

/// True if `v` looks like an iBoxNet profile (a JSON object with `config.uplink`), not one of
/// our preset files.
pub fn is_profile_value(v: &Value) -> bool {
    v["config"]["uplink"].is_object()
}

/// One direction of a profile.
#[derive(Debug, Clone, PartialEq)]
struct Direction {
    mbps: f64,
    packets: u64,
    delay_ms: u64,
    cross: Option<CrossTraffic>,
}

/// Reads `config.<side>` of `v`; errors name `file` and the key.
fn direction(v: &Value, side: &str, file: &str) -> Result<Direction, String> {
    let key = |k: &str| format!("{file}: config.{side}.{k}");
    let d = &v["config"][side];
    if !d.is_object() {
        return Err(format!(
            "{file}: config.{side}: missing (an object is expected)"
        ));
    }
    let number = |k: &str| -> Result<f64, String> {
        d[k].as_f64()
            .filter(|x| x.is_finite() && *x >= 0.0)
            .ok_or_else(|| match &d[k] {
                Value::Null => format!("{}: missing", key(k)),
                other => format!("{}: `{other}` is not a number ≥ 0", key(k)),
            })
    };
    let kbps = number("bottleneck_bandwidth")?;
    if kbps <= 0.0 {
        return Err(format!(
            "{}: 0 kbit/s carries nothing",
            key("bottleneck_bandwidth")
        ));
    }
    let packets = number("buffer_size_packets")?.round() as u64;
    let delay = number("propagation_delay")?;
    if delay > crate::queue::MAX_DELAY_MS as f64 {
        return Err(format!(
            "{}: {delay} ms is over a day",
            key("propagation_delay")
        ));
    }
    let pattern = match &d["cross_traffic_pattern"] {
        Value::Null => Vec::new(),
        Value::Array(a) => a
            .iter()
            .enumerate()
            .map(|(i, x)| {
                x.as_f64().map(|k| k / 1000.0).ok_or_else(|| {
                    format!(
                        "{}[{i}]: `{x}` is not a rate in kbit/s",
                        key("cross_traffic_pattern")
                    )
                })
            })
            .collect::<Result<Vec<f64>, String>>()?,
        other => {
            return Err(format!(
                "{}: `{other}` is not a list",
                key("cross_traffic_pattern")
            ))
        }
    };
    let cross = match pattern.iter().any(|r| *r > 0.0) {
        true => Some(
            CrossTraffic::series(pattern)
                .map_err(|e| format!("{}: {e}", key("cross_traffic_pattern")))?,
        ),
        false => None,
    };
    Ok(Direction {
        // Rates are whole kbit/s: exact in Mbit/s with three decimals.
        mbps: kbps / 1000.0,
        packets: packets.max(1),
        delay_ms: delay.round() as u64,
        cross,
    })
}

/// A profile as our emulator ([`import`]); [`crate::presets::find`] makes it a preset.
#[derive(Debug, Clone, PartialEq)]
pub struct Profile {
    /// `ibox-<measurement_node>-<link_type>-<N>`.
    pub name: String,
    /// Where it comes from, its figures, and which direction holds defaults.
    pub description: String,
    /// The uplink's and downlink's rates, Mbit/s.
    pub uplink_mbps: f64,
    /// See `uplink_mbps`.
    pub downlink_mbps: f64,
    /// The emulator, its mm-link's traces named by the caller's `trace_name`.
    pub emulator: Emulator,
}

/// The profile `text` (read from `file`, named in errors with the key at fault) as an emulator
/// named `ibox-<measurement_node>-<link_type>-<N>` (N from the file name
/// `network-profile-N.json`, else the file's stem), its constant-rate traces named by
/// `trace_name(Mbit/s)`.
pub fn import(
    text: &str,
    file: &str,
    trace_name: impl Fn(f64) -> PathBuf,
) -> Result<Profile, String> {
    let v: Value = serde_json::from_str(text).map_err(|e| format!("{file}: not JSON: {e}"))?;
    import_value(&v, file, trace_name)
}

/// [`import`] of a profile already parsed.
pub fn import_value(
    v: &Value,
    file: &str,
    trace_name: impl Fn(f64) -> PathBuf,
) -> Result<Profile, String> {
    let up = direction(&v, "uplink", file)?;
    let down = direction(&v, "downlink", file)?;
    let word = |k: &str| v[k].as_str().unwrap_or("unknown").to_owned();
    let stem = std::path::Path::new(file)
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("profile");
    let number = stem.strip_prefix("network-profile-").unwrap_or(stem);
    let name = format!(
        "ibox-{}-{}-{number}",
        word("measurement_node").replace(' ', "-"),
        word("link_type")
    );
    let measured = match word("data_flow_direction").as_str() {
        "download" => "downlink",
        _ => "uplink",
    };
    let description = format!(
        "iBoxNet profile {file}: {} → {} ({}, {}; learned from {}) — uplink {} Mbit/s, {} \
         packets, {} ms, cross traffic {}; downlink {} Mbit/s, {} packets, {} ms, cross \
         traffic {}. Only the {measured} was learned; the other direction holds iBoxNet's \
         defaults",
        word("measurement_node"),
        word("peer_cloud_server"),
        word("link_type"),
        word("data_flow_direction"),
        word("data_source_url"),
        up.mbps,
        up.packets,
        up.delay_ms,
        describe(&up.cross),
        down.mbps,
        down.packets,
        down.delay_ms,
        describe(&down.cross),
    );
    let mut link = LinkShell::new(trace_name(up.mbps), trace_name(down.mbps));
    link.uplink_queue = QueueSpec::droptail_packets(up.packets);
    link.downlink_queue = QueueSpec::droptail_packets(down.packets);
    link.uplink_cross = up.cross.clone();
    link.downlink_cross = down.cross.clone();
    let mut shells = Vec::new();
    for (direction, d) in [
        (LinkDirection::Uplink, &up),
        (LinkDirection::Downlink, &down),
    ] {
        if d.delay_ms > 0 {
            shells.push(Shell::OneWayDelay {
                direction,
                ms: d.delay_ms,
            });
        }
    }
    shells.push(Shell::Link(Box::new(link)));
    Ok(Profile {
        name,
        description,
        uplink_mbps: up.mbps,
        downlink_mbps: down.mbps,
        emulator: Emulator::new(shells),
    })
}

fn describe(cross: &Option<CrossTraffic>) -> String {
    match cross {
        Some(c) => format!(
            "{:.3} Mbit/s mean over {} s",
            c.mean_mbps(),
            c.mbps_per_second.len()
        ),
        None => "none".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trace_name(mbps: f64) -> PathBuf {
        PathBuf::from(format!("{mbps}mbps.trace"))
    }

    /// A profile in the published format (theirs are in `microsoft/internet-in-a-box`; this
    /// one's figures are made up), the downlink with iBoxNet's defaults.
    const PROFILE: &str = r#"{
    "measurement_node": "testland",
    "peer_cloud_server": "aws testland",
    "data_flow_direction": "upload",
    "link_type": "cellular",
    "data_source_url": "https://pantheon.stanford.edu/result/0/",
    "config": {
        "uplink": {
            "bottleneck_bandwidth": 8250,
            "buffer_size_bytes": 30000,
            "buffer_size_packets": 20,
            "propagation_delay": 30,
            "cross_traffic_pattern": [2000, 1500, 3250, 0]
        },
        "downlink": {
            "bottleneck_bandwidth": 100000,
            "buffer_size_bytes": 15000000,
            "buffer_size_packets": 10000,
            "propagation_delay": 0,
            "cross_traffic_pattern": []
        },
        "__comment": "bottleneck_bandwidth is in kbps, buffer_size_packets is in number of MTU sized packets, propagation_delay is in ms, and the cross_traffic_pattern is a 30s long timeseries with each entry in kbps"
    }
}"#;

    #[test]
    fn a_profile_becomes_our_emulator() {
        assert!(is_profile_value(&serde_json::from_str(PROFILE).unwrap()));
        let file = "network-profiles/testland/cellular/network-profile-7.json";
        let p = import(PROFILE, file, trace_name).unwrap();
        assert_eq!(p.name, "ibox-testland-cellular-7");
        assert_eq!((p.uplink_mbps, p.downlink_mbps), (8.25, 100.0));
        assert_eq!(
            p.emulator.words().join(" "),
            "pt-delay uplink 30 mm-link 8.25mbps.trace 100mbps.trace --uplink-queue=droptail \
             --uplink-queue-args=packets=20 --downlink-queue=droptail \
             --downlink-queue-args=packets=10000 --uplink-cross-traffic=2,1.5,3.25,0"
        );
        assert!(
            p.description.contains("Only the uplink was learned"),
            "{}",
            p.description
        );
    }

    #[test]
    fn a_malformed_profile_names_file_and_key() {
        let bad = |from: &str, to: &str| {
            assert!(PROFILE.contains(from), "{from}");
            import(&PROFILE.replacen(from, to, 1), "p.json", trace_name).unwrap_err()
        };
        assert_eq!(
            bad(
                "\"bottleneck_bandwidth\": 8250",
                "\"bottleneck_bandwidth\": \"fast\""
            ),
            "p.json: config.uplink.bottleneck_bandwidth: `\"fast\"` is not a number ≥ 0"
        );
        assert_eq!(
            bad("\"propagation_delay\": 30,", ""),
            "p.json: config.uplink.propagation_delay: missing"
        );
        assert_eq!(
            bad("[2000,", "[2000, null,"),
            "p.json: config.uplink.cross_traffic_pattern[1]: `null` is not a rate in kbit/s"
        );
        assert!(import("{", "p.json", trace_name)
            .unwrap_err()
            .starts_with("p.json: not JSON"));
        assert!(!is_profile_value(
            &serde_json::from_str(r#"{"name": "x", "rate_mbps": 12}"#).unwrap()
        ));
    }
}
