//! A scheme's side as a process: started inside its namespace in a process group of its own,
//! its output in the side's `.out` file, checked for an early exit, and ended (SIGTERM, then
//! SIGKILL to the group) when dropped. A side in a guest kernel is its QEMU
//! ([`crate::guests`]), whose command's exit status the guest records.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;
use netns::NetNs;

use crate::schemes::{flow_stem, side_file, Side};

/// A scheme process: its own process group, ended on drop.
pub struct SchemeProcess {
    pub(crate) what: String,
    child: Child,
    log: PathBuf,
    /// The flow it belongs to (1-based).
    pub(crate) flow: u16,
    /// Whether a successful exit means its work is done (a side of a flow with a workload)
    /// rather than a failure.
    pub(crate) may_finish: bool,
    /// Set once it exited successfully with `may_finish`.
    finished: bool,
    /// For a side in a guest (QEMU), the guest's job directory, where it records its
    /// command's exit status (QEMU itself exits 0 at power-off whatever the command did).
    pub(crate) guest_job: Option<PathBuf>,
    /// A program that names its qlog itself writes it into this directory ([`qlog_dir`]);
    /// when the side ends, its one file becomes the side's [`qlog`] (the second path).
    qlog_dir: Option<(PathBuf, PathBuf)>,
}

impl SchemeProcess {
    /// Non-blocking check: `Some(description)` if it has exited and that fails the run — an
    /// exit of a side that [may finish](SchemeProcess::finished) with status 0 does not.
    pub fn exited(&mut self) -> Option<String> {
        if self.finished {
            return None;
        }
        match self.child.try_wait() {
            Ok(Some(status)) if status.success() && self.guest_job.is_some() => {
                let job = self.guest_job.as_deref().expect("checked");
                match guest::exit_status(job) {
                    Some(0) if self.may_finish => {
                        self.finished = true;
                        None
                    }
                    code => Some(format!(
                        "{} ended early in its guest ({}); last output: {}",
                        self.what,
                        code.map_or(
                            "the guest powered off before its command ended".into(),
                            |c| { format!("exit status {c}") }
                        ),
                        tail(&self.log, 400)
                    )),
                }
            }
            Ok(Some(status)) if status.success() && self.may_finish => {
                self.finished = true;
                None
            }
            Ok(Some(status)) => Some(format!(
                "{} exited early ({status}); last output: {}",
                self.what,
                tail(&self.log, 400)
            )),
            Ok(None) => None,
            Err(e) => Some(format!("{}: {e}", self.what)),
        }
    }

    /// What it is, for messages: "sender of flow 1 (`iperf3 …`)".
    pub fn describe(&self) -> &str {
        &self.what
    }

    /// Whether it exited successfully with its flow's work done (a workload's sender after
    /// its transfers were acknowledged), as seen by the last [`SchemeProcess::exited`].
    pub fn finished(&self) -> bool {
        self.finished
    }

    /// SIGTERM to the group, up to 2 s grace, then SIGKILL; reaps the child.
    pub fn stop(&mut self) {
        let pgid = self.child.id();
        netns::kill_group(pgid, libc::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(2);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        // The group may hold grandchildren even after the leader exited.
        netns::kill_group(pgid, libc::SIGKILL);
        let _ = self.child.wait();
        if let Some((dir, qlog)) = self.qlog_dir.take() {
            collect_qlog(&dir, &qlog);
        }
    }
}

/// Moves the one file a side left in its qlog directory `dir` to `qlog` and removes the
/// directory; with several files (several connections), the directory stays as it is, its
/// files named by the program.
fn collect_qlog(dir: &Path, qlog: &Path) {
    let files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| d.filter_map(|e| Some(e.ok()?.path())).collect())
        .unwrap_or_default();
    if let [one] = files.as_slice() {
        if std::fs::rename(one, qlog).is_err() {
            return;
        }
    }
    let _ = std::fs::remove_dir(dir);
}

impl Drop for SchemeProcess {
    fn drop(&mut self) {
        self.stop();
    }
}

fn tail(path: &Path, max: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let t = text.trim();
    let start = t.len().saturating_sub(max);
    let start = (start..t.len())
        .find(|&i| t.is_char_boundary(i))
        .unwrap_or(t.len());
    if t.is_empty() {
        "(none)".into()
    } else {
        t[start..].replace('\n', " | ")
    }
}

/// Starts `argv` (one side of a scheme) inside `ns`, in a process group of its own, with its
/// output in `<dir>/<scheme>_run<N>_flow<i>.<side>.out`.
pub fn spawn(
    ns: &NetNs,
    argv: &[String],
    dir: &Path,
    scheme: &str,
    run_id: u32,
    flow: usize,
    side: Side,
) -> anyhow::Result<SchemeProcess> {
    spawn_with(ns, argv, (dir, scheme, run_id, flow, side), &|_| {})
}

/// Where a side's output goes: (results directory, scheme, run id, flow, side).
pub type SideOutput<'a> = (&'a Path, &'a str, u32, usize, Side);

/// A side's TLS key log: `<dir>/<scheme>_run<N>_flow<i>.<side>.keys`, NSS key log lines
/// (`SSLKEYLOGFILE`'s format, as browsers and curl write it) of every TLS secret its QUIC
/// connections derived, with which Wireshark decrypts a `--capture`.
pub fn key_log(out: SideOutput) -> PathBuf {
    side_output_file(out, "keys")
}

/// The side's file `what` of [`SideOutput`] `out`: `<dir>/<scheme>_run<N>_flow<i>.<side>.<what>`.
fn side_output_file((dir, scheme, run_id, flow, side): SideOutput, what: &str) -> PathBuf {
    let flow_id = u16::try_from(flow).unwrap_or(u16::MAX);
    side_file(&flow_stem(dir, scheme, run_id, flow_id), side, what)
}

/// A side's qlog: `<dir>/<scheme>_run<N>_flow<i>.<side>.sqlog`, the QUIC endpoint's events
/// (packets sent, received and lost, congestion window and RTT updates) as qlog JSON-SEQ
/// (draft-ietf-quic-qlog-main-schema: one JSON record per event after an ASCII RS, `.sqlog`),
/// the serialisation the qlog drafts define for tools such as qvis.
pub fn qlog(out: SideOutput) -> PathBuf {
    side_output_file(out, "sqlog")
}

/// A side's qlog directory, `<dir>/<scheme>_run<N>_flow<i>.<side>.qlog.d`: for a program that
/// names its qlog file itself (tquic's `--qlog-dir`, `{qlog_dir}` in a descriptor's
/// `capture_args`); [`spawn_with_quic_logs`] creates it, and the one file found there when the
/// side ends becomes the side's [`qlog`].
pub fn qlog_dir(out: SideOutput) -> PathBuf {
    side_output_file(out, "qlog.d")
}

/// The environment variable naming the file a QUIC scheme's program writes its qlog to
/// ([`qlog`]); ours (schemes/quinn, schemes/quiche, through `pantheon_scheme_wrapper::qlog_writer`)
/// honour it, as `SSLKEYLOGFILE` for keys.
pub const QLOG_ENV: &str = "PANTHEON_QLOG";

/// [`spawn`] with `SSLKEYLOGFILE` set to the side's [`key_log`] and [`QLOG_ENV`] to its
/// [`qlog`] (`--capture`): the QUIC schemes' programs (quinn's rustls, quiche's BoringSSL)
/// write their TLS secrets and their qlog there; the others ignore both. `capture_args` (the
/// scheme's for this side, `Scheme::capture_args`) are appended to `argv` with `{keys}`,
/// `{qlog}` and `{qlog_dir}` filled in; when they name the side's [`qlog_dir`], it is created
/// first and collected when the side ends.
pub fn spawn_with_quic_logs(
    ns: &NetNs,
    argv: &[String],
    capture_args: &[String],
    out: SideOutput,
) -> anyhow::Result<SchemeProcess> {
    let (keys, qlog, dir) = (key_log(out), qlog(out), qlog_dir(out));
    let text = |p: &Path| p.display().to_string();
    let appended = capture_args.iter().map(|a| {
        a.replace("{keys}", &text(&keys))
            .replace("{qlog_dir}", &text(&dir))
            .replace("{qlog}", &text(&qlog))
    });
    let argv: Vec<String> = argv.iter().cloned().chain(appended).collect();
    let names_dir = capture_args.iter().any(|a| a.contains("{qlog_dir}"));
    if names_dir {
        std::fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
    }
    let mut p = spawn_with(ns, &argv, out, &|cmd| {
        cmd.env("SSLKEYLOGFILE", &keys).env(QLOG_ENV, &qlog);
    })?;
    p.qlog_dir = names_dir.then_some((dir, qlog));
    Ok(p)
}

/// [`spawn`], with `configure` applied to the command before it starts (a guest's QEMU: a
/// parent-death signal).
pub fn spawn_with(
    ns: &NetNs,
    argv: &[String],
    (dir, scheme, run_id, flow, side): SideOutput,
    configure: &dyn Fn(&mut Command),
) -> anyhow::Result<SchemeProcess> {
    let side_name = side.name();
    let flow_id = u16::try_from(flow).unwrap_or(u16::MAX);
    let log = side_output_file((dir, scheme, run_id, flow, side), "out");
    let out = File::create(&log).with_context(|| format!("create {}", log.display()))?;
    let err = out.try_clone()?;
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err);
    ns.spawn_into(&mut cmd);
    configure(&mut cmd);
    let child = cmd
        .spawn()
        .with_context(|| format!("start {side_name} `{}`", argv.join(" ")))?;
    Ok(SchemeProcess {
        what: format!("{side_name} of flow {flow} (`{}`)", argv.join(" ")),
        child,
        log,
        flow: flow_id,
        may_finish: false,
        finished: false,
        guest_job: None,
        qlog_dir: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_qlog_directory_s_one_file_becomes_the_side_s_qlog() {
        let base = std::env::temp_dir().join(format!("qlog-dir-{}", std::process::id()));
        let out = (base.as_path(), "quic_bbr3", 2, 1, Side::Sender);
        let (dir, qlog) = (qlog_dir(out), qlog(out));
        assert!(dir.ends_with("quic_bbr3_run2_flow1.sender.qlog.d"));
        assert!(qlog.ends_with("quic_bbr3_run2_flow1.sender.sqlog"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("SERVER-1a2b.qlog"), "\u{1e}{}\n").unwrap();
        collect_qlog(&dir, &qlog);
        assert_eq!(std::fs::read_to_string(&qlog).unwrap(), "\u{1e}{}\n");
        assert!(!dir.exists());
        // Two connections' files: the directory stays, nothing is overwritten.
        std::fs::create_dir_all(&dir).unwrap();
        for f in ["a.qlog", "b.qlog"] {
            std::fs::write(dir.join(f), "x").unwrap();
        }
        collect_qlog(&dir, &qlog);
        assert!(dir.join("a.qlog").exists() && dir.join("b.qlog").exists());
        assert_eq!(std::fs::read_to_string(&qlog).unwrap(), "\u{1e}{}\n");
        let _ = std::fs::remove_dir_all(&base);
    }
}
