//! From a flow's transfer records to what its users would feel: flow completion time,
//! slowdown, page load time — and what did not finish.
//!
//! - **Flow completion time (FCT)** of a transfer: from the sender beginning it (before it
//!   connects, for a transfer that opens its own connection) to the last byte arriving at the
//!   receiver. Sender and receiver stamp with the run's clock (one machine's in a local run).
//! - **Slowdown**: FCT ÷ the ideal FCT, the transfer's completion time alone on the idle path
//!   — the normalisation of pFabric (Alizadeh et al., SIGCOMM 2013: "FCT normalized to the
//!   best possible completion time") and Homa (Montazeri et al., SIGCOMM 2018: "slowdown").
//!   Ideal here = the handshake's RTT when the transfer opened its connection, + the path's
//!   one-way delay + size ÷ bottleneck rate: what a transfer whose window never limits it
//!   would take. 1 is ideal; a slow start that needs k round trips adds about k RTT ÷ ideal.
//! - **Page load time**: from a page's first request (its first object's start) to the last
//!   byte of its last object.
//!
//! Transfers the sender started and the receiver never ended are *unfinished* (the run
//! stopped first); transfers whose connection ended early are *aborted*. Both are counted and
//! reported, never dropped.

use std::collections::BTreeMap;

use crate::record::{Received, Started, Status};

/// The idle path a transfer's ideal completion time is computed on.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct IdlePath {
    /// Round-trip time, ms.
    pub rtt_ms: f64,
    /// One-way delay, sender to receiver, ms.
    pub owd_ms: f64,
    /// Bottleneck rate, Mbit/s.
    pub rate_mbps: f64,
}

impl IdlePath {
    /// The ideal FCT of `size` bytes (module docs), ms.
    pub fn ideal_fct_ms(&self, size: u64, new_connection: bool) -> f64 {
        let handshake = if new_connection { self.rtt_ms } else { 0.0 };
        handshake + self.owd_ms + size as f64 * 8.0 / (self.rate_mbps * 1e3)
    }
}

/// One transfer, as both sides saw it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Transfer {
    /// As the sender started it.
    pub started: Started,
    /// How it ended: `None` if it had not when the run stopped (unfinished).
    pub ended: Option<Status>,
    /// Its completion time, ms (done transfers only).
    pub fct_ms: Option<f64>,
    /// FCT ÷ ideal FCT (done transfers, when the idle path is known).
    pub slowdown: Option<f64>,
}

/// One page load.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PageLoad {
    /// Page id.
    pub page: u64,
    /// Its objects, and how many of them were done.
    pub objects: u64,
    /// Objects whose last byte arrived.
    pub done: u64,
    /// Its first request, ns since the Unix epoch.
    pub start_ns: u64,
    /// Page load time, ms: `None` unless every object was done.
    pub load_ms: Option<f64>,
}

/// A flow's transfers and pages, joined from both sides' records.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FlowTransfers {
    /// Every transfer the sender started, in id order.
    pub transfers: Vec<Transfer>,
    /// Every page that had an object started, in id order.
    pub pages: Vec<PageLoad>,
    /// Records that do not agree (a transfer the receiver ended but the sender never started).
    pub warnings: Vec<String>,
}

impl FlowTransfers {
    /// Joins a sender's and a receiver's records by transfer id. `path`, when known, gives the
    /// slowdowns.
    pub fn join(sent: &[Started], received: &[Received], path: Option<&IdlePath>) -> FlowTransfers {
        let mut ended: BTreeMap<u64, &Received> = BTreeMap::new();
        for r in received {
            ended.insert(r.id, r);
        }
        let mut out = FlowTransfers::default();
        let mut pages: BTreeMap<u64, PageLoad> = BTreeMap::new();
        let mut last_byte: BTreeMap<u64, u64> = BTreeMap::new();
        for s in sent {
            let r = ended.remove(&s.id);
            let done = r.filter(|r| r.status == Status::Done);
            let fct_ms = done.map(|r| r.done_ns.saturating_sub(s.start_ns) as f64 / 1e6);
            out.transfers.push(Transfer {
                started: *s,
                ended: r.map(|r| r.status),
                fct_ms,
                slowdown: fct_ms
                    .zip(path)
                    .map(|(f, p)| f / p.ideal_fct_ms(s.size, s.new_connection)),
            });
            if s.page > 0 {
                let p = pages.entry(s.page).or_insert(PageLoad {
                    page: s.page,
                    objects: s.page_objects,
                    done: 0,
                    start_ns: s.start_ns,
                    load_ms: None,
                });
                p.start_ns = p.start_ns.min(s.start_ns);
                if let Some(r) = done {
                    p.done += 1;
                    let last = last_byte.entry(s.page).or_default();
                    *last = (*last).max(r.done_ns);
                }
            }
        }
        for (id, r) in ended {
            out.warnings.push(format!(
                "the receiver ended transfer {id} ({} bytes), which the sender never recorded",
                r.size
            ));
        }
        out.transfers.sort_by_key(|t| t.started.id);
        for (id, mut p) in pages {
            if p.done == p.objects {
                p.load_ms = Some(last_byte[&id].saturating_sub(p.start_ns) as f64 / 1e6);
            }
            out.pages.push(p);
        }
        out
    }

    /// Transfers that were done.
    pub fn completed(&self) -> usize {
        self.count(Some(Status::Done))
    }

    /// Transfers whose connection ended early.
    pub fn aborted(&self) -> usize {
        self.count(Some(Status::Aborted))
    }

    /// Transfers still going when the run stopped.
    pub fn unfinished(&self) -> usize {
        self.count(None)
    }

    fn count(&self, ended: Option<Status>) -> usize {
        self.transfers.iter().filter(|t| t.ended == ended).count()
    }

    /// Completion times of the done transfers, ms, in id order.
    pub fn fct_ms(&self) -> Vec<f64> {
        self.transfers.iter().filter_map(|t| t.fct_ms).collect()
    }

    /// Load times of the pages every object of which was done, ms, in page order.
    pub fn page_load_ms(&self) -> Vec<f64> {
        self.pages.iter().filter_map(|p| p.load_ms).collect()
    }
}

/// The size buckets of FCT tables: upper bound (exclusive), bytes, and label.
pub const SIZE_BUCKETS: [(u64, &str); 4] = [
    (10_000, "< 10 KB"),
    (100_000, "10–100 KB"),
    (1_000_000, "100 KB–1 MB"),
    (u64::MAX, "≥ 1 MB"),
];

pub use analyzer::stats::Percentiles;

/// One size bucket's done transfers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bucket {
    /// Its label ([`SIZE_BUCKETS`]).
    pub label: &'static str,
    /// Done transfers in it.
    pub count: usize,
    /// Their FCTs, ms.
    pub fct_ms: Percentiles,
    /// Their slowdowns, when the idle path was known.
    pub slowdown: Option<Percentiles>,
}

/// The done transfers of `transfers` by size bucket (empty buckets left out).
pub fn by_size<'a>(transfers: impl IntoIterator<Item = &'a Transfer>) -> Vec<Bucket> {
    let mut fct: Vec<Vec<f64>> = vec![Vec::new(); SIZE_BUCKETS.len()];
    let mut slow: Vec<Vec<f64>> = vec![Vec::new(); SIZE_BUCKETS.len()];
    for t in transfers {
        let Some(f) = t.fct_ms else { continue };
        let b = SIZE_BUCKETS
            .iter()
            .position(|(upper, _)| t.started.size < *upper)
            .unwrap_or(SIZE_BUCKETS.len() - 1);
        fct[b].push(f);
        slow[b].extend(t.slowdown);
    }
    SIZE_BUCKETS
        .iter()
        .zip(fct.iter().zip(&slow))
        .filter_map(|((_, label), (f, s))| {
            Some(Bucket {
                label,
                count: f.len(),
                fct_ms: Percentiles::of(f)?,
                slowdown: Percentiles::of(s),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn started(id: u64, page: u64, size: u64, start_ms: u64) -> Started {
        Started {
            id,
            page,
            page_objects: if page > 0 { 2 } else { 0 },
            new_connection: true,
            size,
            start_ns: start_ms * 1_000_000,
        }
    }

    fn done(s: &Started, done_ms: u64, status: Status) -> Received {
        Received {
            id: s.id,
            page: s.page,
            size: s.size,
            start_ns: s.start_ns,
            first_byte_ns: s.start_ns,
            done_ns: done_ms * 1_000_000,
            received: s.size,
            status,
        }
    }

    #[test]
    fn every_transfer_is_done_aborted_or_unfinished_and_pages_need_every_object() {
        let s = [
            started(1, 0, 1_000_000, 0),
            started(2, 0, 5_000, 100),
            started(3, 1, 20_000, 200),
            started(4, 1, 20_000, 200),
            started(5, 2, 20_000, 900),
            started(6, 2, 20_000, 900),
        ];
        let r = [
            done(&s[0], 1_500, Status::Done),
            done(&s[1], 180, Status::Aborted),
            done(&s[2], 300, Status::Done),
            done(&s[3], 450, Status::Done),
            done(&s[4], 1_000, Status::Done),
        ];
        // 10 Mbit/s, 28 ms one way: 1 MB ideally 56 + 28 + 800 ms.
        let path = IdlePath {
            rtt_ms: 56.0,
            owd_ms: 28.0,
            rate_mbps: 10.0,
        };
        let f = FlowTransfers::join(&s, &r, Some(&path));
        assert_eq!((f.completed(), f.aborted(), f.unfinished()), (4, 1, 1));
        assert_eq!(f.fct_ms(), [1500.0, 100.0, 250.0, 100.0]);
        assert!((f.transfers[0].slowdown.unwrap() - 1500.0 / 884.0).abs() < 1e-9);
        // Page 1: 200 ms → 450 ms; page 2 lacks an object.
        assert_eq!(f.page_load_ms(), [250.0]);
        assert_eq!(f.pages[1].done, 1);
        let b = by_size(&f.transfers);
        assert_eq!(
            b.iter().map(|b| (b.label, b.count)).collect::<Vec<_>>(),
            [("10–100 KB", 3), ("≥ 1 MB", 1)]
        );
        assert_eq!(b[0].fct_ms.p50, 100.0);
        // A receiver row the sender never wrote is reported.
        let stray = done(&started(9, 0, 10, 0), 1, Status::Done);
        let f = FlowTransfers::join(&s, &[stray], None);
        assert_eq!(f.warnings.len(), 1);
        assert_eq!(f.unfinished(), 6);
    }
}
