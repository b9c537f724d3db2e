//! A flow's workload, as written on the command line (`--workload`), in a mix's flow
//! (`cubic(bytes=1M)`) or in Pantheon's YAML flow list (`workload: bytes=1000000`).
//!
//! ```text
//! bulk                                         full throttle until stopped (Pantheon's only one)
//! bytes=SIZE                                   one transfer of SIZE bytes; the flow ends with it
//! poisson,load=L|rate=R[,size=DIST]            transfers arriving as a Poisson process
//! page[,objects=DIST][,size=DIST][,parallel=P][,every=S]   page loads arriving as a Poisson process
//! ```
//!
//! - `load=L`: the offered load, a fraction of the bottleneck's rate (0 < L < 1): transfers
//!   arrive at L × rate ÷ mean size per second; `rate=R`: R transfers per second.
//! - `size=DIST`: transfer (object) sizes, bytes, a [`SizeDist`] (`exp:100k`, `web`, …);
//!   default `web`, the shipped Web object sizes.
//! - `objects=DIST`: objects per page; default 70 (HTTP Archive's median requests per page,
//!   desktop and mobile, 2022: 70–76).
//! - `parallel=P`: a page's objects are fetched over at most P connections at once; default 6
//!   (browsers' limit of connections per host over HTTP/1.1).
//! - `every=S`: mean seconds between page arrivals; default 10 (seed 002's Fig. 11: one page
//!   request per 10 s).
//!
//! Errors name the key (`load`), say what it must be, and come before anything runs.

use std::fmt;

use crate::dist::{parse_size, SizeDist};

/// What one flow does.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Workload {
    /// Full throttle until the run ends or the flow is stopped.
    #[default]
    Bulk,
    /// One transfer of this many bytes.
    Bytes(u64),
    /// Transfers arriving as a Poisson process.
    Poisson {
        /// How often they arrive.
        arrivals: Arrivals,
        /// Their sizes, bytes.
        size: SizeDist,
    },
    /// Page loads arriving as a Poisson process.
    Page(PageSpec),
}

/// The arrival rate of a Poisson workload.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Arrivals {
    /// Transfers per second.
    Rate(f64),
    /// Offered load: a fraction of the bottleneck's rate, 0 < load < 1; resolved into a rate
    /// against the path by [`Workload::resolve`].
    Load(f64),
}

/// A page-load workload.
#[derive(Debug, Clone, PartialEq)]
pub struct PageSpec {
    /// Objects per page.
    pub objects: SizeDist,
    /// Object sizes, bytes.
    pub size: SizeDist,
    /// At most this many connections at once per page.
    pub parallel: u32,
    /// Mean time between page arrivals, s.
    pub every_s: f64,
}

impl Default for PageSpec {
    /// 70 objects of Web object sizes, 6 connections, a page every 10 s (module docs).
    fn default() -> PageSpec {
        PageSpec {
            objects: SizeDist::Fixed(70),
            size: SizeDist::parse("web").expect("the shipped CDF parses"),
            parallel: 6,
            every_s: 10.0,
        }
    }
}

/// A workload spec that cannot be used; nothing has run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("workload `{spec}`: {key}: {reason}")]
pub struct WorkloadError {
    /// The spec as given.
    pub spec: String,
    /// The key at fault (`load`, `size`), or the kind.
    pub key: String,
    /// What it must be.
    pub reason: String,
}

/// The workload kinds, as scheme descriptors declare them (`workloads.kinds`).
pub const KINDS: [&str; 4] = ["bulk", "bytes", "poisson", "page"];

impl Workload {
    /// Parses a spec (module docs). Errors name the key.
    pub fn parse(spec: &str) -> Result<Workload, WorkloadError> {
        let bad = |key: &str, reason: String| WorkloadError {
            spec: spec.to_owned(),
            key: key.to_owned(),
            reason,
        };
        let mut parts = spec.trim().split(',');
        let head = parts.next().unwrap_or("");
        let mut pairs = Vec::new();
        for p in parts {
            let (k, v) = p
                .split_once('=')
                .ok_or_else(|| bad(p, "expected KEY=VALUE".into()))?;
            if pairs.iter().any(|(seen, _)| *seen == k) {
                return Err(bad(k, "given twice".into()));
            }
            pairs.push((k, v));
        }
        let dist = |key: &str, v: &str| SizeDist::parse(v).map_err(|e| bad(key, e.to_string()));
        let unknown = |k: &str, allowed: &str| bad(k, format!("unknown key; {allowed}"));
        if let Some(n) = head.strip_prefix("bytes=") {
            if let Some((k, _)) = pairs.first() {
                return Err(unknown(k, "bytes=N takes no other key"));
            }
            let n = parse_size(n).map_err(|e| bad("bytes", e.to_string()))?;
            if n < 1.0 {
                return Err(bad("bytes", "must be at least 1 byte".into()));
            }
            return Ok(Workload::Bytes(n.round() as u64));
        }
        match head {
            "bulk" => match pairs.first() {
                Some((k, _)) => Err(unknown(k, "bulk takes no key")),
                None => Ok(Workload::Bulk),
            },
            "poisson" => {
                let mut arrivals = None;
                let mut size = SizeDist::parse("web").expect("the shipped CDF parses");
                for (k, v) in pairs {
                    match k {
                        "load" => {
                            let l =
                                number(v).filter(|l| *l > 0.0 && *l < 1.0).ok_or_else(|| {
                                    bad(
                                        "load",
                                        format!(
                                            "must be above 0 and below 1 (a fraction of the \
                                         bottleneck's rate), got `{v}`"
                                        ),
                                    )
                                })?;
                            arrivals = Some(Arrivals::Load(l));
                        }
                        "rate" => {
                            let r = number(v).filter(|r| *r > 0.0).ok_or_else(|| {
                                bad(
                                    "rate",
                                    format!("must be a positive number (transfers/s), got `{v}`"),
                                )
                            })?;
                            arrivals = Some(Arrivals::Rate(r));
                        }
                        "size" => size = dist("size", v)?,
                        _ => return Err(unknown(k, "poisson takes load or rate, and size")),
                    }
                }
                let arrivals = arrivals.ok_or_else(|| {
                    bad(
                        "load",
                        "poisson needs load=L (0–1 of the bottleneck) or rate=R (transfers/s)"
                            .into(),
                    )
                })?;
                Ok(Workload::Poisson { arrivals, size })
            }
            "page" => page(&pairs, &bad, &dist),
            _ => Err(bad(
                head,
                "unknown workload: expected bulk, bytes=N, poisson,… or page,…".into(),
            )),
        }
    }

    /// Its kind: one of [`KINDS`].
    pub fn kind(&self) -> &'static str {
        match self {
            Workload::Bulk => "bulk",
            Workload::Bytes(_) => "bytes",
            Workload::Poisson { .. } => "poisson",
            Workload::Page(_) => "page",
        }
    }

    /// Whether the flow ends by itself (one transfer), rather than at the end of the run.
    pub fn ends_by_itself(&self) -> bool {
        matches!(self, Workload::Bytes(_))
    }

    /// The same workload with an offered load turned into an arrival rate for a bottleneck of
    /// `link_mbps` (Mbit/s): rate = load × link ÷ (8 × mean size). Errors (naming `load`)
    /// when a load is given and the rate is not known (`None`: a real path).
    pub fn resolve(&self, link_mbps: Option<f64>) -> Result<Workload, WorkloadError> {
        match self {
            Workload::Poisson {
                arrivals: Arrivals::Load(load),
                size,
            } => {
                let mbps = link_mbps
                    .filter(|r| *r > 0.0)
                    .ok_or_else(|| WorkloadError {
                        spec: self.to_string(),
                        key: "load".into(),
                        reason: "the bottleneck's rate is not known here (a real path): give \
                             rate=R transfers per second instead"
                            .into(),
                    })?;
                Ok(Workload::Poisson {
                    arrivals: Arrivals::Rate(load * mbps * 1e6 / (8.0 * size.mean())),
                    size: size.clone(),
                })
            }
            _ => Ok(self.clone()),
        }
    }

    /// The mean offered load, bits per second (`None` for bulk, and for a Poisson load not
    /// yet [resolved](Workload::resolve)); for `bytes=N`, the N bytes' bits (over no period).
    pub fn offered_bps(&self) -> Option<f64> {
        match self {
            Workload::Bulk => None,
            Workload::Bytes(n) => Some(*n as f64 * 8.0),
            Workload::Poisson {
                arrivals: Arrivals::Rate(r),
                size,
            } => Some(r * size.mean() * 8.0),
            Workload::Poisson { .. } => None,
            Workload::Page(p) => Some(p.objects.mean() * p.size.mean() * 8.0 / p.every_s),
        }
    }
}

fn number(v: &str) -> Option<f64> {
    v.parse::<f64>().ok().filter(|x| x.is_finite())
}

impl fmt::Display for Workload {
    /// The canonical spec ([`Workload::parse`] reads it back to the same value).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Workload::Bulk => write!(f, "bulk"),
            Workload::Bytes(n) => write!(f, "bytes={n}"),
            Workload::Poisson { arrivals, size } => {
                let a = match arrivals {
                    Arrivals::Rate(r) => format!("rate={r}"),
                    Arrivals::Load(l) => format!("load={l}"),
                };
                write!(f, "poisson,{a},size={size}")
            }
            Workload::Page(p) => write!(
                f,
                "page,objects={},size={},parallel={},every={}",
                p.objects, p.size, p.parallel, p.every_s
            ),
        }
    }
}

/// `page,…`'s keys (`objects`, `size`, `parallel`, `every`) over [`PageSpec::default`]; `bad`
/// makes the error naming a key, `dist` parses a size distribution.
fn page(
    pairs: &[(&str, &str)],
    bad: &dyn Fn(&str, String) -> WorkloadError,
    dist: &dyn Fn(&str, &str) -> Result<SizeDist, WorkloadError>,
) -> Result<Workload, WorkloadError> {
    let mut page = PageSpec::default();
    for &(k, v) in pairs {
        match k {
            "objects" => page.objects = dist("objects", v)?,
            "size" => page.size = dist("size", v)?,
            "parallel" => {
                page.parallel = v.parse().ok().filter(|p| *p >= 1).ok_or_else(|| {
                    bad("parallel", format!("must be a whole number ≥ 1, got `{v}`"))
                })?
            }
            "every" => {
                page.every_s = number(v).filter(|s| *s > 0.0).ok_or_else(|| {
                    bad(
                        "every",
                        format!("must be a positive number of seconds, got `{v}`"),
                    )
                })?
            }
            _ => {
                return Err(bad(
                    k,
                    "unknown key; page takes objects, size, parallel and every".into(),
                ))
            }
        }
    }
    Ok(Workload::Page(page))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_and_print_back() {
        for spec in [
            "bulk",
            "bytes=1000000",
            "poisson,load=0.5,size=exp:100000",
            "poisson,rate=12.5,size=fixed:1500",
            "page,objects=fixed:20,size=web,parallel=6,every=10",
        ] {
            let w = Workload::parse(spec).unwrap();
            assert_eq!(w.to_string(), spec);
        }
        assert_eq!(
            Workload::parse("bytes=1M").unwrap(),
            Workload::Bytes(1_000_000)
        );
        assert_eq!(
            Workload::parse("page").unwrap(),
            Workload::Page(PageSpec::default())
        );
    }

    #[test]
    fn bad_specs_name_the_key() {
        let key = |s: &str| Workload::parse(s).unwrap_err().key;
        assert_eq!(key("bytes=-5"), "bytes");
        assert_eq!(key("poisson,load=1"), "load");
        assert_eq!(key("poisson,load=1.5,size=exp:1k"), "load");
        assert_eq!(key("poisson,size=exp:1k"), "load");
        assert_eq!(key("poisson,load=0.5,size=cdf:/missing.cdf"), "size");
        assert_eq!(key("poisson,load=0.5,size=exp:-1"), "size");
        assert_eq!(key("page,parallel=0"), "parallel");
        assert_eq!(key("page,speed=3"), "speed");
        assert_eq!(key("page,every=2,every=3"), "every");
        assert_eq!(key("stream"), "stream");
        let e = Workload::parse("poisson,load=1").unwrap_err().to_string();
        assert!(
            e.starts_with("workload `poisson,load=1`: load: must be above 0 and below 1"),
            "{e}"
        );
        let e = Workload::parse("poisson,load=0.5,size=cdf:/missing.cdf").unwrap_err();
        assert!(e.to_string().contains("/missing.cdf"), "{e}");
    }

    #[test]
    fn a_load_becomes_a_rate_on_a_known_link() {
        let w = Workload::parse("poisson,load=0.5,size=fixed:125000").unwrap();
        // 0.5 × 10 Mbit/s = 5 Mbit/s = 625 000 B/s = 5 transfers of 125 kB a second.
        let r = w.resolve(Some(10.0)).unwrap();
        assert_eq!(r.to_string(), "poisson,rate=5,size=fixed:125000");
        assert!((r.offered_bps().unwrap() - 5e6).abs() < 1e-6);
        assert_eq!(w.resolve(None).unwrap_err().key, "load");
    }
}
