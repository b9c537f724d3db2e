//! The scheme library: one TOML descriptor per scheme (`schemes/*.toml`, documented in
//! `docs/schemes.md`), loaded once into an immutable [`Registry`].
//!
//! A scheme is a *full-throttle flow* that runs until the harness stops it, started as two
//! commands: the side that runs first (usually the receiver) gets `{port}` to listen on; the
//! other side gets `{ip}` (the first side's tunnel address) and `{port}` (Pantheon's wrapper
//! convention, reference `pantheon.md` §1.1).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

mod builtin {
    include!(concat!(env!("OUT_DIR"), "/builtin_schemes.rs"));
}

/// Which side starts first and listens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    /// The data receiver.
    Receiver,
    /// The data sender.
    Sender,
}

/// Packages and programs a scheme needs.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Dependencies {
    /// Debian packages that provide it.
    #[serde(default)]
    pub apt: Vec<String>,
    /// Programs that must be on `PATH`.
    #[serde(default)]
    pub binaries: Vec<String>,
}

/// How to start one side.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SideCommand {
    /// argv, with `{port}` and `{ip}` substituted; run directly, not through a shell.
    pub command: Vec<String>,
}

/// One scheme descriptor.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scheme {
    /// Short name used on the command line and in file names (`cubic`).
    pub name: String,
    /// Name shown in plots and tables (`TCP Cubic`).
    pub label: String,
    /// Plot color (a matplotlib color name, as Pantheon's `config.yml`).
    pub color: String,
    /// Plot marker (a matplotlib marker, as Pantheon's `config.yml`).
    pub marker: String,
    /// Which side starts first.
    pub run_first: Side,
    /// Kernel TCP congestion control the scheme needs, if any.
    #[serde(default)]
    pub tcp_congestion_control: Option<String>,
    /// Queueing discipline to install on the sender's tunnel device when the kernel has it.
    #[serde(default)]
    pub preferred_qdisc: Option<String>,
    /// What to install.
    #[serde(default)]
    pub dependencies: Dependencies,
    /// The receiver side.
    pub receiver: SideCommand,
    /// The sender side.
    pub sender: SideCommand,
}

impl Scheme {
    /// The argv of `side`, with `{port}` and `{ip}` filled in.
    pub fn argv(&self, side: Side, ip: &str, port: u16) -> Vec<String> {
        let cmd = match side {
            Side::Receiver => &self.receiver.command,
            Side::Sender => &self.sender.command,
        };
        cmd.iter()
            .map(|a| a.replace("{port}", &port.to_string()).replace("{ip}", ip))
            .collect()
    }

    /// Why this scheme cannot run on this machine, or `None` if it can.
    pub fn unavailable_reason(&self, system: &SystemInfo) -> Option<String> {
        let missing: Vec<&str> = self
            .dependencies
            .binaries
            .iter()
            .filter(|b| find_in_path(b).is_none())
            .map(String::as_str)
            .collect();
        if !missing.is_empty() {
            return Some(format!(
                "{} not found on PATH (install: apt-get install {})",
                missing.join(", "),
                self.dependencies.apt.join(" ")
            ));
        }
        if let Some(cc) = &self.tcp_congestion_control {
            if !system.available_cc.iter().any(|c| c == cc) {
                return Some(format!(
                    "tcp_{cc} is not available in this kernel \
                     (net.ipv4.tcp_available_congestion_control = {}; `modprobe tcp_{cc}` if it is \
                     built as a module)",
                    system.available_cc.join(" ")
                ));
            }
        }
        None
    }

    /// Remarks about running here that do not prevent it.
    pub fn notes(&self, system: &SystemInfo) -> Vec<String> {
        let mut notes = Vec::new();
        if let Some(cc) = &self.tcp_congestion_control {
            if !system.allowed_cc.iter().any(|c| c == cc) {
                notes.push(format!(
                    "{cc} is not in net.ipv4.tcp_allowed_congestion_control: fine for the runner \
                     (root), but unprivileged programs cannot select it"
                ));
            }
        }
        if let Some(q) = &self.preferred_qdisc {
            notes.push(format!(
                "prefers the {q} qdisc: installed on the sender's tunnel device when the kernel has \
                 it, else TCP's internal pacing is used (recorded per run)"
            ));
        }
        notes
    }
}

/// What the scheme checks need to know about this machine.
#[derive(Debug, Clone)]
pub struct SystemInfo {
    /// `net.ipv4.tcp_available_congestion_control`.
    pub available_cc: Vec<String>,
    /// `net.ipv4.tcp_allowed_congestion_control`.
    pub allowed_cc: Vec<String>,
}

impl SystemInfo {
    /// Reads the sysctls from `/proc`.
    pub fn probe() -> SystemInfo {
        let read = |p: &str| -> Vec<String> {
            std::fs::read_to_string(p)
                .unwrap_or_default()
                .split_whitespace()
                .map(str::to_owned)
                .collect()
        };
        SystemInfo {
            available_cc: read("/proc/sys/net/ipv4/tcp_available_congestion_control"),
            allowed_cc: read("/proc/sys/net/ipv4/tcp_allowed_congestion_control"),
        }
    }
}

impl Scheme {
    /// What runs the scheme on this machine, for reports: the sender program's own version
    /// line (`iperf 3.12 (cJSON 1.7.15)`) and, for kernel TCP schemes, the kernel's
    /// congestion control and release (`tcp_cubic, Linux 6.18.44`).
    pub fn version(&self) -> String {
        let program = self
            .sender
            .command
            .first()
            .map(String::as_str)
            .unwrap_or("");
        let own = std::process::Command::new(program)
            .arg("--version")
            .output()
            .ok()
            .and_then(|o| {
                let text = String::from_utf8_lossy(&o.stdout).into_owned()
                    + &String::from_utf8_lossy(&o.stderr);
                text.lines().next().map(|l| l.trim().to_owned())
            })
            .filter(|l| !l.is_empty())
            .unwrap_or_else(|| format!("{program} (no --version)"));
        match &self.tcp_congestion_control {
            Some(cc) => {
                let release =
                    std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
                format!("{own}; kernel tcp_{cc}, Linux {}", release.trim())
            }
            None => own,
        }
    }
}

/// Finds `program` on `PATH`: the first executable file of that name.
pub fn find_in_path(program: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(program))
            .find(|p| {
                std::fs::metadata(p)
                    .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            })
    })
}

/// Errors of loading descriptors.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// A descriptor is malformed.
    #[error("scheme descriptor {file}: {message}")]
    Descriptor {
        /// The file.
        file: String,
        /// What is wrong.
        message: String,
    },
    /// A scheme name nobody describes.
    #[error("unknown scheme `{name}` (known: {known})")]
    Unknown {
        /// The name asked for.
        name: String,
        /// The names that exist.
        known: String,
    },
}

/// All schemes known to this run, by name.
#[derive(Debug, Clone)]
pub struct Registry {
    schemes: BTreeMap<String, Scheme>,
}

impl Registry {
    /// The built-in descriptors, overridden and extended by the `*.toml` files of `extra_dir`.
    pub fn load(extra_dir: Option<&Path>) -> Result<Registry, RegistryError> {
        let mut schemes = BTreeMap::new();
        let mut add = |file: &str, text: &str| -> Result<(), RegistryError> {
            let s: Scheme = toml::from_str(text).map_err(|e| RegistryError::Descriptor {
                file: file.to_owned(),
                message: e.to_string(),
            })?;
            if s.receiver.command.is_empty() || s.sender.command.is_empty() {
                return Err(RegistryError::Descriptor {
                    file: file.to_owned(),
                    message: "receiver and sender commands must not be empty".into(),
                });
            }
            schemes.insert(s.name.clone(), s);
            Ok(())
        };
        for (file, text) in builtin::BUILTIN {
            add(file, text)?;
        }
        if let Some(dir) = extra_dir {
            let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
                .map_err(|e| RegistryError::Descriptor {
                    file: dir.display().to_string(),
                    message: e.to_string(),
                })?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "toml"))
                .collect();
            files.sort();
            for f in files {
                let text = std::fs::read_to_string(&f).map_err(|e| RegistryError::Descriptor {
                    file: f.display().to_string(),
                    message: e.to_string(),
                })?;
                add(&f.display().to_string(), &text)?;
            }
        }
        Ok(Registry { schemes })
    }

    /// The scheme called `name`.
    pub fn get(&self, name: &str) -> Result<&Scheme, RegistryError> {
        self.schemes
            .get(name)
            .ok_or_else(|| RegistryError::Unknown {
                name: name.to_owned(),
                known: self.schemes.keys().cloned().collect::<Vec<_>>().join(", "),
            })
    }

    /// All schemes, by name.
    pub fn all(&self) -> impl Iterator<Item = &Scheme> {
        self.schemes.values()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_descriptors_load_and_substitute() {
        let r = Registry::load(None).unwrap();
        for name in ["cubic", "bbr", "reno", "vegas"] {
            let s = r.get(name).unwrap();
            assert_eq!(s.run_first, Side::Receiver);
            assert_eq!(s.tcp_congestion_control.as_deref(), Some(name));
        }
        let argv = r
            .get("cubic")
            .unwrap()
            .argv(Side::Sender, "100.64.0.3", 5001);
        assert_eq!(
            &argv[..5],
            ["iperf3", "--client", "100.64.0.3", "--port", "5001"]
        );
        assert!(r.get("nope").unwrap_err().to_string().contains("cubic"));
    }

    #[test]
    fn availability_names_the_missing_congestion_control() {
        let r = Registry::load(None).unwrap();
        let sys = SystemInfo {
            available_cc: vec!["reno".into(), "cubic".into()],
            allowed_cc: vec!["reno".into()],
        };
        let vegas = r.get("vegas").unwrap();
        if find_in_path("iperf3").is_some() {
            let why = vegas.unavailable_reason(&sys).unwrap();
            assert!(why.contains("tcp_vegas is not available"), "{why}");
            assert!(r.get("cubic").unwrap().unavailable_reason(&sys).is_none());
        }
        let notes = r.get("cubic").unwrap().notes(&sys).join(" ");
        assert!(notes.contains("tcp_allowed_congestion_control"));
    }
}
