//! Named Linux network namespaces owned by one experiment run.
//!
//! # Brief overview
//!
//! Every run of Pantheon-rs builds its own little network out of network namespaces (one for the
//! receiver's host side, one emulated "far side", one per tunnel endpoint) joined by TUN devices.
//! [`NetNs`] is one such namespace, created with `ip netns add NAME` (so it is visible in
//! `ip netns list` while it lives) and removed with `ip netns del NAME` when the value is dropped,
//! on every exit path that unwinds, Ctrl-C included when the caller turns the signal into an
//! orderly return.
//!
//! Three ways to use a namespace:
//! - [`NetNs::enter`]: move the *calling thread* into it (Linux network namespaces are per
//!   thread), e.g. before opening a TUN device or binding a socket that must live there. Sockets
//!   and TUN file descriptors keep their namespace after the thread moves on.
//! - [`NetNs::spawn_into`]: make a [`std::process::Command`] start inside it, in a new process
//!   group of its own so that exactly that group can be signalled later.
//! - [`NetNs::ip`]: configure it with iproute2 (`ip -n NAME …`): addresses, routes, links.
//!
//! [`interfaces::interfaces`] reads a namespace's interfaces back as typed values (name, MTU,
//! addresses, byte counters).
//!
//! Requires root (`CAP_SYS_ADMIN` and `CAP_NET_ADMIN`) and the `ip` command from iproute2.
#![deny(unsafe_op_in_unsafe_fn)]

pub mod interfaces;
pub mod owner;

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

/// Errors of namespace handling.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An external command (`ip …`) could not be started or exited with a failure status.
    #[error("`{command}` failed: {detail}")]
    Command {
        /// The command line, for the message.
        command: String,
        /// Exit status and the command's stderr, or the spawn error.
        detail: String,
    },
    /// A system call on the namespace failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The OS error.
        source: io::Error,
    },
}

/// Result alias of this crate.
pub type Result<T> = std::result::Result<T, Error>;

/// Runs `program args…` to completion; a non-zero status becomes [`Error::Command`] with stderr.
pub fn run_command(program: &str, args: &[&str]) -> Result<()> {
    command_output(program, args).map(drop)
}

/// Runs `program args…` to completion and returns what it wrote on stdout; a non-zero status
/// becomes [`Error::Command`] with stderr.
pub fn command_output(program: &str, args: &[&str]) -> Result<Vec<u8>> {
    let shown = || format!("{program} {}", args.join(" "));
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| Error::Command {
            command: shown(),
            detail: e.to_string(),
        })?;
    if out.status.success() {
        Ok(out.stdout)
    } else {
        Err(Error::Command {
            command: shown(),
            detail: format!(
                "{}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        })
    }
}

/// A named network namespace that this process created and will delete on drop.
#[derive(Debug)]
pub struct NetNs {
    name: String,
    file: File,
}

impl NetNs {
    /// Creates namespace `name` (`ip netns add`), opens it and brings its loopback up.
    ///
    /// Errors if the name exists already (another run, or a leftover of a killed one: remove it
    /// with `ip netns del NAME`) or if not root.
    pub fn create(name: &str) -> Result<NetNs> {
        // Named after this process: claim it first, so that the name's owner can be told
        // alive or dead (a zombie, a reused pid) by others.
        owner::claim();
        run_command("ip", &["netns", "add", name])?;
        let path = format!("/run/netns/{name}");
        let file = match File::open(&path) {
            Ok(f) => f,
            Err(source) => {
                let _ = run_command("ip", &["netns", "del", name]);
                return Err(Error::Io {
                    what: format!("open {path}"),
                    source,
                });
            }
        };
        let ns = NetNs {
            name: name.to_owned(),
            file,
        };
        ns.ip(&["link", "set", "lo", "up"])?;
        Ok(ns)
    }

    /// The namespace's name, as shown by `ip netns list`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Runs `ip -n NAME args…` (iproute2) and waits for it.
    pub fn ip(&self, args: &[&str]) -> Result<()> {
        let mut full = vec!["-n", self.name.as_str()];
        full.extend_from_slice(args);
        run_command("ip", &full)
    }

    /// Moves the calling thread into this namespace (`setns(2)`); other threads are unaffected.
    pub fn enter(&self) -> Result<()> {
        // SAFETY: plain syscall on a valid, open namespace fd.
        let rc = unsafe { libc::setns(self.file.as_raw_fd(), libc::CLONE_NEWNET) };
        if rc == 0 {
            Ok(())
        } else {
            Err(Error::Io {
                what: format!("setns into network namespace {}", self.name),
                source: io::Error::last_os_error(),
            })
        }
    }

    /// Runs `f` with the calling thread inside this namespace, then returns the thread to the
    /// namespace it was in before. Use it to create sockets or TUN devices that must live here.
    pub fn run_in<T>(&self, f: impl FnOnce() -> T) -> Result<T> {
        let original = File::open("/proc/thread-self/ns/net").map_err(|source| Error::Io {
            what: "open /proc/thread-self/ns/net".into(),
            source,
        })?;
        self.enter()?;
        let value = f();
        // SAFETY: plain syscall on a valid, open namespace fd.
        let rc = unsafe { libc::setns(original.as_raw_fd(), libc::CLONE_NEWNET) };
        if rc != 0 {
            return Err(Error::Io {
                what: "return to the original network namespace".into(),
                source: io::Error::last_os_error(),
            });
        }
        Ok(value)
    }

    /// Makes `cmd` start inside this namespace, as the leader of a new process group (its pgid
    /// is its pid), so that the caller can end exactly that group with `killpg`.
    pub fn spawn_into<'c>(&self, cmd: &'c mut Command) -> &'c mut Command {
        cmd.process_group(0);
        self.exec_inside(cmd)
    }

    /// Makes `cmd` start inside this namespace, in the caller's process group (so an
    /// interactive command stays in the terminal's foreground group).
    pub fn exec_inside<'c>(&self, cmd: &'c mut Command) -> &'c mut Command {
        let fd = self.file.as_raw_fd();
        // SAFETY: the closure only calls setns(2), which is async-signal-safe, on an fd that
        // stays open in the parent for as long as `self` lives (the child gets a copy).
        unsafe {
            cmd.pre_exec(move || {
                if libc::setns(fd, libc::CLONE_NEWNET) == 0 {
                    Ok(())
                } else {
                    Err(io::Error::last_os_error())
                }
            })
        }
    }

    /// Turns IPv6 off in this namespace (`net.ipv6.conf.{default,all}.disable_ipv6 = 1`), for
    /// devices made before and after. A device that comes up with IPv6 sends router
    /// solicitations and MLD reports of its own a few seconds later: through a tunnel they
    /// would be logged as a flow's first packets. Nothing to do where the kernel has no IPv6.
    pub fn disable_ipv6(&self) -> Result<()> {
        for which in ["default", "all"] {
            match self.set_sysctl(&format!("net.ipv6.conf.{which}.disable_ipv6"), "1") {
                Err(Error::Io { source, .. }) if source.kind() == io::ErrorKind::NotFound => {}
                other => other?,
            }
        }
        Ok(())
    }

    /// Writes sysctl `name` (`net.ipv4.tcp_wmem`) = `value` (`4096 16384 1048576`) in this
    /// namespace, as `ip netns exec NS sysctl -w` would: only the kernel's per-namespace
    /// settings (`net.ipv4.tcp_*`, `net.ipv6.conf.*`) stay inside it. Errors name the file.
    pub fn set_sysctl(&self, name: &str, value: &str) -> Result<()> {
        let path = format!("/proc/sys/{}", name.replace('.', "/"));
        self.run_in(|| {
            std::fs::write(&path, value).map_err(|e| Error::Io {
                what: format!("write {value:?} to {path}"),
                source: e,
            })
        })?
    }

    /// Process ids still inside the namespace (`ip netns pids`), for leak checks.
    pub fn pids(&self) -> Vec<u32> {
        pids_of(&self.name)
    }

    /// Kills (SIGKILL) every process still inside the namespace.
    pub fn kill_all(&self) {
        kill_inside(&self.name);
    }
}

impl Drop for NetNs {
    fn drop(&mut self) {
        if let Err(e) = run_command("ip", &["netns", "del", &self.name]) {
            tracing::warn!(
                "warning: could not remove network namespace {}: {e}",
                self.name
            );
        }
    }
}

/// What a Mahimahi shell (or `mm-tunnelclient`) runs inside: `words` (program, then its
/// arguments), or `$SHELL` (`/bin/sh` if unset) when `words` is empty; with `MAHIMAHI_BASE`
/// set to `base`, the address of the outside as seen from inside, unless the environment
/// already has one (inside nested shells the outermost's stays, as in Mahimahi). The caller
/// places it ([`NetNs::spawn_into`], [`NetNs::exec_inside`]) and adds its own environment.
pub fn shell_command(words: &[String], base: std::net::Ipv4Addr) -> Command {
    let mut command = match words.split_first() {
        Some((program, args)) => {
            let mut c = Command::new(program);
            c.args(args);
            c
        }
        None => Command::new(std::env::var("SHELL").unwrap_or_else(|_| "/bin/sh".into())),
    };
    if std::env::var_os("MAHIMAHI_BASE").is_none() {
        command.env("MAHIMAHI_BASE", base.to_string());
    }
    command
}

/// Names of all named network namespaces on this machine (`ip netns list`).
pub fn list_named() -> Vec<String> {
    Command::new("ip")
        .args(["netns", "list"])
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// The pid that a namespace name says owns it: the digits right after one of `prefixes`
/// (`pt-1234-0-host` with prefix `pt-` → 1234), ended by `-` or the name's end.
pub fn owner_pid(name: &str, prefixes: &[&str]) -> Option<u32> {
    prefixes.iter().find_map(|p| {
        let rest = name.strip_prefix(p)?;
        let digits = rest.split('-').next()?;
        digits.parse().ok()
    })
}

/// Removes the namespaces whose name carries an owner pid after one of `prefixes`
/// ([`owner_pid`]) whose owner is gone ([`owner::is_alive`]: killed, reaped or not) — left by
/// a command killed with SIGKILL — after killing (SIGKILL) every process still inside them,
/// and the claims of owners that are gone. Returns the names removed; a namespace that cannot
/// be removed is reported on stderr and left.
pub fn remove_orphans(prefixes: &[&str]) -> Vec<String> {
    let removed =
        remove_where(|name| owner_pid(name, prefixes).is_some_and(|o| !owner::is_alive(o)));
    owner::forget_the_dead();
    removed
}

/// Removes every named namespace whose name `doomed` accepts, after killing (SIGKILL) every
/// process still inside it. Returns the names removed; a namespace that cannot be removed is
/// reported on stderr and left.
pub fn remove_where(doomed: impl Fn(&str) -> bool) -> Vec<String> {
    let mut removed = Vec::new();
    for name in list_named().into_iter().filter(|n| doomed(n)) {
        kill_inside(&name);
        match run_command("ip", &["netns", "del", &name]) {
            Ok(()) => removed.push(name),
            Err(e) => tracing::warn!("warning: could not remove network namespace {name}: {e}"),
        }
    }
    removed
}

/// Kills (SIGKILL) every process inside the named namespace `name`.
fn kill_inside(name: &str) {
    for pid in pids_of(name) {
        // SAFETY: plain syscall; the process is inside a namespace of ours.
        unsafe {
            libc::kill(pid as libc::pid_t, libc::SIGKILL);
        }
    }
}

/// Process ids inside the named namespace `name` (`ip netns pids`); none if it does not
/// exist.
pub fn pids_of(name: &str) -> Vec<u32> {
    Command::new("ip")
        .args(["netns", "pids", name])
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Sends `signal` to the process group `pgid`; a group that no longer exists is not an error.
pub fn kill_group(pgid: u32, signal: i32) {
    // SAFETY: plain syscall.
    unsafe {
        libc::killpg(pgid as libc::pid_t, signal);
    }
}
