//! Slurm, through its stable command-line tools: `sbatch` submits a batch script (a sweep's
//! job array), `squeue` says what of it is pending or running, `scancel` cancels it, and
//! `srun --exact` runs one job step inside an allocation (a calibration's evaluation). The
//! Rust bindings of Slurm's C API are unmaintained and tied to one Slurm version; the CLI has
//! been stable for a decade and is what every site documents.
//!
//! Parsing what the tools print is kept in pure functions ([`parse_job_id`],
//! [`parse_queue`], [`parse_max_array_size`], [`array_spec`]) with unit tests; the functions
//! that run the tools are thin.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{bail, Context};

/// The Slurm allocation this process runs in (from the variables `sbatch`, `salloc` and
/// `srun` set), if any.
#[derive(Debug, Clone, PartialEq)]
pub struct Allocation {
    /// `SLURM_JOB_ID`.
    pub job_id: String,
    /// CPUs allocated on this node (`SLURM_CPUS_ON_NODE`), if Slurm said.
    pub cpus_on_node: Option<usize>,
    /// Tasks of the allocation (`SLURM_NTASKS`), if Slurm said.
    pub ntasks: Option<usize>,
}

/// The allocation of this process, from its environment; `None` outside Slurm.
pub fn allocation() -> Option<Allocation> {
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let num = |k: &str| var(k).and_then(|v| v.trim().parse::<usize>().ok());
    Some(Allocation {
        job_id: var("SLURM_JOB_ID")?,
        cpus_on_node: num("SLURM_CPUS_ON_NODE"),
        ntasks: num("SLURM_NTASKS"),
    })
}

/// Where this process runs: the machine's name and, inside a job step, Slurm's `JOB.STEP`.
pub fn here() -> (String, Option<String>) {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_default();
    let step = match (
        std::env::var("SLURM_JOB_ID"),
        std::env::var("SLURM_STEP_ID"),
    ) {
        (Ok(j), Ok(s)) => Some(format!("{j}.{s}")),
        _ => None,
    };
    (host, step)
}

/// This process's allocation, or the error of a `--executor slurm` command started outside
/// one (see [`outside_allocation`]); `what` names the command, and its arguments are this
/// process's after the first `words` (`pantheon calibrate` = 2), less `--executor slurm`.
pub fn require_allocation(what: &str, words: usize) -> anyhow::Result<Allocation> {
    allocation().ok_or_else(|| {
        let args: Vec<String> = std::env::args()
            .skip(words)
            .filter(|x| x != "--executor" && x != "slurm" && x != "--executor=slurm")
            .map(|x| shell_quote(&x))
            .collect();
        outside_allocation(what, &args.join(" "))
    })
}

/// CPUs of each job step: `SLURM_CPUS_PER_TASK` (sbatch/salloc `-c`), else 1.
pub fn cpus_per_task() -> usize {
    std::env::var("SLURM_CPUS_PER_TASK")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(1)
}

/// The error of a `--executor slurm` command started outside an allocation: how to get one.
/// `what` names the command (`pantheon calibrate`), `args` its arguments as given.
pub fn outside_allocation(what: &str, args: &str) -> anyhow::Error {
    anyhow::anyhow!(
        "--executor slurm runs each evaluation as a job step (`srun --exact`) inside a Slurm \
         allocation, and this is not one (no SLURM_JOB_ID). Get one, e.g. 4 evaluations at a \
         time, 1 CPU each:\n  \
         sbatch -n 4 -c 1 --time=2:00:00 --wrap '{what} {args} --executor slurm'\n\
         or interactively:\n  \
         salloc -n 4 -c 1 --time=2:00:00 {what} {args} --executor slurm"
    )
}

/// A Slurm tool, with a clear error when it is not installed.
fn tool(name: &str) -> Command {
    Command::new(name)
}

fn run_tool(mut cmd: Command, name: &str) -> anyhow::Result<std::process::Output> {
    cmd.stdin(Stdio::null()).output().with_context(|| {
        format!(
            "run `{name}`: is this a node of a Slurm cluster? (`{name}` is in Debian's \
                 slurm-client package; see docs/slurm.md)"
        )
    })
}

/// Submits batch script `script` (`sbatch --parsable`); returns the job id.
pub fn submit(script: &Path) -> anyhow::Result<String> {
    let mut cmd = tool("sbatch");
    cmd.arg("--parsable").arg(script);
    let out = run_tool(cmd, "sbatch")?;
    if !out.status.success() {
        bail!(
            "sbatch {} refused the job: {}",
            script.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    parse_job_id(&String::from_utf8_lossy(&out.stdout))
}

/// The job id `sbatch --parsable` printed: `1234` or `1234;cluster`.
pub fn parse_job_id(out: &str) -> anyhow::Result<String> {
    let id = out.trim().split(';').next().unwrap_or("").trim();
    if id.is_empty() || !id.chars().all(|c| c.is_ascii_digit()) {
        bail!("sbatch printed `{}`, not a job id", out.trim());
    }
    Ok(id.to_owned())
}

/// One element of a job in the queue: its id (`1234_7` for task 7 of array job 1234) and its
/// state (`PENDING`, `RUNNING`, `COMPLETING`, …).
#[derive(Debug, Clone, PartialEq)]
pub struct Queued {
    /// `JOB` or `JOB_TASK`.
    pub id: String,
    /// Slurm's state name.
    pub state: String,
}

impl Queued {
    /// The array task id, if this is an array element.
    pub fn task(&self) -> Option<u32> {
        self.id.split_once('_')?.1.parse().ok()
    }
}

/// What of job `job` is still in the queue (pending, running or completing), one element per
/// array task; empty when it has ended. Errors when `squeue` fails for another reason than
/// the job being gone (then whether it still runs is not known).
pub fn queue(job: &str) -> anyhow::Result<Vec<Queued>> {
    let mut cmd = tool("squeue");
    cmd.args(["-h", "-r", "-j", job, "-o", "%i %T"]);
    let out = run_tool(cmd, "squeue")?;
    let err = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        // A job that ended and left the controller's memory is an "invalid job id".
        if err.contains("Invalid job id") {
            return Ok(Vec::new());
        }
        bail!("squeue -j {job}: {}", err.trim());
    }
    Ok(parse_queue(&String::from_utf8_lossy(&out.stdout)))
}

/// `squeue -h -r -o "%i %T"`'s lines → elements; lines that are not `ID STATE` are skipped,
/// and so are jobs that have ended (`COMPLETED`, `CANCELLED`, `FAILED`, …).
pub fn parse_queue(text: &str) -> Vec<Queued> {
    const LIVE: [&str; 7] = [
        "PENDING",
        "CONFIGURING",
        "RUNNING",
        "COMPLETING",
        "SUSPENDED",
        "REQUEUED",
        "RESIZING",
    ];
    text.lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            let (id, state) = (it.next()?, it.next()?);
            LIVE.contains(&state).then(|| Queued {
                id: id.to_owned(),
                state: state.to_owned(),
            })
        })
        .collect()
}

/// Cancels job `job` (`scancel`; `JOB_TASK` cancels one array task): its running tasks get
/// SIGTERM, then SIGKILL after the site's KillWait.
pub fn cancel(job: &str) -> anyhow::Result<()> {
    let mut cmd = tool("scancel");
    cmd.arg(job);
    let out = run_tool(cmd, "scancel")?;
    if !out.status.success() {
        bail!(
            "scancel {job}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// The site's largest array index + 1 (`MaxArraySize` of `scontrol show config`), if it can
/// be read.
pub fn max_array_size() -> Option<u32> {
    let mut cmd = tool("scontrol");
    cmd.args(["show", "config"]);
    let out = run_tool(cmd, "scontrol").ok()?;
    parse_max_array_size(&String::from_utf8_lossy(&out.stdout))
}

/// `MaxArraySize = 1001` in `scontrol show config`'s output.
pub fn parse_max_array_size(text: &str) -> Option<u32> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once('=')?;
        (k.trim() == "MaxArraySize")
            .then(|| v.trim().parse().ok())
            .flatten()
    })
}

/// `sbatch --array`'s value for indices `ids` (any order): runs of consecutive indices as
/// ranges, `%throttle` when given: `[1,2,3,4,7,9,10]`, 2 → `1-4,7,9-10%2`.
pub fn array_spec(ids: &[u32], throttle: Option<usize>) -> String {
    let mut ids = ids.to_vec();
    ids.sort_unstable();
    ids.dedup();
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < ids.len() {
        let mut j = i;
        while j + 1 < ids.len() && ids[j + 1] == ids[j] + 1 {
            j += 1;
        }
        parts.push(if i == j {
            ids[i].to_string()
        } else {
            format!("{}-{}", ids[i], ids[j])
        });
        i = j + 1;
    }
    let mut s = parts.join(",");
    if let Some(t) = throttle {
        s.push_str(&format!("%{t}"));
    }
    s
}

/// A job step of one task with `cpus` CPUs, given only those (`srun --exact -n1 -cCPUS`), named
/// `name`, for `program` to be added to: `srun … -- program args…`.
pub fn step(cpus: usize, name: &str) -> Command {
    let mut cmd = tool("srun");
    cmd.args(["--exact", "--quiet", "-n1", "-N1"])
        .arg(format!("-c{}", cpus.max(1)))
        .arg(format!("--job-name={name}"));
    cmd
}

/// Runs `cmd` (an `srun`) to its end in a process group of its own, so that the terminal's
/// Ctrl-C reaches only this process; once `interrupted` is set it is sent one SIGTERM, which
/// `srun` passes to its step (whose process then tears its run down). If this process dies,
/// the kernel sends it SIGTERM too (`PR_SET_PDEATHSIG`).
pub fn run_until_interrupted(
    mut cmd: Command,
    interrupted: &AtomicBool,
) -> anyhow::Result<std::process::ExitStatus> {
    cmd.process_group(0);
    // SAFETY: prctl with integer arguments, async-signal-safe, between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
            Ok(())
        });
    }
    let mut child = cmd
        .spawn()
        .context("run srun: is this a node of a Slurm cluster? (see docs/slurm.md)")?;
    let mut signalled = false;
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(status);
        }
        if interrupted.load(Ordering::SeqCst) && !signalled {
            signalled = true;
            // SAFETY: a signal to a child of ours, by its id.
            unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The request file a job step is given, in its directory.
pub const STEP_REQUEST: &str = "request.json";
/// The answer file a job step writes beside its request.
pub const STEP_ANSWER: &str = "result.json";

/// One job step round trip: `request` written to `dir/request.json`, then `program
/// words… dir/request.json` run as a job step of `cpus` CPUs named `name` ([`step`], until
/// `interrupted`: [`run_until_interrupted`]), then its answer read from `dir/result.json`
/// (written by the step with [`write_answer`]). Errors when the step cannot start, or ends
/// without an answer that reads.
pub fn step_round_trip<A: serde::de::DeserializeOwned>(
    cpus: usize,
    name: &str,
    program: &Path,
    words: &[&str],
    dir: &Path,
    request: &impl serde::Serialize,
    interrupted: &AtomicBool,
) -> anyhow::Result<A> {
    std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
    let path = dir.join(STEP_REQUEST);
    std::fs::write(&path, serde_json::to_vec(request)?)
        .with_context(|| format!("write {}", path.display()))?;
    let answer = dir.join(STEP_ANSWER);
    let _ = std::fs::remove_file(&answer);
    let mut cmd = step(cpus, name);
    cmd.arg(program)
        .args(words)
        .arg(&path)
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    let status = run_until_interrupted(cmd, interrupted).context("start the job step (srun)")?;
    let bytes = std::fs::read(&answer).map_err(|_| {
        anyhow::anyhow!(
            "the job step ended ({status}) without a result{}",
            if interrupted.load(Ordering::SeqCst) {
                ": interrupted"
            } else {
                " (see srun's message above)"
            }
        )
    })?;
    serde_json::from_slice(&bytes).with_context(|| format!("read {}", answer.display()))
}

/// A job step's answer `value`, written beside its `request` (`result.json`).
pub fn write_answer(request: &Path, value: &impl serde::Serialize) -> anyhow::Result<()> {
    let out = request.with_file_name(STEP_ANSWER);
    std::fs::write(&out, serde_json::to_vec(value)?)
        .with_context(|| format!("write {}", out.display()))
}

/// `s` quoted for a POSIX shell (a batch script).
pub fn shell_quote(s: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c);
    if !s.is_empty() && s.chars().all(plain) {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_the_tools_print_is_read() {
        assert_eq!(parse_job_id("1234\n").unwrap(), "1234");
        assert_eq!(parse_job_id("77;cluster\n").unwrap(), "77");
        assert!(parse_job_id("sbatch: error").is_err());
        let q = parse_queue("12_3 RUNNING\n12_4 PENDING\n12_1 COMPLETED\njunk\n");
        assert_eq!(q.len(), 2);
        assert_eq!((q[0].task(), q[1].state.as_str()), (Some(3), "PENDING"));
        let conf = "MaxArraySize            = 1001\nMaxJobCount             = 10000\n";
        assert_eq!(parse_max_array_size(conf), Some(1001));
        assert_eq!(parse_max_array_size("nothing"), None);
    }

    #[test]
    fn array_specs_are_ranges() {
        assert_eq!(array_spec(&[10, 9, 1, 2, 3, 4, 7], Some(2)), "1-4,7,9-10%2");
        assert_eq!(array_spec(&[5], None), "5");
        assert_eq!(array_spec(&[], None), "");
    }

    #[test]
    fn shell_quoting() {
        assert_eq!(shell_quote("/a/b-c.d"), "/a/b-c.d");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(shell_quote(""), "''");
    }
}
