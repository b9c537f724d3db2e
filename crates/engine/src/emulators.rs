//! The emulator library's imports (`pantheon emulators import`): iBoxNet network profiles
//! (Ashok et al., HotNets 2020 / POMACS 2022), each learned from one of Pantheon's own runs,
//! made presets in the user's library ([`emucal::presets::library_dir`]) so that `--emulator
//! NAME` runs them and `pantheon emulators --country C --link-type T` lists them.
//!
//! Without a path, the published set is taken as source schemes are
//! ([`crate::source`]): `microsoft/internet-in-a-box` at [`IBOX_COMMIT`], its
//! `network-profiles/` only, from a mirror (`--source-mirror DIR`) or the network, verified
//! and kept under the schemes' tools directory. Nothing of it is in this repository.

use std::path::{Path, PathBuf};

use anyhow::Context;
use emucal::presets::{from_ibox, is_plain_name, read_json, Preset};

use crate::source::Source;

/// The published profiles' repository.
pub const IBOX_REPOSITORY: &str = "https://github.com/microsoft/internet-in-a-box";

/// The commit imported by default: the repository's last (2023-06), 430 profiles.
pub const IBOX_COMMIT: &str = "79d41ac19f51f8070589ccd656747b878cb14356";

/// What an import did.
#[derive(Debug, Default)]
pub struct Imported {
    /// Where the profiles were read: the paths given, or the published set's checkout.
    pub from: Vec<PathBuf>,
    /// The presets written into the library, in the order read.
    pub presets: Vec<Preset>,
    /// Files that were not imported, each with its reason (file, key).
    pub refused: Vec<String>,
}

/// The published set's `[source]`: [`IBOX_REPOSITORY`] at [`IBOX_COMMIT`], `network-profiles/`
/// only; its one step checks that the directory is there (nothing is built).
pub fn published_set() -> Source {
    Source {
        repository: IBOX_REPOSITORY.into(),
        commit: IBOX_COMMIT.into(),
        paths: vec!["network-profiles".into()],
        patches: Vec::new(),
        build: vec![["test", "-d", "network-profiles"]
            .map(str::to_owned)
            .to_vec()],
        modules: Vec::new(),
    }
}

/// Imports the iBoxNet profiles at `paths` (files, or directories searched for `*.json`
/// files whose JSON is a profile) into `library`, one `<name>.json` preset each (written whole
/// or not at all). No paths: the published set, checked out under `tools` from `mirror` or
/// the network. A file that is not a profile, or a malformed one, is refused with its reason
/// and the others are imported; two profiles of one name keep the first. Errors: a path that
/// does not exist, the published set's checkout, the library that cannot be written.
pub fn import(
    paths: &[PathBuf],
    library: &Path,
    tools: &Path,
    mirror: Option<&Path>,
) -> anyhow::Result<Imported> {
    let from = match paths {
        [] => {
            let tree = crate::source::build("iBoxNet profiles", &published_set(), tools, mirror)?;
            vec![tree.join("network-profiles")]
        }
        given => given.to_vec(),
    };
    let mut files = Vec::new();
    for p in &from {
        let meta = std::fs::metadata(p).with_context(|| format!("{}", p.display()))?;
        if meta.is_dir() {
            json_files(p, &mut files).with_context(|| format!("read {}", p.display()))?;
        } else {
            files.push(p.clone());
        }
    }
    std::fs::create_dir_all(library).with_context(|| format!("create {}", library.display()))?;
    let mut done = Imported {
        from,
        ..Imported::default()
    };
    for file in files {
        match profile(&file) {
            Ok(p) if done.presets.iter().any(|q| q.name == p.name) => done.refused.push(format!(
                "{}: a profile named {} was imported already",
                file.display(),
                p.name
            )),
            Ok(p) => {
                write_preset(library, &p)?;
                done.presets.push(p);
            }
            Err(e) => done.refused.push(e),
        }
    }
    Ok(done)
}

/// The `*.json` files under `dir`, depth first, sorted within each directory.
fn json_files(dir: &Path, into: &mut Vec<PathBuf>) -> std::io::Result<()> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    entries.sort();
    for e in entries {
        if e.is_dir() {
            json_files(&e, into)?;
        } else if e.extension().is_some_and(|x| x == "json") {
            into.push(e);
        }
    }
    Ok(())
}

/// The profile at `file` as a preset whose name is a plain file name; errors name the file
/// (and the key at fault).
fn profile(file: &Path) -> Result<Preset, String> {
    let name = file.display().to_string();
    let value = read_json(file)?;
    if !emucal::ibox::is_profile_value(&value) {
        return Err(format!(
            "{name}: not an iBoxNet network profile (no config.uplink object)"
        ));
    }
    let mut p = from_ibox(&value, file)?;
    p.name = p
        .name
        .chars()
        .map(|c| match c {
            'a'..='z' | 'A'..='Z' | '0'..='9' | '.' | '-' | '_' => c,
            _ => '-',
        })
        .collect::<String>()
        .trim_start_matches('.')
        .to_owned();
    if !is_plain_name(&p.name) {
        return Err(format!("{name}: no usable name ({:?})", p.name));
    }
    Ok(p)
}

/// Writes `p` as `<library>/<name>.json`, through a temporary file renamed into place.
fn write_preset(library: &Path, p: &Preset) -> anyhow::Result<()> {
    let file = library.join(format!("{}.json", p.name));
    let tmp = library.join(format!(".{}.json.tmp", p.name));
    std::fs::write(&tmp, serde_json::to_string_pretty(p)? + "\n")
        .with_context(|| format!("write {}", tmp.display()))?;
    std::fs::rename(&tmp, &file).with_context(|| format!("write {}", file.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn side(kbps: u32, packets: u32, ms: i32) -> String {
        format!(
            r#"{{"bottleneck_bandwidth": {kbps}, "buffer_size_bytes": 1,
               "buffer_size_packets": {packets}, "propagation_delay": {ms},
               "cross_traffic_pattern": [1000, 0]}}"#
        )
    }

    fn profile_text(node: &str, up_ms: i32) -> String {
        format!(
            r#"{{"measurement_node": "{node}", "link_type": "cellular",
               "data_flow_direction": "upload",
               "config": {{"uplink": {}, "downlink": {}}}}}"#,
            side(5000, 30, up_ms),
            side(100000, 10000, 0)
        )
    }

    /// A directory in the published layout imports whole: names from node, link type and
    /// number, the country from the directory; a malformed profile and a file that is no
    /// profile are refused with their reasons and the rest imported; the library's presets
    /// read back and filter by label.
    #[test]
    fn a_profile_tree_imports_into_the_library() {
        let dir = std::env::temp_dir().join(format!("ibox-import-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let tree = dir.join("network-profiles");
        let us = tree.join("united-states/cellular");
        let br = tree.join("brazil/cellular");
        for d in [&us, &br] {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::write(
            us.join("network-profile-1.json"),
            profile_text("stanford", 20),
        )
        .unwrap();
        std::fs::write(
            br.join("network-profile-1.json"),
            profile_text("brazil", 30),
        )
        .unwrap();
        std::fs::write(
            br.join("network-profile-2.json"),
            profile_text("brazil", -4),
        )
        .unwrap();
        std::fs::write(br.join("notes.json"), r#"{"a": 1}"#).unwrap();
        let library = dir.join("library");
        let done = import(&[tree], &library, &dir.join("tools"), None).unwrap();
        let names: Vec<&str> = done.presets.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(
            names,
            ["ibox-brazil-cellular-1", "ibox-stanford-cellular-1"]
        );
        assert_eq!(done.refused.len(), 2, "{:?}", done.refused);
        assert!(
            done.refused[0].ends_with(
                "network-profile-2.json: config.uplink.propagation_delay: `-4` is not a number ≥ 0"
            ),
            "{}",
            done.refused[0]
        );
        assert!(done.refused[1].contains("notes.json: not an iBoxNet"));
        let (read, problems) = emucal::presets::library(&library);
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(read, done.presets);
        let us_only: Vec<&str> = read
            .iter()
            .filter(|p| emucal::presets::matches(p, &[("country", "United-States")]))
            .map(|p| p.name.as_str())
            .collect();
        assert_eq!(us_only, ["ibox-stanford-cellular-1"]);
        assert!(read
            .iter()
            .all(|p| emucal::presets::matches(p, &[("link_type", "cellular")])));
        let e = import(&[dir.join("none")], &library, &dir, None).unwrap_err();
        assert!(format!("{e:#}").contains("none"), "{e:#}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
