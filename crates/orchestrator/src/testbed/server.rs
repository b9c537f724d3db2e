//! `pantheon serve`'s servers: the daemon's scheduling loop on the calling thread, the gRPC
//! service of `pantheon submit|status|results` (TLS and the testbed's token) and the archive's
//! web pages (plain HTTP, read-only) on a tokio runtime of their own. The program owns the
//! process (its flags, its signal handler, which calls [`Daemon::shutdown`]).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;

use super::archive::Archive;
use super::daemon::{log, Daemon};
use super::service::{proto, OrchestratorService};
use super::web::{router, WebState};
use crate::agent::auth::{Credentials, TokenCheck};

/// Where `pantheon serve` listens and how often it schedules.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// The gRPC service's address (`--listen`).
    pub listen: SocketAddr,
    /// The web pages' address (`--web`).
    pub web: SocketAddr,
    /// Time between two scheduling steps (`--tick`).
    pub tick: Duration,
    /// Where each experiment's results directory goes (`--results-dir`; the pages' scratch
    /// space is its `.history`).
    pub results_dir: PathBuf,
    /// The archive's file, for the log line.
    pub archive_file: PathBuf,
}

/// Serves `daemon` (its `archive`) until [`Daemon::shutdown`]: binds both addresses (errors
/// name the one that cannot be), logs them, spawns the gRPC service (TLS with `credentials`'
/// certificate and key, every call checked for the token) and the web pages, and schedules on
/// this thread; then lets the servers stop. Errors: credentials without a key, a runtime or
/// listener that cannot start, TLS set-up.
pub fn serve(
    daemon: Arc<Daemon>,
    archive: Arc<dyn Archive>,
    credentials: &Credentials,
    o: &ServeOptions,
) -> anyhow::Result<()> {
    let key = credentials
        .key_pem
        .as_deref()
        .context("the testbed's credentials have no key (agent.key)")?;
    let rt = crate::agent::server::runtime()?;
    let (grpc, web) = rt.block_on(async {
        let g = tokio::net::TcpListener::bind(o.listen)
            .await
            .with_context(|| format!("listen on {}", o.listen))?;
        let w = tokio::net::TcpListener::bind(o.web)
            .await
            .with_context(|| format!("listen on {}", o.web))?;
        anyhow::Ok((g, w))
    })?;
    log(&format!(
        "pantheon serve (version {}): {} nodes, archive {}, results in {}; gRPC on {}, web on \
         http://{}/",
        env!("CARGO_PKG_VERSION"),
        daemon.config().nodes.len(),
        o.archive_file.display(),
        o.results_dir.display(),
        grpc.local_addr()?,
        web.local_addr()?
    ));
    let tls = tonic::transport::ServerTlsConfig::new().identity(
        tonic::transport::Identity::from_pem(&credentials.cert_pem, key),
    );
    let server = tonic::transport::Server::builder()
        .tls_config(tls)
        .context("TLS configuration")?
        .add_service(
            proto::orchestrator_server::OrchestratorServer::with_interceptor(
                OrchestratorService::new(Arc::clone(&daemon)),
                TokenCheck::new(credentials),
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
        scratch: o.results_dir.join(".history"),
    });
    rt.spawn(async move {
        if let Err(e) = axum::serve(web, pages).await {
            log(&format!("web pages: {e}"));
        }
    });
    daemon.run(o.tick);
    rt.shutdown_timeout(Duration::from_secs(1));
    log("stopped");
    Ok(())
}
