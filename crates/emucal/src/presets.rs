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

use std::path::Path;

use crate::calibrate::Candidate;
use crate::mm::Delivery;
use crate::stage::OPPORTUNITY_BYTES;

/// One named emulator: a trace rate and the Mahimahi-style chain around `mm-link`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Preset {
    /// Its name (`nepal-aws-india`).
    pub name: String,
    /// What it models, for listings.
    pub description: String,
    /// Rate of the constant trace used in both directions, Mbit/s.
    pub rate_mbps: f64,
    /// Shells outside mm-link (Pantheon's `--prepend-mm-cmds`).
    pub prepend: String,
    /// mm-link's options (Pantheon's `--extra-mm-link-args`).
    pub link_args: String,
}

impl Candidate {
    /// This emulator as a named preset (usable as `--emulator`).
    pub fn to_preset(&self, name: &str, description: &str) -> Preset {
        Preset {
            name: name.into(),
            description: description.into(),
            rate_mbps: self.rate_mbps,
            prepend: self.prepend(),
            link_args: self.link_args(),
        }
    }
}

impl Preset {
    /// File name of its trace (`100.42mbps.trace`), written with `Trace::constant_rate`.
    pub fn trace_file_name(&self) -> String {
        format!("{}mbps.trace", self.rate_mbps)
    }

    /// The whole chain with `trace` as both traces:
    /// `PREPEND mm-link TRACE TRACE LINK_ARGS`.
    pub fn chain_words(&self, trace: &Path) -> Vec<String> {
        crate::mm::link_chain_words(&self.prepend, trace, trace, &self.link_args)
    }
}

/// Every preset, calibrated ones first.
pub fn presets() -> Vec<Preset> {
    let mut all = Vec::new();
    // (name, path, rate Mbit/s, one-way delay ms, uplink loss, uplink DropTail packets, Poisson)
    for (name, path, rate_mbps, delay_ms, loss, queue_packets, is_poisson) in [
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
    ] {
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
        };
        let description = format!(
            "Pantheon's calibrated emulator of {path}: {rate_mbps} Mbit/s {}, {}, uplink \
             DropTail {queue_packets} packets",
            if is_poisson { "Poisson" } else { "constant" },
            candidate.prepend()
        );
        all.push(candidate.to_preset(name, &description));
    }
    for rtt in [20u64, 100] {
        for rate in [12u64, 60, 108] {
            all.push(Preset {
                name: format!("policer-{rate}mbps-{rtt}ms"),
                description: format!(
                    "Pantheon's policer emulator: {rate} Mbit/s constant, 1-packet DropTail \
                     queues both ways, RTT {rtt} ms"
                ),
                rate_mbps: rate as f64,
                prepend: format!("mm-delay {}", rtt / 2),
                link_args: "--uplink-queue=droptail --uplink-queue-args=packets=1 \
                            --downlink-queue=droptail --downlink-queue-args=packets=1"
                    .into(),
            });
            let burst = rate * 1_000_000 / 8 / 100; // 10 ms at the rate, bytes
            all.push(Preset {
                name: format!("token-bucket-{rate}mbps-{rtt}ms"),
                description: format!(
                    "token-bucket policer of {rate} Mbit/s with a {burst}-byte bucket (10 ms) \
                     on a {} Mbit/s link, RTT {rtt} ms",
                    rate * 4
                ),
                rate_mbps: (rate * 4) as f64,
                prepend: format!(
                    "mm-delay {} pt-policer uplink {rate} {burst} pt-policer downlink {rate} \
                     {burst}",
                    rtt / 2
                ),
                link_args: String::new(),
            });
        }
    }
    for every_ms in [5u64, 20] {
        all.push(Preset {
            name: format!("ack-aggregation-{every_ms}ms"),
            description: format!(
                "ACK aggregation: downlink packets released every {every_ms} ms, 50 Mbit/s \
                 constant, RTT 40 ms"
            ),
            rate_mbps: 50.0,
            prepend: format!("mm-delay 20 pt-aggregate downlink {every_ms}"),
            link_args: String::new(),
        });
    }
    // BDP of 50 Mbit/s × 40 ms in 1504-byte packets.
    let bdp_packets = 50e6 * 0.040 / 8.0 / OPPORTUNITY_BYTES as f64;
    for fraction in [0.1, 0.25, 0.5, 1.0] {
        let packets = (bdp_packets * fraction).round() as u64;
        all.push(Preset {
            name: format!("buffer-{fraction}bdp"),
            description: format!(
                "{fraction} × BDP buffer: uplink DropTail {packets} packets, 50 Mbit/s \
                 constant, RTT 40 ms"
            ),
            rate_mbps: 50.0,
            prepend: "mm-delay 20".into(),
            link_args: format!("--uplink-queue=droptail --uplink-queue-args=packets={packets}"),
        });
    }
    all
}

/// The preset called `name`, or the preset file at path `name` (JSON with the fields of
/// [`Preset`], as `pantheon calibrate` writes `calibration/emulator.json`); the error lists the
/// names, or says what is wrong with the file.
pub fn find(name: &str) -> Result<Preset, String> {
    let file = Path::new(name);
    if name.ends_with(".json") || file.is_file() {
        let text =
            std::fs::read_to_string(file).map_err(|e| format!("read emulator file {name}: {e}"))?;
        let p: Preset = serde_json::from_str(&text)
            .map_err(|e| format!("{name}: not an emulator preset: {e}"))?;
        crate::trace::Trace::constant_rate(p.rate_mbps).map_err(|e| format!("{name}: {e}"))?;
        return Ok(p);
    }
    let all = presets();
    all.iter().find(|p| p.name == name).cloned().ok_or_else(|| {
        let names: Vec<&str> = all.iter().map(|p| p.name.as_str()).collect();
        format!(
            "no emulator named `{name}` (`pantheon emulators` describes them; a path to a \
             preset file such as calibration/emulator.json works too): {}",
            names.join(", ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mm::{parse_chain, Delivery, EmulatedPath, LinkDirection, Shell};
    use crate::queue::QueueSpec;

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
            let chain = parse_chain(&p.chain_words(&trace)).unwrap();
            assert!(chain.command.is_empty(), "{}", p.name);
            // The Pantheon-flag form gives the same shells.
            let via_flags =
                EmulatedPath::from_pantheon_flags(&p.prepend, &trace, &trace, &p.link_args, "")
                    .unwrap();
            assert_eq!(via_flags.shells.len(), chain.shells.len(), "{}", p.name);
        }
        // The Nepal emulator is the paper's: 0.57 Mbit/s Poisson, 28 ms, 4.77 % loss, 14 pkts.
        let nepal = find("nepal-aws-india").unwrap();
        let trace = dir.join(nepal.trace_file_name());
        let chain = parse_chain(&nepal.chain_words(&trace)).unwrap();
        assert!(matches!(chain.shells[0], Shell::Delay { ms: 28 }));
        assert!(matches!(chain.shells[1], Shell::Loss { rate, .. } if rate == 0.0477));
        let Shell::Link(l) = &chain.shells[2] else {
            panic!("mm-link third")
        };
        assert_eq!(
            l.direction(LinkDirection::Uplink).delivery,
            Delivery::Poisson
        );
        assert!(matches!(l.uplink_queue, QueueSpec::DropTail(_)));
        assert_eq!(l.uplink_queue.describe(), "droptail [packets=14]");
        assert_eq!(
            find("buffer-1bdp").unwrap().link_args,
            "--uplink-queue=droptail --uplink-queue-args=packets=166"
        );
        // A preset file, as `pantheon calibrate` writes one.
        let file = dir.join("emulator.json");
        let fitted = crate::calibrate::Candidate {
            rate_mbps: 24.02,
            delay_ms: 30,
            queue_packets: 63,
            loss: 0.0,
            delivery: Delivery::Trace,
        }
        .to_preset("calibrated", "fitted");
        std::fs::write(&file, serde_json::to_string(&fitted).unwrap()).unwrap();
        assert_eq!(find(file.to_str().unwrap()).unwrap(), fitted);
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
