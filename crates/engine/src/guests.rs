//! Scheme sides in guest kernels during a local run (issue 51; the crate `guest` has the
//! guest itself: kernel, initramfs, QEMU's command line, the job directory).
//!
//! Before the run starts, every side whose scheme's `[guest]` names it gets a guest booted in
//! the side's namespace ([`boot`]): a tap device `guest0` there, the tunnel device's address
//! handed over to the guest (the namespace routes between the tunnel and the tap, so packets
//! keep the side's address, 100.64.0.3 or .4, and the tunnel and its logs see nothing new), QEMU
//! started as the side's process (its console is the side's `.out` file), and a wait until the
//! guest is up. When the sequence starts the side, its command line goes to the waiting guest
//! ([`GuestSides::hand_over`]) instead of starting a process: the boot is not part of the run.

use std::net::Ipv4Addr;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context};
use emucal::host::HostSide;
use emucal::mm::EmulatedPath;
use guest::{Accel, GuestNet, Kernel, VmConfig, GUEST_GATEWAY, TAP};
use netns::NetNs;

use crate::process::{spawn_with, SchemeProcess, SideOutput};
use crate::schemes::{find_program, Side, TUNNEL_MTU};
use crate::sequence::RunFlow;

/// The guests' job directories of one run are `<temp>/pantheon-guests-<owner pid>-<random>`:
/// [`remove_orphan_jobs`] removes those whose owner is gone.
pub const JOBS_PREFIX: &str = "pantheon-guests-";

/// Removes the job directories of guests whose owner (the pid in the name) is gone — a
/// command killed with SIGKILL; returns their names.
pub fn remove_orphan_jobs() -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return Vec::new();
    };
    let mut removed = Vec::new();
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(owner) = netns::owner_pid(&name, &[JOBS_PREFIX]) else {
            continue;
        };
        if !netns::owner::is_alive(owner) && std::fs::remove_dir_all(e.path()).is_ok() {
            removed.push(name);
        }
    }
    removed
}

/// Guest memory, MiB: the host's programs run from its filesystem over 9p; iperf3 and the
/// scheme programs need little.
const GUEST_MEMORY_MB: u32 = 512;

/// The guests of one run, by (flow, side), and the directory holding their job directories
/// (removed with it).
#[derive(Default)]
pub struct GuestSides {
    jobs: Vec<((u16, Side), PathBuf)>,
    /// Each guest's namespace (index into the run's), address and peer address.
    places: Vec<(usize, Ipv4Addr, Ipv4Addr)>,
    jobs_root: Option<tempfile::TempDir>,
}

impl GuestSides {
    /// The job directory of flow `flow`'s `side`, if it runs in a guest.
    pub fn job(&self, flow: u16, side: Side) -> Option<&Path> {
        self.jobs
            .iter()
            .find(|(k, _)| *k == (flow, side))
            .map(|(_, p)| p.as_path())
    }

    /// The directory of this run's job directories, created at the first call
    /// (`pantheon-guests-<pid>-…` in the temporary directory, removed with `self`).
    fn jobs_dir(&mut self) -> anyhow::Result<PathBuf> {
        if self.jobs_root.is_none() {
            self.jobs_root = Some(
                tempfile::Builder::new()
                    .prefix(&format!("{JOBS_PREFIX}{}-", std::process::id()))
                    .tempdir()
                    .context("create a directory for the guests' jobs")?,
            );
        }
        Ok(self.jobs_root.as_ref().expect("created").path().to_owned())
    }

    /// Once the tunnels are up: hands each guest's address over from the tunnel device to the
    /// guest ([`reroute`]).
    pub fn reroute(&self, namespaces: &[NetNs]) -> anyhow::Result<()> {
        for &(ns, address, peer) in &self.places {
            reroute(&namespaces[ns], address, peer)?;
        }
        Ok(())
    }

    /// Hands `argv` to the guest of flow `flow`'s `side` waiting in `job`: its program resolved
    /// to an absolute path ([`find_program`]: the harness's own programs sit next to
    /// `pantheon`, which the guest's `PATH` does not know).
    pub fn hand_over(job: &Path, argv: &[String]) -> anyhow::Result<()> {
        let mut argv = argv.to_vec();
        if let Some(p) = argv.first().and_then(|p| find_program(p)) {
            argv[0] = p.display().to_string();
        }
        guest::write_command(job, &argv)
    }
}

/// What [`boot`] started: the guests, their QEMU processes (the sides' processes, for the
/// run's resources) and a note per guest for the run record (kernel, accelerator, boot time).
#[derive(Default)]
pub struct Booted {
    /// The guests, by flow and side.
    pub guests: GuestSides,
    /// Their QEMU processes.
    pub processes: Vec<SchemeProcess>,
    /// For the run record.
    pub notes: Vec<String>,
}

/// Boots a guest for every side of `flows` whose scheme runs it in one, behind a tap in the
/// side's namespace, before the tunnels start: `place(flow, side)` says where that side sits
/// (index into `namespaces`, its address, its peer's; flows 1-based). QEMU's output goes to
/// the side's `.out` file (`output`: results directory, the name files are filed under, run
/// id). Then [`GuestSides::reroute`] once the tunnels are up. Errors if a kernel is not
/// prepared, the path sets end-host limits (`pt-host`: they apply to the namespace, not to a
/// guest's kernel), or a guest does not come up; what was started is in `booted` either way.
pub fn boot(
    flows: &[RunFlow],
    path: &EmulatedPath,
    place: &dyn Fn(u16, Side) -> (usize, Ipv4Addr, Ipv4Addr),
    namespaces: &[NetNs],
    (dir, name, run_id): (&Path, &str, u32),
    booted: &mut Booted,
) -> anyhow::Result<()> {
    for (i, f) in flows.iter().enumerate() {
        let Some(spec) = &f.scheme.guest else {
            continue;
        };
        let flow = u16::try_from(i + 1).context("too many flows")?;
        for side in [Side::Receiver, Side::Sender] {
            if !spec.runs(side.name()) {
                continue;
            }
            let host_side = match side {
                Side::Sender => HostSide::Sender,
                Side::Receiver => HostSide::Receiver,
            };
            if !path.host_limits(host_side).sysctls().is_empty() {
                bail!(
                    "pt-host sets the {} namespace's TCP buffers, but {} runs that side in a \
                     guest kernel, which they do not reach: set them as the scheme's [guest] \
                     sysctls instead",
                    side.name(),
                    f.scheme.name
                );
            }
            let kernel = f.scheme.guest_kernel().context("a guest")?;
            if let Some(why) = kernel.unavailable_reason() {
                bail!("{}: {why}", f.scheme.name);
            }
            let (ns, address, peer) = place(flow, side);
            let job = booted
                .guests
                .jobs_dir()?
                .join(format!("flow{flow}-{}", side.name()));
            std::fs::create_dir_all(&job)?;
            let side_out = (dir, name, run_id, usize::from(flow), side);
            let took = boot_side(
                spec,
                &kernel,
                &namespaces[ns],
                &job,
                address,
                side_out,
                booted,
            )?;
            // What the guest's clock was off by, as the clock program wrote it.
            let clock = std::fs::read_to_string(job.join("clock")).unwrap_or_default();
            booted.notes.push(format!(
                "{} of flow {flow} in a guest: Linux {} ({}, {}), up in {:.1} s before the run; {}",
                side.name(),
                kernel.version,
                kernel.origin(),
                kernel.accel().expect("prepared").qemu_name().to_uppercase(),
                took.as_secs_f64(),
                clock.trim()
            ));
            booted.guests.jobs.push(((flow, side), job));
            booted.guests.places.push((ns, address, peer));
        }
    }
    Ok(())
}

/// One side's guest: the tap in `ns`, the job's script, QEMU started (into `booted`) and
/// waited for; returns how long it took to come up.
fn boot_side(
    spec: &guest::GuestSpec,
    kernel: &Kernel,
    ns: &NetNs,
    job: &Path,
    address: Ipv4Addr,
    side_out: SideOutput,
    booted: &mut Booted,
) -> anyhow::Result<Duration> {
    let accel = kernel.accel().context("the kernel is not prepared")?;
    // The scheme's availability checked it before anything ran.
    let clock = find_program(guest::CLOCK_PROGRAM)
        .with_context(|| format!("{} not found", guest::CLOCK_PROGRAM))?;
    add_tap(ns)?;
    let dir = side_out.0;
    let net = GuestNet {
        address,
        gateway: GUEST_GATEWAY,
        mtu: TUNNEL_MTU,
    };
    std::fs::write(
        job.join("guest.sh"),
        guest::guest_script(spec, &net, Some(dir), Some(&clock)),
    )?;
    let vm = VmConfig {
        kernel,
        accel: &accel,
        job,
        tap: Some(TAP),
        data_dir: Some(dir),
        memory_mb: GUEST_MEMORY_MB,
    };
    let argv: Vec<String> = std::iter::once("qemu-system-x86_64".to_owned())
        .chain(vm.args())
        .collect();
    // QEMU dies with this thread (the run's, which outlives it): a SIGKILL of `pantheon`
    // leaves no VM running.
    let mut p = spawn_with(ns, &argv, side_out, &|cmd| {
        // SAFETY: prctl is async-signal-safe; nothing else runs in the child.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
    })?;
    p.guest_job = Some(job.to_owned());
    p.what = format!(
        "{} of flow {} (in a guest: QEMU, Linux {})",
        side_out.4.name(),
        side_out.3,
        kernel.version
    );
    let up = wait_up(&mut p, job, &accel);
    booted.processes.push(p);
    up
}

/// Waits for the guest of `p` to say it is up; errors with its console's last lines if it
/// ended or took too long (60 s with KVM, 240 s with TCG).
fn wait_up(p: &mut SchemeProcess, job: &Path, accel: &Accel) -> anyhow::Result<Duration> {
    let timeout = Duration::from_secs(if *accel == Accel::Kvm { 60 } else { 240 });
    let mut ended = None;
    let r = guest::wait_for(&job.join("ready"), timeout, || {
        ended = p.exited();
        ended.is_none()
    });
    r.map_err(|e| match ended {
        Some(why) => anyhow::anyhow!("{why}"),
        None => e.context(format!("{}: the guest did not come up", p.describe())),
    })
}

/// Tap [`TAP`] in `ns`, up, with the tunnel's MTU and [`GUEST_GATEWAY`]: the guest's link.
fn add_tap(ns: &NetNs) -> anyhow::Result<()> {
    let g = format!("{GUEST_GATEWAY}/32");
    let mtu = TUNNEL_MTU.to_string();
    let steps: [&[&str]; 3] = [
        &["tuntap", "add", "dev", TAP, "mode", "tap"],
        &["link", "set", TAP, "mtu", &mtu, "up"],
        &["addr", "add", &g, "dev", TAP],
    ];
    for s in steps {
        ns.ip(s)
            .with_context(|| format!("a tap for a guest in namespace {}", ns.name()))?;
    }
    Ok(())
}

/// Gives the side's `address` to the guest behind [`TAP`] in `ns`: the tunnel device loses it
/// (its routes to `peer` and the default through the tunnel kept), `address` is routed to the
/// tap, and the namespace forwards between the two.
fn reroute(ns: &NetNs, address: Ipv4Addr, peer: Ipv4Addr) -> anyhow::Result<()> {
    let (a, p) = (address.to_string(), peer.to_string());
    let steps: [&[&str]; 4] = [
        &["addr", "del", &a, "peer", &p, "dev", "tunnel"],
        &["route", "replace", &format!("{p}/32"), "dev", "tunnel"],
        &["route", "replace", "default", "dev", "tunnel"],
        &["route", "replace", &format!("{a}/32"), "dev", TAP],
    ];
    for s in steps {
        ns.ip(s)
            .with_context(|| format!("route to the guest in namespace {}", ns.name()))?;
    }
    for (k, v) in [
        ("net.ipv4.ip_forward", "1"),
        ("net.ipv4.conf.all.rp_filter", "0"),
    ] {
        ns.set_sysctl(k, v)?;
    }
    Ok(())
}
