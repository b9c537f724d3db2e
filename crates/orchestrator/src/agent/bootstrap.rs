//! `pantheon node bootstrap [USER@]HOST[:PORT]`: bring a node up over SSH with one command.
//!
//! Over one SSH session (ssh2, public-key authentication) it creates `--remote-dir` on the
//! node, copies the `pantheon-agent` binary and the testbed credentials there (key and token
//! mode 0600), stops the agent it started there before (found by `agent.pid`, and only if that
//! process runs the binary of that directory), and starts the new one detached (`setsid
//! nohup`), logging to `agent.log`. The caller then waits for the agent to answer over gRPC.
//!
//! The node's host key is checked against `~/.ssh/known_hosts` (or `--known-hosts`): a key
//! that differs from the recorded one is refused; an unknown host is accepted and its
//! fingerprint printed (OpenSSH's `accept-new`).

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use ssh2::{CheckResult, HashType, KnownHostFileKind, Session};

use super::auth::{Credentials, CERT_FILE, KEY_FILE, TOKEN_FILE};

/// What to bootstrap where.
#[derive(Debug, Clone)]
pub struct Bootstrap {
    /// SSH user (default root).
    pub user: String,
    /// SSH host.
    pub host: String,
    /// SSH port (default 22).
    pub port: u16,
    /// Private key for public-key authentication.
    pub identity: PathBuf,
    /// known_hosts file to check the node's key against (missing file: every host unknown).
    pub known_hosts: PathBuf,
    /// Directory on the node (absolute; created).
    pub remote_dir: String,
    /// The agent's `--name`.
    pub name: String,
    /// The agent's `--listen` port.
    pub listen_port: u16,
    /// The `pantheon-agent` binary to copy.
    pub agent_binary: PathBuf,
}

impl Bootstrap {
    /// Parses `[USER@]HOST[:PORT]`.
    pub fn parse_target(target: &str) -> anyhow::Result<(String, String, u16)> {
        let (user, rest) = match target.split_once('@') {
            Some((u, r)) => (u.to_owned(), r),
            None => ("root".to_owned(), target),
        };
        let (host, port) = match rest.rsplit_once(':') {
            Some((h, p)) => (
                h.to_owned(),
                p.parse()
                    .with_context(|| format!("{target}: port {p:?} is not a number"))?,
            ),
            None => (rest.to_owned(), 22),
        };
        if host.is_empty() || user.is_empty() {
            bail!("{target}: expected [USER@]HOST[:PORT]");
        }
        Ok((user, host, port))
    }
}

/// Runs `command` on the node; its stdout, or an error with its stderr and exit status.
fn exec(session: &Session, command: &str) -> anyhow::Result<String> {
    let mut ch = session.channel_session()?;
    ch.exec(command)?;
    let mut out = String::new();
    ch.read_to_string(&mut out)?;
    let mut err = String::new();
    ch.stderr().read_to_string(&mut err)?;
    ch.wait_close()?;
    let status = ch.exit_status()?;
    if status != 0 {
        bail!("`{command}` exited with {status}: {}", err.trim());
    }
    Ok(out)
}

/// Copies `data` to `path` on the node with `mode`.
fn send(session: &Session, path: &str, mode: i32, data: &[u8]) -> anyhow::Result<()> {
    let mut remote = session
        .scp_send(Path::new(path), mode, data.len() as u64, None)
        .with_context(|| format!("scp to {path}"))?;
    remote
        .write_all(data)
        .with_context(|| format!("scp to {path}"))?;
    remote.send_eof()?;
    remote.wait_eof()?;
    remote.close()?;
    remote.wait_close()?;
    Ok(())
}

/// Connects, checks the host key, authenticates; the session. `say` reports progress.
fn connect(b: &Bootstrap, say: &dyn Fn(&str)) -> anyhow::Result<Session> {
    let addr = (b.host.as_str(), b.port)
        .to_socket_addrs()
        .with_context(|| format!("resolve {}", b.host))?
        .next()
        .ok_or_else(|| anyhow!("{} has no address", b.host))?;
    let tcp = TcpStream::connect_timeout(&addr, Duration::from_secs(10))
        .with_context(|| format!("connect to {addr}"))?;
    let mut session = Session::new()?;
    session.set_tcp_stream(tcp);
    session.set_timeout(120_000);
    session.handshake().context("SSH handshake")?;
    let (key, _) = session
        .host_key()
        .ok_or_else(|| anyhow!("{addr} sent no host key"))?;
    let key = key.to_vec();
    let fingerprint: String = session
        .host_key_hash(HashType::Sha256)
        .map(|h| h.iter().map(|b| format!("{b:02x}")).collect())
        .unwrap_or_default();
    let mut known = session.known_hosts()?;
    if b.known_hosts.exists() {
        known
            .read_file(&b.known_hosts, KnownHostFileKind::OpenSSH)
            .with_context(|| format!("read {}", b.known_hosts.display()))?;
    }
    match known.check_port(&b.host, b.port, &key) {
        CheckResult::Match => {}
        CheckResult::Mismatch => bail!(
            "{}:{}: its host key (SHA-256 {fingerprint}) differs from the one in {}: refusing",
            b.host,
            b.port,
            b.known_hosts.display()
        ),
        CheckResult::NotFound | CheckResult::Failure => say(&format!(
            "{}:{} is not in {}: accepting its host key, SHA-256 {fingerprint}",
            b.host,
            b.port,
            b.known_hosts.display()
        )),
    }
    session
        .userauth_pubkey_file(&b.user, None, &b.identity, None)
        .with_context(|| format!("authenticate as {} with {}", b.user, b.identity.display()))?;
    Ok(session)
}

/// Copies the agent and `credentials` to the node and (re)starts the agent there. Returns the
/// agent's pid on the node.
pub fn bootstrap(
    b: &Bootstrap,
    credentials: &Credentials,
    say: &dyn Fn(&str),
) -> anyhow::Result<u32> {
    super::check_name(&b.name, 16, "--name").map_err(anyhow::Error::msg)?;
    let dir = &b.remote_dir;
    if !dir.starts_with('/')
        || !dir
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-".contains(c))
    {
        bail!("--remote-dir {dir:?}: an absolute path of letters, digits and / . _ -");
    }
    let key = credentials
        .key_pem
        .as_deref()
        .ok_or_else(|| anyhow!("the credentials have no agent.key: the agent needs it"))?;
    let binary = std::fs::read(&b.agent_binary)
        .with_context(|| format!("read {}", b.agent_binary.display()))?;
    let session = connect(b, say)?;
    say(&format!("connected to {}@{}:{}", b.user, b.host, b.port));
    exec(
        &session,
        &format!("mkdir -p {dir}/credentials {dir}/data && chmod 700 {dir}/credentials"),
    )?;
    say(&format!(
        "copying pantheon-agent ({:.0} MB) to {dir}",
        binary.len() as f64 / 1e6
    ));
    // A new file then a rename: the running binary is never overwritten in place.
    send(
        &session,
        &format!("{dir}/pantheon-agent.new"),
        0o755,
        &binary,
    )?;
    send(
        &session,
        &format!("{dir}/credentials/{CERT_FILE}"),
        0o644,
        credentials.cert_pem.as_bytes(),
    )?;
    send(
        &session,
        &format!("{dir}/credentials/{KEY_FILE}"),
        0o600,
        key.as_bytes(),
    )?;
    send(
        &session,
        &format!("{dir}/credentials/{TOKEN_FILE}"),
        0o600,
        format!("{}\n", credentials.token).as_bytes(),
    )?;
    // Stop the agent this directory started before — only if that pid still runs its binary.
    let script = format!(
        "cd {dir} && mv pantheon-agent.new pantheon-agent && \
         if [ -f agent.pid ]; then p=$(cat agent.pid); \
           case \"$(readlink /proc/$p/exe 2>/dev/null)\" in {dir}/pantheon-agent*) \
             kill $p; for i in 1 2 3 4 5 6 7 8 9 10; do kill -0 $p 2>/dev/null || break; sleep 0.5; done;; \
           esac; fi; \
         setsid nohup {dir}/pantheon-agent --name {name} --listen 0.0.0.0:{port} \
           --credentials {dir}/credentials --data-dir {dir}/data >> {dir}/agent.log 2>&1 < /dev/null & \
         echo $! > agent.pid; cat agent.pid",
        name = b.name,
        port = b.listen_port,
    );
    let pid = exec(&session, &script)?;
    let pid: u32 = pid
        .trim()
        .parse()
        .with_context(|| format!("the agent's pid: {pid:?}"))?;
    say(&format!(
        "started pantheon-agent {} (pid {pid}) on {}, log {dir}/agent.log",
        b.name, b.host
    ));
    Ok(pid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_parse_as_ssh_does() {
        assert_eq!(
            Bootstrap::parse_target("alice@10.0.0.2:2222").unwrap(),
            ("alice".into(), "10.0.0.2".into(), 2222)
        );
        assert_eq!(
            Bootstrap::parse_target("node1").unwrap(),
            ("root".into(), "node1".into(), 22)
        );
        assert!(Bootstrap::parse_target("a@h:x").is_err());
        assert!(Bootstrap::parse_target("@h").is_err());
    }
}
