//! `pantheon schemes setup`: installs what scheme descriptors ask for — Debian packages, Python
//! packages, Rust programs (our own scheme programs of `schemes/`, crates from crates.io), the
//! source trees of source schemes ([`crate::source`]: cloned at their pin, verified, patched,
//! built) — then runs their `setup` and `setup_after_reboot` steps, as Pantheon's `setup.py
//! --install-deps --setup` did (reference `pantheon.md` §1.3).
//!
//! Every step is printed before it runs; a failing step fails its scheme (with the command and
//! its exit status) but not the other schemes, except `setup_after_reboot` steps, whose failure
//! is a warning (Pantheon: "failure → warning only").

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context};

use crate::schemes::{find_program, tools_dir, CargoDependency, Scheme, SystemInfo};
use crate::step::{shown, Step};

/// The outcome of setting up one scheme.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SetupOutcome {
    /// The scheme's name.
    pub scheme: String,
    /// Whether every step succeeded and the scheme is runnable afterwards.
    pub ok: bool,
    /// What failed, or warnings and the verdict of `schemes list`.
    pub detail: String,
}

/// Sets up each of `schemes` in turn; one failing does not stop the others.
pub fn setup_all(schemes: &[&Scheme]) -> Vec<SetupOutcome> {
    let system = SystemInfo::probe();
    let mut apt_updated = false;
    schemes
        .iter()
        .map(|s| {
            tracing::info!(">> {}: setting up", s.name);
            let mut warnings = Vec::new();
            match setup_one(s, &mut apt_updated, &mut warnings) {
                Err(e) => SetupOutcome {
                    scheme: s.name.clone(),
                    ok: false,
                    detail: format!("{e:#}"),
                },
                Ok(()) => {
                    let why = s.unavailable_reason(&system);
                    warnings.extend(why.iter().map(|w| format!("still not runnable: {w}")));
                    SetupOutcome {
                        scheme: s.name.clone(),
                        ok: why.is_none(),
                        detail: if warnings.is_empty() {
                            "ready".to_owned()
                        } else {
                            warnings.join("; ")
                        },
                    }
                }
            }
        })
        .collect()
}

fn setup_one(s: &Scheme, apt_updated: &mut bool, warnings: &mut Vec<String>) -> anyhow::Result<()> {
    let deps = &s.dependencies;
    // A guest side needs QEMU and what builds its initramfs.
    let guest_packages: Vec<String> = match &s.guest {
        Some(_) => guest::HOST_PACKAGES.map(String::from).to_vec(),
        None => Vec::new(),
    };
    let missing: Vec<&String> = deps
        .apt
        .iter()
        .chain(&guest_packages)
        .filter(|p| {
            !Command::new("dpkg")
                .args(["-s", p.as_str()])
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .collect();
    if !missing.is_empty() {
        if !*apt_updated {
            run(Command::new("apt-get").args(["update", "-qq"]))?;
            *apt_updated = true;
        }
        run(Command::new("apt-get")
            .args(["install", "-y", "-qq"])
            .args(&missing)
            .env("DEBIAN_FRONTEND", "noninteractive"))?;
    }
    if !deps.pip.is_empty() {
        run(Command::new("python3")
            .args(["-m", "pip", "install", "--break-system-packages"])
            .args(&deps.pip))?;
    }
    let have_binaries = deps.binaries.iter().all(|b| find_program(b).is_some());
    if !deps.nix.is_empty() && !have_binaries {
        let nix_env = find_program("nix-env").context(
            "this scheme is built with Nix (nix/schemes/default.nix), and Nix is not installed \
             here (https://nixos.org/download)",
        )?;
        let exprs = workspace_root()?.join("nix");
        for attr in &deps.nix {
            run(Command::new(&nix_env)
                .arg("-f")
                .arg(&exprs)
                .args(["-iA", attr]))?;
        }
    }
    for c in &deps.cargo {
        if have_binaries {
            tracing::info!("   {}: already built", describe(c));
            continue;
        }
        run(&mut cargo_command(c)?)?;
    }
    let tools = tools_dir();
    std::fs::create_dir_all(&tools)
        .with_context(|| format!("create the scheme tools directory {}", tools.display()))?;
    if let Some(src) = &s.source {
        crate::source::build(&s.name, src, &tools, crate::source::mirror_dir().as_deref())?;
    }
    if let Some(kernel) = s.guest_kernel() {
        // The program that sets a guest's clock from the host's, built with the workspace.
        if find_program(guest::CLOCK_PROGRAM).is_none() {
            run(&mut cargo_command(&CargoDependency::Workspace {
                workspace: "pantheon-guest".into(),
            })?)?;
        }
        kernel
            .prepare(&mut |m| tracing::info!("   guest kernel {}: {m}", kernel.version))
            .with_context(|| {
                format!(
                    "prepare guest kernel {} ({})",
                    kernel.version,
                    kernel.origin()
                )
            })?;
    }
    for step in &s.setup {
        run(&mut step_command(step, &tools)?)?;
    }
    for step in &s.setup_after_reboot {
        if let Err(e) = run(&mut step_command(step, &tools)?) {
            warnings.push(format!(
                "setup_after_reboot step failed (warning only): {e:#}"
            ));
        }
    }
    Ok(())
}

fn describe(c: &CargoDependency) -> String {
    match c {
        CargoDependency::Workspace { workspace } => format!("workspace package {workspace}"),
        CargoDependency::Registry { name, version } => format!("crate {name} {version}"),
    }
}

/// The cargo invocation that provides `c`: `cargo build -p` into the target directory this
/// `pantheon` was built in (so the program lands next to it), or `cargo install --locked` from
/// crates.io into [`tools_dir`].
fn cargo_command(c: &CargoDependency) -> anyhow::Result<Command> {
    let cargo = find_program("cargo")
        .or_else(|| {
            let home = std::env::var_os("HOME")?;
            let p = PathBuf::from(home).join(".cargo/bin/cargo");
            p.exists().then_some(p)
        })
        .context("cargo is not installed (install Rust with rustup: https://rustup.rs)")?;
    let mut cmd = Command::new(cargo);
    match c {
        CargoDependency::Workspace { workspace } => {
            let manifest = workspace_root()?.join("Cargo.toml");
            let exe = std::env::current_exe().context("locate the pantheon executable")?;
            let profile_dir = exe
                .parent()
                .context("the pantheon executable's directory")?;
            // Only a `pantheon` inside a Cargo target directory (`<target>/{debug,release}/`)
            // can have the program built next to it; an installed one (`scripts/setup.sh`
            // copies the scheme programs beside it) would otherwise build into its prefix.
            let profile = profile_dir.file_name().and_then(|n| n.to_str());
            if !matches!(profile, Some("debug" | "release")) {
                bail!(
                    "workspace package {workspace} is not installed next to {}; run `bash \
                     scripts/install.sh` from the Pantheon-rs clone to build and install it (the main \
                     job's build installs `pantheon` alone)",
                    exe.display()
                );
            }
            let target = profile_dir.parent().unwrap_or(profile_dir);
            cmd.arg("build")
                .arg("--manifest-path")
                .arg(manifest)
                .args(["-p", workspace])
                .env("CARGO_TARGET_DIR", target);
            if profile == Some("release") {
                cmd.arg("--release");
            }
        }
        CargoDependency::Registry { name, version } => {
            cmd.args(["install", "--locked", name, "--version", version, "--root"])
                .arg(tools_dir());
        }
    }
    Ok(cmd)
}

/// The Pantheon-rs source tree this `pantheon` was built from (its `Cargo.toml`, `nix/`,
/// `schemes/`); an error if it is no longer there.
fn workspace_root() -> anyhow::Result<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    if !root.join("Cargo.toml").exists() {
        bail!(
            "the Pantheon-rs source tree this pantheon was built from ({}) is gone; run `pantheon \
             schemes setup` from a build of the source",
            root.display()
        );
    }
    Ok(root)
}

fn step_command(step: &Step, tools: &Path) -> anyhow::Result<Command> {
    let tools_str = tools.display().to_string();
    let argv: Vec<String> = step
        .iter()
        .map(|a| a.replace("{tools}", &tools_str))
        .collect();
    let Some((program, args)) = argv.split_first() else {
        bail!("an empty setup step");
    };
    let mut cmd = Command::new(program);
    cmd.args(args).current_dir(tools);
    Ok(cmd)
}

/// Runs `cmd` with its output on our stderr; an error names the command and its status.
fn run(cmd: &mut Command) -> anyhow::Result<()> {
    let shown = shown(cmd);
    tracing::info!("   $ {shown}");
    let status = cmd
        .stdout(std::process::Stdio::inherit())
        .status()
        .with_context(|| format!("could not start `{shown}`"))?;
    if !status.success() {
        bail!("`{shown}` failed ({status})");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_substitute_the_tools_directory_and_failures_name_the_command() {
        let cmd = step_command(
            &vec!["sh".into(), "-c".into(), "test -d {tools}".into()],
            Path::new("/tmp"),
        )
        .unwrap();
        let args: Vec<_> = cmd.get_args().map(|a| a.to_string_lossy()).collect();
        assert_eq!(args, ["-c", "test -d /tmp"]);
        let err = run(Command::new("sh").args(["-c", "exit 3"])).unwrap_err();
        assert!(err.to_string().contains("`sh -c exit 3` failed"), "{err}");
        assert!(err.to_string().contains('3'), "{err}");
        assert!(step_command(&vec![], Path::new("/tmp")).is_err());
    }

    #[test]
    fn a_failing_setup_fails_its_scheme_only_and_reboot_steps_only_warn() {
        let dir = tempfile::tempdir().unwrap();
        std::env::set_var("PANTHEON_SCHEMES_HOME", dir.path());
        let base = |name: &str, extra: &str| -> Scheme {
            toml::from_str(&format!(
                "name = \"{name}\"\nlabel = \"L\"\ncolor = \"red\"\nmarker = \"o\"\n\
                 run_first = \"receiver\"\n{extra}\n[receiver]\ncommand = [\"true\"]\n\
                 [sender]\ncommand = [\"true\"]\n"
            ))
            .unwrap()
        };
        let bad = base("bad", "setup = [[\"sh\", \"-c\", \"exit 4\"]]");
        let good = base(
            "good",
            "setup = [[\"sh\", \"-c\", \"touch {tools}/built\"]]\n\
             setup_after_reboot = [[\"false\"]]",
        );
        let out = setup_all(&[&bad, &good]);
        assert!(
            !out[0].ok && out[0].detail.contains("exit 4"),
            "{:?}",
            out[0]
        );
        assert!(out[1].ok, "{:?}", out[1]);
        assert!(out[1].detail.contains("warning only"), "{:?}", out[1]);
        assert!(dir.path().join("built").exists());
    }
}
