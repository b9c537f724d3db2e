//! The crate boundaries the architecture promises (`docs/architecture.md`): the experiment
//! engine and everything below it build without the testbed's network stack. Read from Cargo's
//! own dependency graph (`cargo tree`, offline: it needs the lock file, not the network).

use std::process::Command;

/// The testbed's dependencies: gRPC, the archive's SQLite, the web server, ssh.
const TESTBED_ONLY: &[&str] = &["tonic", "rusqlite", "axum", "ssh2"];

/// The names of the crates `package` depends on (normal dependencies, transitively).
fn dependencies(package: &str) -> Vec<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "tree",
            "--offline",
            "--locked",
            "-e",
            "normal",
            "--prefix",
            "none",
        ])
        .args(["-p", package])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run cargo tree");
    assert!(
        out.status.success(),
        "cargo tree -p {package}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .collect()
}

#[test]
fn only_the_testbed_crate_depends_on_grpc_sqlite_web_and_ssh() {
    for package in [
        "pantheon-sweep",
        "pantheon-engine",
        "pantheon-workload",
        "pantheon-sim",
        "pantheon-indigo",
        "pantheon-analyzer",
        "pantheon-emucal",
        "pantheon-tunnel",
        "pantheon-netns",
    ] {
        let deps = dependencies(package);
        assert!(deps.len() > 1, "{package}: {deps:?}");
        let bad: Vec<&String> = deps
            .iter()
            .filter(|d| TESTBED_ONLY.contains(&d.as_str()))
            .collect();
        assert!(bad.is_empty(), "{package} depends on {bad:?}");
    }
    // The check can fail: the testbed crate does have them.
    let testbed = dependencies("pantheon-orchestrator");
    for d in TESTBED_ONLY {
        assert!(
            testbed.iter().any(|t| t == d),
            "pantheon-orchestrator: no {d}"
        );
    }
}

#[test]
fn the_workload_program_leaves_the_analysis_out() {
    // `pantheon-tcp` draws schedules and writes records; the metrics (and Polars, most of the
    // build) are the analysis's, behind the workload crate's `metrics` feature.
    let deps = dependencies("pantheon-scheme-tcp");
    assert!(deps.iter().any(|d| d == "pantheon-workload"), "{deps:?}");
    for heavy in ["polars", "pantheon-analyzer", "pantheon-tunnel"] {
        assert!(
            !deps.iter().any(|d| d == heavy),
            "pantheon-scheme-tcp depends on {heavy}"
        );
    }
}

#[test]
fn the_ml_crate_stays_in_the_learned_controller_crate() {
    // Indigo's candle is its own crate's: the simulator it trains on, the emulator and the
    // tunnel build without it.
    let indigo = dependencies("pantheon-indigo");
    assert!(indigo.iter().any(|d| d == "candle-core"), "{indigo:?}");
    for package in ["pantheon-sim", "pantheon-emucal", "pantheon-tunnel"] {
        let deps = dependencies(package);
        assert!(
            !deps.iter().any(|d| d.starts_with("candle")),
            "{package} depends on candle"
        );
    }
}
