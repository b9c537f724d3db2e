//! Experiments without root: a command that creates network namespaces, run by an ordinary
//! user, runs again inside a user namespace of its own (the user mapped to root in it) with its
//! own mount and network namespaces, where it may create named network namespaces (on a
//! private `/run/netns`), TUN devices and qdiscs, as root would on the machine — but only
//! over namespaces it created, never the machine's own network.
//!
//! What the kernel must allow, checked before anything runs ([`missing`]), each missing piece
//! named with its fix:
//!
//! - unprivileged user namespaces: `user.max_user_namespaces` > 0, and where the kernel has
//!   them, `kernel.unprivileged_userns_clone` = 1 (Debian's older kernels) and
//!   `kernel.apparmor_restrict_unprivileged_userns` = 0 (Ubuntu 24.04);
//! - `/dev/net/tun` readable and writable by the user (the tunnel's TUN devices).
//!
//! What only the machine's root can change degrades with a warning ([`warnings`]): the
//! tunnel's 8 MiB socket buffers are forced as root (`SO_RCVBUFFORCE`); rootless they are
//! clamped to `net.core.rmem_max`/`wmem_max`. Kernel TCP schemes work: in a network namespace
//! it owns, the user may pick any congestion control the kernel has loaded (loading a module,
//! e.g. `tcp_bbr`, needs root once). The run's metadata records that it ran rootless
//! (`rootless: true`).
//!
//! The checks are pure functions of what `/proc` and `/dev` say ([`Probe`]), unit-tested; the
//! namespace and mount calls around them are thin.

use std::ffi::CString;
use std::path::Path;

use anyhow::{bail, Context};

/// The variable the re-executed command finds set (to the user's uid) inside the namespaces.
pub const ENV: &str = "PANTHEON_ROOTLESS";

/// Socket buffer the tunnel asks for, bytes (as in `tunnel::io`).
const TUNNEL_BUFFER: u64 = 8 << 20;

/// What the kernel and the machine say, read once.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Probe {
    /// `/proc/sys/user/max_user_namespaces`.
    pub max_user_namespaces: Option<u64>,
    /// `/proc/sys/kernel/unprivileged_userns_clone` (Debian kernels before 6.x), if present.
    pub unprivileged_userns_clone: Option<u64>,
    /// `/proc/sys/kernel/apparmor_restrict_unprivileged_userns` (Ubuntu 24.04), if present.
    pub apparmor_restrict: Option<u64>,
    /// `/dev/net/tun` can be opened read-write by this user.
    pub tun_rw: bool,
    /// `/dev/net/tun` exists.
    pub tun_exists: bool,
    /// `net.core.rmem_max` and `net.core.wmem_max`, bytes.
    pub rmem_max: Option<u64>,
    /// `net.core.wmem_max`, bytes.
    pub wmem_max: Option<u64>,
}

fn read_u64(path: &str) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

impl Probe {
    /// Reads this machine.
    pub fn read() -> Probe {
        let tun = Path::new("/dev/net/tun");
        let c = CString::new("/dev/net/tun").expect("no NUL");
        Probe {
            max_user_namespaces: read_u64("/proc/sys/user/max_user_namespaces"),
            unprivileged_userns_clone: read_u64("/proc/sys/kernel/unprivileged_userns_clone"),
            apparmor_restrict: read_u64("/proc/sys/kernel/apparmor_restrict_unprivileged_userns"),
            // SAFETY: access(2) on a NUL-terminated path.
            tun_rw: unsafe { libc::access(c.as_ptr(), libc::R_OK | libc::W_OK) } == 0,
            tun_exists: tun.exists(),
            rmem_max: read_u64("/proc/sys/net/core/rmem_max"),
            wmem_max: read_u64("/proc/sys/net/core/wmem_max"),
        }
    }
}

/// What is missing for a rootless run, each with its fix (empty: nothing).
pub fn missing(p: &Probe) -> Vec<String> {
    let mut m = Vec::new();
    if p.max_user_namespaces == Some(0) {
        m.push(
            "unprivileged user namespaces are disabled (user.max_user_namespaces = 0); as root: \
             sysctl -w user.max_user_namespaces=15000"
                .to_owned(),
        );
    }
    if p.unprivileged_userns_clone == Some(0) {
        m.push(
            "unprivileged user namespaces are disabled (kernel.unprivileged_userns_clone = 0); \
             as root: sysctl -w kernel.unprivileged_userns_clone=1"
                .to_owned(),
        );
    }
    if p.apparmor_restrict.is_some_and(|v| v != 0) {
        m.push(
            "AppArmor restricts unprivileged user namespaces \
             (kernel.apparmor_restrict_unprivileged_userns = 1); as root: sysctl -w \
             kernel.apparmor_restrict_unprivileged_userns=0, or an AppArmor profile allowing \
             `userns` for pantheon"
                .to_owned(),
        );
    }
    if !p.tun_exists {
        m.push(
            "/dev/net/tun does not exist (the tunnel's TUN devices); as root: modprobe tun"
                .to_owned(),
        );
    } else if !p.tun_rw {
        m.push(
            "/dev/net/tun is not readable and writable by this user (the tunnel's TUN devices); \
             as root: chmod 0666 /dev/net/tun"
                .to_owned(),
        );
    }
    m
}

/// What works less well rootless, each with what root would change.
pub fn warnings(p: &Probe) -> Vec<String> {
    let mut w = Vec::new();
    for (name, v) in [
        ("net.core.rmem_max", p.rmem_max),
        ("net.core.wmem_max", p.wmem_max),
    ] {
        if let Some(v) = v.filter(|v| *v < TUNNEL_BUFFER) {
            w.push(format!(
                "{name} = {v}: rootless, the tunnel's sockets get at most {} KiB of buffer \
                 instead of the 8 MiB forced as root (bursts above a few Gbit/s may be dropped \
                 by the tunnel); as root: sysctl -w {name}={TUNNEL_BUFFER}",
                v / 1024
            ));
        }
    }
    w
}

/// True inside the namespaces of a rootless run (set by [`reexec`]), in the command and
/// what it starts.
pub fn is_rootless() -> bool {
    std::env::var_os(ENV).is_some()
}

/// True in the command [`reexec`] started (not in what that command starts in turn): the
/// one process that sets the namespaces up. [`ENV`] holds `<uid>:<pid of the re-executing
/// process>`.
fn is_reexecuted_child() -> bool {
    let Ok(v) = std::env::var(ENV) else {
        return false;
    };
    // SAFETY: getppid has no preconditions.
    let parent = unsafe { libc::getppid() };
    v.split_once(':')
        .and_then(|(_, p)| p.parse::<i32>().ok())
        .is_some_and(|p| p == parent)
}

/// What a command that creates namespaces does first when not root: runs again rootless
/// ([`reexec`], whose run ends this command: the error [`RanRootless`]), or, being that run,
/// sets its namespaces up ([`setup_inside`]). Nothing for root.
pub fn enter(command: &str) -> anyhow::Result<()> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        reexec(command)?;
    }
    if is_reexecuted_child() {
        setup_inside().with_context(|| format!("`{command}` without root: set up namespaces"))?;
    }
    Ok(())
}

/// The error [`reexec`] always ends with when the command ran again rootless: that run is over,
/// with exit status `code`, and this process has nothing left to do. The program ends with
/// `code` and prints nothing ([`ran_rootless`] finds it in an error's chain); a library that
/// catches errors must pass this one on.
#[derive(Debug, thiserror::Error)]
#[error(
    "the command ran again without root, in namespaces of its own, and ended with status {code}"
)]
pub struct RanRootless {
    /// The rootless run's exit status (128 + the signal if a signal ended it).
    pub code: i32,
}

/// The exit status of the rootless run that ended this command, if `e` is (or wraps)
/// [`RanRootless`].
pub fn ran_rootless(e: &anyhow::Error) -> Option<i32> {
    e.chain()
        .find_map(|c| c.downcast_ref::<RanRootless>())
        .map(|r| r.code)
}

/// Runs this command again (same program, same arguments) inside a new user namespace (this
/// user as root), mount namespace and network namespace, waits for it and returns
/// [`RanRootless`] with its exit status: the caller's program exits with it. Errors, before
/// anything runs, naming each missing piece. `command` names the command in messages.
pub fn reexec(command: &str) -> anyhow::Result<std::convert::Infallible> {
    let probe = Probe::read();
    let m = missing(&probe);
    if !m.is_empty() {
        bail!(
            "`{command}` runs without root inside a user namespace of its own, and this machine \
             does not allow it:\n  - {}\n(or run it as root)",
            m.join("\n  - ")
        );
    }
    for w in warnings(&probe) {
        tracing::warn!("warning: {w}");
    }
    // SAFETY: getuid/getgid have no preconditions.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    let exe = std::fs::read_link("/proc/self/exe").context("find this program")?;
    let mut cmd = std::process::Command::new(exe);
    cmd.args(std::env::args_os().skip(1))
        .env(ENV, format!("{uid}:{}", std::process::id()));
    let maps = [
        ("/proc/self/setgroups", "deny".to_owned()),
        ("/proc/self/uid_map", format!("0 {uid} 1")),
        ("/proc/self/gid_map", format!("0 {gid} 1")),
    ]
    .map(|(f, v)| (CString::new(f).expect("no NUL"), v));
    use std::os::unix::process::CommandExt;
    // SAFETY: between fork and exec only async-signal-safe calls (unshare, open, write,
    // close, prctl) on memory prepared before the fork.
    unsafe {
        cmd.pre_exec(move || {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
            if libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNS | libc::CLONE_NEWNET) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            for (file, value) in &maps {
                let fd = libc::open(file.as_ptr(), libc::O_WRONLY);
                if fd < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                let n = libc::write(fd, value.as_ptr().cast(), value.len());
                libc::close(fd);
                if n < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().map_err(|e| {
        anyhow::anyhow!(
            "`{command}` without root: entering a user namespace failed ({e}); the kernel or a \
             security module refuses unprivileged user namespaces here"
        )
    })?;
    // The terminal's Ctrl-C reaches the child (same process group), which tears its run
    // down; this process only waits for it (ignored after the spawn: the child must not
    // inherit SIG_IGN).
    // SAFETY: ignoring SIGINT in this process only.
    unsafe { libc::signal(libc::SIGINT, libc::SIG_IGN) };
    let status = child.wait().context("wait for the rootless run")?;
    use std::os::unix::process::ExitStatusExt;
    let code = status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0));
    Err(RanRootless { code }.into())
}

/// Inside the namespaces (the re-executed command): makes every mount private to them, puts
/// a private, empty `/run/netns` in place (for `ip netns`), and brings the loopback interface
/// of its network namespace up.
pub fn setup_inside() -> anyhow::Result<()> {
    mount(None, "/", None, libc::MS_REC | libc::MS_PRIVATE, None)
        .context("make the mounts private")?;
    if Path::new("/run/netns").is_dir() {
        mount(
            Some("tmpfs"),
            "/run/netns",
            Some("tmpfs"),
            0,
            Some("mode=755"),
        )
        .context("mount a private /run/netns")?;
    } else {
        private_run_with_netns().context("make a private /run with a netns directory")?;
    }
    netns::run_command("ip", &["link", "set", "lo", "up"]).context("bring up loopback")
}

/// No `/run/netns` and `/run` not ours: a new tmpfs in `/run`'s place, holding a bind mount
/// of each entry of the old `/run` and an empty `netns/`.
fn private_run_with_netns() -> anyhow::Result<()> {
    let stage = std::env::temp_dir().join(format!(".pantheon-run-stage-{}", std::process::id()));
    std::fs::create_dir_all(&stage).with_context(|| format!("create {}", stage.display()))?;
    let s = stage.display().to_string();
    mount(Some("tmpfs"), &s, Some("tmpfs"), 0, Some("mode=755"))?;
    for e in std::fs::read_dir("/run").context("read /run")?.flatten() {
        let from = e.path();
        let to = stage.join(e.file_name());
        let ft = e.file_type()?;
        if ft.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(&from)?, &to)?;
            continue;
        }
        if ft.is_dir() {
            std::fs::create_dir(&to)?;
        } else {
            std::fs::File::create(&to)?;
        }
        let _ = mount(
            Some(&from.display().to_string()),
            &to.display().to_string(),
            None,
            libc::MS_BIND | libc::MS_REC,
            None,
        );
    }
    std::fs::create_dir(stage.join("netns"))?;
    mount(Some(&s), "/run", None, libc::MS_MOVE, None)?;
    let _ = std::fs::remove_dir(&stage);
    Ok(())
}

fn mount(
    source: Option<&str>,
    target: &str,
    fstype: Option<&str>,
    flags: libc::c_ulong,
    data: Option<&str>,
) -> anyhow::Result<()> {
    let c = |s: &str| CString::new(s).expect("no NUL");
    let (source, target, fstype, data) = (source.map(c), c(target), fstype.map(c), data.map(c));
    let ptr = |s: &Option<CString>| s.as_ref().map_or(std::ptr::null(), |s| s.as_ptr());
    // SAFETY: mount(2) with NUL-terminated strings or nulls that live across the call.
    let rc = unsafe {
        libc::mount(
            ptr(&source),
            target.as_ptr(),
            ptr(&fstype),
            flags,
            ptr(&data).cast(),
        )
    };
    if rc != 0 {
        bail!(
            "mount {}: {}",
            target.to_string_lossy(),
            std::io::Error::last_os_error()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fine() -> Probe {
        Probe {
            max_user_namespaces: Some(96364),
            unprivileged_userns_clone: None,
            apparmor_restrict: None,
            tun_rw: true,
            tun_exists: true,
            rmem_max: Some(16 << 20),
            wmem_max: Some(16 << 20),
        }
    }

    #[test]
    fn each_missing_piece_is_named_with_its_fix() {
        assert!(missing(&fine()).is_empty());
        let p = Probe {
            max_user_namespaces: Some(0),
            tun_rw: false,
            ..fine()
        };
        let m = missing(&p);
        assert_eq!(m.len(), 2, "{m:?}");
        assert!(
            m[0].contains("sysctl -w user.max_user_namespaces="),
            "{m:?}"
        );
        assert!(m[1].contains("chmod 0666 /dev/net/tun"), "{m:?}");
        let p = Probe {
            unprivileged_userns_clone: Some(0),
            apparmor_restrict: Some(1),
            tun_exists: false,
            ..fine()
        };
        let m = missing(&p).join("\n");
        for want in [
            "kernel.unprivileged_userns_clone=1",
            "apparmor_restrict_unprivileged_userns=0",
            "modprobe tun",
        ] {
            assert!(m.contains(want), "{want}: {m}");
        }
    }

    #[test]
    fn small_socket_buffer_limits_are_warned_of() {
        assert!(warnings(&fine()).is_empty());
        let w = warnings(&Probe {
            rmem_max: Some(212_992),
            ..fine()
        });
        assert_eq!(w.len(), 1);
        assert!(w[0].starts_with("net.core.rmem_max = 212992") && w[0].contains("208 KiB"));
    }
}
