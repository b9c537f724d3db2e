//! `pantheon schemes list|setup|era|check`: the scheme library.
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Subcommand;
use engine::schemes::{Registry, Scheme, SystemInfo};

use engine::plan::{seconds, MAX_RUNTIME};

/// Where source schemes' repositories come from when the network does not reach them.
#[derive(clap::Args)]
pub(crate) struct MirrorArgs {
    /// A directory of git mirrors, one per upstream repository (`owner+name/`,
    /// `owner/name.git`, `name.git`, …: a fetched snapshot or `git clone --mirror`); source
    /// schemes are cloned from it instead of the network. Default: $PANTHEON_SOURCE_MIRROR.
    #[arg(long, value_name = "DIR")]
    source_mirror: Option<PathBuf>,
}

impl MirrorArgs {
    /// Makes `--source-mirror` what the engine reads (`PANTHEON_SOURCE_MIRROR`): called
    /// before any thread starts.
    pub(crate) fn apply(&self) -> anyhow::Result<()> {
        if let Some(dir) = &self.source_mirror {
            if !dir.is_dir() {
                anyhow::bail!("--source-mirror {}: no such directory", dir.display());
            }
            let abs = std::path::absolute(dir)?;
            std::env::set_var(engine::source::MIRROR_ENV, abs);
        }
        Ok(())
    }
}

#[derive(Subcommand)]
pub(crate) enum SchemesAction {
    /// List the schemes and whether each can run on this machine (and why not).
    List {
        /// Extra scheme descriptors (*.toml).
        #[arg(long)]
        schemes_dir: Option<PathBuf>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
        /// Only the source schemes (built from a pinned git commit by `schemes setup`).
        #[arg(long)]
        source: bool,
        /// Only the schemes that can run on this machine now (for scripts: `pantheon run local
        /// --schemes "$(pantheon schemes list --source --runnable --names)"`).
        #[arg(long)]
        runnable: bool,
        /// Print the names alone, one per line (for scripts: `pantheon schemes setup $(pantheon
        /// schemes list --source --names)`).
        #[arg(long, conflicts_with = "json")]
        names: bool,
        #[command(flatten)]
        mirror: MirrorArgs,
    },
    /// Install what schemes need — the Debian, Python, Rust and Nix packages their descriptors
    /// name; for source schemes, their repository cloned at the pinned commit, verified,
    /// patched and built into the tools directory — and run their setup steps (needs root for
    /// apt). One failing scheme does not stop the others; exit status 1 if any failed. See
    /// docs/schemes.md.
    Setup {
        /// Schemes to set up.
        #[arg(required_unless_present = "all", conflicts_with = "all")]
        names: Vec<String>,
        /// Set up every scheme.
        #[arg(long)]
        all: bool,
        /// Extra scheme descriptors (*.toml).
        #[arg(long)]
        schemes_dir: Option<PathBuf>,
        #[command(flatten)]
        mirror: MirrorArgs,
    },
    /// Which scheme here runs each of Pantheon's schemes as Pantheon ran it on a day (its
    /// wrappers changed programs and arguments over the years: Copa's δ, SCReAM's program):
    /// one line per Pantheon scheme name, the descriptor whose `[pantheon]` era covers the day,
    /// or why none does. `run --pantheon-era DAY` runs them. See docs/schemes.md.
    Era {
        /// The day, YYYY-MM-DD (e.g. 2017-08-30, the day of seed 001's Pantheon commit).
        day: engine::provenance::Day,
        /// Extra scheme descriptors (*.toml).
        #[arg(long)]
        schemes_dir: Option<PathBuf>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Run each scheme through a short emulated run (10 Mbit/s both ways, mm-delay 28, through
    /// the tunnel) and say which work and, precisely, what is wrong with the others (needs
    /// root). Exit status 1 if any fails.
    Check {
        /// Schemes to check (default: all).
        names: Vec<String>,
        /// Seconds each run lasts.
        #[arg(long, default_value_t = 5.0)]
        runtime: f64,
        /// Extra scheme descriptors (*.toml).
        #[arg(long)]
        schemes_dir: Option<PathBuf>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

/// Lists, sets up or checks schemes; exit status 1 if a setup or check failed.
pub(crate) fn exec(action: SchemesAction) -> anyhow::Result<ExitCode> {
    match action {
        SchemesAction::List {
            schemes_dir,
            json,
            source,
            runnable,
            names,
            mirror,
        } => {
            mirror.apply()?;
            let registry = Registry::load(schemes_dir.as_deref())?;
            let sys = runnable.then(SystemInfo::probe);
            let chosen: Vec<&Scheme> = registry
                .all()
                .filter(|s| !source || s.source.is_some())
                .filter(|s| {
                    sys.as_ref()
                        .is_none_or(|sys| s.unavailable_reason(sys).is_none())
                })
                .collect();
            if names {
                for s in chosen {
                    println!("{}", s.name);
                }
                return Ok(ExitCode::SUCCESS);
            }
            list(&chosen, json)
        }
        SchemesAction::Setup {
            names,
            all: _,
            schemes_dir,
            mirror,
        } => {
            mirror.apply()?;
            let registry = Registry::load(schemes_dir.as_deref())?;
            let chosen = if names.is_empty() {
                registry.all().collect::<Vec<_>>()
            } else {
                names
                    .iter()
                    .map(|n| registry.get(n))
                    .collect::<Result<Vec<_>, _>>()?
            };
            let outcomes = engine::setup::setup_all(&chosen);
            let rows = outcomes.iter().map(|o| (&*o.scheme, o.ok, &*o.detail));
            Ok(verdict_lines(rows, true))
        }
        SchemesAction::Era {
            day,
            schemes_dir,
            json,
        } => {
            let registry = Registry::load(schemes_dir.as_deref())?;
            era(&registry, day, json)
        }
        SchemesAction::Check {
            names,
            runtime,
            schemes_dir,
            json,
        } => {
            let registry = Registry::load(schemes_dir.as_deref())?;
            engine::clean::before_creating_namespaces("pantheon schemes check")?;
            let work = tempfile::Builder::new()
                .prefix("pantheon-check-")
                .tempdir()
                .context("create a scratch directory")?;
            let tag = format!("ptc-{}", std::process::id());
            let verdicts = engine::check::check(
                &registry,
                &names,
                seconds(runtime, "--runtime", MAX_RUNTIME)?,
                work.path(),
                &tag,
            )?;
            if json {
                println!("{}", serde_json::to_string_pretty(&verdicts)?);
            }
            let rows = verdicts.iter().map(|v| (&*v.scheme, v.ok, &*v.detail));
            Ok(verdict_lines(rows, !json))
        }
    }
}

/// `; Pantheon's copa (not reproduced: see copa_orig)` and the like: what `schemes list` says of
/// a scheme that stands for one of Pantheon's ([`engine::provenance`]).
fn as_pantheon(s: &Scheme) -> String {
    let Some(p) = &s.pantheon else {
        return String::new();
    };
    format!(
        "; Pantheon's {} ({}, {} deviation(s), wrapper {} at {})",
        p.scheme,
        fidelity_phrase(p),
        p.deviations.len(),
        p.wrapper,
        &p.commit[..7]
    )
}

/// `its program`, `reimplemented`, `NOT reproduced: see copa_orig`.
fn fidelity_phrase(p: &engine::provenance::Provenance) -> String {
    use engine::provenance::Fidelity;
    match (p.fidelity, &p.instead) {
        (Fidelity::Original, _) => "its program".to_owned(),
        (Fidelity::Reimplemented, _) => "reimplemented".to_owned(),
        (Fidelity::NotReproduced, Some(i)) => format!("NOT reproduced: see {i}"),
        (Fidelity::NotReproduced, None) => "NOT reproduced".to_owned(),
    }
}

/// `pantheon schemes era DAY`: each of Pantheon's scheme names, and the scheme here that runs it
/// as Pantheon did that day (or why none does).
fn era(registry: &Registry, day: engine::provenance::Day, json: bool) -> anyhow::Result<ExitCode> {
    let mut rows = Vec::new();
    if !json {
        println!("Pantheon's schemes as Pantheon ran them on {day}:");
    }
    for name in engine::provenance::PANTHEON_SCHEMES {
        let found = registry.as_pantheon_ran(name, day);
        if json {
            rows.push(match &found {
                Ok(s) => serde_json::json!({"pantheon": name, "scheme": s.name,
                    "pantheon_table": s.pantheon}),
                Err(e) => serde_json::json!({"pantheon": name, "scheme": null,
                    "reason": e.to_string()}),
            });
            continue;
        }
        match found {
            Ok(s) => {
                let p = s
                    .pantheon
                    .as_ref()
                    .expect("resolved through its [pantheon] table");
                println!(
                    "  {name:<17} → {:<16} ({}; era {})",
                    s.name,
                    fidelity_phrase(p),
                    p.era
                );
            }
            Err(engine::schemes::RegistryError::NoEra { eras, .. }) => {
                println!("  {name:<17} → none ({eras})")
            }
            Err(e) => println!("  {name:<17} → none: {e}"),
        }
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
    }
    Ok(ExitCode::SUCCESS)
}

/// `pantheon schemes list`: one line per scheme, runnable or why not, and its notes.
fn list(schemes: &[&Scheme], json: bool) -> anyhow::Result<ExitCode> {
    let sys = SystemInfo::probe();
    let mirror = engine::source::mirror_dir();
    // Whether the network reaches the source schemes' repositories: asked once, and only when
    // one of them is unbuilt and not in a mirror.
    let mut network: Option<bool> = None;
    let mut rows = Vec::new();
    for &s in schemes {
        let mut why = s.unavailable_reason(&sys);
        if let (Some(w), Some(src)) = (&mut why, &s.source) {
            let mirrored = mirror.as_deref().and_then(|d| src.find_mirror(d)).is_some();
            if !src.is_built(&engine::schemes::tools_dir()) && !mirrored {
                let host = src.host();
                if !*network.get_or_insert_with(|| engine::source::network_reaches(host)) {
                    *w = src.unreachable_reason(&s.name, host);
                }
            }
        }
        if json {
            rows.push(serde_json::json!({"name": s.name, "label": s.label,
                "runnable": why.is_none(), "reason": why, "notes": s.notes(&sys),
                "source": s.source, "pantheon": s.pantheon}));
        } else {
            match &why {
                None => println!("{:<16} {:<13} runnable{}", s.name, s.label, as_pantheon(s)),
                Some(w) => println!(
                    "{:<16} {:<13} NOT runnable: {w}{}",
                    s.name,
                    s.label,
                    as_pantheon(s)
                ),
            }
            for n in s.notes(&sys) {
                println!("{:<30}  note: {n}", "");
            }
        }
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
    }
    Ok(ExitCode::SUCCESS)
}

/// Prints (when `print`) one `NAME  ok|FAILED  DETAIL` line per scheme, for `schemes check`
/// and `schemes setup`; exit status 1 if any failed.
fn verdict_lines<'a>(
    rows: impl Iterator<Item = (&'a str, bool, &'a str)>,
    print: bool,
) -> ExitCode {
    let mut all_ok = true;
    for (scheme, ok, detail) in rows {
        all_ok &= ok;
        if print {
            let status = if ok { "ok    " } else { "FAILED" };
            println!("{scheme:<16} {status} {detail}");
        }
    }
    if all_ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
