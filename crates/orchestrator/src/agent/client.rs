//! A blocking client of one agent, for the synchronous experiment runner.
//!
//! Each [`AgentClient`] owns a single-threaded tokio runtime and a lazily connected TLS
//! channel: creating one never fails because the agent is down, and a call to a dead agent
//! fails (UNAVAILABLE, or DEADLINE_EXCEEDED after the call timeout) instead of hanging, so the
//! runner can fail that run and go on.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context};
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};

use super::auth::{Credentials, TokenHeader};
use super::proto::{self, agent_client::AgentClient as Grpc};

/// Longest a single call may take (StopRun drains for at most 60 s).
pub const CALL_TIMEOUT: Duration = Duration::from_secs(90);

/// A connection to one agent.
pub struct AgentClient {
    rt: tokio::runtime::Runtime,
    grpc: Grpc<InterceptedService<Channel, TokenHeader>>,
    /// The agent's address as given, `host:port`.
    pub addr: String,
    /// Its host part (an IP address or name).
    pub host: String,
}

impl AgentClient {
    /// A client of the agent at `addr` (`host:port`, or `host` for port 7070), trusting
    /// `credentials`' certificate and sending its token; calls time out after
    /// [`CALL_TIMEOUT`]. Errors only for a malformed address.
    pub fn new(addr: &str, credentials: &Credentials) -> anyhow::Result<AgentClient> {
        AgentClient::with_timeout(addr, credentials, CALL_TIMEOUT)
    }

    /// [`AgentClient::new`] whose calls time out after `call_timeout` (a stalled agent fails
    /// the call after that long; keep it above the longest drain of a stop, 60 s, for real
    /// runs).
    pub fn with_timeout(
        addr: &str,
        credentials: &Credentials,
        call_timeout: Duration,
    ) -> anyhow::Result<AgentClient> {
        let c = connect(addr, super::DEFAULT_PORT, credentials, call_timeout)?;
        Ok(AgentClient {
            rt: c.rt,
            grpc: Grpc::with_interceptor(c.channel, TokenHeader::new(credentials)),
            addr: c.addr,
            host: c.host,
        })
    }

    fn call<T>(
        &self,
        what: &str,
        f: impl AsyncFnOnce(
            &mut Grpc<InterceptedService<Channel, TokenHeader>>,
        ) -> Result<tonic::Response<T>, tonic::Status>,
    ) -> anyhow::Result<T> {
        let mut grpc = self.grpc.clone();
        self.rt
            .block_on(f(&mut grpc))
            .map(tonic::Response::into_inner)
            .map_err(|s| anyhow!("agent {}: {what}: {}", self.addr, describe(&s)))
    }

    /// Node info (without scheme versions: see [`AgentClient::info_with_versions`]).
    pub fn info(&self) -> anyhow::Result<proto::NodeInfo> {
        self.call("info", async |g| {
            g.info(proto::InfoRequest::default()).await
        })
    }

    /// Node info with each runnable scheme's version (`SchemeStatus.version`), which the agent
    /// probes by running the schemes' programs: once per experiment.
    pub fn info_with_versions(&self) -> anyhow::Result<proto::NodeInfo> {
        let req = proto::InfoRequest {
            scheme_versions: true,
        };
        self.call("info", async |g| g.info(req).await)
    }

    /// Waits up to `timeout` for the agent to answer (it may be restarting); its info.
    pub fn wait_ready(&self, timeout: Duration) -> anyhow::Result<proto::NodeInfo> {
        let deadline = Instant::now() + timeout;
        loop {
            match self.info() {
                Ok(i) => return Ok(i),
                Err(e) if Instant::now() >= deadline => return Err(e),
                Err(_) => std::thread::sleep(Duration::from_millis(250)),
            }
        }
    }

    /// Sets up schemes on the node.
    pub fn prepare_schemes(&self, schemes: &[String]) -> anyhow::Result<proto::PrepareReply> {
        let req = proto::PrepareRequest {
            schemes: schemes.to_vec(),
        };
        self.call("prepare schemes", async |g| g.prepare_schemes(req).await)
    }

    /// The node's clock offset to `server`, from `samples` SNTP queries.
    pub fn clock_offset(&self, server: &str, samples: u32) -> anyhow::Result<proto::ClockReply> {
        let req = proto::ClockRequest {
            server: server.to_owned(),
            samples,
        };
        self.call("clock offset", async |g| g.clock_offset(req).await)
    }

    /// Starts a tunnel endpoint.
    pub fn start_tunnel(&self, req: proto::TunnelRequest) -> anyhow::Result<proto::TunnelReply> {
        self.call("start tunnel", async |g| g.start_tunnel(req).await)
    }

    /// Starts one side of a scheme.
    pub fn start_side(&self, req: proto::SideRequest) -> anyhow::Result<proto::SideReply> {
        self.call("start side", async |g| g.start_side(req).await)
    }

    /// The run's tunnels and processes.
    pub fn run_status(&self, run: &str) -> anyhow::Result<proto::RunStatusReply> {
        let req = proto::RunRef {
            run: run.to_owned(),
        };
        self.call("run status", async |g| g.run_status(req).await)
    }

    /// Ends flow `flow`'s scheme sides of the run on the node (a mix's stop time); its tunnel
    /// stays.
    pub fn stop_flow(&self, run: &str, flow: u16) -> anyhow::Result<proto::StopReply> {
        let req = proto::FlowRef {
            run: Some(proto::RunRef {
                run: run.to_owned(),
            }),
            flow: u32::from(flow),
        };
        self.call("stop flow", async |g| g.stop_flow(req).await)
    }

    /// Ends the run on the node after `drain`.
    pub fn stop_run(&self, run: &str, drain: Duration) -> anyhow::Result<proto::StopReply> {
        let req = proto::StopRequest {
            run: Some(proto::RunRef {
                run: run.to_owned(),
            }),
            drain_ms: drain.as_millis().min(60_000) as u32,
        };
        self.call("stop run", async |g| g.stop_run(req).await)
    }

    /// Copies the run's files from the node into `dir` (each file written as it arrives, so a
    /// broken stream keeps the files already complete); then, if `remove`, the node deletes
    /// them. Returns the names of the files written.
    pub fn fetch_logs(&self, run: &str, dir: &Path, remove: bool) -> anyhow::Result<Vec<String>> {
        let req = proto::FetchRequest {
            run: Some(proto::RunRef {
                run: run.to_owned(),
            }),
            remove,
        };
        let mut grpc = self.grpc.clone();
        let addr = self.addr.clone();
        self.rt.block_on(async move {
            let mut stream = grpc
                .fetch_logs(req)
                .await
                .map_err(|s| anyhow!("agent {addr}: fetch logs: {}", describe(&s)))?
                .into_inner();
            let from = format!("agent {addr}");
            let mut out = ChunkWriter::new(dir, &from);
            while let Some(chunk) = stream
                .message()
                .await
                .map_err(|s| anyhow!("agent {addr}: fetch logs: {}", describe(&s)))?
            {
                out.write(&chunk.name, &chunk.data)?;
            }
            Ok(out.names)
        })
    }
}

/// A gRPC status as one line: `unavailable: <message>`.
pub fn describe(s: &tonic::Status) -> String {
    let code = format!("{:?}", s.code()).to_lowercase();
    if s.message().is_empty() {
        code
    } else {
        format!("{code}: {}", s.message())
    }
}

/// A lazily connected TLS channel to one of the testbed's gRPC servers (an agent or the
/// daemon), with the single-threaded runtime that drives it.
pub struct Connection {
    /// Drives the channel's calls (`block_on`).
    pub rt: tokio::runtime::Runtime,
    /// The channel (connects at the first call).
    pub channel: Channel,
    /// `host:port`.
    pub addr: String,
    /// The host part (an IP address or name).
    pub host: String,
}

/// A [`Connection`] to `addr` (`host:port`, or `host` for `default_port`) trusting
/// `credentials`' certificate (it must name the host), connect timeout 5 s, calls timing out
/// after `call_timeout`. Never fails because the server is down; errors only for a malformed
/// address or TLS setup.
pub fn connect(
    addr: &str,
    default_port: u16,
    credentials: &Credentials,
    call_timeout: Duration,
) -> anyhow::Result<Connection> {
    let with_port = if addr
        .rsplit_once(':')
        .is_some_and(|(_, p)| p.parse::<u16>().is_ok())
    {
        addr.to_owned()
    } else {
        format!("{addr}:{default_port}")
    };
    let host = with_port
        .rsplit_once(':')
        .map(|(h, _)| h.trim_matches(['[', ']']).to_owned())
        .unwrap_or_default();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("start a tokio runtime")?;
    let tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(&credentials.cert_pem))
        .domain_name(host.clone());
    let endpoint = Endpoint::from_shared(format!("https://{with_port}"))
        .with_context(|| format!("server address {addr:?}"))?
        .connect_timeout(Duration::from_secs(5))
        .timeout(call_timeout)
        .tls_config(tls)
        .with_context(|| format!("TLS for {addr}"))?;
    let channel = {
        let _guard = rt.enter();
        endpoint.connect_lazy()
    };
    Ok(Connection {
        rt,
        channel,
        addr: with_port,
        host,
    })
}

/// Writes a stream of file chunks (name, data; a file's chunks in a row) into a directory,
/// each file as it arrives, so that a broken stream keeps the files already complete.
pub struct ChunkWriter<'a> {
    dir: &'a Path,
    from: &'a str,
    file: Option<std::fs::File>,
    /// The files written so far, in order.
    pub names: Vec<String>,
}

impl<'a> ChunkWriter<'a> {
    /// Writes into `dir` what the server at `from` (for errors) sends.
    pub fn new(dir: &'a Path, from: &'a str) -> ChunkWriter<'a> {
        ChunkWriter {
            dir,
            from,
            file: None,
            names: Vec::new(),
        }
    }

    /// Appends `data` to file `name` (created at its first chunk). Errors on a name that is
    /// not a plain file name (never writes outside the directory) or a write error.
    pub fn write(&mut self, name: &str, data: &[u8]) -> anyhow::Result<()> {
        use std::io::Write;
        if !super::is_plain_file_name(name) {
            return Err(anyhow!("{} sent a bad file name {name:?}", self.from));
        }
        let path = self.dir.join(name);
        if self.names.last().map(String::as_str) != Some(name) {
            self.file = Some(
                std::fs::File::create(&path)
                    .with_context(|| format!("create {}", path.display()))?,
            );
            self.names.push(name.to_owned());
        }
        self.file
            .as_mut()
            .expect("opened above")
            .write_all(data)
            .with_context(|| format!("write {}", path.display()))
    }
}
