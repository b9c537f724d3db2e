//! A Mahimahi-compatible link emulator, and Bayesian calibration of its parameters.
//!
//! # Brief overview
//!
//! Pantheon runs every local experiment inside Mahimahi shells: `mm-delay` (fixed one-way
//! delay), `mm-loss` (i.i.d. loss, one direction per shell) and `mm-link` (a trace of delivery
//! opportunities serving a queue). This crate reproduces their semantics
//! (`reference/mahimahi.md`) as sans-IO stages on a nanosecond clock, and runs them between two
//! network namespaces with one ferry thread per direction.
//!
//! - [`trace`]: trace files (`1 2 3 4 6` = 10 Mbit/s) and the constant-rate generator.
//! - [`queue`]: `infinite`, `droptail`, `drophead`, `codel` and `pie` with Mahimahi's argument
//!   syntax; byte counts include Mahimahi's 4-byte header. Beyond Mahimahi: `ecn=1` for `codel`
//!   and `pie` (mark instead of drop) and the `step` marking queue.
//! - [`ecn`]: the ECN field of IP packets; marking Congestion Experienced.
//! - [`stage`]: link, delay, loss and on/off stages and the [`stage::Pipeline`] of one
//!   direction.
//! - [`schedule`]: time-varying paths: delay and loss schedule files.
//! - [`cross`]: non-reactive cross traffic that shares a link's queue and opportunities.
//! - [`reactive`]: reactive cross traffic, loss-based (Reno) flows modelled in the link.
//! - [`linklog`]: mm-link's `--uplink-log` text format.
//! - [`mm`]: chains of Mahimahi shells (`mm-delay 28 mm-link up down -- cmd`): parsed into
//!   [`mm::Shell`]s, rendered back as words, loaded into the runnable [`mm::EmulatedPath`].
//! - [`emulator`]: the typed [`emulator::Emulator`] that plans, presets and calibration hand to
//!   the runner; Pantheon's `--prepend-mm-cmds`/`--extra-mm-link-args` strings in and out.
//! - [`presets`]: the emulator library (Pantheon's calibrated and pathological emulators).
//! - [`runtime`]: TUN devices + ferry threads.
//! - [`calibrate`]: the paper's five-parameter emulator and the Bayesian search that fits it to
//!   a real path.
//! - [`fit`]: the search driven to its end with candidates measured by an [`fit::Evaluator`]:
//!   the best emulator, its replication error, a leave-one-out check.
//!
//! ```
//! use pantheon_emucal::{queue::QueueSpec, stage::{AnyStage, LinkStage, Pipeline, MS}, trace::Trace};
//! // 12 Mbit/s: one 1500-byte opportunity per ms.
//! let link = LinkStage::new(&Trace::constant_rate(12.0).unwrap(), QueueSpec::Infinite, 0);
//! let mut p = Pipeline::new(vec![AnyStage::Link(link)]);
//! p.push(0, vec![0u8; 1500]);
//! p.push(0, vec![0u8; 1500]);
//! p.advance(2 * MS);
//! assert_eq!(p.pop().unwrap().0, 1 * MS);
//! assert_eq!(p.pop().unwrap().0, 2 * MS);
//! ```

pub mod calibrate;
pub mod cross;
pub use tunnel::ecn;
pub mod emulator;
#[cfg(feature = "search")]
pub mod fit;
pub mod host;
pub mod ibox;
pub mod linklog;
pub mod mm;
pub mod presets;
pub mod queue;
pub mod reactive;
#[cfg(feature = "runtime")]
pub mod runtime;
pub mod schedule;
pub mod stage;
pub mod trace;

/// A packet in flight through the emulator: the IP datagram's bytes.
pub type Packet = Vec<u8>;

/// A 1500-byte IPv4 packet with ECN bits `ecn` and identification `id` (its byte 5), its header
/// checksum right: test traffic for the marking queues.
#[cfg(test)]
pub(crate) fn test_packet(id: u8, ecn: u8) -> Packet {
    let mut p = vec![0u8; 1500];
    p[..12].copy_from_slice(&[0x45, ecn, 0x05, 0xdc, 0, id, 0x40, 0, 64, 17, 0, 0]);
    let c = ecn::ipv4_header_checksum(&p[..20]);
    p[10..12].copy_from_slice(&c.to_be_bytes());
    p
}
