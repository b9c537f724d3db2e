//! `pantheon-agent`'s server: the agent's gRPC service over TLS with the testbed's token, on
//! a tokio runtime of its own, until the program says stop. The program owns the process (its
//! flags, its signal handler); this module owns the servers.

use std::net::SocketAddr;
use std::sync::mpsc::Receiver;

use anyhow::Context;
use tonic::transport::{Identity, Server, ServerTlsConfig};

use super::auth::{Credentials, TokenCheck};
use super::log;
use super::proto::agent_server::AgentServer;
use super::service::AgentService;

/// Serves `service` on `listen` over TLS (the testbed's certificate and key in `credentials`,
/// every call checked for its token) until a message arrives on `stop` (or its sender is
/// dropped); then ends every run still hosted, saying which. Logs the address it listens on.
/// Errors: `credentials` without a key, a runtime or listener that cannot start, TLS set-up.
pub fn serve(
    listen: SocketAddr,
    credentials: &Credentials,
    service: AgentService,
    stop: Receiver<()>,
) -> anyhow::Result<()> {
    let key = credentials
        .key_pem
        .as_deref()
        .context("the agent's credentials have no key (agent.key)")?;
    let tls = ServerTlsConfig::new().identity(Identity::from_pem(&credentials.cert_pem, key));
    let rt = runtime()?;
    let server = Server::builder()
        .tls_config(tls)
        .context("TLS configuration")?
        .add_service(AgentServer::with_interceptor(
            service.clone(),
            TokenCheck::new(credentials),
        ));
    let name = service.node().to_owned();
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .with_context(|| format!("listen on {listen}"))?;
        log(&format!(
            "node {name} (version {}) listening on {}",
            env!("CARGO_PKG_VERSION"),
            listener.local_addr()?
        ));
        let shutdown = async {
            let _ = tokio::task::spawn_blocking(move || stop.recv()).await;
            log("stopping");
        };
        server
            .serve_with_incoming_shutdown(
                tokio_stream::wrappers::TcpListenerStream::new(listener),
                shutdown,
            )
            .await
            .context("serve")
    })?;
    let stopped = service.stop_all();
    if !stopped.is_empty() {
        log(&format!("ended runs still hosted: {}", stopped.join(", ")));
    }
    Ok(())
}

/// The servers' runtime: two worker threads (a node's CPUs are the runs').
pub(crate) fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("start the tokio runtime")
}
