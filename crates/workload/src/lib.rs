//! Workloads beyond full throttle: what a flow sends when it is not a bulk transfer, and what
//! its users would feel — flow completion times, slowdowns, page load times.
//!
//! Pantheon runs every scheme at full throttle; its paper names Web-like workloads as what
//! researchers would want next (§7), and judging a scavenger means judging what it does to
//! the foreground's transfers (seed 002, Fig. 11). This crate is the workload's logic, with no
//! sockets and no clock (the programs in `schemes/` do the I/O):
//!
//! # Brief overview
//!
//! - [`Workload`] ([`spec`]): `bulk`, `bytes=N`, `poisson,load=L,size=DIST`,
//!   `page,objects=DIST,size=DIST,parallel=P,every=S`, parsed with errors that name the key.
//! - [`SizeDist`] ([`dist`]): fixed, exponential, Pareto and empirical-CDF sizes, and the
//!   shipped Web object sizes ([`dist::WEB_OBJECT_SIZES`], SURGE's model).
//! - [`Schedule`] ([`schedule`]): a workload's arrivals drawn from a seed — the same on every
//!   machine, so the analysis can draw them again.
//! - [`record`]: the CSV rows the sending and receiving programs write as transfers start and
//!   end, and their readers (a row cut short by a killed program is reported, not fatal).
//! - [`wire`]: the header each transfer starts with and the receiver's acknowledgement.
//! - `metrics` (feature `metrics`): both sides' rows joined into FCT, slowdown and page load
//!   time, by size bucket, with unfinished and aborted transfers counted.
//!
//! # Example
//!
//! ```
//! use pantheon_workload::{Schedule, Workload};
//! // Half of a 10 Mbit/s bottleneck in exponentially sized transfers of 100 kB on average.
//! let w = Workload::parse("poisson,load=0.5,size=exp:100k").unwrap();
//! let w = w.resolve(Some(10.0)).unwrap();
//! assert_eq!(w.to_string(), "poisson,rate=6.25,size=exp:100000");
//! let first_minute = Schedule::new(&w, 1).take_while(|a| a.at_ns < 60_000_000_000).count();
//! assert!((300..450).contains(&first_minute));
//! ```

pub mod dist;
#[cfg(feature = "metrics")]
pub mod metrics;
pub mod record;
pub mod schedule;
pub mod spec;
pub mod wire;

pub use dist::SizeDist;
pub use schedule::{Arrival, Schedule, Start};
pub use spec::{Workload, WorkloadError};
