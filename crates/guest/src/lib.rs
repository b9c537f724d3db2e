//! Scheme sides in a guest kernel of their own (issue 51).
//!
//! # Why
//!
//! A kernel scheme (TCP Vegas, DCTCP, TCP-LP, …) is the kernel's code. Run on the host, a run can
//! use only what the host's kernel was built with — on a machine whose kernel has `reno cubic
//! bbr` built in and no modules, Vegas cannot run at all — and its figures depend on a kernel
//! nobody pinned. A side that runs *in a guest* gets the kernel its descriptor names: a Debian
//! `linux-image-<version>` package, unpacked into a cache ([`Kernel`]), with every mainline
//! congestion-control module and `sch_fq`.
//!
//! # How a guest is put where the side would have run
//!
//! ```text
//!   <tag>-tx<i> namespace                                  guest (QEMU, its own kernel)
//!   tunnel ── (routes) ── guest0 (tap, 10.255.0.1) ═══════ eth0  100.64.0.4 = the side's address
//! ```
//!
//! The guest boots over the host's own filesystem (9p, read-only: the scheme's programs and
//! iperf3 are the host's), the kernel's modules (read-only) and the results directory
//! (read-write, at the same path, for the files a side writes). Its NIC is a tap device in the
//! side's network namespace, and it takes the side's tunnel address: the namespace forwards
//! between the tunnel and the tap, so the tunnel, the emulator, their logs and the analysis are
//! unchanged — the guest is simply the host at that address ([`GuestNet`]).
//!
//! The guest boots *before* the run starts and waits (`ready` in its job directory); the side's
//! command is handed over when the flow starts ([`write_command`]), so boot time is not part of
//! the measured run. When the command ends the guest writes its status and powers off, and QEMU
//! exits — the side's end, seen like any process's.
//!
//! # The job directory (shared with the guest as `/run/job`)
//!
//! | file | written by | what |
//! |---|---|---|
//! | `guest.sh` | host, before boot | [`guest_script`]: modules, sysctls, network, qdisc, then waits |
//! | `ready` | guest | its network is up; it waits for `command` |
//! | `command` | host, at the flow's start | the side's command line (renamed into place) |
//! | `status` | guest | the command's exit status, before power-off |
//!
//! # Acceleration
//!
//! QEMU runs the guest with KVM where a guest boots with it, else with TCG (QEMU's own
//! translator): [`Kernel::prepare`] boots each, once, and records which works in the kernel's
//! directory ([`Accel`]). Nested KVM is not always usable even where `/dev/kvm` opens (on a
//! Firecracker host, KVM accepts the VM but the guest kernel hangs while starting, or stops
//! with "KVM internal error" emulating `lock cmpxchg16b`); TCG is slower but correct, and its
//! throughput ceiling and added delay are measured (`docs/performance.md`).
#![deny(unsafe_op_in_unsafe_fn)]

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde::Deserialize;

pub mod clock;

/// The program a guest runs to set its clock from the host's ([`clock`]), built with this
/// crate and installed next to `pantheon`.
pub const CLOCK_PROGRAM: &str = "pantheon-guest-clock";

/// A scheme descriptor's `[guest]` table: the kernel its sides run in and how that kernel is
/// set up before the side starts.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GuestSpec {
    /// The Debian kernel: the package is `linux-image-<kernel>` (`6.1.0-50-amd64`), as
    /// Debian's registry offers it; or [`SOURCE_KERNEL`] (`"source"`): the kernel the
    /// descriptor's `[source]` builds from a pinned tree (BBRv3, TCP Prague: schemes that are
    /// patches to Linux, not modules), left in the tree as [`Kernel::built`] reads it.
    pub kernel: String,
    /// Modules loaded before the side starts, with their dependencies (`tcp_vegas`).
    #[serde(default)]
    pub modules: Vec<String>,
    /// Sysctls written before the side starts (`"net.ipv4.tcp_ecn" = "1"`).
    #[serde(default)]
    pub sysctls: BTreeMap<String, String>,
    /// Root qdisc of the guest's NIC (`fq` for BBR's pacing); none: the kernel's default.
    #[serde(default)]
    pub qdisc: Option<String>,
    /// Which sides run in the guest: `"sender"`, `"receiver"` or both; default the sender
    /// (the side whose congestion control is measured).
    #[serde(default = "sender_only")]
    pub sides: Vec<String>,
}

/// [`GuestSpec::kernel`]'s value for a kernel built from the descriptor's `[source]`.
pub const SOURCE_KERNEL: &str = "source";

/// Where a `[source]` build leaves its kernel, inside its tree ([`Kernel::built`]).
pub const BUILT_KERNEL_DIR: &str = "guest-kernel";

fn sender_only() -> Vec<String> {
    vec!["sender".into()]
}

impl GuestSpec {
    /// Whether side `name` (`"sender"`, `"receiver"`) runs in the guest.
    pub fn runs(&self, name: &str) -> bool {
        self.sides.iter().any(|s| s == name)
    }

    /// Errors on a side name other than `sender`/`receiver`, no side, or a module, sysctl or
    /// qdisc name that could break out of the guest script.
    pub fn validate(&self) -> Result<()> {
        if self.sides.is_empty() {
            bail!("[guest] sides is empty: name \"sender\", \"receiver\" or both");
        }
        if let Some(s) = self
            .sides
            .iter()
            .find(|s| *s != "sender" && *s != "receiver")
        {
            bail!("[guest] sides: {s:?} is not \"sender\" or \"receiver\"");
        }
        let plain = |s: &str| {
            !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c))
        };
        for (what, name) in std::iter::once(("kernel", self.kernel.as_str()))
            .chain(self.modules.iter().map(|m| ("module", m.as_str())))
            .chain(self.sysctls.keys().map(|k| ("sysctl", k.as_str())))
            .chain(self.qdisc.iter().map(|q| ("qdisc", q.as_str())))
        {
            if !plain(name) {
                bail!("[guest] {what} {name:?}: only letters, digits, '_', '-' and '.'");
            }
        }
        Ok(())
    }
}

/// The apt packages a guest needs on the host: QEMU, a static busybox for the initramfs, kmod
/// (`depmod`, `modprobe` for the guest's modules) and cpio.
pub const HOST_PACKAGES: [&str; 4] = ["qemu-system-x86", "busybox-static", "kmod", "cpio"];

/// Where prepared kernels live: `$PANTHEON_KERNELS_HOME`, else
/// `~/.cache/pantheon-rs/kernels`; one directory per kernel version.
pub fn kernels_home() -> PathBuf {
    if let Some(d) = std::env::var_os("PANTHEON_KERNELS_HOME") {
        return PathBuf::from(d);
    }
    let home = std::env::var_os("HOME").unwrap_or_else(|| "/root".into());
    PathBuf::from(home).join(".cache/pantheon-rs/kernels")
}

/// How QEMU runs a guest ([`Kernel::accel`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Accel {
    /// Hardware virtualisation through `/dev/kvm`.
    Kvm,
    /// QEMU's translator, with the reason KVM was not used.
    Tcg(String),
}

impl Accel {
    /// QEMU's `-accel` value.
    pub fn qemu_name(&self) -> &'static str {
        match self {
            Accel::Kvm => "kvm",
            Accel::Tcg(_) => "tcg",
        }
    }

    /// For the run record and `schemes list`: `kvm`, or `tcg (<why not kvm>)`.
    pub fn describe(&self) -> String {
        match self {
            Accel::Kvm => "kvm".into(),
            Accel::Tcg(why) => format!("tcg ({why})"),
        }
    }
}

/// One guest kernel in its directory: `boot/vmlinuz-<version>`, `lib/modules/<version>/`
/// (with `modules.dep`), `initramfs.cpio` and `accel`. A Debian kernel is prepared in
/// `kernels_home()/<version>` from its package ([`Kernel::new`]); a kernel built from a pinned
/// tree is in that tree ([`Kernel::built`]).
#[derive(Debug, Clone)]
pub struct Kernel {
    /// The version: as in `linux-image-<version>`, or the built kernel's release.
    pub version: String,
    /// Its directory.
    pub dir: PathBuf,
    /// `None`: a Debian package; else the pinned tree it was built from (`https://github.com/
    /// google/bbr at 001a430b3ddb`), for the run record.
    pub source: Option<String>,
}

/// The modules the initramfs loads to reach the host's filesystem (virtio PCI, 9p): with
/// their dependencies, resolved by [`Kernel::prepare`].
const BOOT_MODULES: [&str; 3] = ["virtio_pci", "9pnet_virtio", "9p"];

/// The modules every guest loads before its own: the NIC's driver.
const NET_MODULES: [&str; 1] = ["virtio_net"];

impl Kernel {
    /// Debian's kernel `version` in [`kernels_home`] (prepared or not).
    pub fn new(version: &str) -> Kernel {
        Kernel {
            version: version.to_owned(),
            dir: kernels_home().join(version),
            source: None,
        }
    }

    /// The kernel a `[source]` build left in `dir` (its tree's [`BUILT_KERNEL_DIR`]):
    /// `release` (one line, `make kernelrelease`), `boot/vmlinuz-<release>` and
    /// `lib/modules/<release>/` (`make modules_install INSTALL_MOD_PATH=dir`). `source` names
    /// the pinned tree. Not built yet: version `unbuilt`, and [`Kernel::unavailable_reason`]
    /// says so.
    pub fn built(dir: PathBuf, source: String) -> Kernel {
        let version = std::fs::read_to_string(dir.join("release"))
            .ok()
            .map(|r| r.trim().to_owned())
            .filter(|r| !r.is_empty())
            .unwrap_or_else(|| "unbuilt".into());
        Kernel {
            version,
            dir,
            source: Some(source),
        }
    }

    /// Where it comes from, for notes and the run record: `Debian linux-image-6.1.0-50-amd64`
    /// or `built from https://github.com/google/bbr at 001a430b3ddb`.
    pub fn origin(&self) -> String {
        match &self.source {
            None => format!("Debian linux-image-{}", self.version),
            Some(tree) => format!("built from {tree}"),
        }
    }

    /// The compressed kernel image.
    pub fn vmlinuz(&self) -> PathBuf {
        self.dir.join(format!("boot/vmlinuz-{}", self.version))
    }

    /// The initramfs that mounts the host's filesystem and runs the job's script.
    pub fn initramfs(&self) -> PathBuf {
        self.dir.join("initramfs.cpio")
    }

    /// How guests of this kernel run, as [`Kernel::prepare`] found; `None` until prepared.
    pub fn accel(&self) -> Option<Accel> {
        let text = std::fs::read_to_string(self.dir.join("accel")).ok()?;
        let mut lines = text.lines();
        match lines.next()? {
            "kvm" => Some(Accel::Kvm),
            "tcg" => Some(Accel::Tcg(lines.next().unwrap_or("").to_owned())),
            _ => None,
        }
    }

    /// Why a guest of this kernel cannot start here (`None`: it can): QEMU missing, or the
    /// kernel not prepared — each with the command that fixes it.
    pub fn unavailable_reason(&self) -> Option<String> {
        if !program_exists("qemu-system-x86_64") {
            return Some(
                "qemu-system-x86_64 is missing (apt-get install qemu-system-x86); \
                 `pantheon schemes setup` installs it"
                    .into(),
            );
        }
        if let Some(tree) = self.source.as_ref().filter(|_| !self.vmlinuz().exists()) {
            return Some(format!(
                "its guest kernel is built from {tree}, and no build of it is in {}; \
                 `pantheon schemes setup` builds it",
                self.dir.display()
            ));
        }
        if self.accel().is_none() || !self.vmlinuz().exists() || !self.initramfs().exists() {
            return Some(format!(
                "guest kernel {} is not prepared in {}; `pantheon schemes setup` prepares it",
                self.version,
                self.dir.display()
            ));
        }
        None
    }

    /// Unpacks `linux-image-<version>` (downloaded with `apt-get download`) into the kernel's
    /// directory (a built kernel is already there), indexes its modules (`depmod`), builds the
    /// initramfs (busybox, the boot modules, [`init_script`]) and boots it once with KVM — else
    /// with TCG — to record which works. `say`: progress lines. Errors name the step that
    /// failed and its output; a kernel already prepared is left as it is.
    pub fn prepare(&self, say: &mut dyn FnMut(&str)) -> Result<()> {
        if self.accel().is_some() && self.vmlinuz().exists() && self.initramfs().exists() {
            return Ok(());
        }
        if let Some(tree) = &self.source {
            if !self.vmlinuz().exists() {
                bail!(
                    "the build of {tree} left no kernel in {} (release, boot/vmlinuz-<release>)",
                    self.dir.display()
                );
            }
        } else {
            self.unpack(say)?;
        }
        run(Command::new("depmod")
            .arg("-b")
            .arg(&self.dir)
            .arg(&self.version))?;
        say("building the initramfs");
        self.build_initramfs()?;
        say("booting it once to choose KVM or TCG");
        let accel = self.probe_accel()?;
        say(&format!("guests run with {}", accel.describe()));
        let text = match &accel {
            Accel::Kvm => "kvm\n".to_owned(),
            Accel::Tcg(why) => format!("tcg\n{why}\n"),
        };
        std::fs::write(self.dir.join("accel"), text)?;
        Ok(())
    }

    /// Downloads Debian's `linux-image-<version>` and unpacks it into the kernel's directory.
    fn unpack(&self, say: &mut dyn FnMut(&str)) -> Result<()> {
        std::fs::create_dir_all(&self.dir)
            .with_context(|| format!("create {}", self.dir.display()))?;
        let package = format!("linux-image-{}", self.version);
        say(&format!("downloading {package} (apt-get download)"));
        let download = self.dir.join("download");
        let _ = std::fs::remove_dir_all(&download);
        std::fs::create_dir_all(&download)?;
        run(Command::new("apt-get")
            .args(["download", &package])
            .current_dir(&download))
        .with_context(|| {
            format!("{package} is not offered by this machine's apt sources (apt-cache search linux-image)")
        })?;
        let deb = std::fs::read_dir(&download)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .find(|p| p.extension().is_some_and(|e| e == "deb"))
            .with_context(|| format!("apt-get download left no .deb in {}", download.display()))?;
        say(&format!("unpacking {}", deb.display()));
        run(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&self.dir))?;
        std::fs::remove_dir_all(&download)?;
        Ok(())
    }

    /// The modules' files in load order (dependencies first), as `modprobe --show-depends`
    /// gives them for this kernel.
    fn module_files(&self, modules: &[&str]) -> Result<Vec<PathBuf>> {
        let mut files: Vec<PathBuf> = Vec::new();
        for m in modules {
            let out = Command::new("modprobe")
                .arg("-d")
                .arg(&self.dir)
                .args(["-S", &self.version, "--show-depends", m])
                .output()
                .context("run modprobe (apt-get install kmod)")?;
            if !out.status.success() {
                bail!(
                    "module {m} of kernel {}: {}",
                    self.version,
                    String::from_utf8_lossy(&out.stderr).trim()
                );
            }
            for line in String::from_utf8_lossy(&out.stdout).lines() {
                if let Some(p) = line.strip_prefix("insmod ") {
                    let p = PathBuf::from(p.trim());
                    if !files.contains(&p) {
                        files.push(p);
                    }
                }
            }
        }
        Ok(files)
    }

    fn build_initramfs(&self) -> Result<()> {
        let root = self.dir.join("initramfs");
        let _ = std::fs::remove_dir_all(&root);
        for d in ["bin", "mods", "proc", "sys", "dev", "host"] {
            std::fs::create_dir_all(root.join(d))?;
        }
        let busybox = Path::new("/bin/busybox");
        if !is_static(busybox) {
            bail!(
                "/bin/busybox is missing or not statically linked (apt-get install busybox-static)"
            );
        }
        std::fs::copy(busybox, root.join("bin/busybox"))?;
        for (i, f) in self.module_files(&BOOT_MODULES)?.iter().enumerate() {
            let name = f.file_name().context("module path")?.to_string_lossy();
            std::fs::copy(f, root.join(format!("mods/{i:02}-{name}")))
                .with_context(|| format!("copy {}", f.display()))?;
        }
        let init = root.join("init");
        std::fs::write(&init, init_script())?;
        set_mode(&init, 0o755)?;
        set_mode(&root.join("bin/busybox"), 0o755)?;
        let out = std::fs::File::create(self.initramfs())?;
        run(Command::new("sh")
            .args(["-c", "find . | cpio --quiet -o -H newc"])
            .current_dir(&root)
            .stdout(out))?;
        Ok(())
    }

    /// Boots a guest that only says it is up, with KVM (30 s) and, failing that, TCG (120 s).
    fn probe_accel(&self) -> Result<Accel> {
        let job = self.dir.join("probe");
        let kvm_failed = match self.probe(&job, &Accel::Kvm, Duration::from_secs(30)) {
            Ok(()) => return Ok(Accel::Kvm),
            Err(e) => e.to_string(),
        };
        let accel = Accel::Tcg(format!("KVM did not boot a guest here: {kvm_failed}"));
        self.probe(&job, &accel, Duration::from_secs(120))
            .context("no guest booted, with KVM or TCG")?;
        Ok(accel)
    }

    fn probe(&self, job: &Path, accel: &Accel, timeout: Duration) -> Result<()> {
        if matches!(accel, Accel::Kvm) && std::fs::File::open("/dev/kvm").is_err() {
            bail!("/dev/kvm cannot be opened");
        }
        let _ = std::fs::remove_dir_all(job);
        std::fs::create_dir_all(job)?;
        std::fs::write(
            job.join("guest.sh"),
            "touch /run/job/ready\necho o > /proc/sysrq-trigger\n",
        )?;
        let console = std::fs::File::create(job.join("console.log"))?;
        let vm = VmConfig {
            kernel: self,
            accel,
            job,
            tap: None,
            data_dir: None,
            memory_mb: 256,
        };
        let mut child = vm
            .command()
            .stdout(console.try_clone()?)
            .stderr(console)
            .spawn()
            .context("start qemu-system-x86_64")?;
        let up = wait_for(&job.join("ready"), timeout, || {
            matches!(child.try_wait(), Ok(None))
        });
        let _ = child.kill();
        let _ = child.wait();
        match up {
            Ok(_) => Ok(()),
            Err(e) => {
                let log = std::fs::read_to_string(job.join("console.log")).unwrap_or_default();
                let last = log
                    .lines()
                    .rev()
                    .map(|l| l.trim())
                    .find(|l| !l.is_empty() && l.is_ascii())
                    .unwrap_or("no console output")
                    .to_owned();
                bail!("{e}; last console line: {last}")
            }
        }
    }
}

/// The initramfs's `/init` (busybox sh): loads the boot modules, mounts the host's filesystem
/// (9p tag `hostroot`, read-only) at `/host` with the kernel's files (`kernel`) at
/// `/run/kernel` and the job directory (`job`, read-write) at `/run/job` inside it, and runs
/// the job's `guest.sh` in it as root. On any failure it says so and powers off.
pub fn init_script() -> String {
    r#"#!/bin/busybox sh
B=/bin/busybox
fail() { echo "pantheon guest init: $*"; echo o > /proc/sysrq-trigger; $B sleep 10; }
$B mount -t proc proc /proc
$B mount -t sysfs sys /sys
$B mount -t devtmpfs dev /dev
for m in /mods/*.ko; do $B insmod "$m" || fail "insmod $m"; done
o=trans=virtio,version=9p2000.L,msize=512000
$B mount -t 9p -o $o,ro hostroot /host || fail "mount the host's filesystem"
$B mount -t proc proc /host/proc
$B mount -t sysfs sys /host/sys
$B mount -t devtmpfs dev /host/dev
$B mount -t tmpfs tmp /host/tmp
$B mount -t tmpfs run /host/run
$B mkdir -p /host/run/kernel /host/run/job
$B mount -t 9p -o $o,ro kernel /host/run/kernel || fail "mount the kernel's files"
$B mount -t 9p -o $o job /host/run/job || fail "mount the job directory"
exec $B chroot /host /bin/sh /run/job/guest.sh
"#
    .to_owned()
}

/// The guest's network: it takes the side's tunnel address and reaches everything through
/// the namespace's end of the tap ([`GUEST_GATEWAY`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GuestNet {
    /// The side's tunnel address, which the guest's `eth0` takes (100.64.0.4 for a sender).
    pub address: Ipv4Addr,
    /// The namespace's end of the tap.
    pub gateway: Ipv4Addr,
    /// The guest NIC's MTU, bytes: the tunnel device's, so that TCP's MSS is the same as on
    /// the host.
    pub mtu: u32,
}

/// The namespace's end of every guest's tap: an address outside the tunnel's 100.64.0.0/24.
pub const GUEST_GATEWAY: Ipv4Addr = Ipv4Addr::new(10, 255, 0, 1);

/// The name of the tap device in the side's namespace.
pub const TAP: &str = "guest0";

/// The job's `guest.sh`: IPv6 off (no packets of the kernel's own in the logs), the NIC's
/// driver and `spec`'s modules loaded, its sysctls written, `eth0` given `net`, the qdisc set,
/// `data_dir` (the results directory) mounted read-write at its own path; the guest's clock
/// set from the host's by `clock` (the `pantheon-guest-clock` program, [`clock`]; its result
/// in the job's `clock` file) when given; then `ready`, a wait for `command`, the command with
/// its status in `status`, [`LINGER`], and power-off. A setup step that fails is reported on
/// the console and ends the guest with status 1 in `status`.
pub fn guest_script(
    spec: &GuestSpec,
    net: &GuestNet,
    data_dir: Option<&Path>,
    clock: Option<&Path>,
) -> String {
    let mut s = String::from(
        "#!/bin/sh\n\
         # Written by pantheon for one scheme side (crates/guest).\n\
         J=/run/job\n\
         fail() { echo \"pantheon guest: $*\"; echo 1 > $J/status; echo o > /proc/sysrq-trigger; sleep 10; }\n\
         echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6\n\
         echo 1 > /proc/sys/net/ipv6/conf/default/disable_ipv6\n",
    );
    let modules: Vec<&str> = NET_MODULES
        .iter()
        .copied()
        .chain(spec.modules.iter().map(String::as_str))
        .collect();
    s += &format!(
        "modprobe -d /run/kernel -a {} || fail 'load modules {}'\n",
        modules.join(" "),
        modules.join(" ")
    );
    for (k, v) in &spec.sysctls {
        s += &format!(
            "echo {} > /proc/sys/{} || fail 'sysctl {k}'\n",
            quote(v),
            k.replace('.', "/")
        );
    }
    let (a, g, mtu) = (net.address, net.gateway, net.mtu);
    s += &format!(
        "ip link set lo up\n\
         ip link set eth0 mtu {mtu} up || fail 'no eth0'\n\
         ip addr add {a}/32 dev eth0\n\
         ip route add {g}/32 dev eth0\n\
         ip route add default via {g} dev eth0 || fail 'route via {g}'\n"
    );
    if let Some(q) = &spec.qdisc {
        s += &format!("tc qdisc replace dev eth0 root {q} || fail 'qdisc {q}'\n");
    }
    if let Some(d) = data_dir {
        let d = quote(&d.display().to_string());
        s += &format!(
            "mkdir -p {d}\n\
             mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 data {d} || fail 'mount {d}'\n\
             cd {d}\n"
        );
    }
    if let Some(c) = clock {
        s += &format!(
            "{} $J/clock || fail 'set the clock from the host'\n",
            quote(&c.display().to_string())
        );
    }
    s += "touch $J/ready\n\
          while [ ! -e $J/command ]; do sleep 0.005; done\n\
          sh $J/command\n\
          echo $? > $J/status\n";
    s += LINGER;
    s += "echo o > /proc/sysrq-trigger\n\
          sleep 10\n";
    s
}

/// What the guest does between its command's exit and power-off: as a host's kernel does after
/// a program exits, it finishes closing the program's TCP connections — until every socket of
/// `/proc/net/tcp` is listening or in TIME_WAIT (state `0A` or `06`), at most 5 s. Without it a
/// sender that exits after its transfer never acknowledges the receiver's FIN: the receiver
/// retransmits it into a namespace whose guest is gone, and the namespace's ICMP "host
/// unreachable" replies, 3 s later, cross the tunnel as the flow's last packets.
const LINGER: &str = "i=0\n\
     while [ $i -lt 500 ] && awk 'NR > 1 && $4 != \"0A\" && $4 != \"06\" { f = 1 } END { exit !f }' /proc/net/tcp; do\n\
     \x20 sleep 0.01; i=$((i + 1))\n\
     done\n";

/// Hands `argv` to the guest waiting in `job`: written to `command.tmp` and renamed, so the
/// guest never reads half of it. Program names are kept as given: resolve them to absolute
/// paths first (the guest's `PATH` is the host's, without the harness's additions).
pub fn write_command(job: &Path, argv: &[String]) -> Result<()> {
    let line: Vec<String> = argv.iter().map(|a| quote(a)).collect();
    let tmp = job.join("command.tmp");
    std::fs::write(&tmp, format!("exec {}\n", line.join(" ")))
        .with_context(|| format!("write {}", tmp.display()))?;
    std::fs::rename(&tmp, job.join("command"))
        .with_context(|| format!("hand the command to the guest in {}", job.display()))
}

/// The exit status the guest recorded for its command (`None`: not recorded — the guest did
/// not get that far, or was stopped).
pub fn exit_status(job: &Path) -> Option<i32> {
    std::fs::read_to_string(job.join("status"))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Waits until `file` exists (polled every 10 ms), at most `timeout`, while `alive()`;
/// returns how long it took. Errors when the time is up or `alive()` turned false.
pub fn wait_for(
    file: &Path,
    timeout: Duration,
    mut alive: impl FnMut() -> bool,
) -> Result<Duration> {
    let t0 = Instant::now();
    while !file.exists() {
        if !alive() {
            bail!("the guest ended before {} appeared", file.display());
        }
        if t0.elapsed() >= timeout {
            bail!("no {} after {:.0} s", file.display(), timeout.as_secs_f64());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(t0.elapsed())
}

/// One guest's QEMU: its kernel, how it is accelerated, its job directory, its tap (none: no
/// NIC) and the results directory it may write.
#[derive(Debug, Clone)]
pub struct VmConfig<'a> {
    /// The prepared kernel.
    pub kernel: &'a Kernel,
    /// KVM or TCG.
    pub accel: &'a Accel,
    /// The job directory, shared as `/run/job`.
    pub job: &'a Path,
    /// The tap device (in the namespace QEMU starts in) that becomes the guest's `eth0`.
    pub tap: Option<&'a str>,
    /// Shared read-write with tag `data` ([`guest_script`] mounts it at its own path).
    pub data_dir: Option<&'a Path>,
    /// Guest memory, MiB.
    pub memory_mb: u32,
}

impl VmConfig<'_> {
    /// The `qemu-system-x86_64` argument list (after the program name): one vCPU, no
    /// display, the serial console on stdout, power-off ends QEMU.
    pub fn args(&self) -> Vec<String> {
        let k = self.kernel;
        let mut a: Vec<String> = [
            "-nodefaults",
            "-no-user-config",
            "-display",
            "none",
            "-serial",
            "stdio",
            "-no-reboot",
            "-smp",
            "1",
        ]
        .map(String::from)
        .to_vec();
        a.push("-accel".into());
        a.push(self.accel.qemu_name().into());
        a.push("-cpu".into());
        a.push(
            if *self.accel == Accel::Kvm {
                "host"
            } else {
                "max"
            }
            .into(),
        );
        a.push("-m".into());
        a.push(self.memory_mb.to_string());
        a.push("-kernel".into());
        a.push(k.vmlinuz().display().to_string());
        a.push("-initrd".into());
        a.push(k.initramfs().display().to_string());
        a.push("-append".into());
        a.push("console=ttyS0 quiet loglevel=1 panic=-1 rdinit=/init".into());
        let mut share = |id: &str, path: &Path, ro: bool| {
            a.push("-fsdev".into());
            a.push(format!(
                "local,id={id},path={},security_model=none{}",
                path.display(),
                if ro {
                    ",readonly=on,multidevs=remap"
                } else {
                    ""
                }
            ));
            a.push("-device".into());
            a.push(format!("virtio-9p-pci,fsdev={id},mount_tag={id}"));
        };
        share("hostroot", Path::new("/"), true);
        share("kernel", &k.dir, true);
        share("job", self.job, false);
        if let Some(d) = self.data_dir {
            share("data", d, false);
        }
        if let Some(tap) = self.tap {
            a.push("-netdev".into());
            a.push(format!("tap,id=net0,ifname={tap},script=no,downscript=no"));
            a.push("-device".into());
            a.push("virtio-net-pci,netdev=net0".into());
        }
        a
    }

    /// [`VmConfig::args`] as a command, stdin closed.
    pub fn command(&self) -> Command {
        let mut c = Command::new("qemu-system-x86_64");
        c.args(self.args()).stdin(Stdio::null());
        c
    }
}

/// `s` as one shell word (single-quoted unless it is plain).
pub fn quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-./:=,@+%".contains(c))
    {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

fn run(cmd: &mut Command) -> Result<()> {
    let what = format!("{cmd:?}");
    let out = cmd
        .stderr(Stdio::piped())
        .output()
        .with_context(|| format!("start {what}"))?;
    if !out.status.success() {
        bail!(
            "{what}: {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

fn program_exists(name: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(name).is_file()))
}

/// Whether `path` is a 64-bit ELF executable without a program interpreter (`PT_INTERP`):
/// statically linked.
fn is_static(path: &Path) -> bool {
    let Ok(b) = std::fs::read(path) else {
        return false;
    };
    let u16_at = |o: usize| {
        b.get(o..o + 2)
            .map(|x| u16::from_le_bytes([x[0], x[1]]) as usize)
    };
    let u64_at = |o: usize| {
        b.get(o..o + 8)
            .map(|x| u64::from_le_bytes(x.try_into().expect("8 bytes")) as usize)
    };
    if !b.starts_with(b"\x7fELF\x02\x01") {
        return false;
    }
    let (Some(phoff), Some(size), Some(count)) = (u64_at(0x20), u16_at(0x36), u16_at(0x38)) else {
        return false;
    };
    (0..count).all(|i| {
        let o = phoff + i * size;
        b.get(o..o + 4) != Some(&3u32.to_le_bytes()[..])
    })
}

fn set_mode(path: &Path, mode: u32) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .with_context(|| format!("chmod {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vegas() -> GuestSpec {
        toml_like(&["tcp_vegas"])
    }

    fn toml_like(modules: &[&str]) -> GuestSpec {
        GuestSpec {
            kernel: "6.1.0-50-amd64".into(),
            modules: modules.iter().map(|m| m.to_string()).collect(),
            sysctls: BTreeMap::from([("net.ipv4.tcp_ecn".into(), "1".into())]),
            qdisc: Some("fq".into()),
            sides: sender_only(),
        }
    }

    #[test]
    fn the_guest_script_loads_sets_and_addresses_in_order_then_waits_for_its_command() {
        let net = GuestNet {
            address: Ipv4Addr::new(100, 64, 0, 4),
            gateway: GUEST_GATEWAY,
            mtu: 1464,
        };
        let s = guest_script(
            &vegas(),
            &net,
            Some(Path::new("/data/my results")),
            Some(Path::new("/opt/pantheon-guest-clock")),
        );
        let at = |needle: &str| s.find(needle).unwrap_or_else(|| panic!("{needle} in\n{s}"));
        assert!(at("disable_ipv6") < at("modprobe"));
        assert!(s.contains("modprobe -d /run/kernel -a virtio_net tcp_vegas"));
        assert!(s.contains("echo 1 > /proc/sys/net/ipv4/tcp_ecn"));
        assert!(s.contains("ip link set eth0 mtu 1464 up"));
        assert!(s.contains("ip addr add 100.64.0.4/32 dev eth0"));
        assert!(s.contains("default via 10.255.0.1"));
        assert!(s.contains("tc qdisc replace dev eth0 root fq"));
        // The path with a space is one word.
        assert!(s.contains("data '/data/my results'"));
        assert!(at("ip addr add") < at("touch $J/ready"));
        // The clock is the host's before the guest says it is up.
        assert!(at("/opt/pantheon-guest-clock $J/clock") < at("touch $J/ready"));
        assert!(at("touch $J/ready") < at("sh $J/command"));
        assert!(at("sh $J/command") < at("echo $? > $J/status"));
        // TCP's closes finish before power-off.
        assert!(at("echo $? > $J/status") < at("/proc/net/tcp"));
        assert!(at("/proc/net/tcp") < at("echo o > /proc/sysrq-trigger\nsleep 10"));
    }

    #[test]
    fn a_spec_that_could_break_out_of_the_script_is_refused() {
        let mut s = vegas();
        s.validate().unwrap();
        s.modules.push("tcp_vegas; reboot".into());
        assert!(s.validate().unwrap_err().to_string().contains("module"));
        let mut s = vegas();
        s.sides = vec!["both".into()];
        assert!(s.validate().unwrap_err().to_string().contains("both"));
        s.sides.clear();
        assert!(s.validate().is_err());
    }

    #[test]
    fn a_command_is_handed_over_whole_and_quoted() {
        let job = std::env::temp_dir().join(format!("pantheon-guest-test-{}", std::process::id()));
        std::fs::create_dir_all(&job).unwrap();
        let argv = ["/usr/bin/iperf3", "--client", "100.64.0.3", "it's"].map(String::from);
        write_command(&job, &argv).unwrap();
        let c = std::fs::read_to_string(job.join("command")).unwrap();
        assert_eq!(c, "exec /usr/bin/iperf3 --client 100.64.0.3 'it'\\''s'\n");
        assert!(!job.join("command.tmp").exists());
        assert_eq!(exit_status(&job), None);
        std::fs::write(job.join("status"), "3\n").unwrap();
        assert_eq!(exit_status(&job), Some(3));
        std::fs::remove_dir_all(&job).unwrap();
    }

    #[test]
    fn qemu_gets_one_share_per_directory_and_the_tap_as_its_nic() {
        let k = Kernel {
            version: "6.1.0-50-amd64".into(),
            dir: PathBuf::from("/k"),
            source: None,
        };
        let accel = Accel::Tcg("test".into());
        let vm = VmConfig {
            kernel: &k,
            accel: &accel,
            job: Path::new("/j"),
            tap: Some(TAP),
            data_dir: Some(Path::new("/d")),
            memory_mb: 512,
        };
        let a = vm.args().join(" ");
        assert!(a.contains("-accel tcg -cpu max"), "{a}");
        assert!(a.contains("-kernel /k/boot/vmlinuz-6.1.0-50-amd64 -initrd /k/initramfs.cpio"));
        for tag in ["hostroot", "kernel", "job", "data"] {
            assert!(a.contains(&format!("mount_tag={tag}")), "{tag}: {a}");
        }
        assert!(a.contains("path=/,security_model=none,readonly=on"));
        assert!(a.contains("path=/j,security_model=none -device"));
        assert!(a.contains("ifname=guest0"));
        assert_eq!(Accel::Kvm.describe(), "kvm");
    }

    #[test]
    fn a_dynamically_linked_program_is_not_static() {
        // The test binary itself is dynamically linked (it has an interpreter).
        assert!(!is_static(&std::env::current_exe().unwrap()));
        assert!(!is_static(Path::new("/nonexistent")));
        // CI installs busybox-static (guest::HOST_PACKAGES).
        assert!(is_static(Path::new("/bin/busybox")));
    }

    #[test]
    fn a_kernel_not_prepared_says_how_to_prepare_it() {
        let k = Kernel {
            version: "6.1.0-50-amd64".into(),
            dir: PathBuf::from("/nonexistent/kernels/6.1.0-50-amd64"),
            source: None,
        };
        assert_eq!(k.accel(), None);
        let why = k.unavailable_reason().unwrap();
        // Either QEMU is missing or the kernel is not prepared; both name the fix.
        assert!(why.contains("pantheon schemes setup"), "{why}");
        assert_eq!(k.origin(), "Debian linux-image-6.1.0-50-amd64");
    }

    #[test]
    fn a_kernel_built_from_source_is_read_from_its_tree() {
        let dir =
            std::env::temp_dir().join(format!("pantheon-built-kernel-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let k = Kernel::built(
            dir.clone(),
            "https://github.com/google/bbr at 001a430b3ddb".into(),
        );
        assert_eq!(k.version, "unbuilt");
        assert_eq!(
            k.origin(),
            "built from https://github.com/google/bbr at 001a430b3ddb"
        );
        if program_exists("qemu-system-x86_64") {
            let why = k.unavailable_reason().unwrap();
            assert!(
                why.contains("built from https://github.com/google/bbr"),
                "{why}"
            );
        }
        let mut said = Vec::new();
        let err = k.prepare(&mut |m| said.push(m.to_owned())).unwrap_err();
        assert!(err.to_string().contains("left no kernel"), "{err}");
        assert!(said.is_empty(), "nothing downloaded: {said:?}");
        std::fs::create_dir_all(dir.join("boot")).unwrap();
        std::fs::write(dir.join("release"), "6.4.0-bbrv3+\n").unwrap();
        std::fs::write(dir.join("boot/vmlinuz-6.4.0-bbrv3+"), "").unwrap();
        let k = Kernel::built(dir.clone(), "t".into());
        assert_eq!(k.version, "6.4.0-bbrv3+");
        assert_eq!(k.vmlinuz(), dir.join("boot/vmlinuz-6.4.0-bbrv3+"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_initramfs_mounts_the_host_read_only_and_runs_the_job() {
        let s = init_script();
        assert!(s.contains("ro hostroot /host"));
        assert!(s.contains("exec $B chroot /host /bin/sh /run/job/guest.sh"));
    }
}
