//! L4S's I/O for quinn (`--cc prague`): the codepoint on the wire and timers fine enough to
//! pace.
//!
//! - **ECT(1).** quinn-proto (0.11) marks ECN-capable datagrams ECT(0) and counts a peer's
//!   ECT(1) as corruption, so [`L4sSocket`] turns ECT(0) into ECT(1) as a datagram leaves and
//!   ECT(1) back into ECT(0) as one arrives (`sim::quic::l4s_on_wire`, `l4s_from_wire`; CE passes
//!   both ways). Both ends of an L4S flow are this program.
//! - **Timers at ns resolution.** quinn paces by waking its connection when the pacer has
//!   tokens again, a fraction of a millisecond ahead at tens of Mbit/s. Tokio's timers have
//!   millisecond granularity, so on tokio the pacer's wake-ups round up to the next ms and each
//!   sends a millisecond's packets at once (at 50 Mbit/s, bursts of four). A DualPI2 L queue
//!   marks every packet that waited over its 1 ms step, so those bursts alone are marked and
//!   Prague backs off far below the link (measured in docs/ecn.md). [`PreciseRuntime`] is
//!   tokio with each timer a `timerfd` (CLOCK_MONOTONIC, ns resolution) that tokio's reactor
//!   polls, so packets leave at the pacer's times.

use std::io::{self, IoSliceMut};
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use anyhow::{Context as _, Result};
use quinn::{AsyncTimer, AsyncUdpSocket, Endpoint, Runtime, TokioRuntime, UdpPoller};
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

/// An L4S endpoint on a UDP socket bound to `addr` (a server with `server`'s configuration):
/// [`L4sSocket`] over tokio's socket, [`PreciseRuntime`]'s timers. Errors if the address
/// cannot be bound.
pub fn endpoint(addr: SocketAddr, server: Option<quinn::ServerConfig>) -> Result<Endpoint> {
    let socket = std::net::UdpSocket::bind(addr).with_context(|| format!("binding {addr}"))?;
    let socket = Arc::new(L4sSocket(TokioRuntime.wrap_udp_socket(socket)?));
    Ok(Endpoint::new_with_abstract_socket(
        quinn::EndpointConfig::default(),
        server,
        socket,
        Arc::new(PreciseRuntime),
    )?)
}

/// quinn's UDP socket with L4S's codepoint: ECT(1) on every datagram quinn marks ECT(0), and
/// ECT(1) read back as ECT(0) for quinn-proto's ECN validation.
#[derive(Debug)]
pub struct L4sSocket(Arc<dyn AsyncUdpSocket>);

/// `ecn` through `map`, quinn-udp's codepoint as quinn-proto's and back (the same bits).
fn mapped(
    ecn: Option<quinn::udp::EcnCodepoint>,
    map: fn(Option<quinn::EcnCodepoint>) -> Option<quinn::EcnCodepoint>,
) -> Option<quinn::udp::EcnCodepoint> {
    map(ecn.and_then(|e| quinn::EcnCodepoint::from_bits(e as u8)))
        .and_then(|e| quinn::udp::EcnCodepoint::from_bits(e as u8))
}

impl AsyncUdpSocket for L4sSocket {
    fn create_io_poller(self: Arc<Self>) -> Pin<Box<dyn UdpPoller>> {
        Arc::clone(&self.0).create_io_poller()
    }

    fn try_send(&self, t: &quinn::udp::Transmit) -> io::Result<()> {
        self.0.try_send(&quinn::udp::Transmit {
            destination: t.destination,
            ecn: mapped(t.ecn, sim::quic::l4s_on_wire),
            contents: t.contents,
            segment_size: t.segment_size,
            src_ip: t.src_ip,
        })
    }

    fn poll_recv(
        &self,
        cx: &mut Context,
        bufs: &mut [IoSliceMut<'_>],
        meta: &mut [quinn::udp::RecvMeta],
    ) -> Poll<io::Result<usize>> {
        let polled = self.0.poll_recv(cx, bufs, meta);
        if let Poll::Ready(Ok(n)) = polled {
            for m in &mut meta[..n] {
                m.ecn = mapped(m.ecn, sim::quic::l4s_from_wire);
            }
        }
        polled
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.0.local_addr()
    }

    fn max_transmit_segments(&self) -> usize {
        self.0.max_transmit_segments()
    }

    fn max_receive_segments(&self) -> usize {
        self.0.max_receive_segments()
    }

    fn may_fragment(&self) -> bool {
        self.0.may_fragment()
    }
}

/// quinn's tokio runtime with [`TimerFd`] timers.
#[derive(Debug)]
pub struct PreciseRuntime;

impl Runtime for PreciseRuntime {
    fn new_timer(&self, at: Instant) -> Pin<Box<dyn AsyncTimer>> {
        match TimerFd::new(at) {
            Ok(t) => Box::pin(t),
            // No timerfd (the process is out of file descriptors): tokio's, 1 ms resolution.
            Err(e) => {
                eprintln!("pantheon-quinn: timerfd: {e}; pacing at tokio's 1 ms resolution");
                TokioRuntime.new_timer(at)
            }
        }
    }

    fn spawn(&self, future: Pin<Box<dyn std::future::Future<Output = ()> + Send>>) {
        tokio::spawn(future);
    }

    fn wrap_udp_socket(&self, socket: std::net::UdpSocket) -> io::Result<Arc<dyn AsyncUdpSocket>> {
        TokioRuntime.wrap_udp_socket(socket)
    }
}

/// A one-shot timer at `deadline` on a `timerfd` (CLOCK_MONOTONIC, the clock of Rust's
/// `Instant` on Linux) that tokio's reactor polls for readability.
#[derive(Debug)]
pub struct TimerFd {
    fd: AsyncFd<OwnedFd>,
    deadline: Instant,
}

impl TimerFd {
    fn new(deadline: Instant) -> io::Result<TimerFd> {
        // SAFETY: timerfd_create has no memory arguments; a non-negative result is a new file
        // descriptor that nothing else owns.
        let raw = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` was just created and is owned by nothing else.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: an OwnedFd's raw descriptor is valid, open and the same until it is dropped,
        // which only the AsyncFd that owns it does.
        let fd = unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE)? };
        let timer = TimerFd { fd, deadline };
        timer.arm();
        Ok(timer)
    }

    /// Sets the timerfd to expire at the deadline (at once if it has passed: a zero value
    /// would disarm it).
    fn arm(&self) {
        let left = self.deadline.saturating_duration_since(Instant::now());
        let ns = left.as_nanos().max(1);
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: (ns / 1_000_000_000) as libc::time_t,
                tv_nsec: (ns % 1_000_000_000) as libc::c_long,
            },
        };
        // SAFETY: the fd is a timerfd we own; `spec` lives across the call; no old value asked.
        unsafe { libc::timerfd_settime(self.fd.as_raw_fd(), 0, &spec, std::ptr::null_mut()) };
    }
}

impl AsyncTimer for TimerFd {
    fn reset(self: Pin<&mut Self>, at: Instant) {
        let this = self.get_mut();
        this.deadline = at;
        this.arm();
    }

    fn poll(self: Pin<&mut Self>, cx: &mut Context) -> Poll<()> {
        let this = self.get_mut();
        loop {
            if Instant::now() >= this.deadline {
                return Poll::Ready(());
            }
            let mut ready = match this.fd.poll_read_ready(cx) {
                Poll::Ready(Ok(guard)) => guard,
                Poll::Ready(Err(_)) => return Poll::Ready(()),
                Poll::Pending => return Poll::Pending,
            };
            // An expiry (perhaps of an earlier deadline): read its count, then look again.
            let mut count = [0u8; 8];
            // SAFETY: reads at most 8 bytes into `count`, a buffer of 8 bytes.
            unsafe { libc::read(this.fd.as_raw_fd(), count.as_mut_ptr().cast(), 8) };
            ready.clear_ready();
        }
    }
}
