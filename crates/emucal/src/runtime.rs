//! The emulator's I/O shell: two TUN devices joining an outer and an inner network namespace,
//! and one ferry thread per direction that moves packets through that direction's
//! [`Pipeline`] on a nanosecond monotonic clock.
//!
//! The devices are opened with offload, as the tunnel's is (`tunnel::tun`): one read takes a
//! whole GSO packet (up to 64 KiB of TCP or UDP segments) and hands the pipeline its
//! MTU-sized segments — the packets a device without offload gives one by one, so queues,
//! opportunities and logs see exactly the same packets — and the packets due at one instant
//! leave in GRO-merged batches. The clock is read once per wake-up for arrivals and once per
//! written batch for departures.
//!
//! ```text
//!  outer netns                                   inner netns (the emulated side)
//!  emu0 100.64.0.1 ◄── downlink ferry ── uplink ferry ──► ingress 100.64.0.2, default route
//!  (MAHIMAHI_BASE)                                          via 100.64.0.1
//! ```
//! The devices carry no packet-information header (IFF_NO_PI); the link model adds Mahimahi's
//! 4 bytes to every size itself, so opportunities and queue limits mean what they mean there.

use std::net::Ipv4Addr;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use netns::NetNs;

use tunnel::tun::{TunReader, TunWriter};

use crate::linklog::LinkLogWriter;
use crate::mm::{EmulatedPath, LinkDirection, LinkShell};
use crate::stage::{AnyStage, LinkEvent, Pipeline};
use crate::Packet;

/// Address of the outer device: what the emulated side reaches the outside by
/// (Mahimahi's `MAHIMAHI_BASE`).
pub const OUTER_ADDR: Ipv4Addr = Ipv4Addr::new(100, 64, 0, 1);
/// Address of the inner device.
pub const INNER_ADDR: Ipv4Addr = Ipv4Addr::new(100, 64, 0, 2);
/// Name of the outer TUN device.
pub const OUTER_DEV: &str = "emu0";
/// Name of the inner TUN device (as Mahimahi's).
pub const INNER_DEV: &str = "ingress";

/// Names and addresses of the emulator's two TUN devices.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Devices {
    /// Outer device name (≤ 15 bytes).
    pub outer_dev: String,
    /// Outer address (`MAHIMAHI_BASE` for the inner side).
    pub outer_addr: Ipv4Addr,
    /// Inner device name.
    pub inner_dev: String,
    /// Inner address; the inner namespace's default route goes via the outer address.
    pub inner_addr: Ipv4Addr,
}

impl Default for Devices {
    /// `emu0` 100.64.0.1 outside, `ingress` 100.64.0.2 inside.
    fn default() -> Devices {
        Devices {
            outer_dev: OUTER_DEV.into(),
            outer_addr: OUTER_ADDR,
            inner_dev: INNER_DEV.into(),
            inner_addr: INNER_ADDR,
        }
    }
}

/// Errors of starting the emulator.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// Namespace configuration failed.
    #[error(transparent)]
    NetNs(#[from] netns::Error),
    /// A TUN device, log file or thread could not be created.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The OS error.
        source: std::io::Error,
    },
}

/// Buckets of the lateness histogram: 1 µs each, the last one for ≥ 10 ms.
const LATENESS_BUCKETS: usize = 10_001;

/// Live counters of one direction.
#[derive(Debug)]
pub struct DirectionStats {
    /// Packets that entered the path.
    pub arrived: AtomicU64,
    /// Packets that left it.
    pub departed: AtomicU64,
    /// Packets dropped inside (queue and random loss).
    pub dropped: AtomicU64,
    /// Packets inside the path right now.
    pub held: AtomicUsize,
    /// True once a `--once` link of this direction used its last opportunity.
    pub finished: AtomicBool,
    /// How late packets were written to the outgoing device after their scheduled departure:
    /// count per µs of lateness.
    lateness_us: Box<[AtomicU64]>,
}

impl Default for DirectionStats {
    fn default() -> DirectionStats {
        DirectionStats {
            arrived: AtomicU64::new(0),
            departed: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            held: AtomicUsize::new(0),
            finished: AtomicBool::new(false),
            lateness_us: (0..LATENESS_BUCKETS).map(|_| AtomicU64::new(0)).collect(),
        }
    }
}

impl DirectionStats {
    /// The `q`-quantile (0–1) of how late departed packets were written, in µs (10 000 means
    /// ≥ 10 ms); `None` before any departure. Lateness = the time the packet was handed to the
    /// outgoing TUN device minus the departure time the link model scheduled.
    pub fn lateness_quantile_us(&self, q: f64) -> Option<u64> {
        let counts: Vec<u64> = self
            .lateness_us
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .collect();
        let total: u64 = counts.iter().sum();
        if total == 0 {
            return None;
        }
        let rank = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        counts
            .iter()
            .position(|&c| {
                seen += c;
                seen >= rank
            })
            .map(|i| i as u64)
    }
}

/// A running emulator; dropping it stops both ferries.
#[derive(Debug)]
pub struct RunningEmulator {
    stop: Arc<AtomicBool>,
    /// Uplink counters.
    pub uplink: Arc<DirectionStats>,
    /// Downlink counters.
    pub downlink: Arc<DirectionStats>,
    threads: Vec<JoinHandle<()>>,
    epoch: Instant,
    errors: Arc<Mutex<Vec<String>>>,
}

/// `what` failed: the error of an I/O call.
fn io_error(what: &str) -> impl FnOnce(std::io::Error) -> RuntimeError {
    let what = what.to_owned();
    move |source| RuntimeError::Io { what, source }
}

/// The emulator's two TUN devices: `devices.outer_dev` in `outer` (this namespace if `None`)
/// and `devices.inner_dev` in `inner`, each peered with the other's address, up, non-blocking,
/// with offload (TSO/USO in, GRO out); `inner`'s default route through its device.
fn tun_devices(
    outer: Option<&NetNs>,
    inner: &NetNs,
    devices: &Devices,
) -> Result<(Arc<tun_rs::SyncDevice>, Arc<tun_rs::SyncDevice>), RuntimeError> {
    let make = |ns: Option<&NetNs>, name: &str, addr: Ipv4Addr, peer: Ipv4Addr| {
        let build = || {
            tun_rs::DeviceBuilder::new()
                .name(name)
                .mtu(1500)
                .ipv4(addr, 32u8, Some(peer))
                .offload(true)
                .build_sync()
        };
        let where_ = ns.map_or("this namespace", NetNs::name);
        let dev = match ns {
            Some(ns) => ns.run_in(build)?,
            None => build(),
        }
        .map_err(io_error(&format!("create TUN {name} in {where_}")))?;
        let up = ["link", "set", "dev", name, "up", "txqueuelen", "10000"];
        match ns {
            Some(ns) => ns.ip(&up)?,
            None => netns::run_command("ip", &up)?,
        }
        Ok::<_, RuntimeError>(dev)
    };
    let outer_dev = Arc::new(make(
        outer,
        &devices.outer_dev,
        devices.outer_addr,
        devices.inner_addr,
    )?);
    let inner_dev = Arc::new(make(
        Some(inner),
        &devices.inner_dev,
        devices.inner_addr,
        devices.outer_addr,
    )?);
    inner.ip(&[
        "route",
        "replace",
        "default",
        "via",
        &devices.outer_addr.to_string(),
        "dev",
        &devices.inner_dev,
    ])?;
    for dev in [&outer_dev, &inner_dev] {
        dev.set_nonblocking(true)
            .map_err(io_error("set TUN non-blocking"))?;
    }
    Ok((outer_dev, inner_dev))
}

/// The log writers of a direction's logged `links` (stage index, shell), their headers dated
/// `init_epoch_ns` (ns since the Unix epoch).
fn link_logs(
    links: &[(usize, &LinkShell)],
    direction: LinkDirection,
    init_epoch_ns: u64,
) -> Result<Vec<(usize, Option<LinkLogWriter>)>, RuntimeError> {
    let mut logs = Vec::new();
    for &(stage, link) in links {
        let file = link
            .direction(direction)
            .log
            .expect("logged links have a log file");
        let w = LinkLogWriter::create(file, link, direction, init_epoch_ns)
            .map_err(io_error("create mm-link log"))?;
        logs.push((stage, Some(w)));
    }
    Ok(logs)
}

/// One thread per ferry (named); if one cannot start, `stop` is set (the others end) and the
/// error returned.
fn spawn_ferries(
    ferries: Vec<(String, Ferry)>,
    stop: &AtomicBool,
) -> Result<Vec<JoinHandle<()>>, RuntimeError> {
    let mut threads = Vec::new();
    for (name, ferry) in ferries {
        let spawned = std::thread::Builder::new()
            .name(name)
            .spawn(move || ferry.run());
        match spawned {
            Ok(t) => threads.push(t),
            Err(e) => {
                stop.store(true, Ordering::SeqCst);
                return Err(RuntimeError::Io {
                    what: "spawn ferry thread".into(),
                    source: e,
                });
            }
        }
    }
    Ok(threads)
}

impl RunningEmulator {
    /// Creates the two devices (outer `emu0` in `outer`, inner `ingress` in `inner` with a
    /// default route via the outer address) and starts both ferries. Random generators are
    /// seeded from `seed`.
    pub fn start(
        path: &EmulatedPath,
        outer: &NetNs,
        inner: &NetNs,
        seed: u64,
    ) -> Result<RunningEmulator, RuntimeError> {
        RunningEmulator::start_with(path, Some(outer), inner, &Devices::default(), seed)
    }

    /// As [`RunningEmulator::start`] with the devices named and addressed by `devices`; `outer`
    /// `None` puts the outer device in the calling thread's namespace (as Mahimahi does).
    /// Link log files named in `path` are created here (errors name the file).
    pub fn start_with(
        path: &EmulatedPath,
        outer: Option<&NetNs>,
        inner: &NetNs,
        devices: &Devices,
        seed: u64,
    ) -> Result<RunningEmulator, RuntimeError> {
        let (outer_dev, inner_dev) = tun_devices(outer, inner, devices)?;
        let stop = Arc::new(AtomicBool::new(false));
        let epoch = Instant::now();
        let init_epoch_ns = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let uplink = Arc::new(DirectionStats::default());
        let downlink = Arc::new(DirectionStats::default());
        let errors = Arc::new(Mutex::new(Vec::new()));
        let mut ferries = Vec::new();
        for (direction, from, to, stats) in [
            (LinkDirection::Uplink, &inner_dev, &outer_dev, &uplink),
            (LinkDirection::Downlink, &outer_dev, &inner_dev, &downlink),
        ] {
            let (pipeline, links) = path.pipeline(direction, seed);
            let logs = link_logs(&links, direction, init_epoch_ns)?;
            ferries.push((
                format!("ferry-{direction:?}").to_lowercase(),
                Ferry {
                    pipeline,
                    from: from.clone(),
                    to: to.clone(),
                    epoch,
                    stop: stop.clone(),
                    stats: stats.clone(),
                    logs,
                    events: Vec::new(),
                    errors: errors.clone(),
                    reader: TunReader::new(PACKET_BUF),
                    writer: TunWriter::new(),
                    due: Vec::new(),
                    pool: Vec::new(),
                    write_errors: 0,
                },
            ));
        }
        let threads = spawn_ferries(ferries, &stop)?;
        Ok(RunningEmulator {
            stop,
            uplink,
            downlink,
            threads,
            epoch,
            errors,
        })
    }

    /// The instant the emulator's clock (and every trace) started: opportunity times are
    /// offsets from it.
    pub fn epoch(&self) -> Instant {
        self.epoch
    }

    /// Packets inside the emulated path, both directions.
    pub fn held(&self) -> usize {
        self.uplink.held.load(Ordering::Relaxed) + self.downlink.held.load(Ordering::Relaxed)
    }

    /// True when a `--once` link has used its last opportunity in both directions (Mahimahi
    /// then ends the shell).
    pub fn finished(&self) -> bool {
        self.uplink.finished.load(Ordering::Relaxed)
            && self.downlink.finished.load(Ordering::Relaxed)
    }

    /// Problems met while running (a link log that could not be written), for the user.
    pub fn errors(&self) -> Vec<String> {
        self.errors.lock().map(|e| e.clone()).unwrap_or_default()
    }

    /// Stops both ferries, waits for them and completes the link logs (every opportunity up
    /// to now is logged).
    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for RunningEmulator {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Reads per wake-up before the pipeline is advanced (bounded work per loop); each read is one
/// packet, or one GSO packet split into its segments.
const READS_PER_WAKE: usize = 64;
/// Longest sleep, so that `stop` is noticed promptly.
const MAX_SLEEP_NS: u64 = 20_000_000;
/// Receive buffer per packet: a full MTU and then some.
const PACKET_BUF: usize = 2048;

struct Ferry {
    pipeline: Pipeline,
    from: Arc<tun_rs::SyncDevice>,
    to: Arc<tun_rs::SyncDevice>,
    epoch: Instant,
    stop: Arc<AtomicBool>,
    stats: Arc<DirectionStats>,
    /// Link stages (index in the pipeline) whose events go to a log file.
    logs: Vec<(usize, Option<LinkLogWriter>)>,
    events: Vec<LinkEvent>,
    errors: Arc<Mutex<Vec<String>>>,
    reader: TunReader,
    /// Departures on their way to `to`, written in GRO-merged batches.
    writer: TunWriter,
    /// The scheduled departure times (ns) of the packets in `writer`, for their lateness.
    due: Vec<u64>,
    /// Buffers of departed packets, reused for arrivals.
    pool: Vec<Packet>,
    /// Batches the outgoing device refused (their packets are lost, as a full device's).
    write_errors: u64,
}

impl Ferry {
    fn now(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    fn run(mut self) {
        // Timers fire when asked rather than up to 50 µs late (the default slack).
        // SAFETY: prctl with integer arguments.
        unsafe {
            libc::prctl(libc::PR_SET_TIMERSLACK, 1u64, 0u64, 0u64, 0u64);
        }
        let mut pfd = libc::pollfd {
            fd: self.from.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        while !self.stop.load(Ordering::Relaxed) {
            let now = self.now();
            self.read_arrivals(now);
            self.pipeline.advance(now);
            self.send_departures();
            self.write_logs();
            self.stats
                .held
                .store(self.pipeline.held(), Ordering::Relaxed);
            self.stats
                .dropped
                .store(self.pipeline.dropped(), Ordering::Relaxed);
            if self.pipeline.finished() {
                self.stats.finished.store(true, Ordering::Relaxed);
            }
            let sleep = match self.pipeline.next_wakeup() {
                Some(t) => t.saturating_sub(self.now()),
                None => MAX_SLEEP_NS,
            }
            .min(MAX_SLEEP_NS);
            if sleep == 0 {
                continue;
            }
            let ts = libc::timespec {
                tv_sec: (sleep / 1_000_000_000) as libc::time_t,
                tv_nsec: (sleep % 1_000_000_000) as libc::c_long,
            };
            // SAFETY: one valid pollfd, a valid timespec, no signal mask.
            unsafe {
                libc::ppoll(&mut pfd, 1, &ts, std::ptr::null());
            }
        }
        // Log every opportunity up to the end, as Mahimahi does while it runs.
        let now = self.now();
        self.pipeline.advance(now);
        self.write_logs();
        let mut failed = Vec::new();
        for (_, w) in &mut self.logs {
            if let Some(Err(e)) = w.as_mut().map(LinkLogWriter::flush) {
                failed.push(format!("mm-link log: {e}"));
            }
        }
        if self.write_errors > 0 {
            failed.push(format!(
                "the outgoing TUN device refused {} batches of departing packets (lost)",
                self.write_errors
            ));
        }
        failed.into_iter().for_each(|m| self.report(m));
    }

    /// Moves what the incoming device holds (at most [`READS_PER_WAKE`] reads) into the
    /// pipeline, every segment arriving at `now`.
    fn read_arrivals(&mut self, now: u64) {
        for _ in 0..READS_PER_WAKE {
            // Empty, or a packet tun-rs could not split (lost): wait for the next.
            let Ok(n) = self.reader.read(&self.from) else {
                break;
            };
            for i in 0..n {
                let spare = self.pool.pop().unwrap_or_default();
                self.pipeline.push(now, self.reader.take(i, spare));
            }
            self.stats.arrived.fetch_add(n as u64, Ordering::Relaxed);
        }
    }

    /// Writes every packet the pipeline has released, in order, in GRO-merged batches, and
    /// records how late each was handed to the device.
    fn send_departures(&mut self) {
        while let Some((t, pkt)) = self.pipeline.pop() {
            self.due.push(t);
            if self.writer.push(&pkt, &self.to).is_err() {
                self.write_errors += 1;
            }
            self.pool.push(pkt);
            if self.writer.held() == 0 {
                self.account_sent();
            }
        }
        if self.writer.flush(&self.to).is_err() {
            self.write_errors += 1;
        }
        self.account_sent();
    }

    /// Counts the packets of the batch just written as departed, each as late as the time
    /// now (one clock read) minus its scheduled departure.
    fn account_sent(&mut self) {
        if self.due.is_empty() {
            return;
        }
        let sent = self.now();
        for &t in &self.due {
            let late_us = sent.saturating_sub(t) / 1000;
            self.stats.lateness_us[(late_us as usize).min(LATENESS_BUCKETS - 1)]
                .fetch_add(1, Ordering::Relaxed);
        }
        self.stats
            .departed
            .fetch_add(self.due.len() as u64, Ordering::Relaxed);
        self.due.clear();
    }

    /// Moves the logged links' new events into their files; a file that fails is reported
    /// once and no longer written (its events are discarded).
    fn write_logs(&mut self) {
        let mut failed = Vec::new();
        for (stage, w) in &mut self.logs {
            if let Some(AnyStage::Link(l)) = self.pipeline.stage_mut(*stage) {
                l.take_events(&mut self.events);
            }
            if let Some(Err(e)) = w.as_mut().map(|w| w.write(&self.events)) {
                failed.push(format!("mm-link log: {e}; logging stopped"));
                *w = None;
            }
            self.events.clear();
        }
        failed.into_iter().for_each(|m| self.report(m));
    }

    fn report(&self, message: String) {
        if let Ok(mut e) = self.errors.lock() {
            e.push(message);
        }
    }
}
