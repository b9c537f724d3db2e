//! Simulated time: the quic schemes over the emulator on a virtual clock.
//!
//! A real run of `quic` moves packets between a quinn program, a TUN device, the tunnel and
//! the emulator, in real time. Here the same pieces minus the operating system run in one
//! thread on a virtual clock: quinn-proto's [`quinn_proto::Connection`] (the sans-IO core under
//! the `pantheon-quinn` program, with the same congestion controllers, pacing and transport
//! settings: [`quic`]) and the emulator's sans-IO stages (`emucal::stage`, the same pipelines
//! the real-time emulator runs). The loop ([`run`]) jumps from event to event, so a run costs
//! CPU time only, and every random choice comes from the run's seed: the same seed gives the
//! same packets at the same nanoseconds, byte for byte in the logs.
//!
//! What it is not: no kernel (no socket buffers, no TUN queue, no scheduler), no CPU
//! contention, no real timers (a pacing timer fires exactly when asked). Only schemes whose
//! congestion control runs in quinn-proto can be simulated; kernel TCP, quiche and tquic read
//! the operating system's clock themselves.
//!
//! - [`quic`]: the controllers, transport settings and TLS configuration both clocks share.
//! - [`frame`]: simulated packets as the emulator and the tunnel logs see real ones.
//! - [`run`]: the discrete-event loop.
//! - [`logs`]: its logs, as files a real run would have written, or in memory.
//!
//! ```
//! use pantheon_sim::{logs::MemorySink, quic::{Controller, MAX_UDP_PAYLOAD}, run::*};
//! let shells = emucal::mm::parse_shells("mm-delay 10").unwrap();
//! let path = emucal::mm::EmulatedPath::load(shells, vec![]).unwrap();
//! let config = SimConfig {
//!     path: &path,
//!     flows: vec![FlowSpec { cc: Controller::Cubic.factory(), start_ns: 0, stop_ns: None, l4s: false }],
//!     seed: 1,
//!     end_ns: 200_000_000, // 0.2 s
//!     drain_ns: 1_000_000_000,
//!     max_udp_payload: MAX_UDP_PAYLOAD,
//!     host: HostLatency::MEASURED,
//!     host_seed: 1,
//! };
//! let mut sink = MemorySink::default();
//! let outcome = simulate(&config, &mut sink, &mut |_| true).unwrap();
//! assert!(outcome.delivered.0 > 100 && outcome.drained);
//! ```

pub mod frame;
pub mod logs;
pub mod quic;
pub mod run;
