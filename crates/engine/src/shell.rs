//! `pantheon shell`: run a command inside an emulated path written as a chain of Mahimahi
//! shells, as the chain itself would (`mahimahi.md` §1–2):
//!
//! ```text
//! pantheon shell mm-delay 28 mm-loss uplink 0.004 mm-link up.trace down.trace \
//!     --uplink-queue=droptail --uplink-queue-args=packets=50 -- iperf3 -c '$MAHIMAHI_BASE'
//! ```
//!
//! - The command runs in a new network namespace `pshell-<pid>` whose only route leads through
//!   the emulated path to a TUN device `pshell-<pid>` in the namespace `pantheon shell` was
//!   started in. Addresses are picked as Mahimahi picks them: the first two free addresses of
//!   100.64.0.1–255 (outside, inside), skipping every address and route destination in use and
//!   `$MAHIMAHI_BASE`; so inside another shell the next pair is used.
//! - Environment: `MAHIMAHI_BASE` = the outside address, unless already set (so inside nested
//!   shells it stays the outermost one's), and `MAHIMAHI_SHELL_PREFIX` gains each shell's
//!   prefix (`[delay 28 ms] [link] `). The command is executed directly (no shell); a literal
//!   `$MAHIMAHI_BASE` in its words (quoted on our command line so that the outer shell left it
//!   alone) is replaced by the address MAHIMAHI_BASE has inside. Without a command, `$SHELL`
//!   (or `/bin/sh`) runs.
//! - Exit status: the command's (128 + N if a signal N ended it). `--once` links end the shell
//!   when both directions have used their last opportunity, ending the command (exit 0), as
//!   Mahimahi. Ctrl-C reaches the command (same process group); the shell then ends with it.
//! - When the command has exited, what it sent last (its FINs and the answers) may finish
//!   crossing the path (until the path is empty for 100 ms, at most 2 s); Mahimahi drops it.
//! - NAT as Mahimahi's: IPv4 forwarding on, and `iptables -t nat -A POSTROUTING -s INSIDE -j
//!   MASQUERADE -m comment --comment pshell-<pid>`, so the command reaches beyond this host;
//!   the rule is removed when the shell ends, and forwarding is turned back off if this shell
//!   turned it on and no other `pantheon shell` is running. Without `iptables` the shell warns
//!   and the command reaches this host only.
//! - Differences from Mahimahi, on purpose: one namespace and one TUN pair for the whole chain
//!   (Mahimahi: one per shell, so the command there sees 100.64.0.4 inside `mm-delay mm-link`);
//!   no DNS proxy (use addresses, or the host's resolver if it listens beyond loopback); runs
//!   as root (Mahimahi insists on a setuid binary run by a normal user).

use std::collections::HashSet;
use std::net::Ipv4Addr;
use std::process::{Command, ExitStatus};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context};
use emucal::host::{HostLimits, HostSide};
use emucal::mm::{parse_chain, Chain, EmulatedPath, SHELL_NAMES};
use emucal::runtime::{Devices, RunningEmulator};
use netns::NetNs;

use crate::record::INTERRUPTED;

/// Which program emulates the path.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Backend {
    /// Ours (`crates/emucal`).
    #[default]
    Ours,
    /// The real Mahimahi binaries on PATH, run with the same chain.
    Mahimahi,
}

/// Options of `pantheon shell` besides the chain.
#[derive(Debug, Clone, Default)]
pub struct ShellOptions {
    /// Seed of the random generators (loss, on/off, PIE, Poisson delivery).
    pub seed: u64,
    /// Mahimahi's integer-ms clock instead of ns timing.
    pub ms_clock: bool,
    /// A preset of the emulator library instead of a chain: the words are then the command.
    pub emulator: Option<String>,
    /// Who emulates.
    pub backend: Backend,
}

/// The chain of preset `name` (its trace written into `dir`) with `command` (a leading `--`
/// dropped) to run inside it, and the chain's words for real Mahimahi.
pub fn preset_chain(
    name: &str,
    dir: &std::path::Path,
    command: &[String],
) -> anyhow::Result<(Chain, Vec<String>)> {
    let preset = emucal::presets::find(name).map_err(anyhow::Error::msg)?;
    for (file, mbps) in preset.traces() {
        crate::plan::write_constant_trace(&dir.join(file), mbps)?;
    }
    let emulator = preset.emulator_in(dir);
    let command = match command.split_first() {
        Some((first, rest)) if first == "--" => rest,
        _ => command,
    };
    let words = emulator.words();
    let chain = Chain {
        shells: emulator.shells,
        command: command.to_vec(),
    };
    Ok((chain, words))
}

/// The first two addresses of 100.64.0.1–255 not in `used` (outside, inside), as Mahimahi's
/// `two_unassigned_addresses`; `None` when fewer than two are free.
pub fn two_unassigned_addresses(used: &HashSet<Ipv4Addr>) -> Option<(Ipv4Addr, Ipv4Addr)> {
    let mut free = (1..=255u8)
        .map(|x| Ipv4Addr::new(100, 64, 0, x))
        .filter(|a| !used.contains(a));
    Some((free.next()?, free.next()?))
}

/// Destinations in `/proc/net/route` text (hex, in the kernel's byte order).
pub fn route_destinations(proc_net_route: &str) -> Vec<Ipv4Addr> {
    proc_net_route
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().nth(1))
        .filter_map(|h| u32::from_str_radix(h, 16).ok())
        .map(|x| Ipv4Addr::from(x.to_le_bytes()))
        .collect()
}

/// Addresses in use in the calling thread's namespace: on interfaces, as route destinations,
/// and `$MAHIMAHI_BASE`.
fn used_addresses() -> anyhow::Result<HashSet<Ipv4Addr>> {
    let out = Command::new("ip")
        .args(["-4", "-o", "addr", "show"])
        .output()
        .context("run `ip -4 -o addr show` (is iproute2 installed?)")?;
    let mut used: HashSet<Ipv4Addr> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            w.position(|x| x == "inet")?;
            w.next()?.split('/').next()?.parse().ok()
        })
        .collect();
    if let Ok(routes) = std::fs::read_to_string("/proc/thread-self/net/route") {
        used.extend(route_destinations(&routes));
    }
    if let Some(base) = std::env::var("MAHIMAHI_BASE")
        .ok()
        .and_then(|b| b.parse().ok())
    {
        used.insert(base);
    }
    Ok(used)
}

/// Mahimahi's NAT for one shell: forwarding on, one MASQUERADE rule for the inside address,
/// both undone on drop.
struct Nat {
    /// The shell's name (`pshell-<pid>`), the rule's comment.
    name: String,
    rule: Vec<String>,
    /// `ip_forward`'s value before, if this shell changed it.
    forward_was: Option<String>,
}

const IP_FORWARD: &str = "/proc/sys/net/ipv4/ip_forward";

impl Nat {
    fn start(inside: Ipv4Addr, comment: &str) -> anyhow::Result<Nat> {
        let rule: Vec<String> = [
            "POSTROUTING",
            "-s",
            &inside.to_string(),
            "-j",
            "MASQUERADE",
            "-m",
            "comment",
            "--comment",
            comment,
        ]
        .map(str::to_owned)
        .to_vec();
        let iptables = |op: &str| -> anyhow::Result<()> {
            let out = Command::new("iptables")
                .args(["-w", "-t", "nat", op])
                .args(&rule)
                .output()
                .context("run iptables (is it installed?)")?;
            anyhow::ensure!(
                out.status.success(),
                "iptables -t nat {op} failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
            Ok(())
        };
        iptables("-A")?;
        let before = std::fs::read_to_string(IP_FORWARD).unwrap_or_default();
        let mut nat = Nat {
            name: comment.to_owned(),
            rule,
            forward_was: None,
        };
        if before.trim() != "1" {
            std::fs::write(IP_FORWARD, "1").with_context(|| format!("write 1 to {IP_FORWARD}"))?;
            nat.forward_was = Some(before);
        }
        Ok(nat)
    }
}

impl Drop for Nat {
    fn drop(&mut self) {
        let _ = Command::new("iptables")
            .args(["-w", "-t", "nat", "-D"])
            .args(&self.rule)
            .output();
        // Turn forwarding back off unless another `pantheon shell` still needs it.
        let others = netns::list_named()
            .into_iter()
            .any(|n| n.starts_with("pshell-") && *n != self.name);
        if let (Some(was), false) = (&self.forward_was, others) {
            let _ = std::fs::write(IP_FORWARD, was.trim());
        }
    }
}

/// How a child ended, as a shell reports it: its code, or 128 + the signal.
pub fn status_code(status: ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(1)
}

/// Runs `words` (the chain, then the command; or only the command with a preset) and returns
/// the exit code for the process.
pub fn run(words: &[String], opts: &ShellOptions) -> anyhow::Result<i32> {
    // A preset's trace lives in a directory removed when the shell ends.
    let (chain, chain_words, _traces) = match &opts.emulator {
        Some(name) => {
            let dir = tempfile::Builder::new()
                .prefix("pantheon-shell-")
                .tempdir()
                .context("create a directory for the preset's trace")?;
            let (chain, chain_words) = preset_chain(name, dir.path(), words)?;
            (chain, chain_words, Some(dir))
        }
        None => {
            let chain = parse_chain(words)?;
            let chain_words = words[..words.len() - chain.command.len()].to_vec();
            (chain, chain_words, None)
        }
    };
    if chain.shells.is_empty() {
        return Err(anyhow!(
            "no Mahimahi shell before `{}` (shells: {SHELL_NAMES})",
            words.first().map_or("", String::as_str)
        ));
    }
    // Traces are read (and errors name them) whoever emulates.
    let mut path = EmulatedPath::load(chain.shells.clone(), chain.command.clone())?;
    if opts.backend == Backend::Mahimahi {
        return run_mahimahi(&chain, &chain_words);
    }
    path.ms_clock = opts.ms_clock;
    if path.host_limits(HostSide::Receiver) != HostLimits::default() {
        return Err(anyhow!(
            "pt-host receiver|both: the shell's outside is this machine's own network namespace, \
             whose TCP settings pantheon shell does not change; give `pt-host sender …` (the \
             command's side, inside the path)"
        ));
    }
    // The shell's NAT to the machine's network (iptables, ip_forward) is the machine's root's
    // to set: no rootless shell.
    crate::clean::require_root(
        "pantheon shell",
        "NAT from the emulated path to the machine's network",
    )?;
    crate::clean::before_creating_namespaces("pantheon shell")?;

    let (outer_addr, inner_addr) = two_unassigned_addresses(&used_addresses()?)
        .ok_or_else(|| anyhow!("no two free addresses left in 100.64.0.1–255"))?;
    let name = format!("pshell-{}", std::process::id());
    let inner = NetNs::create(&name).with_context(|| format!("create network namespace {name}"))?;
    crate::runner::set_host_limits_in(&inner, path.host_limits(HostSide::Sender))?;
    let devices = Devices {
        outer_dev: name.clone(),
        outer_addr,
        inner_dev: "ingress".into(),
        inner_addr,
    };
    let mut emulator = RunningEmulator::start_with(&path, None, &inner, &devices, opts.seed)
        .context("start the emulator")?;
    let _nat = match Nat::start(inner_addr, &name) {
        Ok(nat) => Some(nat),
        Err(e) => {
            tracing::warn!("pantheon shell: no NAT ({e:#}); the command reaches this host only");
            None
        }
    };

    let mut child = spawn_inside(&chain, outer_addr, &inner)?;
    let code = wait_for_command(&mut child, &emulator)?;
    let_the_path_drain(&emulator);
    emulator.stop();
    for e in emulator.errors() {
        tracing::warn!("pantheon shell: {e}");
    }
    drop(emulator);
    // Whatever the command left running in the namespace goes with it.
    inner.kill_all();
    drop(inner);
    Ok(code)
}

/// Starts the chain's command (or `$SHELL`) inside `inner`, as the innermost Mahimahi shell
/// does: `$MAHIMAHI_BASE` in its words replaced by the address it has inside, `MAHIMAHI_BASE`
/// and `MAHIMAHI_SHELL_PREFIX` in its environment.
fn spawn_inside(
    chain: &emucal::mm::Chain,
    outer_addr: Ipv4Addr,
    inner: &NetNs,
) -> anyhow::Result<std::process::Child> {
    let prefix: String = chain.shells.iter().map(|s| s.prefix()).collect();
    let base = std::env::var("MAHIMAHI_BASE").unwrap_or_else(|_| outer_addr.to_string());
    let words: Vec<String> = chain
        .command
        .iter()
        .map(|w| {
            w.replace("${MAHIMAHI_BASE}", &base)
                .replace("$MAHIMAHI_BASE", &base)
        })
        .collect();
    let mut command = netns::shell_command(&words, outer_addr);
    let old_prefix = std::env::var("MAHIMAHI_SHELL_PREFIX").unwrap_or_default();
    command.env("MAHIMAHI_SHELL_PREFIX", format!("{old_prefix}{prefix}"));
    inner.exec_inside(&mut command);
    let shown = if chain.command.is_empty() {
        "the shell".to_owned()
    } else {
        chain.command.join(" ")
    };
    command
        .spawn()
        .with_context(|| format!("start `{shown}` inside the emulated path"))
}

/// Waits for the command to end and returns its exit code; ends it when the emulator's `--once`
/// traces are over (code 0, as Mahimahi), and passes an interrupt on to it: the program sets
/// [`INTERRUPTED`] on SIGINT/SIGTERM (Ctrl-C reaches the command through the terminal; a
/// signal sent to us alone is passed on).
fn wait_for_command(
    child: &mut std::process::Child,
    emulator: &RunningEmulator,
) -> anyhow::Result<i32> {
    let mut forwarded = false;
    Ok(loop {
        if let Some(status) = child.try_wait().context("wait for the command")? {
            break status_code(status);
        }
        if emulator.finished() {
            // `--once`: the traces are over; Mahimahi ends the command and exits 0.
            end_child(child);
            break 0;
        }
        if INTERRUPTED.load(Ordering::SeqCst) && !forwarded {
            // SAFETY: plain syscall on our own child.
            unsafe {
                libc::kill(child.id() as libc::pid_t, libc::SIGINT);
            }
            forwarded = true;
        }
        std::thread::sleep(Duration::from_millis(5));
    })
}

/// Lets what the command sent last (its FINs, the peer's answers) cross the path before the
/// emulator goes.
fn let_the_path_drain(emulator: &RunningEmulator) {
    // Let what the command sent last (its FINs, the peer's answers) cross the path before it
    // goes: until the path has been empty for 100 ms, at most 2 s. Mahimahi drops them, which
    // leaves a server outside waiting for a connection that is gone.
    let deadline = Instant::now() + Duration::from_secs(2);
    let mut empty_since = None;
    while Instant::now() < deadline {
        if emulator.held() > 0 {
            empty_since = None;
        } else if empty_since.get_or_insert_with(Instant::now).elapsed()
            >= Duration::from_millis(100)
        {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Runs the chain with Mahimahi's own binaries ([`emucal::mm::mahimahi_argv`]) and returns
/// its exit code. Errors if a shell's binary is not on PATH.
fn run_mahimahi(chain: &emucal::mm::Chain, chain_words: &[String]) -> anyhow::Result<i32> {
    let argv = emucal::mm::mahimahi_argv(chain, chain_words)?;
    let mut programs: Vec<&str> = chain.shells.iter().map(|s| s.program()).collect();
    programs.dedup();
    if let Some(missing) = programs
        .iter()
        .find(|p| crate::schemes::find_in_path(p).is_none())
    {
        anyhow::bail!(
            "--emulator-backend mahimahi: `{missing}` is not on PATH (Mahimahi is not packaged \
             for current Debian/Ubuntu: build it from https://github.com/ravinet/mahimahi, or \
             use the default backend)"
        );
    }
    let status = Command::new(&argv[0])
        .args(&argv[1..])
        .status()
        .with_context(|| format!("run `{}`", argv.join(" ")))?;
    Ok(status_code(status))
}

/// SIGTERM, then SIGKILL after 1 s.
fn end_child(child: &mut std::process::Child) {
    // SAFETY: plain syscall on our own child.
    unsafe {
        libc::kill(child.id() as libc::pid_t, libc::SIGTERM);
    }
    let deadline = Instant::now() + Duration::from_secs(1);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = child.kill();
    let _ = child.wait();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_addresses_like_mahimahi() {
        let a = |x| Ipv4Addr::new(100, 64, 0, x);
        assert_eq!(
            two_unassigned_addresses(&HashSet::new()),
            Some((a(1), a(2)))
        );
        // Inside a shell: .1 is MAHIMAHI_BASE, .2 our own address → .3/.4.
        let used = HashSet::from([a(1), a(2)]);
        assert_eq!(two_unassigned_addresses(&used), Some((a(3), a(4))));
        let used = HashSet::from([a(2)]);
        assert_eq!(two_unassigned_addresses(&used), Some((a(1), a(3))));
        let all: HashSet<_> = (1..=254).map(a).collect();
        assert_eq!(two_unassigned_addresses(&all), None);
    }

    #[test]
    fn reads_route_destinations() {
        let text = "Iface\tDestination\tGateway \tFlags\n\
                    eth0\t00000000\t0102000A\t0003\n\
                    ingress\t0100400A\t00000000\t0005\n";
        assert_eq!(
            route_destinations(text),
            [Ipv4Addr::new(0, 0, 0, 0), Ipv4Addr::new(10, 64, 0, 1)]
        );
    }
}
