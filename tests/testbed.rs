//! The orchestrator daemon end to end (issue 9): `pantheon serve` schedules a testbed file's
//! matrix over agents in network namespaces, archives and publishes every experiment, survives
//! `kill -9`, and its pages render in headless Chromium.
//!
//! ```text
//!   node 1 10.79.1.2 ─┐
//!   node 2 10.79.2.2 ─┼─ hub namespace (routes between the nodes; runs `pantheon serve`,
//!   node 3 10.79.3.2 ─┘   gRPC 127.0.0.1:7071, web 127.0.0.1:8080, and the CLI)
//! ```
//! Needs root, iproute2, nsenter, iperf3 and (for the browser test) Debian's `chromium`; every
//! namespace, process and file is removed on every exit path (`Drop`). One test at a time.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use netns::NetNs;
use serde_json::Value;

mod common;
use common::{text, Agent};

static SERIAL: Mutex<()> = Mutex::new(());

/// The nodes, the hub, the daemon.
struct Bed {
    dir: PathBuf,
    tag: String,
    daemon: Option<Child>,
    agents: Vec<Agent>,
    /// Hub first. Dropped last: removing a namespace also removes its devices.
    namespaces: Vec<NetNs>,
}

impl Drop for Bed {
    fn drop(&mut self) {
        self.stop_daemon();
        self.agents.clear();
        self.namespaces.clear();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Bed {
    /// `nodes` nodes (agents running), the hub, credentials for all.
    fn new(test: &str, nodes: usize) -> Bed {
        let tag = format!("t{}{test}", std::process::id() % 100_000);
        let dir = std::env::temp_dir().join(format!("pantheon-testbed-{tag}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut bed = Bed {
            dir,
            tag: tag.clone(),
            daemon: None,
            agents: Vec::new(),
            namespaces: vec![NetNs::create(&format!("{tag}-h")).expect("hub namespace")],
        };
        bed.namespaces[0]
            .run_in(|| std::fs::write("/proc/sys/net/ipv4/ip_forward", "1"))
            .unwrap()
            .expect("forwarding in the hub");
        let mut hosts = Vec::new();
        for k in 1..=nodes {
            let ns = NetNs::create(&format!("{tag}-{k}")).expect("node namespace");
            let hub = &bed.namespaces[0];
            hub.ip(&[
                "link",
                "add",
                &format!("n{k}"),
                "type",
                "veth",
                "peer",
                "name",
                "eth0",
                "netns",
                ns.name(),
            ])
            .unwrap();
            hub.ip(&[
                "addr",
                "add",
                &format!("10.79.{k}.1/24"),
                "dev",
                &format!("n{k}"),
            ])
            .unwrap();
            hub.ip(&["link", "set", &format!("n{k}"), "up"]).unwrap();
            ns.ip(&["addr", "add", &format!("10.79.{k}.2/24"), "dev", "eth0"])
                .unwrap();
            ns.ip(&["link", "set", "eth0", "up"]).unwrap();
            ns.ip(&["route", "add", "default", "via", &format!("10.79.{k}.1")])
                .unwrap();
            hosts.push(format!("10.79.{k}.2"));
            bed.namespaces.push(ns);
        }
        let mut args = vec!["node", "credentials", "--out"];
        let creds = bed.dir.join("creds");
        args.push(creds.to_str().unwrap());
        for h in &hosts {
            args.extend(["--host", h]);
        }
        let out = bed.pantheon(&args);
        assert!(out.status.success(), "{}", text(&out));
        for k in 1..=nodes {
            let ns = bed.namespaces[k].name().to_owned();
            bed.agents.push(Agent::start(&ns, &bed.node(k), &bed.dir));
        }
        bed
    }

    /// Node `k`'s name (its agent's too).
    fn node(&self, k: usize) -> String {
        format!("{}n{k}", self.tag)
    }

    /// Writes the testbed file: every node, then `matrix` (TOML of `[matrix]` and
    /// `[schedule]`).
    fn testbed_file(&self, matrix: &str) -> PathBuf {
        let mut t = String::from("credentials = \"creds\"\ncall_timeout = 30\n");
        for k in 1..=self.agents.len() {
            t.push_str(&format!(
                "[[node]]\nname = \"{}\"\nagent = \"10.79.{k}.2:7070\"\ndescription = \"node {k}\"\n",
                self.node(k)
            ));
        }
        t.push_str(matrix);
        let p = self.dir.join("testbed.toml");
        std::fs::write(&p, t).unwrap();
        p
    }

    /// Starts `pantheon serve` in the hub (its log appends to `daemon.log`); returns once its
    /// services listen.
    fn start_daemon(&mut self) {
        let log = self.dir.join("daemon.log");
        let (out, from) = common::append_log(&log);
        let child = Command::new("nsenter")
            .arg(format!("--net=/run/netns/{}", self.namespaces[0].name()))
            .arg(env!("CARGO_BIN_EXE_pantheon"))
            .arg("serve")
            .arg(self.dir.join("testbed.toml"))
            .arg("--archive")
            .arg(self.dir.join("archive.sqlite"))
            .arg("--results-dir")
            .arg(self.dir.join("archive"))
            .args(["--tick", "0.2"])
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .expect("start pantheon serve");
        self.daemon = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let text = self.daemon_log();
            if text
                .get(from..)
                .unwrap_or_default()
                .contains("web on http://")
            {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the daemon did not start: {text}"
            );
            if let Some(Ok(Some(status))) = self.daemon.as_mut().map(|c| c.try_wait()) {
                panic!("the daemon ended ({status}): {text}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn daemon_log(&self) -> String {
        std::fs::read_to_string(self.dir.join("daemon.log")).unwrap_or_default()
    }

    /// SIGKILL: no chance to clean up (kill -9).
    fn kill_daemon(&mut self) {
        if let Some(mut c) = self.daemon.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGTERM, then SIGKILL after 30 s.
    fn stop_daemon(&mut self) {
        let Some(mut c) = self.daemon.take() else {
            return;
        };
        if let Ok(None) = c.try_wait() {
            // SAFETY: plain syscall on our own, still running child.
            unsafe {
                libc::kill(c.id() as i32, libc::SIGTERM);
            }
            let deadline = Instant::now() + Duration::from_secs(30);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = c.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        let _ = c.kill();
        let _ = c.wait();
    }

    /// The `pantheon` CLI in the hub (with the testbed's credentials where it takes them).
    fn pantheon(&self, args: &[&str]) -> Output {
        let mut cmd = Command::new("nsenter");
        cmd.arg(format!("--net=/run/netns/{}", self.namespaces[0].name()))
            .arg(env!("CARGO_BIN_EXE_pantheon"))
            .args(args);
        if matches!(args[0], "results" | "status" | "submit") {
            cmd.arg("--credentials").arg(self.dir.join("creds"));
        }
        cmd.output().expect("run pantheon")
    }

    fn json(&self, args: &[&str]) -> Value {
        let out = self.pantheon(args);
        assert!(out.status.success(), "{args:?}: {}", text(&out));
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out)))
    }

    /// Polls `pantheon results show ID --json` until `done(reply)`, at most `secs`.
    fn wait_for(&self, id: i64, secs: u64, what: &str, done: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            let out = self.pantheon(&["results", "show", &id.to_string(), "--json"]);
            if out.status.success() {
                let v: Value = serde_json::from_slice(&out.stdout).unwrap();
                if done(&v) {
                    return v;
                }
            }
            assert!(
                Instant::now() < deadline,
                "P{id}: {what} not within {secs} s: {}\n{}",
                text(&out),
                self.daemon_log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// GET `path` of the daemon's web pages (from inside the hub): (status, body).
    fn get(&self, path: &str) -> (u16, Vec<u8>) {
        let mut s = self.namespaces[0]
            .run_in(|| TcpStream::connect("127.0.0.1:8080"))
            .unwrap()
            .expect("connect to the web pages");
        write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").unwrap();
        let mut raw = Vec::new();
        s.read_to_end(&mut raw).unwrap();
        let head_end = raw
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .expect("an HTTP response");
        let status = String::from_utf8_lossy(&raw[..head_end])
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        (status, raw[head_end + 4..].to_vec())
    }

    fn page(&self, path: &str) -> String {
        let (status, body) = self.get(path);
        let body = String::from_utf8_lossy(&body).into_owned();
        assert_eq!(status, 200, "GET {path}: {body}");
        body
    }
}

const DONE: fn(&Value) -> bool = |v| v["experiment"]["status"] == "done";

#[test]
fn a_three_node_testbed_runs_its_matrix_unattended_and_publishes_every_experiment() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut bed = Bed::new("m", 3);
    bed.testbed_file(
        "[matrix]\nschemes = [\"cubic\"]\nflows = [1]\nruntime = 3\ninterval = 0\n\
         runs = { wired = 1 }\nboth_directions = false\nrandom_order = false\n\
         [schedule]\nevery = 3600\n",
    );
    bed.start_daemon();
    // One tournament: three pairs, one direction, one flow count → P1, P2, P3.
    let shown: Vec<Value> = (1..=3)
        .map(|id| bed.wait_for(id, 240, "done", DONE))
        .collect();
    let list = bed.json(&["results", "list", "--json"]);
    let list = list.as_array().unwrap();
    assert_eq!(list.len(), 3, "{list:?}");
    let mut pairs: Vec<[String; 2]> = Vec::new();
    for v in &shown {
        let e = &v["experiment"];
        let mut pair = [
            e["sender"].as_str().unwrap().to_owned(),
            e["receiver"].as_str().unwrap().to_owned(),
        ];
        pair.sort();
        pairs.push(pair);
        assert_eq!(e["tournament"], 1, "{e}");
        assert_eq!(e["attempts"], 1, "{e}");
        // Analysed: a summary row, and each run's metrics.
        let s = &v["summary"][0];
        assert_eq!(s["scheme"], "cubic", "{v}");
        assert!(s["tput_mbps"].as_f64().unwrap() > 1.0, "{v}");
        assert!(s["delay_ms"].as_f64().unwrap() > 0.0, "{v}");
        let runs = v["runs"].as_array().unwrap();
        assert_eq!(runs.len(), 1, "{v}");
        assert!(
            runs[0]["status"] == "ok" && runs[0]["analysed"] == true,
            "{v}"
        );
        let dir = PathBuf::from(e["result_dir"].as_str().unwrap());
        for f in [
            "pantheon_report.pdf",
            "pantheon_report.html",
            "pantheon_summary.svg",
        ] {
            assert!(dir.join(f).is_file(), "{} has no {f}", dir.display());
        }
    }
    pairs.sort();
    let n = |k| bed.node(k);
    assert_eq!(
        pairs,
        vec![[n(1), n(2)], [n(1), n(3)], [n(2), n(3)]],
        "every pair once"
    );
    // No node in two experiments at once: with three nodes every two experiments share one,
    // so they ran one after the other.
    let mut spans: Vec<(String, String)> = shown
        .iter()
        .map(|v| {
            let e = &v["experiment"];
            (
                e["started_at"].as_str().unwrap().to_owned(),
                e["finished_at"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    spans.sort();
    for w in spans.windows(2) {
        assert!(w[0].1 <= w[1].0, "overlapping experiments: {spans:?}");
    }
    let status = bed.pantheon(&["status"]);
    let st = text(&status);
    assert!(
        st.contains("running: 0") && st.contains("queued: 0"),
        "{st}"
    );
    // The web pages: the list, one experiment with its report, a history.
    let index = bed.page("/");
    for id in 1..=3 {
        assert!(
            index.contains(&format!("href=\"/experiments/{id}\">P{id}</a>")),
            "{index}"
        );
    }
    assert_eq!(index.matches(">done<").count(), 3, "{index}");
    let filtered = bed.page(&format!("/?path={}%E2%86%92{}", n(1), n(2)));
    assert!(filtered.contains("1 experiment(s)"), "{filtered}");
    let page = bed.page("/experiments/1");
    for needle in [
        "id=\"summary\"",
        "<td>cubic</td>",
        "/experiments/1/files/pantheon_summary.svg",
        "/experiments/1/files/pantheon_report.pdf",
    ] {
        assert!(page.contains(needle), "no {needle} in {page}");
    }
    let (code, pdf) = bed.get("/experiments/1/files/pantheon_report.pdf");
    assert!(code == 200 && pdf.starts_with(b"%PDF"), "{code}");
    assert_eq!(bed.get("/experiments/1/files/..%2Farchive.sqlite").0, 400);
    assert_eq!(bed.get("/experiments/99").0, 404);
    let e1 = &shown[0]["experiment"];
    let history = bed.page(&format!(
        "/history?sender={}&receiver={}&scheme=cubic",
        e1["sender"].as_str().unwrap(),
        e1["receiver"].as_str().unwrap()
    ));
    assert!(history.contains("1 experiment(s)"), "{history}");
    let (code, svg) = bed.get(&format!(
        "/history.svg?sender={}&receiver={}&scheme=cubic",
        e1["sender"].as_str().unwrap(),
        e1["receiver"].as_str().unwrap()
    ));
    assert!(
        code == 200 && String::from_utf8_lossy(&svg).contains("<svg"),
        "{code}"
    );
    // `pantheon results fetch` copies the results directory.
    let fetched = bed.dir.join("fetched");
    let out = bed.pantheon(&["results", "fetch", "2", "--out", fetched.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(std::fs::read(fetched.join("pantheon_report.pdf"))
        .unwrap()
        .starts_with(b"%PDF"));
    bed.stop_daemon();
    for a in &bed.agents {
        assert!(a.namespaces().is_empty(), "{:?}", a.namespaces());
    }
}

#[test]
fn a_daemon_killed_mid_experiment_resumes_it_and_runs_nothing_twice() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut bed = Bed::new("k", 2);
    bed.testbed_file(
        "[matrix]\nschemes = [\"cubic\"]\nflows = [1]\nruntime = 3\ninterval = 0\n\
         runs = { wired = 3 }\nboth_directions = false\nrandom_order = false\n\
         [schedule]\nevery = 3600\n",
    );
    bed.start_daemon();
    // Run 1 finished, run 2 under way: kill -9.
    bed.wait_for(1, 120, "run 1 done and run 2 started", |v| {
        let runs = v["runs"].as_array().cloned().unwrap_or_default();
        runs.iter().any(|r| r["run"] == 1 && r["status"] == "ok")
            && runs
                .iter()
                .any(|r| r["run"] == 2 && r["status"] == "running")
    });
    std::thread::sleep(Duration::from_millis(500));
    bed.kill_daemon();
    bed.start_daemon();
    let v = bed.wait_for(1, 240, "done after the restart", DONE);
    let e = &v["experiment"];
    assert_eq!(e["attempts"], 2, "{v}");
    let runs: Vec<(u64, String, String)> = v["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["run"].as_u64().unwrap(),
                r["status"].as_str().unwrap().to_owned(),
                r["name"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    // Run 1 is the first attempt's (counted once, not run again); runs 2 and 3 the second's.
    assert_eq!(
        runs,
        vec![
            (1, "ok".into(), "e1a1-0".into()),
            (2, "ok".into(), "e1a2-0".into()),
            (3, "ok".into(), "e1a2-1".into()),
        ],
        "{v}"
    );
    let log = bed.daemon_log();
    assert!(
        log.contains("run e1a1-1 was interrupted by a restart"),
        "{log}"
    );
    for run in 1..=3 {
        let line = format!("cubic run {run}: done");
        assert_eq!(log.matches(&line).count(), 1, "{line}: {log}");
    }
    // One tournament only: the restart did not queue the matrix again.
    let list = bed.json(&["results", "list", "--json"]);
    assert_eq!(list.as_array().unwrap().len(), 1, "{list}");
    let dir = PathBuf::from(e["result_dir"].as_str().unwrap());
    let perf = common::read_json(&dir.join("pantheon_perf.json"));
    for run in ["1", "2", "3"] {
        assert!(
            perf["cubic"][run]["all"]["tput"].as_f64().unwrap() > 1.0,
            "{perf}"
        );
    }
    let records = common::read_json(&dir.join("pantheon_runs.json"));
    assert_eq!(records.as_array().unwrap().len(), 3, "{records}");
    bed.stop_daemon();
    for a in &bed.agents {
        assert!(a.namespaces().is_empty(), "{:?}", a.namespaces());
    }
}

/// Headless Chromium's DOM of `path`, after loading it from the hub.
fn chromium_dom(bed: &Bed, path: &str) -> String {
    let profile = bed.dir.join("chromium-profile");
    let out = Command::new("nsenter")
        .arg(format!("--net=/run/netns/{}", bed.namespaces[0].name()))
        .args(["chromium", "--headless", "--no-sandbox", "--disable-gpu"])
        .args([
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--virtual-time-budget=5000",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg("--dump-dom")
        .arg(format!("http://127.0.0.1:8080{path}"))
        .output()
        .expect("run chromium (Debian package `chromium`)");
    assert!(out.status.success(), "chromium: {}", text(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn the_web_pages_render_in_headless_chromium_with_the_summary_plot_and_table() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut bed = Bed::new("w", 2);
    bed.testbed_file(
        "[matrix]\nschemes = [\"cubic\", \"bbr\"]\nflows = [1]\nruntime = 2\ninterval = 0\n\
         runs = { wired = 1 }\nboth_directions = false\nrandom_order = false\n\
         [schedule]\nevery = 3600\n",
    );
    bed.start_daemon();
    bed.wait_for(1, 180, "done", DONE);
    let list = chromium_dom(&bed, "/");
    assert!(
        list.contains("<table id=\"experiments\">") && list.contains(">P1</a>"),
        "{list}"
    );
    let page = chromium_dom(&bed, "/experiments/1");
    assert!(page.contains("<table id=\"summary\">"), "{page}");
    for scheme in ["cubic", "bbr"] {
        assert!(page.contains(&format!("<td>{scheme}</td>")), "{page}");
    }
    let img = "src=\"/experiments/1/files/pantheon_summary.svg\"";
    assert!(
        page.contains("id=\"summary-plot\"") && page.contains(img),
        "{page}"
    );
    // The plot the page shows is a drawn SVG with both schemes.
    let svg = bed.page("/experiments/1/files/pantheon_summary.svg");
    assert!(
        svg.contains("<svg") && svg.contains("TCP Cubic") && svg.contains("TCP BBR"),
        "{svg}"
    );
}

/// How a simulated agent behaves.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Behaviour {
    /// Answers everything; its receiver side returns a Pantheon merged datalink log.
    Healthy,
    /// Answers Info, fails every tunnel.
    Failing,
    /// Accepts connections and never answers.
    Stalled,
}

/// A simulated agent: the agent's gRPC service on loopback, with no namespaces or processes.
#[derive(Clone)]
struct SimulatedAgent {
    name: String,
    behaviour: Behaviour,
    /// Runs in which this node receives.
    receiving: std::sync::Arc<Mutex<std::collections::BTreeSet<String>>>,
}

use pantheon_orchestrator::agent::proto as ap;
use tonic::{Request, Response, Status};

impl SimulatedAgent {
    async fn stall(&self) -> Result<(), Status> {
        match self.behaviour {
            Behaviour::Stalled => {
                tokio::time::sleep(Duration::from_secs(3600)).await;
                Err(Status::unavailable("stalled"))
            }
            _ => Ok(()),
        }
    }
}

/// One second of a 12 Mbit/s link carrying one 1500-byte packet per ms, 20 ms one way.
fn merged_log() -> String {
    let mut events: Vec<(f64, String)> = Vec::new();
    for ms in 0..=1100 {
        events.push((ms as f64, format!("{ms}.000 # 1500")));
    }
    for i in 0..1000 {
        let t = i as f64 + 0.5;
        events.push((t, format!("{t:.3} + 1536 1")));
        events.push((t + 20.0, format!("{:.3} - 1536 20.000 1", t + 20.0)));
    }
    events.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut log = String::from("# init timestamp: 1500000000000.000\n");
    for (_, l) in events {
        log.push_str(&l);
        log.push('\n');
    }
    log
}

#[tonic::async_trait]
impl ap::agent_server::Agent for SimulatedAgent {
    async fn info(&self, _: Request<ap::InfoRequest>) -> Result<Response<ap::NodeInfo>, Status> {
        self.stall().await?;
        Ok(Response::new(ap::NodeInfo {
            node: self.name.clone(),
            version: "simulated".into(),
            ..Default::default()
        }))
    }
    async fn prepare_schemes(
        &self,
        _: Request<ap::PrepareRequest>,
    ) -> Result<Response<ap::PrepareReply>, Status> {
        self.stall().await?;
        Ok(Response::new(ap::PrepareReply::default()))
    }
    async fn clock_offset(
        &self,
        _: Request<ap::ClockRequest>,
    ) -> Result<Response<ap::ClockReply>, Status> {
        self.stall().await?;
        Err(Status::unimplemented("no NTP here"))
    }
    async fn start_tunnel(
        &self,
        request: Request<ap::TunnelRequest>,
    ) -> Result<Response<ap::TunnelReply>, Status> {
        self.stall().await?;
        if self.behaviour == Behaviour::Failing {
            return Err(Status::internal("simulated tunnel failure"));
        }
        let r = request.into_inner();
        if !r.sender_side {
            let run = r.run.map(|x| x.run).unwrap_or_default();
            self.receiving.lock().unwrap().insert(run);
        }
        Ok(Response::new(ap::TunnelReply {
            udp_port: 9,
            private_address: "100.64.0.1".into(),
        }))
    }
    async fn start_side(
        &self,
        _: Request<ap::SideRequest>,
    ) -> Result<Response<ap::SideReply>, Status> {
        self.stall().await?;
        Ok(Response::new(ap::SideReply::default()))
    }
    async fn run_status(
        &self,
        _: Request<ap::RunRef>,
    ) -> Result<Response<ap::RunStatusReply>, Status> {
        self.stall().await?;
        Ok(Response::new(ap::RunStatusReply {
            tunnels_connected: true,
            failures: vec![],
        }))
    }
    async fn stop_flow(&self, _: Request<ap::FlowRef>) -> Result<Response<ap::StopReply>, Status> {
        self.stall().await?;
        Ok(Response::new(ap::StopReply::default()))
    }
    async fn stop_run(
        &self,
        _: Request<ap::StopRequest>,
    ) -> Result<Response<ap::StopReply>, Status> {
        self.stall().await?;
        Ok(Response::new(ap::StopReply::default()))
    }
    type FetchLogsStream = tokio_stream::wrappers::ReceiverStream<Result<ap::FileChunk, Status>>;
    async fn fetch_logs(
        &self,
        request: Request<ap::FetchRequest>,
    ) -> Result<Response<Self::FetchLogsStream>, Status> {
        self.stall().await?;
        let run = request.into_inner().run.map(|x| x.run).unwrap_or_default();
        let (tx, rx) = tokio::sync::mpsc::channel(2);
        if self.receiving.lock().unwrap().remove(&run) {
            tx.send(Ok(ap::FileChunk {
                name: "cubic_datalink_run1.log".into(),
                data: merged_log().into_bytes(),
            }))
            .await
            .unwrap();
        }
        Ok(Response::new(tokio_stream::wrappers::ReceiverStream::new(
            rx,
        )))
    }
}

/// (start, end) of every experiment each node was in, from `results list --json`.
fn node_spans(list: &Value) -> std::collections::BTreeMap<String, Vec<(String, String)>> {
    let mut spans: std::collections::BTreeMap<String, Vec<(String, String)>> = Default::default();
    for e in list.as_array().unwrap() {
        let (Some(s), Some(f)) = (e["started_at"].as_str(), e["finished_at"].as_str()) else {
            continue;
        };
        if s.is_empty() || f.is_empty() {
            continue;
        }
        for n in [&e["sender"], &e["receiver"]] {
            spans
                .entry(n.as_str().unwrap().to_owned())
                .or_default()
                .push((s.to_owned(), f.to_owned()));
        }
    }
    spans
}

#[test]
fn with_twenty_simulated_agents_failing_and_stalled_ones_do_not_block_the_schedule() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = std::env::temp_dir().join(format!("pantheon-load-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    struct Cleanup(PathBuf, Option<Child>);
    impl Drop for Cleanup {
        fn drop(&mut self) {
            if let Some(mut c) = self.1.take() {
                let _ = c.kill();
                let _ = c.wait();
            }
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    let mut cleanup = Cleanup(dir.clone(), None);
    let creds = dir.join("creds");
    let out = Command::new(env!("CARGO_BIN_EXE_pantheon"))
        .args(["node", "credentials", "--host", "127.0.0.1", "--out"])
        .arg(&creds)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let credentials = pantheon_orchestrator::agent::auth::Credentials::load(&creds, true).unwrap();
    // 20 agents: 2 stalled, 2 failing, the rest healthy.
    let behaviour = |k: usize| match k {
        3 | 11 => Behaviour::Stalled,
        6 | 15 => Behaviour::Failing,
        _ => Behaviour::Healthy,
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut toml = String::from("credentials = \"creds\"\ncall_timeout = 2\n");
    for k in 1..=20 {
        let listener = rt
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let port = listener.local_addr().unwrap().port();
        let agent = SimulatedAgent {
            name: format!("s{k}"),
            behaviour: behaviour(k),
            receiving: Default::default(),
        };
        let tls = tonic::transport::ServerTlsConfig::new().identity(
            tonic::transport::Identity::from_pem(
                &credentials.cert_pem,
                credentials.key_pem.as_deref().unwrap(),
            ),
        );
        let server = tonic::transport::Server::builder()
            .tls_config(tls)
            .unwrap()
            .add_service(ap::agent_server::AgentServer::with_interceptor(
                agent,
                pantheon_orchestrator::agent::auth::TokenCheck::new(&credentials),
            ));
        rt.spawn(
            server.serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
        );
        toml.push_str(&format!(
            "[[node]]\nname = \"s{k}\"\nagent = \"127.0.0.1:{port}\"\n"
        ));
    }
    toml.push_str(
        "[matrix]\nschemes = [\"cubic\"]\nflows = [1]\nruntime = 1\ninterval = 0\n\
         runs = { wired = 1 }\nboth_directions = false\nrandom_order = false\n\
         [schedule]\nevery = 3600\n",
    );
    std::fs::write(dir.join("testbed.toml"), toml).unwrap();
    let log_path = dir.join("daemon.log");
    let log = std::fs::File::create(&log_path).unwrap();
    cleanup.1 = Some(
        Command::new(env!("CARGO_BIN_EXE_pantheon"))
            .arg("serve")
            .arg(dir.join("testbed.toml"))
            .arg("--archive")
            .arg(dir.join("archive.sqlite"))
            .arg("--results-dir")
            .arg(dir.join("archive"))
            .args([
                "--listen",
                "127.0.0.1:0",
                "--web",
                "127.0.0.1:0",
                "--tick",
                "0.2",
            ])
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap(),
    );
    // Its gRPC address, from its first line.
    let deadline = Instant::now() + Duration::from_secs(20);
    let grpc = loop {
        let t = std::fs::read_to_string(&log_path).unwrap_or_default();
        if let Some(a) = t.split("gRPC on ").nth(1).and_then(|r| r.split(',').next()) {
            break a.to_owned();
        }
        assert!(Instant::now() < deadline, "daemon did not start: {t}");
        std::thread::sleep(Duration::from_millis(50));
    };
    // `pantheon results ACTION… --json` against the daemon.
    let results = |action: &[&str]| -> Value {
        let out = Command::new(env!("CARGO_BIN_EXE_pantheon"))
            .arg("results")
            .args(action)
            .args(["--json", "--daemon", &grpc, "--credentials"])
            .arg(&creds)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let list = || results(&["list"]);
    let involves = |e: &Value, k: usize| {
        e["sender"] == format!("s{k}").as_str() || e["receiver"] == format!("s{k}").as_str()
    };
    // Run until 40 experiments ended, every stalled node's first one among them.
    let deadline = Instant::now() + Duration::from_secs(150);
    let ended = loop {
        let l = list();
        let ended: Vec<Value> = l
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["status"] == "done" || e["status"] == "failed")
            .cloned()
            .collect();
        let stalled_seen = [3, 11]
            .iter()
            .all(|&k| ended.iter().any(|e| involves(e, k)));
        if ended.len() >= 40 && stalled_seen {
            break ended;
        }
        assert!(
            Instant::now() < deadline,
            "{} experiments ended after 150 s: {l}\n{}",
            ended.len(),
            std::fs::read_to_string(&log_path).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    for e in &ended {
        let unhealthy = [3, 6, 11, 15].iter().any(|&k| involves(e, k));
        let stalled = [3, 11].iter().any(|&k| involves(e, k));
        if stalled {
            // Failed on the call timeout, with the reason.
            assert_eq!(e["status"], "failed", "{e}");
            let why = e["error"].as_str().unwrap();
            assert!(why.contains("not answering"), "{e}");
        } else if !unhealthy {
            assert_eq!(e["status"], "done", "{e}");
        }
    }
    // Failing agents fail their runs, with the reason; the experiment is still analysed.
    let failing = ended
        .iter()
        .find(|e| {
            [6, 15].iter().any(|&k| involves(e, k)) && ![3, 11].iter().any(|&k| involves(e, k))
        })
        .expect("an experiment with a failing agent ended");
    let id = failing["id"].as_i64().unwrap().to_string();
    let shown = results(&["show", &id]);
    let reason = shown["runs"][0]["reason"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(reason.contains("simulated tunnel failure"), "{shown}");
    // No node in two experiments at once, across everything that ran.
    for (node, mut spans) in node_spans(&list()) {
        spans.sort();
        for w in spans.windows(2) {
            assert!(
                w[0].1 <= w[1].0,
                "{node} in two experiments at once: {spans:?}"
            );
        }
    }
    // While a stalled node's experiment waited on its calls, others ran to the end.
    let healthy_done_during_stall = ended.iter().any(|s| {
        [3, 11].iter().any(|&k| involves(s, k))
            && ended.iter().any(|h| {
                h["status"] == "done"
                    && h["started_at"].as_str() >= s["started_at"].as_str()
                    && h["finished_at"].as_str() <= s["finished_at"].as_str()
            })
    });
    assert!(healthy_done_during_stall, "{ended:?}");
    let child = cleanup.1.as_mut().unwrap();
    assert!(matches!(child.try_wait(), Ok(None)), "the daemon died");
    // SAFETY: plain syscall on our own, still running child.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    rt.shutdown_timeout(Duration::from_secs(1));
}
