//! The training set: the paper's 24 synthetic emulators and any named or calibrated ones, each
//! with the oracle's ideal window.
//!
//! `synthetic` is the paper's set (§6): constant links of 5, 10, 20, 50, 100 and 200 Mbit/s ×
//! one-way delays of 10, 20, 40 and 80 ms, infinite buffers, no loss; the oracle's window is
//! the BDP. Any other entry is an emulator as `--emulator` takes it (a preset's name such as
//! `nepal-aws-india`, or a file such as `calibration/emulator.json`): the oracle searches for
//! its best fixed window in simulation ([`crate::rollout::search_window`]) and caches it in
//! the training directory (`oracle.json`), so a resumed or repeated training reuses it.

use std::collections::BTreeMap;
use std::path::Path;

use emucal::mm::EmulatedPath;
use emucal::trace::Trace;

use crate::rollout::{path_bdp, search_window, TrainingEmulator};

/// The name of the paper's synthetic set.
pub const SYNTHETIC: &str = "synthetic";
/// The synthetic set's link rates, Mbit/s.
pub const RATES_MBPS: [u32; 6] = [5, 10, 20, 50, 100, 200];
/// The synthetic set's one-way delays, ms.
pub const DELAYS_MS: [u64; 4] = [10, 20, 40, 80];
/// Multiples of the BDP the oracle tries as fixed windows on a calibrated emulator.
pub const SEARCH_FACTORS: [f64; 7] = [0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 3.0];

/// Why the training set could not be made.
#[derive(Debug, thiserror::Error)]
pub enum SetError {
    /// An entry that is neither `synthetic`, a preset nor an emulator file.
    #[error("training emulator `{0}`: {1}")]
    Unknown(String, String),
    /// An emulator without a bottleneck rate (delay and loss only): no BDP to aim at.
    #[error("training emulator `{0}` has no bottleneck link (no mm-link or policer): no ideal window to learn")]
    NoBottleneck(String),
    /// A trace or cache file.
    #[error("{0}")]
    Io(String),
    /// The oracle's search failed in simulation.
    #[error("oracle search over `{0}`: {1}")]
    Search(String, sim::run::SimError),
}

/// Writes the constant trace of `mbps` into `dir` (if missing) and returns its path.
fn trace(dir: &Path, mbps: f64) -> Result<std::path::PathBuf, SetError> {
    let path = dir.join(format!("{mbps}mbps.trace"));
    if !path.exists() {
        Trace::write_constant(&path, mbps).map_err(SetError::Io)?;
    }
    Ok(path)
}

fn load(text: &str) -> Result<EmulatedPath, String> {
    let shells = emucal::mm::parse_shells(text).map_err(|e| e.to_string())?;
    EmulatedPath::load(shells, vec![]).map_err(|e| e.to_string())
}

/// The paper's 24 synthetic emulators, traces written into `dir`.
pub fn synthetic(dir: &Path) -> Result<Vec<TrainingEmulator>, SetError> {
    let mut out = Vec::new();
    for rate in RATES_MBPS {
        let t = trace(dir, f64::from(rate))?.display().to_string();
        for delay in DELAYS_MS {
            let name = format!("{rate}mbps-{delay}ms");
            let path = load(&format!("mm-delay {delay} mm-link {t} {t}"))
                .map_err(|e| SetError::Unknown(name.clone(), e))?;
            let ideal_cwnd = path_bdp(&path).ok_or_else(|| SetError::NoBottleneck(name.clone()))?;
            out.push(TrainingEmulator {
                name,
                path,
                ideal_cwnd,
            });
        }
    }
    Ok(out)
}

/// The emulators of `entries` (module docs), traces written into `dir/traces`, the oracle's
/// windows of calibrated ones read from or searched into `dir/oracle.json` (runs of
/// `oracle_secs` simulated seconds, seed `seed`); `progress` is told each search.
pub fn training_set(
    entries: &[String],
    dir: &Path,
    oracle_secs: u64,
    seed: u64,
    progress: &mut dyn FnMut(&str),
) -> Result<Vec<TrainingEmulator>, SetError> {
    let traces = dir.join("traces");
    std::fs::create_dir_all(&traces)
        .map_err(|e| SetError::Io(format!("create {}: {e}", traces.display())))?;
    let cache_file = dir.join("oracle.json");
    let mut cache: BTreeMap<String, f64> = std::fs::read_to_string(&cache_file)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default();
    let mut out = Vec::new();
    for entry in entries {
        if entry == SYNTHETIC {
            out.extend(synthetic(&traces)?);
            continue;
        }
        let preset =
            emucal::presets::find(entry).map_err(|e| SetError::Unknown(entry.clone(), e))?;
        for (_, mbps) in preset.traces() {
            trace(&traces, mbps)?;
        }
        let path = preset
            .emulator_in(&traces)
            .load()
            .map_err(|e| SetError::Unknown(entry.clone(), e.to_string()))?;
        let key = format!("{} | {}", preset.name, path.command_line);
        let ideal_cwnd = match cache.get(&key) {
            Some(w) => *w,
            None => {
                progress(&preset.name);
                let (w, _) = search_window(&preset.name, &path, &SEARCH_FACTORS, oracle_secs, seed)
                    .map_err(|e| SetError::Search(entry.clone(), e))?
                    .ok_or_else(|| SetError::NoBottleneck(entry.clone()))?;
                cache.insert(key, w);
                let text = serde_json::to_string_pretty(&cache).expect("a map serialises");
                std::fs::write(&cache_file, text)
                    .map_err(|e| SetError::Io(format!("write {}: {e}", cache_file.display())))?;
                w
            }
        };
        out.push(TrainingEmulator {
            name: preset.name.clone(),
            path,
            ideal_cwnd,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_synthetic_set_is_the_papers_24_links_with_their_bdps() {
        let dir = std::env::temp_dir().join(format!("indigo-set-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let set = synthetic(&dir).unwrap();
        assert_eq!(set.len(), 24);
        let e = set.iter().find(|e| e.name == "100mbps-40ms").unwrap();
        // 100 Mbit/s × 80 ms RTT / 1500 bytes ≈ 667 packets.
        assert!((e.ideal_cwnd - 666.7).abs() < 2.0, "{}", e.ideal_cwnd);
        let e = set.iter().find(|e| e.name == "5mbps-10ms").unwrap();
        assert!((e.ideal_cwnd - 8.33).abs() < 0.2, "{}", e.ideal_cwnd);
        let err = training_set(&["nowhere".into()], &dir, 1, 1, &mut |_| {})
            .unwrap_err()
            .to_string();
        assert!(err.contains("training emulator `nowhere`"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
