//! A workload's arrivals, drawn from a seed: what the sending program starts, and when.
//!
//! [`Schedule`] is an iterator of [`Arrival`]s in time order, times in nanoseconds after the
//! flow's start. A Poisson process of rate λ has exponential gaps of mean 1/λ, the first
//! arrival one gap after the start. Every draw (gaps, sizes, object counts) comes from one
//! ChaCha8 generator seeded with the schedule's seed, in arrival order, so the same seed gives
//! the same schedule on every machine — and the analysis can draw the schedule again to check
//! what the program recorded against what it was meant to start.
//!
//! ```
//! use pantheon_workload::{Schedule, Workload};
//! let w = Workload::parse("poisson,rate=10,size=exp:100k").unwrap();
//! let first: Vec<_> = Schedule::new(&w, 7).take(3).collect();
//! assert_eq!(first, Schedule::new(&w, 7).take(3).collect::<Vec<_>>());
//! assert!(first[0].at_ns < first[1].at_ns);
//! ```

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::spec::{Arrivals, Workload};

/// One thing to start: a transfer, or a page of objects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Arrival {
    /// When, ns after the flow's start.
    pub at_ns: u64,
    /// What.
    pub what: Start,
}

/// What arrives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Start {
    /// One transfer: its id (1-based in the flow) and size, bytes.
    Transfer {
        /// Transfer id.
        id: u64,
        /// Bytes.
        size: u64,
    },
    /// A page: its id (1-based in the flow) and its objects, each `(transfer id, size)` —
    /// transfer ids continue across pages.
    Page {
        /// Page id.
        id: u64,
        /// `(transfer id, bytes)` of each object, in fetch order.
        objects: Vec<(u64, u64)>,
    },
}

impl Arrival {
    /// Bytes it carries (a page: all its objects).
    pub fn bytes(&self) -> u64 {
        match &self.what {
            Start::Transfer { size, .. } => *size,
            Start::Page { objects, .. } => objects.iter().map(|(_, s)| s).sum(),
        }
    }
}

/// A workload's arrivals (module docs). Bulk has none; `bytes=N` one, at 0; Poisson and page
/// workloads never end (take what falls before the deadline).
#[derive(Debug, Clone)]
pub struct Schedule {
    workload: Workload,
    rng: ChaCha8Rng,
    now_ns: u64,
    next_transfer: u64,
    next_page: u64,
    done: bool,
}

impl Schedule {
    /// The arrivals of `workload` (a Poisson load must be [resolved](Workload::resolve) into a
    /// rate first: an unresolved one yields nothing) from `seed`.
    pub fn new(workload: &Workload, seed: u64) -> Schedule {
        Schedule {
            workload: workload.clone(),
            rng: ChaCha8Rng::seed_from_u64(seed),
            now_ns: 0,
            next_transfer: 1,
            next_page: 1,
            done: false,
        }
    }

    /// An exponential gap of mean `mean_s`, ns.
    fn gap_ns(&mut self, mean_s: f64) -> u64 {
        let u: f64 = 1.0 - self.rng.random::<f64>();
        (-mean_s * u.ln() * 1e9).round() as u64
    }

    fn transfer_id(&mut self) -> u64 {
        self.next_transfer += 1;
        self.next_transfer - 1
    }
}

impl Iterator for Schedule {
    type Item = Arrival;

    fn next(&mut self) -> Option<Arrival> {
        if self.done {
            return None;
        }
        match self.workload.clone() {
            Workload::Bulk
            | Workload::Poisson {
                arrivals: Arrivals::Load(_),
                ..
            } => {
                self.done = true;
                None
            }
            Workload::Bytes(n) => {
                self.done = true;
                Some(Arrival {
                    at_ns: 0,
                    what: Start::Transfer {
                        id: self.transfer_id(),
                        size: n,
                    },
                })
            }
            Workload::Poisson {
                arrivals: Arrivals::Rate(rate),
                size,
            } => {
                self.now_ns += self.gap_ns(1.0 / rate);
                let size = size.sample(&mut self.rng);
                Some(Arrival {
                    at_ns: self.now_ns,
                    what: Start::Transfer {
                        id: self.transfer_id(),
                        size,
                    },
                })
            }
            Workload::Page(p) => {
                self.now_ns += self.gap_ns(p.every_s);
                let n = p.objects.sample(&mut self.rng);
                let objects = (0..n)
                    .map(|_| {
                        let size = p.size.sample(&mut self.rng);
                        (self.transfer_id(), size)
                    })
                    .collect();
                self.next_page += 1;
                Some(Arrival {
                    at_ns: self.now_ns,
                    what: Start::Page {
                        id: self.next_page - 1,
                        objects,
                    },
                })
            }
        }
    }
}

/// The arrivals of `workload` from `seed` that start before `until_s` seconds.
pub fn arrivals_before(workload: &Workload, seed: u64, until_s: f64) -> Vec<Arrival> {
    let until_ns = (until_s * 1e9) as u64;
    Schedule::new(workload, seed)
        .take_while(|a| a.at_ns < until_ns)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The offered load of the arrivals before `secs`, as a fraction of `link_mbps`.
    fn load(w: &Workload, seed: u64, secs: f64, link_mbps: f64) -> f64 {
        let bytes: u64 = arrivals_before(w, seed, secs)
            .iter()
            .map(Arrival::bytes)
            .sum();
        bytes as f64 * 8.0 / secs / (link_mbps * 1e6)
    }

    #[test]
    fn the_generator_offers_the_load_asked_for_on_average_over_many_draws() {
        // 0.5 of 10 Mbit/s in 100 kB (mean) transfers: 6.25 a second. One 60-s run varies by
        // several percent by chance; the mean over 400 runs (seeds) is within 1 % of 0.5.
        let w = Workload::parse("poisson,load=0.5,size=exp:100k")
            .unwrap()
            .resolve(Some(10.0))
            .unwrap();
        let loads: Vec<f64> = (0..400).map(|seed| load(&w, seed, 60.0, 10.0)).collect();
        let mean = loads.iter().sum::<f64>() / loads.len() as f64;
        assert!((mean - 0.5).abs() < 0.005, "mean offered load {mean}");
        let spread = loads
            .iter()
            .cloned()
            .fold(0.0, |m: f64, l| m.max((l - 0.5).abs()));
        assert!(
            spread > 0.02,
            "runs should differ by chance: at most {spread} from 0.5"
        );
        // Gaps: the arrival count of a 60-s run averages 60 × 6.25 = 375.
        let n: usize = (0..400).map(|s| arrivals_before(&w, s, 60.0).len()).sum();
        assert!(((n as f64 / 400.0) / 375.0 - 1.0).abs() < 0.01, "{n}");
    }

    #[test]
    fn the_same_seed_draws_the_same_schedule_and_another_does_not() {
        let w = Workload::parse("page,objects=exp:20,size=web,every=10").unwrap();
        let a = arrivals_before(&w, 3, 600.0);
        assert_eq!(a, arrivals_before(&w, 3, 600.0));
        assert_ne!(a, arrivals_before(&w, 4, 600.0));
        // About 60 pages in 10 minutes; object ids run on across pages.
        assert!((40..=80).contains(&a.len()), "{}", a.len());
        let ids: Vec<u64> = a
            .iter()
            .flat_map(|p| match &p.what {
                Start::Page { objects, .. } => objects.iter().map(|o| o.0).collect(),
                Start::Transfer { .. } => vec![],
            })
            .collect();
        assert_eq!(ids, (1..=ids.len() as u64).collect::<Vec<_>>());
    }

    #[test]
    fn bytes_is_one_transfer_at_the_start_and_bulk_none() {
        let one: Vec<_> = Schedule::new(&Workload::Bytes(1000), 1).collect();
        assert_eq!(
            one,
            [Arrival {
                at_ns: 0,
                what: Start::Transfer { id: 1, size: 1000 }
            }]
        );
        assert_eq!(Schedule::new(&Workload::Bulk, 1).count(), 0);
    }
}
