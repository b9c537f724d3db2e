//! The daemon's gRPC service for the CLI (`proto/testbed.proto`) and its blocking client.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::anyhow;
use tokio_stream::wrappers::ReceiverStream;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;
use tonic::{Request, Response, Status};

use super::archive::{self, Filter};
use super::daemon::{Daemon, Submission};
use crate::agent::auth::{Credentials, TokenHeader};
use crate::agent::client::{connect, describe, ChunkWriter};

/// The generated protocol (`pantheon.testbed.v1`).
#[allow(missing_docs, clippy::all)]
pub mod proto {
    tonic::include_proto!("pantheon.testbed.v1");
}

use proto::orchestrator_client::OrchestratorClient as Grpc;
use proto::orchestrator_server::Orchestrator;

/// Port the daemon's gRPC service listens on unless told otherwise.
pub const DEFAULT_PORT: u16 = 7_071;

/// The service, over a running [`Daemon`].
#[derive(Clone)]
pub struct OrchestratorService {
    daemon: Arc<Daemon>,
}

impl OrchestratorService {
    /// Serves `daemon`.
    pub fn new(daemon: Arc<Daemon>) -> OrchestratorService {
        OrchestratorService { daemon }
    }
}

fn internal(e: anyhow::Error) -> Status {
    Status::internal(format!("{e:#}"))
}

/// The archive's experiment as a message.
pub fn experiment_message(e: &archive::Experiment) -> proto::Experiment {
    proto::Experiment {
        id: e.id,
        sender: e.sender.clone(),
        receiver: e.receiver.clone(),
        link: e.link.clone(),
        flows: u32::from(e.flows),
        run_times: e.run_times,
        runtime_s: e.runtime_s,
        interval_s: e.interval_s,
        schemes: e.schemes.clone(),
        status: e.status.as_str().to_owned(),
        attempts: e.attempts,
        queued_at: e.queued_at.clone(),
        started_at: e.started_at.clone().unwrap_or_default(),
        finished_at: e.finished_at.clone().unwrap_or_default(),
        result_dir: e.result_dir.clone().unwrap_or_default(),
        error: e.error.clone().unwrap_or_default(),
        tournament: e.tournament.unwrap_or(0),
    }
}

fn status_filter(s: &str) -> Result<Option<archive::Status>, Status> {
    Ok(match s {
        "" => None,
        "queued" => Some(archive::Status::Queued),
        "running" => Some(archive::Status::Running),
        "done" => Some(archive::Status::Done),
        "failed" => Some(archive::Status::Failed),
        other => {
            return Err(Status::invalid_argument(format!(
                "status {other:?}: use queued, running, done or failed"
            )))
        }
    })
}

impl OrchestratorService {
    fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Daemon) -> Result<T, Status> + Send + 'static,
    ) -> impl std::future::Future<Output = Result<T, Status>> {
        let d = Arc::clone(&self.daemon);
        async move {
            tokio::task::spawn_blocking(move || f(&d))
                .await
                .map_err(|e| Status::internal(e.to_string()))?
        }
    }
}

#[tonic::async_trait]
impl Orchestrator for OrchestratorService {
    async fn submit(
        &self,
        request: Request<proto::SubmitRequest>,
    ) -> Result<Response<proto::SubmitReply>, Status> {
        let r = request.into_inner();
        let sub = Submission {
            sender: r.sender,
            receiver: r.receiver,
            schemes: r.schemes,
            flows: (r.flows > 0)
                .then(|| u16::try_from(r.flows).map_err(|_| Status::invalid_argument("flows")))
                .transpose()?,
            run_times: (r.run_times > 0).then_some(r.run_times),
            runtime_s: (r.runtime_s > 0.0).then_some(r.runtime_s),
            interval_s: (r.interval_s >= 0.0).then_some(r.interval_s),
        };
        let id = self
            .blocking(move |d| {
                d.submit(sub)
                    .map_err(|e| Status::invalid_argument(format!("{e:#}")))
            })
            .await?;
        Ok(Response::new(proto::SubmitReply { id }))
    }

    async fn status(
        &self,
        _: Request<proto::StatusRequest>,
    ) -> Result<Response<proto::StatusReply>, Status> {
        let reply = self
            .blocking(|d| {
                let a = d.archive();
                let list = |s| {
                    a.list(&Filter {
                        status: Some(s),
                        ..Filter::default()
                    })
                    .map_err(internal)
                };
                let (last, at) = a.last_tournament().map_err(internal)?.unwrap_or_default();
                Ok(proto::StatusReply {
                    nodes: d.config().nodes.iter().map(|n| n.name.clone()).collect(),
                    busy_nodes: d.busy_nodes(),
                    running: list(archive::Status::Running)?
                        .iter()
                        .map(experiment_message)
                        .collect(),
                    queued: list(archive::Status::Queued)?
                        .iter()
                        .rev()
                        .map(experiment_message)
                        .collect(),
                    last_tournament: last,
                    last_tournament_at: at,
                })
            })
            .await?;
        Ok(Response::new(reply))
    }

    async fn list_results(
        &self,
        request: Request<proto::ListRequest>,
    ) -> Result<Response<proto::ListReply>, Status> {
        let r = request.into_inner();
        let opt = |s: String| (!s.is_empty()).then_some(s);
        let f = Filter {
            status: status_filter(&r.status)?,
            path: opt(r.path),
            scheme: opt(r.scheme),
            since: opt(r.since),
            until: opt(r.until),
        };
        let rows = self
            .blocking(move |d| d.archive().list(&f).map_err(internal))
            .await?;
        Ok(Response::new(proto::ListReply {
            experiments: rows.iter().map(experiment_message).collect(),
        }))
    }

    async fn show_result(
        &self,
        request: Request<proto::ResultRef>,
    ) -> Result<Response<proto::ResultReply>, Status> {
        let id = request.into_inner().id;
        let reply = self
            .blocking(move |d| {
                let a = d.archive();
                let e = a
                    .experiment(id)
                    .map_err(internal)?
                    .ok_or_else(|| Status::not_found(format!("no experiment {id}")))?;
                Ok(proto::ResultReply {
                    experiment: Some(experiment_message(&e)),
                    summary: a
                        .scheme_stats(id)
                        .map_err(internal)?
                        .into_iter()
                        .map(|s| proto::SchemeSummary {
                            scheme: s.scheme,
                            runs: s.runs,
                            tput_mbps: s.tput_mbps,
                            delay_ms: s.delay_ms,
                            loss: s.loss,
                        })
                        .collect(),
                    runs: a
                        .runs(id)
                        .map_err(internal)?
                        .into_iter()
                        .map(|r| proto::Run {
                            analysed: r.tput_mbps.is_some(),
                            name: r.name,
                            scheme: r.scheme,
                            run: r.run,
                            status: r.status,
                            reason: r.reason.unwrap_or_default(),
                            tput_mbps: r.tput_mbps.unwrap_or(0.0),
                            delay_ms: r.delay_ms.unwrap_or(0.0),
                            loss: r.loss.unwrap_or(0.0),
                        })
                        .collect(),
                })
            })
            .await?;
        Ok(Response::new(reply))
    }

    type FetchResultStream = ReceiverStream<Result<proto::FileChunk, Status>>;

    async fn fetch_result(
        &self,
        request: Request<proto::ResultRef>,
    ) -> Result<Response<Self::FetchResultStream>, Status> {
        let id = request.into_inner().id;
        let dir = self
            .blocking(move |d| {
                d.archive()
                    .experiment(id)
                    .map_err(internal)?
                    .ok_or_else(|| Status::not_found(format!("no experiment {id}")))?
                    .result_dir
                    .ok_or_else(|| Status::not_found(format!("experiment {id} has no results yet")))
            })
            .await?;
        Ok(Response::new(crate::agent::service::stream_files(
            dir.into(),
            |name, data| proto::FileChunk { name, data },
            || {},
        )))
    }
}

/// A blocking client of the daemon, for the CLI.
pub struct DaemonClient {
    rt: tokio::runtime::Runtime,
    grpc: Grpc<InterceptedService<Channel, TokenHeader>>,
    /// `host:port`.
    pub addr: String,
}

impl DaemonClient {
    /// A client of the daemon at `addr` (`host[:port]`, port 7071 by default) with the
    /// testbed's `credentials`. Errors only for a malformed address.
    pub fn new(addr: &str, credentials: &Credentials) -> anyhow::Result<DaemonClient> {
        let c = connect(addr, DEFAULT_PORT, credentials, Duration::from_secs(60))?;
        Ok(DaemonClient {
            rt: c.rt,
            grpc: Grpc::with_interceptor(c.channel, TokenHeader::new(credentials)),
            addr: c.addr,
        })
    }

    fn call<T>(
        &self,
        what: &str,
        f: impl AsyncFnOnce(
            &mut Grpc<InterceptedService<Channel, TokenHeader>>,
        ) -> Result<Response<T>, Status>,
    ) -> anyhow::Result<T> {
        let mut grpc = self.grpc.clone();
        self.rt
            .block_on(f(&mut grpc))
            .map(Response::into_inner)
            .map_err(|s| anyhow!("daemon {}: {what}: {}", self.addr, describe(&s)))
    }

    /// Queues an experiment; its number.
    pub fn submit(&self, req: proto::SubmitRequest) -> anyhow::Result<i64> {
        self.call("submit", async |g| g.submit(req).await)
            .map(|r| r.id)
    }

    /// The daemon's status.
    pub fn status(&self) -> anyhow::Result<proto::StatusReply> {
        self.call("status", async |g| g.status(proto::StatusRequest {}).await)
    }

    /// Archived experiments matching `req`.
    pub fn list(&self, req: proto::ListRequest) -> anyhow::Result<Vec<proto::Experiment>> {
        self.call("list results", async |g| g.list_results(req).await)
            .map(|r| r.experiments)
    }

    /// Experiment `id` with its summary and runs.
    pub fn show(&self, id: i64) -> anyhow::Result<proto::ResultReply> {
        self.call("show result", async |g| {
            g.show_result(proto::ResultRef { id }).await
        })
    }

    /// Copies experiment `id`'s results directory into `dir` (created); the files' names.
    pub fn fetch(&self, id: i64, dir: &Path) -> anyhow::Result<Vec<String>> {
        std::fs::create_dir_all(dir).map_err(|e| anyhow!("create {}: {e}", dir.display()))?;
        let mut grpc = self.grpc.clone();
        let from = format!("daemon {}", self.addr);
        self.rt.block_on(async {
            let fail = |s: Status| anyhow!("{from}: fetch result: {}", describe(&s));
            let mut stream = grpc
                .fetch_result(proto::ResultRef { id })
                .await
                .map_err(fail)?
                .into_inner();
            let mut out = ChunkWriter::new(dir, &from);
            while let Some(chunk) = stream.message().await.map_err(fail)? {
                out.write(&chunk.name, &chunk.data)?;
            }
            Ok::<_, anyhow::Error>(out.names)
        })
    }
}
