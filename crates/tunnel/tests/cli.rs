//! The `pantheon-tunnel` program, driven as Pantheon's harness drives `mm-tunnelserver` and
//! `mm-tunnelclient`: over loopback, each endpoint in a namespace it creates itself. Needs root
//! and iperf3 (CI has both).

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use pantheon_tunnel::log::{read_log, Kind, Role};

const BIN: &str = env!("CARGO_BIN_EXE_pantheon-tunnel");

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ptun-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Spawns `program args` with stdout piped into a channel of lines.
fn spawn(program: &Path, args: &[&str]) -> (Child, mpsc::Receiver<String>) {
    let mut child = Command::new(program)
        .args(args)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let out = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    (child, rx)
}

/// The first line containing `needle`, within `timeout`.
fn line_with(rx: &mpsc::Receiver<String>, needle: &str, timeout: Duration) -> String {
    let end = Instant::now() + timeout;
    loop {
        let left = end.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) if line.contains(needle) => return line,
            Ok(_) => {}
            Err(e) => panic!("no line with {needle:?}: {e}"),
        }
    }
}

fn wait_exit(child: &mut Child, timeout: Duration) -> std::process::ExitStatus {
    let end = Instant::now() + timeout;
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        if Instant::now() > end {
            let _ = child.kill();
            panic!("process {} did not exit within {timeout:?}", child.id());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn namespaces_of(pid: u32) -> Vec<String> {
    netns::list_named()
        .into_iter()
        .filter(|n| n.starts_with(&format!("ptun-{pid}-")))
        .collect()
}

/// Pantheon's text-log line `ms - uid - size`, parsed as `merge_tunnel_logs.py` does.
fn text_records(path: &Path) -> (String, HashMap<u64, u64>) {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    let header = lines.next().unwrap().to_owned();
    let mut sizes = HashMap::new();
    for line in lines {
        let parts: Vec<&str> = line.split(" - ").collect();
        assert_eq!(parts.len(), 3, "{}: bad line {line:?}", path.display());
        parts[0].parse::<f64>().unwrap();
        sizes.insert(parts[1].parse().unwrap(), parts[2].parse().unwrap());
    }
    (header, sizes)
}

#[test]
fn drop_in_for_mm_tunnelserver_and_mm_tunnelclient() {
    let dir = scratch("compat");
    let server_bin = dir.join("mm-tunnelserver");
    let client_bin = dir.join("mm-tunnelclient");
    std::os::unix::fs::symlink(BIN, &server_bin).unwrap();
    std::os::unix::fs::symlink(BIN, &client_bin).unwrap();
    let p = |n: &str| dir.join(n).to_str().unwrap().to_owned();

    // As tunnel_manager.py: the server first, its stdout line gives the client's arguments.
    let (mut server, server_out) = spawn(
        &server_bin,
        &[
            &format!("--ingress-log={}", p("s.ingress")),
            &format!("--egress-log={}", p("s.egress")),
            "iperf3",
            "-s",
            "-1",
        ],
    );
    let line = line_with(&server_out, "mm-tunnelclient", Duration::from_secs(10));
    let words: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(words.len(), 5, "{line}");
    assert_eq!(&words[..2], ["mm-tunnelclient", "localhost"]);
    let (port, client_private, server_private) = (words[2], words[3], words[4]);
    assert!(client_private.starts_with("100.64.0.") && server_private.starts_with("100.64.0."));

    // Options after the positionals, as Pantheon appends them. The server's iperf3 starts
    // with its tunnel and may not listen yet when the client's tunnel is up (Pantheon waits
    // its first side's setup time): the client tries again until it is refused no more.
    let iperf3_client = format!(
        "for i in $(seq 50); do iperf3 -c {server_private} -t 2 && exit 0; sleep 0.2; done; exit 1"
    );
    let (mut client, client_out) = spawn(
        &client_bin,
        &[
            "127.0.0.1",
            port,
            client_private,
            server_private,
            &format!("--ingress-log={}", p("c.ingress")),
            &format!("--egress-log={}", p("c.egress")),
            "sh",
            "-c",
            &iperf3_client,
        ],
    );
    line_with(
        &client_out,
        "Tunnelclient got connection from tunnelserver at 127.0.0.1",
        Duration::from_secs(10),
    );
    assert!(wait_exit(&mut client, Duration::from_secs(30)).success());
    assert!(wait_exit(&mut server, Duration::from_secs(10)).success());
    assert!(namespaces_of(server.id()).is_empty() && namespaces_of(client.id()).is_empty());

    // Headers: getopt's order (options first), then the kind and a ms timestamp.
    let (client_header, sent) = text_records(&dir.join("c.egress"));
    let prefix = format!(
        "# '{}' '--ingress-log={}' '--egress-log={}' '127.0.0.1' '{port}' '{client_private}' \
         '{server_private}' 'sh' '-c' '{iperf3_client}' egress: ",
        client_bin.display(),
        p("c.ingress"),
        p("c.egress"),
    );
    assert!(client_header.starts_with(&prefix), "{client_header}");
    let stamp = &client_header[prefix.len()..];
    assert_eq!(stamp.split('.').nth(1).map(str::len), Some(3), "{stamp}");
    let (server_header, received) = text_records(&dir.join("s.ingress"));
    let prefix = format!(
        "# '{}' '--ingress-log={}' '--egress-log={}' 'iperf3' '-s' '-1' ingress: ",
        server_bin.display(),
        p("s.ingress"),
        p("s.egress"),
    );
    assert!(server_header.starts_with(&prefix), "{server_header}");

    // merge_tunnel_logs.py's rule: every received uid was sent, with the same size.
    assert!(sent.len() > 1000, "only {} packets sent", sent.len());
    for (uid, size) in &received {
        assert_eq!(sent.get(uid), Some(size), "uid {uid}");
    }
    assert!(received.len() as f64 >= 0.99 * sent.len() as f64);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn sigterm_ends_the_command_removes_the_namespace_and_keeps_the_logs() {
    let dir = scratch("sigterm");
    let p = |n: &str| dir.join(n).to_str().unwrap().to_owned();
    let pid_cmd = |file: &str| format!("echo $$ > {}; exec sleep 1000", p(file));
    let (mut server, server_out) = spawn(
        Path::new(BIN),
        &[
            "server",
            "--ingress-log",
            &p("s.ingress.ptlog"),
            "--egress-log",
            &p("s.egress.ptlog"),
            "sh",
            "-c",
            &pid_cmd("server.pid"),
        ],
    );
    let line = line_with(&server_out, "mm-tunnelclient", Duration::from_secs(10));
    let words: Vec<&str> = line.split_whitespace().collect();
    let (mut client, client_out) = spawn(
        Path::new(BIN),
        &[
            "client",
            "127.0.0.1",
            words[2],
            words[3],
            words[4],
            "--sender-side",
            "--egress-log",
            &p("c.egress.ptlog"),
            "bash",
            "-c",
            // A TCP SYN to the server's namespace (answered by a RST): traffic to log.
            &format!(
                "(echo >/dev/tcp/{}/9) 2>/dev/null; {}",
                words[4],
                pid_cmd("client.pid")
            ),
        ],
    );
    line_with(&client_out, "got connection", Duration::from_secs(10));
    let pid_of = |f: &str| -> u32 {
        let path = dir.join(f);
        assert!(io_wait(
            || std::fs::read_to_string(&path).is_ok_and(|s| s.ends_with('\n'))
        ));
        std::fs::read_to_string(&path)
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    };
    let commands = [pid_of("server.pid"), pid_of("client.pid")];
    for child in [&server, &client] {
        // SAFETY: plain syscall on our own child.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    }
    for child in [&mut server, &mut client] {
        let status = wait_exit(child, Duration::from_secs(10));
        assert_eq!(status.code(), Some(130));
        assert!(namespaces_of(child.id()).is_empty());
    }
    for pid in commands {
        assert!(
            !Path::new(&format!("/proc/{pid}")).exists(),
            "command {pid} still runs"
        );
    }

    let egress = read_log(&dir.join("c.egress.ptlog")).unwrap();
    assert_eq!(egress.header.role, Role::Client);
    assert_eq!(egress.header.kind, Kind::Egress);
    assert!(egress.stopped_at.is_none());
    assert!(!egress.records.is_empty());
    assert!(
        !dir.join("c.ingress.ptlog").exists(),
        "no --ingress-log, no file"
    );

    // `check` matches the client's egress with the server's ingress: nothing lost on loopback.
    let out = Command::new(BIN)
        .args([
            "check",
            &p("c.egress.ptlog"),
            &p("s.ingress.ptlog"),
            "--json",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let report = String::from_utf8(out.stdout).unwrap();
    let sent = egress.records.len();
    assert!(
        report.starts_with(&format!(
            "{{\"sent\": {sent}, \"received\": {sent}, \"lost\": 0,"
        )),
        "{report}"
    );

    // `convert` turns the binary log into Pantheon's text log, one line per record.
    let status = Command::new(BIN)
        .args(["convert", &p("c.egress.ptlog")])
        .status()
        .unwrap();
    assert!(status.success());
    let (header, records) = text_records(&dir.join("c.log.egress"));
    assert!(header.starts_with("# 'pantheon-tunnel' 'convert' 'c.egress.ptlog' egress: "));
    assert_eq!(records.len(), egress.records.len());
    std::fs::remove_dir_all(&dir).unwrap();
}

fn io_wait(mut cond: impl FnMut() -> bool) -> bool {
    pantheon_tunnel::io::wait_until(Duration::from_secs(10), &mut cond)
}

#[test]
fn client_without_server_gives_up_with_a_clear_error() {
    let port = std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = Command::new(BIN)
        .args([
            "client",
            "127.0.0.1",
            &port.to_string(),
            "100.64.0.2",
            "100.64.0.1",
            "true",
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("failed to connect to tunnel server after 6 tries"),
        "{stderr}"
    );
}

/// A connected server/client pair running `server_cmd` and `client_cmd` (after `sh -c`), both
/// with the extra options `opts`; stderr goes to files in `dir`.
fn pair(dir: &Path, opts: &[&str], server_cmd: &str, client_cmd: &str) -> (Child, Child) {
    let stderr = |name: &str| Stdio::from(std::fs::File::create(dir.join(name)).unwrap());
    let mut server = Command::new(BIN)
        .arg("server")
        .args(opts)
        .args(["sh", "-c", server_cmd])
        .stdout(Stdio::piped())
        .stderr(stderr("server.err"))
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(server.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let words: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(words.first(), Some(&"mm-tunnelclient"), "{line}");
    let client = Command::new(BIN)
        .args(["client", "127.0.0.1", words[2], words[3], words[4]])
        .args(opts)
        .args(["sh", "-c", client_cmd])
        .stdout(Stdio::null())
        .stderr(stderr("client.err"))
        .spawn()
        .unwrap();
    (server, client)
}

fn pid_in(path: &Path) -> u32 {
    assert!(io_wait(
        || std::fs::read_to_string(path).is_ok_and(|s| s.ends_with('\n'))
    ));
    std::fs::read_to_string(path)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// The host's first non-loopback IPv4 address.
fn host_address() -> String {
    let out = Command::new("ip")
        .args(["-4", "-o", "addr", "show"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().nth(3))
        .filter_map(|a| a.split('/').next())
        .find(|a| !a.starts_with("127."))
        .expect("this test needs a non-loopback IPv4 address on the host")
        .to_owned()
}

#[test]
fn a_closing_peer_ends_the_other_endpoint() {
    let dir = scratch("fin");
    let pid_file = dir.join("server.pid");
    // Containment first: from the client's namespace, a host address outside the tunnel is
    // unreachable (routed into the tunnel, not forwarded by the server's namespace).
    let listener = std::net::TcpListener::bind("0.0.0.0:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let target = format!(
        "{}/{}",
        host_address(),
        listener.local_addr().unwrap().port()
    );
    let (mut server, mut client) = pair(
        &dir,
        &[],
        &format!("echo $$ > {}; exec sleep 1000", pid_file.display()),
        &format!("timeout 3 bash -c 'echo > /dev/tcp/{target}' 2>/dev/null; exit $((3 + $?))"),
    );
    let command = pid_in(&pid_file);
    // The client's COMMAND exits at once: the client passes on its status and sends FIN.
    let status = wait_exit(&mut client, Duration::from_secs(10)).code();
    assert!(
        matches!(status, Some(4..)),
        "{target} reachable: exit {status:?}"
    );
    assert!(listener.accept().is_err(), "a connection reached the host");
    // The server ends its COMMAND (after a 2 s grace) and says why.
    let status = wait_exit(&mut server, Duration::from_secs(10));
    assert_eq!(status.code(), Some(1));
    let err = std::fs::read_to_string(dir.join("server.err")).unwrap();
    assert!(err.contains("closed the tunnel"), "{err}");
    assert!(!Path::new(&format!("/proc/{command}")).exists());
    assert!(namespaces_of(server.id()).is_empty() && namespaces_of(client.id()).is_empty());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_vanished_peer_ends_the_other_endpoint_after_the_peer_timeout() {
    let dir = scratch("vanish");
    let pid_file = dir.join("server.pid");
    let (mut server, mut client) = pair(
        &dir,
        &["--peer-timeout", "1.5"],
        &format!("echo $$ > {}; exec sleep 1000", pid_file.display()),
        "exec sleep 1000",
    );
    let command = pid_in(&pid_file);
    // Idle for longer than the timeout: KEEPALIVEs keep both ends up.
    std::thread::sleep(Duration::from_secs(3));
    assert!(server.try_wait().unwrap().is_none(), "idle tunnel ended");
    // SIGKILL: the client can neither send FIN nor clean up.
    client.kill().unwrap();
    client.wait().unwrap();
    let killed_at = Instant::now();
    let status = wait_exit(&mut server, Duration::from_secs(10));
    let took = killed_at.elapsed();
    // Our own leftovers of the killed client: its COMMAND and namespace.
    for ns in namespaces_of(client.id()) {
        let out = Command::new("ip")
            .args(["netns", "pids", &ns])
            .output()
            .unwrap();
        for pid in String::from_utf8_lossy(&out.stdout).split_whitespace() {
            // SAFETY: plain syscall; these processes were started by the killed client.
            unsafe { libc::kill(pid.parse().unwrap(), libc::SIGKILL) };
        }
        netns::run_command("ip", &["netns", "del", &ns]).unwrap();
    }
    assert_eq!(status.code(), Some(1));
    assert!(took < Duration::from_secs(4), "noticed after {took:?}");
    let err = std::fs::read_to_string(dir.join("server.err")).unwrap();
    assert!(err.contains("for 1.5 s: it vanished"), "{err}");
    assert!(!Path::new(&format!("/proc/{command}")).exists());
    assert!(namespaces_of(server.id()).is_empty());
    std::fs::remove_dir_all(&dir).unwrap();
}
