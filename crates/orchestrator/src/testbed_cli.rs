//! `pantheon serve`, `submit`, `status` and `results`: the orchestrator daemon and the
//! commands that talk to it.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Subcommand};
use pantheon_orchestrator::agent::auth::{Credentials, TokenCheck};
use pantheon_orchestrator::schemes::Registry;
use pantheon_orchestrator::testbed::archive::{Archive, SqliteArchive};
use pantheon_orchestrator::testbed::config::TestbedConfig;
use pantheon_orchestrator::testbed::daemon::{log, Daemon};
use pantheon_orchestrator::testbed::service::{proto, DaemonClient, OrchestratorService};
use pantheon_orchestrator::testbed::web::{router, WebState};

/// `pantheon serve`'s flags.
#[derive(Args)]
pub struct ServeArgs {
    /// The testbed file (TOML): nodes, experiment matrix, schedule. See docs/testbed.md.
    testbed: PathBuf,
    /// The archive (SQLite file, created if missing).
    #[arg(long, default_value = "pantheon-archive.sqlite")]
    archive: PathBuf,
    /// Where each experiment's results directory goes (`DIR/<number>/`).
    #[arg(long, default_value = "archive")]
    results_dir: PathBuf,
    /// Address of the gRPC service for `pantheon submit|status|results` (TLS and token, with
    /// the testbed's credentials: its host must be in the certificate).
    #[arg(long, default_value = "127.0.0.1:7071")]
    listen: SocketAddr,
    /// Address of the web pages (plain HTTP, read-only).
    #[arg(long, default_value = "127.0.0.1:8080")]
    web: SocketAddr,
    /// Seconds between two scheduling steps.
    #[arg(long, default_value_t = 1.0)]
    tick: f64,
    /// Extra scheme descriptors (*.toml).
    #[arg(long)]
    schemes_dir: Option<PathBuf>,
}

/// How the CLI reaches the daemon.
#[derive(Args)]
pub struct DaemonArgs {
    /// The daemon's gRPC address, HOST[:PORT] (port 7071 by default).
    #[arg(long, default_value = "127.0.0.1")]
    daemon: String,
    /// Directory with the testbed's agent.pem and token (`pantheon node credentials`).
    #[arg(long, default_value = "credentials")]
    credentials: PathBuf,
}

impl DaemonArgs {
    fn client(&self) -> anyhow::Result<DaemonClient> {
        DaemonClient::new(&self.daemon, &Credentials::load(&self.credentials, false)?)
    }
}

/// `pantheon submit`'s flags.
#[derive(Args)]
pub struct SubmitArgs {
    /// The sending node (a name from the testbed file).
    sender: String,
    /// The receiving node.
    receiver: String,
    /// Schemes, space separated (default: the matrix's).
    #[arg(long)]
    schemes: Option<String>,
    /// Flows per run (default: the matrix's first).
    #[arg(short = 'f', long)]
    flows: Option<u16>,
    /// Runs per scheme (default: the matrix's for the pair's link type).
    #[arg(long)]
    run_times: Option<u32>,
    /// Seconds per run (default: the matrix's).
    #[arg(short = 't', long)]
    runtime: Option<f64>,
    /// Seconds between flows (default: the matrix's).
    #[arg(long)]
    interval: Option<f64>,
    #[command(flatten)]
    daemon: DaemonArgs,
}

/// `pantheon results …`.
#[derive(Subcommand)]
pub enum ResultsAction {
    /// Archived experiments, newest first.
    List {
        /// A node name, or SENDER→RECEIVER (or SENDER>RECEIVER) for one direction.
        #[arg(long)]
        path: Option<String>,
        /// Experiments that ran this scheme.
        #[arg(long)]
        scheme: Option<String>,
        /// Queued on or after this date (YYYY-MM-DD or an RFC 3339 time).
        #[arg(long)]
        since: Option<String>,
        /// Queued before this date.
        #[arg(long)]
        until: Option<String>,
        /// queued, running, done or failed.
        #[arg(long)]
        status: Option<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        daemon: DaemonArgs,
    },
    /// One experiment: its summary (mean throughput, p95 one-way delay, loss per scheme) and
    /// runs.
    Show {
        /// Its number.
        id: i64,
        /// Print JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        daemon: DaemonArgs,
    },
    /// Copy an experiment's results directory (report, plots, logs) here.
    Fetch {
        /// Its number.
        id: i64,
        /// Where (default: P<number>).
        #[arg(long)]
        out: Option<PathBuf>,
        #[command(flatten)]
        daemon: DaemonArgs,
    },
}

/// Runs the daemon until SIGINT/SIGTERM.
pub fn serve(a: ServeArgs) -> anyhow::Result<ExitCode> {
    let config = TestbedConfig::load(&a.testbed)?;
    let registry = Registry::load(a.schemes_dir.as_deref())?;
    for s in &config.matrix.schemes {
        registry
            .get(s)
            .with_context(|| format!("{}: [matrix] schemes", a.testbed.display()))?;
    }
    let tick = Duration::try_from_secs_f64(a.tick)
        .ok()
        .filter(|t| !t.is_zero())
        .context("--tick must be a positive number of seconds")?;
    let credentials = Credentials::load(&config.credentials, true)?;
    let archive: Arc<dyn Archive> = Arc::new(SqliteArchive::open(&a.archive)?);
    let daemon = Daemon::new(
        config,
        Arc::clone(&archive),
        registry,
        a.results_dir.clone(),
    )?;
    let interrupted = daemon.recover()?;
    if interrupted > 0 {
        log(&format!("{interrupted} interrupted run(s) will run again"));
    }
    {
        let d = Arc::clone(&daemon);
        ctrlc::set_handler(move || {
            log("stopping: the runs in progress end early and will run again at the next start");
            d.shutdown();
        })
        .context("install the SIGINT/SIGTERM handler")?;
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("start the tokio runtime")?;
    let (grpc, web) = rt.block_on(async {
        let g = tokio::net::TcpListener::bind(a.listen)
            .await
            .with_context(|| format!("listen on {}", a.listen))?;
        let w = tokio::net::TcpListener::bind(a.web)
            .await
            .with_context(|| format!("listen on {}", a.web))?;
        anyhow::Ok((g, w))
    })?;
    log(&format!(
        "pantheon serve (version {}): {} nodes, archive {}, results in {}; gRPC on {}, web on \
         http://{}/",
        env!("CARGO_PKG_VERSION"),
        daemon.config().nodes.len(),
        a.archive.display(),
        a.results_dir.display(),
        grpc.local_addr()?,
        web.local_addr()?
    ));
    let tls =
        tonic::transport::ServerTlsConfig::new().identity(tonic::transport::Identity::from_pem(
            &credentials.cert_pem,
            credentials.key_pem.as_deref().expect("loaded with the key"),
        ));
    let server = tonic::transport::Server::builder()
        .tls_config(tls)
        .context("TLS configuration")?
        .add_service(
            proto::orchestrator_server::OrchestratorServer::with_interceptor(
                OrchestratorService::new(Arc::clone(&daemon)),
                TokenCheck::new(&credentials),
            ),
        );
    rt.spawn(async move {
        if let Err(e) = server
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(grpc))
            .await
        {
            log(&format!("gRPC service: {e}"));
        }
    });
    let pages = router(WebState {
        archive,
        scratch: a.results_dir.join(".history"),
    });
    rt.spawn(async move {
        if let Err(e) = axum::serve(web, pages).await {
            log(&format!("web pages: {e}"));
        }
    });
    daemon.run(tick);
    rt.shutdown_timeout(Duration::from_secs(1));
    log("stopped");
    Ok(ExitCode::SUCCESS)
}

/// `pantheon submit`.
pub fn submit(a: SubmitArgs) -> anyhow::Result<ExitCode> {
    let id = a.daemon.client()?.submit(proto::SubmitRequest {
        sender: a.sender,
        receiver: a.receiver,
        schemes: a
            .schemes
            .map(|s| s.split_whitespace().map(str::to_owned).collect())
            .unwrap_or_default(),
        flows: a.flows.map_or(0, u32::from),
        run_times: a.run_times.unwrap_or(0),
        runtime_s: a.runtime.unwrap_or(0.0),
        interval_s: a.interval.unwrap_or(-1.0),
    })?;
    println!("queued experiment P{id}");
    Ok(ExitCode::SUCCESS)
}

fn row(e: &proto::Experiment) -> String {
    format!(
        "P{:<5} {:>10} → {:<10} {:>8} {:>2} flow(s) {:>3} run(s)  {:<8} {}  {}",
        e.id,
        e.sender,
        e.receiver,
        e.link,
        e.flows,
        e.run_times,
        e.status,
        e.queued_at,
        e.schemes.join(" ")
    )
}

/// Prints `v` as indented JSON on stdout.
fn print_json(v: &impl serde::Serialize) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(v)?);
    Ok(())
}

/// `pantheon status`.
pub fn status(d: DaemonArgs, json: bool) -> anyhow::Result<ExitCode> {
    let s = d.client()?.status()?;
    if json {
        print_json(&s)?;
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "nodes: {} (busy: {})",
        s.nodes.join(", "),
        if s.busy_nodes.is_empty() {
            "none".to_owned()
        } else {
            s.busy_nodes.join(", ")
        }
    );
    if s.last_tournament > 0 {
        println!(
            "last tournament: {} started {}",
            s.last_tournament, s.last_tournament_at
        );
    }
    println!("running: {}", s.running.len());
    for e in &s.running {
        println!("  {}", row(e));
    }
    println!("queued: {}", s.queued.len());
    for e in &s.queued {
        println!("  {}", row(e));
    }
    Ok(ExitCode::SUCCESS)
}

/// `pantheon results …`.
pub fn results(action: ResultsAction) -> anyhow::Result<ExitCode> {
    match action {
        ResultsAction::List {
            path,
            scheme,
            since,
            until,
            status,
            json,
            daemon,
        } => {
            let rows = daemon.client()?.list(proto::ListRequest {
                path: path.unwrap_or_default(),
                scheme: scheme.unwrap_or_default(),
                since: since.unwrap_or_default(),
                until: until.unwrap_or_default(),
                status: status.unwrap_or_default(),
            })?;
            if json {
                print_json(&rows)?;
            } else {
                for e in &rows {
                    println!("{}", row(e));
                }
                eprintln!("{} experiment(s)", rows.len());
            }
        }
        ResultsAction::Show { id, json, daemon } => {
            let r = daemon.client()?.show(id)?;
            if json {
                print_json(&r)?;
                return Ok(ExitCode::SUCCESS);
            }
            let e = r.experiment.unwrap_or_default();
            println!("{}", row(&e));
            if !e.error.is_empty() {
                println!("error: {}", e.error);
            }
            println!("results: {}", e.result_dir);
            if !r.summary.is_empty() {
                println!(
                    "\n{:<12} {:>4} {:>22} {:>26} {:>14}",
                    "scheme", "runs", "mean tput (Mbit/s)", "mean p95 delay (ms)", "mean loss (%)"
                );
                for s in &r.summary {
                    println!(
                        "{:<12} {:>4} {:>22.2} {:>26.2} {:>14.2}",
                        s.scheme,
                        s.runs,
                        s.tput_mbps,
                        s.delay_ms,
                        s.loss * 100.0
                    );
                }
            }
            println!();
            for x in &r.runs {
                let metrics = if x.analysed {
                    format!(
                        "{:.2} Mbit/s, {:.2} ms, {:.2} % loss",
                        x.tput_mbps,
                        x.delay_ms,
                        x.loss * 100.0
                    )
                } else {
                    String::new()
                };
                let reason = if x.reason.is_empty() {
                    String::new()
                } else {
                    format!(": {}", x.reason)
                };
                println!("{} run {}: {}{reason} {metrics}", x.scheme, x.run, x.status);
            }
        }
        ResultsAction::Fetch { id, out, daemon } => {
            let dir = out.unwrap_or_else(|| PathBuf::from(format!("P{id}")));
            let names = daemon.client()?.fetch(id, &dir)?;
            eprintln!("{} file(s) → {}", names.len(), dir.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}
