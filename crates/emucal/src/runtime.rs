//! The emulator's I/O shell: two TUN devices joining an outer and an inner network namespace,
//! and one ferry thread per direction that moves packets through that direction's
//! [`Pipeline`] on a nanosecond monotonic clock.
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
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use netns::NetNs;

use crate::mm::{EmulatedPath, LinkDirection};
use crate::stage::Pipeline;
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

/// Errors of starting the emulator.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// Namespace configuration failed.
    #[error(transparent)]
    NetNs(#[from] netns::Error),
    /// A TUN device or thread could not be created.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The OS error.
        source: std::io::Error,
    },
}

/// Live counters of one direction.
#[derive(Debug, Default)]
pub struct DirectionStats {
    /// Packets that entered the path.
    pub arrived: AtomicU64,
    /// Packets that left it.
    pub departed: AtomicU64,
    /// Packets dropped inside (queue and random loss).
    pub dropped: AtomicU64,
    /// Packets inside the path right now.
    pub held: AtomicUsize,
}

/// A running emulator; dropping it stops both ferries.
#[derive(Debug)]
pub struct Emulator {
    stop: Arc<AtomicBool>,
    /// Uplink counters.
    pub uplink: Arc<DirectionStats>,
    /// Downlink counters.
    pub downlink: Arc<DirectionStats>,
    threads: Vec<JoinHandle<()>>,
}

impl Emulator {
    /// Creates the two devices (outer in `outer`, inner in `inner` with a default route via
    /// the outer address) and starts both ferries. Loss generators are seeded from `seed`.
    pub fn start(
        path: &EmulatedPath,
        outer: &NetNs,
        inner: &NetNs,
        seed: u64,
    ) -> Result<Emulator, RuntimeError> {
        let io = |what: &str| {
            let what = what.to_owned();
            move |source| RuntimeError::Io { what, source }
        };
        let make = |ns: &NetNs, name: &str, addr: Ipv4Addr, peer: Ipv4Addr| {
            let dev = ns
                .run_in(|| {
                    tun_rs::DeviceBuilder::new()
                        .name(name)
                        .mtu(1500)
                        .ipv4(addr, 32u8, Some(peer))
                        .build_sync()
                })?
                .map_err(io(&format!("create TUN {name} in {}", ns.name())))?;
            ns.ip(&["link", "set", "dev", name, "up", "txqueuelen", "10000"])?;
            Ok::<_, RuntimeError>(dev)
        };
        let outer_dev = Arc::new(make(outer, OUTER_DEV, OUTER_ADDR, INNER_ADDR)?);
        let inner_dev = Arc::new(make(inner, INNER_DEV, INNER_ADDR, OUTER_ADDR)?);
        inner.ip(&[
            "route",
            "replace",
            "default",
            "via",
            &OUTER_ADDR.to_string(),
            "dev",
            INNER_DEV,
        ])?;
        for dev in [&outer_dev, &inner_dev] {
            dev.set_nonblocking(true)
                .map_err(io("set TUN non-blocking"))?;
        }

        let stop = Arc::new(AtomicBool::new(false));
        let epoch = Instant::now();
        let uplink = Arc::new(DirectionStats::default());
        let downlink = Arc::new(DirectionStats::default());
        let mut threads = Vec::new();
        for (direction, from, to, stats) in [
            (LinkDirection::Uplink, &inner_dev, &outer_dev, &uplink),
            (LinkDirection::Downlink, &outer_dev, &inner_dev, &downlink),
        ] {
            let ferry = Ferry {
                pipeline: path.pipeline(direction, seed),
                from: from.clone(),
                to: to.clone(),
                epoch,
                stop: stop.clone(),
                stats: stats.clone(),
            };
            let name = format!("ferry-{direction:?}").to_lowercase();
            threads.push(
                std::thread::Builder::new()
                    .name(name)
                    .spawn(move || ferry.run())
                    .map_err(io("spawn ferry thread"))?,
            );
        }
        Ok(Emulator {
            stop,
            uplink,
            downlink,
            threads,
        })
    }

    /// Packets inside the emulated path, both directions.
    pub fn held(&self) -> usize {
        self.uplink.held.load(Ordering::Relaxed) + self.downlink.held.load(Ordering::Relaxed)
    }

    /// Stops both ferries and waits for them.
    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Packets read per wake-up before the pipeline is advanced (bounded work per loop).
const BATCH: usize = 256;
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
}

impl Ferry {
    fn run(mut self) {
        // Timers fire when asked rather than up to 50 µs late (the default slack).
        // SAFETY: prctl with integer arguments.
        unsafe {
            libc::prctl(libc::PR_SET_TIMERSLACK, 1u64, 0u64, 0u64, 0u64);
        }
        let mut pool: Vec<Packet> = Vec::new();
        let mut pfd = libc::pollfd {
            fd: self.from.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        while !self.stop.load(Ordering::Relaxed) {
            let now = self.epoch.elapsed().as_nanos() as u64;
            for _ in 0..BATCH {
                let mut pkt = pool.pop().unwrap_or_default();
                pkt.resize(PACKET_BUF, 0);
                match self.from.recv(&mut pkt) {
                    Ok(n) => {
                        pkt.truncate(n);
                        self.pipeline.push(now, pkt);
                        self.stats.arrived.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(_) => {
                        pool.push(pkt);
                        break;
                    }
                }
            }
            self.pipeline.advance(now);
            while let Some((_, pkt)) = self.pipeline.pop() {
                let _ = self.to.send(&pkt);
                self.stats.departed.fetch_add(1, Ordering::Relaxed);
                pool.push(pkt);
            }
            self.stats
                .held
                .store(self.pipeline.held(), Ordering::Relaxed);
            self.stats
                .dropped
                .store(self.pipeline.dropped(), Ordering::Relaxed);
            let sleep = match self.pipeline.next_wakeup() {
                Some(t) => t.saturating_sub(self.epoch.elapsed().as_nanos() as u64),
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
    }
}
