//! The crate boundaries the architecture promises (`docs/architecture.md`): the experiment
//! engine and everything below it build without the testbed's network stack. Read from Cargo's
//! own dependency graph (`cargo tree`, offline: it needs the lock file, not the network).

use std::process::Command;

/// The testbed's dependencies: gRPC, the archive's SQLite, the web server, ssh.
const TESTBED_ONLY: &[&str] = &["tonic", "rusqlite", "axum", "ssh2"];

/// The names of the crates `package` depends on (normal dependencies, transitively), with its
/// default features.
fn dependencies(package: &str) -> Vec<String> {
    dependencies_with(package, &[])
}

/// The names of the crates `package` depends on with `cargo tree`'s extra arguments `extra`
/// (features; `--depth 1` for direct ones only), normal and build dependencies (what a build
/// compiles), transitively.
fn dependencies_with(package: &str, extra: &[&str]) -> Vec<String> {
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
        .args(extra)
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
    // Indigo at decision time — the `indigo` schemes' program (pantheon-quinn) and simulated
    // Indigo in the engine — reads its model without candle (pantheon-indigo-controller).
    for package in [
        "pantheon-sim",
        "pantheon-emucal",
        "pantheon-tunnel",
        "pantheon-indigo-controller",
        "pantheon-scheme-quinn",
    ] {
        let deps = dependencies(package);
        assert!(
            !deps
                .iter()
                .any(|d| d.starts_with("candle") || d == "pantheon-indigo"),
            "{package} depends on candle"
        );
    }
    let engine = dependencies_with("pantheon-engine", &["--features", "indigo"]);
    assert_links(
        "the engine with simulated Indigo",
        &engine,
        &["candle-core", "candle-nn", "pantheon-indigo"],
        &["pantheon-indigo-controller", "quinn-proto"],
    );
    let quinn = dependencies("pantheon-scheme-quinn");
    assert!(
        quinn.iter().any(|d| d == "pantheon-indigo-controller"),
        "{quinn:?}"
    );
}

/// Asserts that `deps` (of `what`) has none of `heavy` and every one of `needed` (so that the
/// check can fail: the graph was read).
fn assert_links(what: &str, deps: &[String], heavy: &[&str], needed: &[&str]) {
    let bad: Vec<&&str> = heavy
        .iter()
        .filter(|h| deps.iter().any(|d| d == *h))
        .collect();
    assert!(bad.is_empty(), "{what} links {bad:?}");
    for n in needed {
        assert!(deps.iter().any(|d| d == n), "{what}: no {n} in {deps:?}");
    }
}

/// What the main job's `pantheon` must not build: Indigo's ML (candle), the calibration's
/// Bayesian search (egobox), the testbed's gRPC/SQLite/web/ssh, and Polars' query engine and
/// Parquet.
const NOT_IN_THE_MAIN_JOB: &[&str] = &[
    "candle-core",
    "egobox-ego",
    "ndarray",
    "tonic",
    "rusqlite",
    "axum",
    "ssh2",
    "pantheon-orchestrator",
    "pantheon-indigo",
    "pantheon-sweep",
    "polars-lazy",
    "polars-stream",
    "polars-parquet",
    "object_store",
];

#[test]
fn the_main_jobs_pantheon_builds_only_what_local_experiments_need() {
    // scripts/setup.sh's build_and_install_main_job: `pantheon` without default features.
    let deps = dependencies_with("pantheon-cli", &["--no-default-features", "-e", "build"]);
    assert_links(
        "pantheon-cli --no-default-features",
        &deps,
        NOT_IN_THE_MAIN_JOB,
        &[
            "pantheon-engine",
            "pantheon-analyzer",
            "polars",
            "pantheon-sim",
        ],
    );
    // With its default features it has them all (the check reads the features).
    let full = dependencies("pantheon-cli");
    for d in [
        "candle-core",
        "egobox-ego",
        "tonic",
        "rusqlite",
        "polars-parquet",
    ] {
        assert!(full.iter().any(|f| f == d), "pantheon-cli: no {d}");
    }
}

#[test]
fn the_emulators_core_and_the_simulator_link_no_runtime_or_search() {
    // emucal without features is its sans-IO core; the TUN runtime and the Bayesian search are
    // its features `runtime` and `search`.
    let heavy = ["egobox-ego", "ndarray", "tun-rs", "pantheon-netns"];
    for package in ["pantheon-emucal", "pantheon-sim"] {
        assert_links(package, &dependencies(package), &heavy, &["rand"]);
    }
    // The tunnel's library without features is its sans-IO core; its program (clap, ctrlc) and
    // TUN relay are features: what reads logs links neither.
    let io = ["tun-rs", "pantheon-netns", "clap", "ctrlc"];
    let core = dependencies_with("pantheon-tunnel", &["--no-default-features"]);
    assert_links(
        "pantheon-tunnel --no-default-features",
        &core,
        &io,
        &["libc"],
    );
    for package in ["pantheon-analyzer", "pantheon-sim"] {
        assert_links(package, &dependencies(package), &io, &["pantheon-tunnel"]);
    }
    let runtime = dependencies_with("pantheon-emucal", &["--features", "runtime"]);
    assert_links("emucal/runtime", &runtime, &["egobox-ego"], &["tun-rs"]);
    let search = dependencies_with("pantheon-emucal", &["--features", "search"]);
    assert_links("emucal/search", &search, &["tun-rs"], &["egobox-ego"]);
}

#[test]
fn the_analysis_uses_eager_polars_and_parquet_only_for_tables() {
    // Polars' query engine was half of its build; the metrics use eager frames.
    let lazy = [
        "polars-lazy",
        "polars-stream",
        "polars-plan",
        "object_store",
    ];
    let analyzer = dependencies("pantheon-analyzer");
    assert_links("pantheon-analyzer", &analyzer, &lazy, &["polars-core"]);
    assert_links(
        "pantheon-analyzer",
        &analyzer,
        &["polars-parquet"],
        &["plotters"],
    );
    let table = dependencies_with("pantheon-analyzer", &["--features", "table"]);
    assert_links("analyzer/table", &table, &lazy, &["polars-parquet"]);
}

/// Every library and program source file of the workspace (`crates/*/src/**.rs`), as (path
/// relative to the workspace, its code): the text before its unit tests (`#[cfg(test)] mod`),
/// comment lines left out.
fn sources() -> Vec<(String, String)> {
    fn walk(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for e in std::fs::read_dir(dir).expect("read a source directory") {
            let path = e.expect("a directory entry").path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|x| x == "rs") {
                out.push(path);
            }
        }
    }
    // The tests are `pantheon-cli`'s (crates/cli): the workspace is two levels up.
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("the workspace");
    let mut files = Vec::new();
    for krate in std::fs::read_dir(root.join("crates")).expect("read crates/") {
        let src = krate.expect("a crate").path().join("src");
        if src.is_dir() {
            walk(&src, &mut files);
        }
    }
    files.sort();
    files
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path).expect("read a source file");
            let lines: Vec<&str> = text.lines().collect();
            let tests = lines
                .windows(2)
                .position(|w| {
                    w[0].trim() == "#[cfg(test)]" && w[1].trim_start().starts_with("mod ")
                })
                .unwrap_or(lines.len());
            let code: String = lines[..tests]
                .iter()
                .filter(|l| !l.trim_start().starts_with("//"))
                .map(|l| format!("{l}\n"))
                .collect();
            let rel = path.strip_prefix(root).unwrap_or(&path);
            (rel.display().to_string(), code)
        })
        .collect()
}

#[test]
fn the_perf_file_is_read_and_written_only_through_its_type() {
    // `analyzer::perf::Perf` is the one writer and reader of `pantheon_perf.json`; elsewhere
    // nobody names the file or reads it as untyped JSON.
    let sources = sources();
    let (inside, outside): (Vec<_>, Vec<_>) = sources
        .iter()
        .partition(|(path, _)| path.starts_with("crates/analyzer/"));
    assert!(
        inside
            .iter()
            .any(|(p, code)| p.ends_with("perf.rs") && code.contains("\"pantheon_perf.json\"")),
        "analyzer/src/perf.rs no longer names the file"
    );
    let naming: Vec<&String> = outside
        .iter()
        .filter(|(_, code)| code.contains("pantheon_perf"))
        .map(|(p, _)| p)
        .collect();
    assert!(naming.is_empty(), "pantheon_perf.json named in {naming:?}");
    let untyped: Vec<&String> = outside
        .iter()
        .filter(|(_, code)| code.contains("PERF_FILE") && code.contains("Value"))
        .map(|(p, _)| p)
        .collect();
    assert!(
        untyped.is_empty(),
        "the perf file read as serde_json::Value in {untyped:?}"
    );
}

#[test]
fn libraries_do_not_own_the_process() {
    // Signal handlers, exiting and printing are the programs' (crates/cli, every src/bin/);
    // libraries return errors (engine::rootless::RanRootless for a command that ran again
    // rootless) and report warnings and progress through `tracing`, which the programs print.
    let owning = [
        "eprintln!",
        "println!",
        "print!(",
        "eprint!(",
        "process::exit",
        "ctrlc::",
        // Progress bars: a library reports progress through a trait the program implements
        // (engine::experiment::Events, sweep::exec::Progress).
        "indicatif::",
    ];
    let sources = sources();
    let libraries: Vec<&(String, String)> = sources
        .iter()
        .filter(|(p, _)| !p.starts_with("crates/cli/") && !p.contains("/src/bin/"))
        .collect();
    assert!(
        libraries
            .iter()
            .any(|(p, _)| p == "crates/engine/src/runner.rs"),
        "the engine's sources were not read"
    );
    let bad: Vec<String> = libraries
        .iter()
        .flat_map(|(p, code)| {
            owning
                .iter()
                .filter(|o| code.contains(*o))
                .map(move |o| format!("{p}: {o}"))
        })
        .collect();
    assert!(bad.is_empty(), "libraries owning the process: {bad:?}");
}

#[test]
fn the_servers_are_built_in_the_orchestrator() {
    // `pantheon serve` and `pantheon-agent` are programs over orchestrator::testbed::server
    // and orchestrator::agent::server: the CLI parses flags and installs the signal handler,
    // and depends on no server crate itself.
    let direct = dependencies_with("pantheon-cli", &["--depth", "1"]);
    assert_links(
        "pantheon-cli (its own dependencies)",
        &direct,
        &["tonic", "axum", "tokio", "tokio-stream"],
        &["pantheon-orchestrator", "clap"],
    );
    let sources = sources();
    let bad: Vec<&String> = sources
        .iter()
        .filter(|(p, code)| {
            p.starts_with("crates/cli/")
                && ["tonic::", "axum::", "tokio::"]
                    .iter()
                    .any(|w| code.contains(w))
        })
        .map(|(p, _)| p)
        .collect();
    assert!(bad.is_empty(), "servers built in the CLI: {bad:?}");
}

#[test]
fn every_experiment_is_run_by_the_one_driver() {
    // Whoever starts an experiment (`pantheon run local|remote|sim`, a sweep's point, the
    // daemon, a calibration's evaluation), its runs are run and recorded by
    // engine::experiment::run_all: no second runs × schemes loop records runs, and no
    // experiment re-enters through a command line parsed again (a sweep point's argv).
    let sources = sources();
    let driver = "crates/engine/src/experiment.rs";
    let code = |path: &str| {
        sources
            .iter()
            .find(|(p, _)| p == path)
            .map(|(_, c)| c.as_str())
            .unwrap_or_else(|| panic!("{path} was not read"))
    };
    assert!(code(driver).contains(".append_to(&plan.data_dir)"));
    for caller in [
        "crates/cli/src/commands/run.rs",
        "crates/sweep/src/point.rs",
        "crates/orchestrator/src/testbed/daemon.rs",
        "crates/orchestrator/src/remote.rs",
        "crates/engine/src/calibrate.rs",
    ] {
        assert!(
            code(caller).contains("experiment::"),
            "{caller} does not call engine::experiment"
        );
    }
    let bad: Vec<String> = sources
        .iter()
        .filter(|(p, _)| p != driver && p != "crates/engine/src/record.rs")
        .flat_map(|(p, code)| {
            [".append_to(", "try_parse_from", "analyze_dir("]
                .into_iter()
                .filter(move |w| code.contains(w))
                .filter(move |w| !(*w == "analyze_dir(" && p == "crates/engine/src/analyze.rs"))
                .map(move |w| format!("{p}: {w}"))
        })
        .collect();
    assert!(
        bad.is_empty(),
        "experiments run outside engine::experiment: {bad:?}"
    );
}

/// The module graph of each crate: top-level module (`src/<m>.rs` or `src/<m>/…`) → the
/// top-level modules its code names as `crate::<m>`, by crate directory.
fn module_graphs() -> std::collections::BTreeMap<String, ModuleGraph> {
    let mut graphs: std::collections::BTreeMap<String, ModuleGraph> = Default::default();
    for (path, code) in sources() {
        let mut parts = path.split('/');
        let (Some("crates"), Some(krate), Some("src"), Some(first)) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let module = first.trim_end_matches(".rs");
        if ["lib", "main", "bin"].contains(&module) {
            continue;
        }
        let uses = graphs
            .entry(krate.to_owned())
            .or_default()
            .entry(module.to_owned())
            .or_default();
        for (i, _) in code.match_indices("crate::") {
            // `crate::` itself, not the end of `my_crate::`.
            if code[..i].ends_with(|c: char| c.is_alphanumeric() || c == '_') {
                continue;
            }
            let rest = &code[i + "crate::".len()..];
            // `crate::{a::x, b}` names a and b; `crate::a::x` names a.
            let names: Vec<&str> = match rest.strip_prefix('{') {
                Some(list) => list[..list.find('}').unwrap_or(list.len())]
                    .split(',')
                    .map(|item| item.trim().split("::").next().unwrap_or(""))
                    .collect(),
                None => vec![rest],
            };
            for name in names {
                let name: String = name
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() && name != module {
                    uses.insert(name);
                }
            }
        }
    }
    graphs
}

type ModuleGraph = std::collections::BTreeMap<String, std::collections::BTreeSet<String>>;

/// A cycle of `graph` as the modules along it, if it has one.
fn cycle(graph: &ModuleGraph) -> Option<Vec<String>> {
    fn visit(
        graph: &ModuleGraph,
        m: &str,
        path: &mut Vec<String>,
        done: &mut std::collections::BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|p| p == m) {
            let mut c = path[at..].to_vec();
            c.push(m.to_owned());
            return Some(c);
        }
        if done.contains(m) {
            return None;
        }
        path.push(m.to_owned());
        for next in graph.get(m).into_iter().flatten() {
            if let Some(c) = visit(graph, next, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(m.to_owned());
        None
    }
    let mut done = Default::default();
    graph
        .keys()
        .find_map(|m| visit(graph, m, &mut Vec::new(), &mut done))
}

#[test]
fn no_crate_has_an_import_circle_between_its_modules() {
    let graphs = module_graphs();
    // The graph was read: the engine's runner runs simulated runs through the simulator.
    assert!(graphs["engine"]["runner"].contains("simulate"));
    // And a circle is found when there is one.
    let mut circular = graphs["engine"].clone();
    circular
        .entry("simulate".into())
        .or_default()
        .insert("runner".into());
    assert!(cycle(&circular).is_some());
    for (krate, graph) in &graphs {
        if let Some(c) = cycle(graph) {
            panic!("crates/{krate}: import circle {}", c.join(" → "));
        }
    }
}

/// Every function of library and program code (not tests), as `(file, function, lines)`. A
/// declaration without a body (a trait's) is not one. Braces inside string literals are
/// skipped; comment lines are already gone.
fn function_lengths() -> Vec<(String, String, usize)> {
    let mut out = Vec::new();
    for (path, code) in sources() {
        let lines: Vec<&str> = code.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let Some(at) = line
                .find("fn ")
                .filter(|&at| at == 0 || line[..at].ends_with(|c: char| c == ' ' || c == '('))
            else {
                continue;
            };
            let name: String = line[at + 3..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if name.is_empty() {
                continue;
            }
            if let Some(end) = body_end(&lines, i, at + 3) {
                out.push((path.clone(), name, end - i + 1));
            }
        }
    }
    out
}

/// The line where the body of the function declared on line `start` (from column `col`) ends;
/// `None` for a declaration without a body.
fn body_end(lines: &[&str], start: usize, col: usize) -> Option<usize> {
    let (mut depth, mut opened) = (0i32, false);
    for (j, line) in lines.iter().enumerate().skip(start) {
        let text = if j == start { &line[col..] } else { line };
        let (mut in_string, mut escaped) = (false, false);
        for c in text.chars() {
            if in_string {
                match (escaped, c) {
                    (true, _) => escaped = false,
                    (false, '\\') => escaped = true,
                    (false, '"') => in_string = false,
                    _ => {}
                }
                continue;
            }
            match c {
                '"' => in_string = true,
                ';' if !opened => return None,
                '{' => {
                    depth += 1;
                    opened = true;
                }
                '}' => {
                    depth -= 1;
                    if opened && depth == 0 {
                        return Some(j);
                    }
                }
                _ => {}
            }
        }
    }
    None
}

/// Lines a function may take, comment lines not counted (issue 48: "no non-test function over
/// ~100 lines").
const MAX_FUNCTION_LINES: usize = 100;

#[test]
fn no_function_is_over_a_hundred_lines() {
    let lengths = function_lengths();
    // The check reads functions: the local experiment's driver is found, with its length.
    assert!(
        lengths
            .iter()
            .any(|(p, f, n)| p == "crates/engine/src/experiment.rs" && f == "local" && *n > 40),
        "engine::experiment::local was not measured"
    );
    let long: Vec<String> = lengths
        .iter()
        .filter(|(_, _, n)| *n > MAX_FUNCTION_LINES)
        .map(|(p, f, n)| format!("{p}: {f} ({n} lines)"))
        .collect();
    assert!(
        long.is_empty(),
        "functions over {MAX_FUNCTION_LINES} lines: {long:?} (split them)"
    );
}
