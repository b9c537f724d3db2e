//! What the end-to-end testbed tests share: agents started in namespaces, commands, output.
#![allow(dead_code)] // each test binary uses part of it

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// One agent process (started through nsenter into its node's namespace).
pub struct Agent {
    /// The process.
    pub child: Child,
    /// Its node name.
    pub name: String,
    /// Its namespace.
    pub ns: String,
    log: PathBuf,
    /// Where this instance's lines start in `log` (a restarted agent appends to the log of the
    /// one it replaces).
    log_from: usize,
}

impl Agent {
    /// Starts `pantheon-agent --name NAME` in namespace `ns`, with `dir/creds` and its data
    /// in `dir/agent-NAME`, logging to `dir/agent-NAME.log`; returns once it listens.
    pub fn start(ns: &str, name: &str, dir: &Path) -> Agent {
        let log = dir.join(format!("agent-{name}.log"));
        let (out, log_from) = append_log(&log);
        let child = Command::new("nsenter")
            .arg(format!("--net=/run/netns/{ns}"))
            .arg(env!("CARGO_BIN_EXE_pantheon-agent"))
            .args(["--listen", "0.0.0.0:7070", "--name", name, "--credentials"])
            .arg(dir.join("creds"))
            .arg("--data-dir")
            .arg(dir.join(format!("agent-{name}")))
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .expect("start pantheon-agent");
        let a = Agent {
            child,
            name: name.to_owned(),
            ns: ns.to_owned(),
            log,
            log_from,
        };
        // Listening once it says so.
        let deadline = Instant::now() + Duration::from_secs(20);
        while !a.log_text().contains("listening on") {
            assert!(
                Instant::now() < deadline,
                "agent {name} did not start: {}",
                a.log_text()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        a
    }

    /// What this instance has logged so far.
    pub fn log_text(&self) -> String {
        let text = std::fs::read(&self.log).unwrap_or_default();
        String::from_utf8_lossy(text.get(self.log_from..).unwrap_or_default()).into_owned()
    }

    /// This agent's run namespaces that exist now.
    pub fn namespaces(&self) -> Vec<String> {
        netns::list_named()
            .into_iter()
            .filter(|n| n.starts_with(&format!("pa-{}-", self.name)))
            .collect()
    }

    /// SIGTERM, then SIGKILL after 10 s; reaps it.
    pub fn stop(&mut self) {
        stop_child(&mut self.child);
    }
}

/// Stops a child process of ours by its id: SIGTERM, then SIGKILL after 10 s; reaps it.
pub fn stop_child(child: &mut Child) {
    if let Ok(Some(_)) = child.try_wait() {
        return; // already ended (and reaped): its pid may be someone else's now
    }
    // SAFETY: plain syscall on our own, still running child.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
}

impl Drop for Agent {
    fn drop(&mut self) {
        self.stop();
    }
}

/// `path` opened for appending (created if missing), and its length: where the lines of the
/// process about to write to it start (a restarted process appends to its predecessor's log).
pub fn append_log(path: &Path) -> (std::fs::File, usize) {
    let from = std::fs::metadata(path).map_or(0, |m| m.len() as usize);
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap();
    (file, from)
}

/// Runs a command; panics with its stderr if it fails.
pub fn sh(args: &[&str]) {
    let out = Command::new(args[0]).args(&args[1..]).output().unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A command's stdout and stderr.
pub fn text(o: &Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A JSON file, parsed.
pub fn read_json(p: &Path) -> Value {
    serde_json::from_str(
        &std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())),
    )
    .unwrap()
}

/// A temporary directory, removed on drop.
pub struct Dir(pub PathBuf);

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A fresh directory `pantheon-<what>-<pid>` in the system's temporary directory, removed on
/// drop.
pub fn temp(what: &str) -> Dir {
    let d = std::env::temp_dir().join(format!("pantheon-{what}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    Dir(d)
}

/// `pantheon args…` (this build's), which must succeed: its output.
pub fn pantheon(args: &[&str]) -> String {
    let (code, out) = pantheon_status(args);
    assert_eq!(code, 0, "pantheon {args:?} failed:\n{out}");
    out
}

/// `pantheon args…` (this build's): its exit status and output.
pub fn pantheon_status(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_pantheon"))
        .args(args)
        .output()
        .expect("run pantheon");
    (out.status.code().unwrap_or(-1), text(&out))
}

/// Each case `(args, says)`: `pantheon run MODE --data-dir DATA ARGS…` (`local` or `sim`) is
/// refused before anything runs — exit status 2, its output saying `says`, nothing created at
/// `data`.
pub fn refused_before_anything_runs(mode: &str, data: &Path, cases: &[(Vec<&str>, &str)]) {
    for (args, says) in cases {
        let mut all = vec!["run", mode, "--data-dir", data.to_str().unwrap()];
        all.extend(args.iter().copied());
        let (code, out) = pantheon_status(&all);
        assert_eq!(code, 2, "{args:?}: {out}");
        assert!(out.contains(says), "{args:?}: {out}");
        assert!(!data.exists(), "{args:?} created {}", data.display());
    }
}

/// The pids of every `iperf3` process on this machine (a kernel scheme's two sides).
pub fn iperf3_pids() -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()))
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "iperf3")
        })
        .collect()
}

/// `(sent, arrived)` of every datalink packet of run 1, flow 1 of `scheme` in `data` that
/// crossed the path, ms since the Unix epoch on the host's clock: from the tunnel's two logs
/// (the sender side's egress, the receiver side's ingress), matched by packet uid.
pub fn crossed_packets(data: &Path, scheme: &str) -> Vec<(f64, f64)> {
    let log = |kind: &str| {
        let f = data.join(format!("{scheme}_datalink_run1_flow1.{kind}.ptlog"));
        tunnel::log::read_log(&f).unwrap_or_else(|e| panic!("{}: {e}", f.display()))
    };
    let ms = |l: &tunnel::log::LogFile, t_ns: u64| {
        (l.header.base_realtime_ns as f64 + t_ns as f64) / 1e6
    };
    let (sent, arrived) = (log("egress"), log("ingress"));
    let sent_at: std::collections::HashMap<u64, f64> = sent
        .records
        .iter()
        .map(|r| (r.uid, ms(&sent, r.t_ns)))
        .collect();
    arrived
        .records
        .iter()
        .filter_map(|r| Some((*sent_at.get(&r.uid)?, ms(&arrived, r.t_ns))))
        .collect()
}

/// The packets `tshark -r capture args…` reads (Wireshark's own reader and dissectors, as a
/// researcher opens the file), one summary line each; panics with tshark's error if it cannot
/// read the file.
pub fn tshark(capture: &Path, args: &[&str]) -> Vec<String> {
    let out = Command::new("tshark")
        .arg("-r")
        .arg(capture)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("tshark (apt install tshark): {e}"));
    assert!(
        out.status.success(),
        "tshark -r {}: {}",
        capture.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

/// The packets of a pcapng file, in order: each Enhanced Packet Block's UID (its
/// `epb_packetid` option) and captured bytes, read block by block.
pub fn pcapng_packets(path: &Path) -> Vec<(u64, Vec<u8>)> {
    let b = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let u16_at = |i: usize| u16::from_le_bytes([b[i], b[i + 1]]);
    let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().unwrap());
    let mut out = Vec::new();
    let mut at = 0;
    while at < b.len() {
        let (kind, len) = (u32_at(at), u32_at(at + 4) as usize);
        assert_eq!(u32_at(at + len - 4) as usize, len, "block at {at}");
        if kind == 6 {
            let captured = u32_at(at + 20) as usize;
            let data = b[at + 28..at + 28 + captured].to_vec();
            let mut opt = at + 28 + captured.div_ceil(4) * 4;
            let mut uid = None;
            while u16_at(opt) != 0 {
                let olen = usize::from(u16_at(opt + 2));
                if u16_at(opt) == 5 {
                    uid = Some(u64::from_le_bytes(b[opt + 4..opt + 12].try_into().unwrap()));
                }
                opt += 4 + olen.div_ceil(4) * 4;
            }
            out.push((uid.expect("epb_packetid"), data));
        }
        at += len;
    }
    out
}

/// Asserts that the pcapng `capture` holds the packets of the tunnel log `log` — the same UIDs
/// in the same order — each cut at `snaplen` bytes and starting with an IPv4 header, and that
/// `tshark -r` reads as many packets from it; returns the UIDs.
pub fn captured_as_logged(log: &Path, capture: &Path, snaplen: usize) -> Vec<u64> {
    let uids: Vec<u64> = tunnel::log::read_log(log)
        .unwrap_or_else(|e| panic!("{}: {e}", log.display()))
        .records
        .iter()
        .map(|r| r.uid)
        .collect();
    let packets = pcapng_packets(capture);
    let what = capture.display();
    assert_eq!(
        packets.iter().map(|p| p.0).collect::<Vec<_>>(),
        uids,
        "{what}"
    );
    for (uid, bytes) in &packets {
        assert!(bytes.len() <= snaplen, "{what}: packet {uid}");
        assert_eq!(
            bytes.first().map(|b| b >> 4),
            Some(4),
            "{what}: packet {uid}"
        );
    }
    assert_eq!(tshark(capture, &[]).len(), uids.len(), "tshark -r {what}");
    uids
}
