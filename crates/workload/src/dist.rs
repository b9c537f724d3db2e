//! Distributions of transfer sizes (bytes) and of objects per page (counts).
//!
//! Four kinds, written as a workload spec writes them ([`SizeDist::parse`]):
//!
//! | spec                 | distribution                                                     |
//! |----------------------|------------------------------------------------------------------|
//! | `N` or `fixed:N`     | always N                                                         |
//! | `exp:MEAN`           | exponential with that mean                                       |
//! | `pareto:MEAN:SHAPE`  | Pareto of that mean and shape α > 1 (scale = MEAN·(α−1)/α)       |
//! | `cdf:FILE`           | an empirical CDF file (format below)                             |
//! | `web`                | the shipped Web object sizes (SURGE's model, `data/`)            |
//!
//! Sizes take the suffixes `k`, `M`, `G` (10³, 10⁶, 10⁹: `exp:100k`). Draws are rounded to
//! whole units and are at least 1.
//!
//! An **empirical CDF file** has one point a line, `SIZE FRACTION` (space, tab or comma
//! between): the fraction of draws of at most SIZE. Sizes increase, fractions do not decrease,
//! lie in 0–1 and the last is 1; `#` starts a comment. Draws interpolate linearly between
//! points (inverse-transform sampling, as the traffic generators of the pFabric and HPCC
//! simulations read their flow-size CDFs); below the first point's fraction the first size is
//! drawn.

use std::fmt;
use std::path::Path;

use rand::Rng;

/// The shipped Web object sizes: SURGE's lognormal body and Pareto tail (Barford & Crovella,
/// SIGMETRICS 1998), as made by `data/make_web_cdf.py`; mean 55.0 KB, median about 12.6 KB.
pub const WEB_OBJECT_SIZES: &str = include_str!("../data/web-object-sizes.cdf");

/// A distribution of sizes or counts.
#[derive(Debug, Clone, PartialEq)]
pub enum SizeDist {
    /// Always this value.
    Fixed(u64),
    /// Exponential with this mean.
    Exp {
        /// Mean, > 0.
        mean: f64,
    },
    /// Pareto of this mean and shape.
    Pareto {
        /// Mean, > 0.
        mean: f64,
        /// Shape α, > 1 (the mean is infinite otherwise).
        shape: f64,
    },
    /// An empirical CDF, from a file or shipped.
    Cdf(EmpiricalCdf),
}

/// A piecewise-linear CDF: `(size, fraction)` points, sizes increasing, fractions
/// non-decreasing, the last 1 ([`EmpiricalCdf::parse`]).
#[derive(Debug, Clone, PartialEq)]
pub struct EmpiricalCdf {
    /// Where it came from, as the spec named it (`web`, or the file's path): how it is written
    /// back.
    pub source: String,
    points: Vec<(f64, f64)>,
}

/// Why a distribution or CDF file cannot be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DistError {
    /// The spec is malformed (what was expected is in the message).
    #[error("{0}")]
    Spec(String),
    /// A CDF file cannot be read.
    #[error("{path}: {reason}")]
    File {
        /// The file.
        path: String,
        /// The system's error.
        reason: String,
    },
    /// A CDF file's line is malformed.
    #[error("{path}, line {line}: {reason}")]
    Line {
        /// The file.
        path: String,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        reason: String,
    },
}

/// The largest size a workload may name, bytes (1 PB: 93 days at 1 Gbit/s, far beyond any run;
/// and every size up to it is exact in the `f64` sizes are parsed into and in the `u64` they
/// are sent as).
pub const MAX_SIZE_BYTES: f64 = 1e15;

/// Parses a size: a non-negative number with an optional suffix `k`/`K`, `M`, `G` (powers of
/// 10: `1.5M` = 1 500 000), at most [`MAX_SIZE_BYTES`]. Errors name the text.
pub fn parse_size(text: &str) -> Result<f64, DistError> {
    let (number, unit) = match text.chars().last() {
        Some('k' | 'K') => (&text[..text.len() - 1], 1e3),
        Some('M') => (&text[..text.len() - 1], 1e6),
        Some('G') => (&text[..text.len() - 1], 1e9),
        _ => (text, 1.0),
    };
    number
        .parse::<f64>()
        .ok()
        .map(|v| v * unit)
        .filter(|v| v.is_finite() && *v >= 0.0)
        .ok_or_else(|| {
            DistError::Spec(format!(
                "`{text}` is not a size (a non-negative number, optionally with k, M or G)"
            ))
        })
        .and_then(|v| {
            if v > MAX_SIZE_BYTES {
                Err(DistError::Spec(format!(
                    "`{text}` is larger than the largest size supported, 1 PB (1000000G)"
                )))
            } else {
                Ok(v)
            }
        })
}

impl SizeDist {
    /// Parses a distribution spec (module docs); `cdf:FILE` reads the file now. Errors say what
    /// was expected, or name the file and line.
    pub fn parse(text: &str) -> Result<SizeDist, DistError> {
        let positive = |v: &str, what: &str| -> Result<f64, DistError> {
            let x = parse_size(v)?;
            if x > 0.0 {
                Ok(x)
            } else {
                Err(DistError::Spec(format!(
                    "{what} must be positive, got `{v}`"
                )))
            }
        };
        let (kind, args) = text.split_once(':').unwrap_or((text, ""));
        match kind {
            "web" if args.is_empty() => {
                Ok(SizeDist::Cdf(EmpiricalCdf::parse(WEB_OBJECT_SIZES, "web")?))
            }
            "fixed" => Ok(SizeDist::Fixed(positive(args, "fixed:N")?.round() as u64)),
            "exp" => Ok(SizeDist::Exp {
                mean: positive(args, "exp:MEAN")?,
            }),
            "pareto" => {
                let (m, s) = args.split_once(':').ok_or_else(|| {
                    DistError::Spec(format!("`{text}`: expected pareto:MEAN:SHAPE"))
                })?;
                let shape = s.parse::<f64>().ok().filter(|a| *a > 1.0).ok_or_else(|| {
                    DistError::Spec(format!(
                        "`{text}`: the shape must be a number above 1 (the mean is infinite \
                         otherwise), got `{s}`"
                    ))
                })?;
                Ok(SizeDist::Pareto {
                    mean: positive(m, "pareto's MEAN")?,
                    shape,
                })
            }
            "cdf" if !args.is_empty() => Ok(SizeDist::Cdf(EmpiricalCdf::read(Path::new(args))?)),
            _ if args.is_empty() && parse_size(text).is_ok() => Ok(SizeDist::Fixed(
                positive(text, "a fixed size")?.round() as u64,
            )),
            _ => Err(DistError::Spec(format!(
                "`{text}` is not a distribution: expected N, fixed:N, exp:MEAN, \
                 pareto:MEAN:SHAPE, cdf:FILE or web"
            ))),
        }
    }

    /// The distribution's mean (before rounding draws to whole units).
    pub fn mean(&self) -> f64 {
        match self {
            SizeDist::Fixed(n) => *n as f64,
            SizeDist::Exp { mean } | SizeDist::Pareto { mean, .. } => *mean,
            SizeDist::Cdf(c) => c.mean(),
        }
    }

    /// One draw, rounded, at least 1.
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> u64 {
        // In (0, 1]: a logarithm of it is finite.
        let mut open = || 1.0 - rng.random::<f64>();
        let x = match self {
            SizeDist::Fixed(n) => *n as f64,
            SizeDist::Exp { mean } => -mean * open().ln(),
            SizeDist::Pareto { mean, shape } => {
                let scale = mean * (shape - 1.0) / shape;
                scale / open().powf(1.0 / shape)
            }
            SizeDist::Cdf(c) => c.quantile(1.0 - open()),
        };
        (x.round() as u64).max(1)
    }
}

impl fmt::Display for SizeDist {
    /// The spec it was parsed from, in canonical form (`exp:100000`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SizeDist::Fixed(n) => write!(f, "fixed:{n}"),
            SizeDist::Exp { mean } => write!(f, "exp:{mean}"),
            SizeDist::Pareto { mean, shape } => write!(f, "pareto:{mean}:{shape}"),
            SizeDist::Cdf(c) if c.source == "web" => write!(f, "web"),
            SizeDist::Cdf(c) => write!(f, "cdf:{}", c.source),
        }
    }
}

impl EmpiricalCdf {
    /// Reads an empirical CDF file. Errors name the file, and the line of a malformed point.
    pub fn read(path: &Path) -> Result<EmpiricalCdf, DistError> {
        // 16 MiB: a million points; a FIFO or a device is refused by type, never read.
        let text =
            analyzer::files::read_regular_text(path, "a CDF file", 16 << 20).map_err(|e| {
                DistError::File {
                    path: e.path,
                    reason: e.reason,
                }
            })?;
        EmpiricalCdf::parse(&text, &path.display().to_string())
    }

    /// Parses a CDF file's text; `source` names it in errors and in [`SizeDist`]'s display.
    pub fn parse(text: &str, source: &str) -> Result<EmpiricalCdf, DistError> {
        let bad = |line: usize, reason: String| DistError::Line {
            path: source.to_owned(),
            line,
            reason,
        };
        let mut points: Vec<(f64, f64)> = Vec::new();
        let mut last_line = 0;
        for (i, raw) in text.lines().enumerate() {
            let line = raw.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            last_line = i + 1;
            let fields: Vec<&str> = line
                .split(|c: char| c == ',' || c.is_whitespace())
                .filter(|s| !s.is_empty())
                .collect();
            let [size, fraction] = fields[..] else {
                return Err(bad(
                    i + 1,
                    format!("expected `SIZE FRACTION`, got `{line}`"),
                ));
            };
            let size = parse_size(size).map_err(|e| bad(i + 1, e.to_string()))?;
            let fraction = fraction
                .parse::<f64>()
                .ok()
                .filter(|p| (0.0..=1.0).contains(p))
                .ok_or_else(|| bad(i + 1, format!("the fraction `{fraction}` is not in 0–1")))?;
            if let Some(&(s0, p0)) = points.last() {
                if size <= s0 {
                    return Err(bad(
                        i + 1,
                        format!("sizes must increase ({size} after {s0})"),
                    ));
                }
                if fraction < p0 {
                    return Err(bad(
                        i + 1,
                        format!("fractions must not decrease ({fraction} after {p0})"),
                    ));
                }
            }
            points.push((size, fraction));
        }
        match points.last() {
            None => Err(DistError::File {
                path: source.to_owned(),
                reason: "no points (expected lines of `SIZE FRACTION`)".into(),
            }),
            Some(&(_, p)) if p != 1.0 => Err(bad(
                last_line,
                format!("the last fraction must be 1, got {p}"),
            )),
            Some(_) => Ok(EmpiricalCdf {
                source: source.to_owned(),
                points,
            }),
        }
    }

    /// The size at cumulative fraction `u` (0–1), interpolated linearly between points.
    pub fn quantile(&self, u: f64) -> f64 {
        let p = &self.points;
        let i = p.partition_point(|&(_, f)| f <= u);
        if i == 0 {
            return p[0].0;
        }
        if i == p.len() {
            return p[p.len() - 1].0;
        }
        let ((x0, f0), (x1, f1)) = (p[i - 1], p[i]);
        x0 + (x1 - x0) * (u - f0) / (f1 - f0)
    }

    /// The mean of the piecewise-linear distribution: the first size with the first fraction's
    /// mass, then each segment's midpoint with its mass.
    pub fn mean(&self) -> f64 {
        let p = &self.points;
        p[0].0 * p[0].1
            + p.windows(2)
                .map(|w| (w[1].1 - w[0].1) * (w[0].0 + w[1].0) / 2.0)
                .sum::<f64>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    fn mean_of(d: &SizeDist, n: usize) -> f64 {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        (0..n).map(|_| d.sample(&mut rng) as f64).sum::<f64>() / n as f64
    }

    #[test]
    fn draws_average_the_mean_of_each_kind() {
        for spec in ["fixed:1500", "exp:100k", "pareto:50k:2.5", "web"] {
            let d = SizeDist::parse(spec).unwrap();
            let m = mean_of(&d, 200_000);
            // Pareto 2.5 and the web tail (α 1.1, cut at 10 MB) converge slowly: 5 %.
            let tol = if spec == "web" { 0.05 } else { 0.02 };
            assert!(
                (m / d.mean() - 1.0).abs() < tol,
                "{spec}: drew {m:.0} on average, mean {:.0}",
                d.mean()
            );
            assert_eq!(
                SizeDist::parse(&d.to_string()).unwrap(),
                d,
                "{spec} round trip"
            );
        }
        // The shipped Web sizes: as make_web_cdf.py computed.
        let web = SizeDist::parse("web").unwrap();
        assert!((web.mean() - 55_004.6).abs() < 1.0, "{}", web.mean());
    }

    #[test]
    fn an_empirical_cdf_interpolates_between_its_points() {
        let c = EmpiricalCdf::parse("# sizes\n100 0.5\n300, 1\n", "t").unwrap();
        assert_eq!(c.quantile(0.2), 100.0);
        assert_eq!(c.quantile(0.75), 200.0);
        assert_eq!(c.quantile(1.0), 300.0);
        assert_eq!(c.mean(), 0.5 * 100.0 + 0.5 * 200.0);
    }

    #[test]
    fn bad_specs_and_files_say_what_and_where() {
        let e = |s: &str| SizeDist::parse(s).unwrap_err().to_string();
        assert!(e("exp:-5").contains("not a size"), "{}", e("exp:-5"));
        assert!(e("pareto:10k:0.9").contains("above 1"));
        assert!(e("gauss:4").contains("expected N, fixed:N"));
        assert!(e("cdf:/nonexistent/sizes.cdf").starts_with("/nonexistent/sizes.cdf: "));
        let line = |t: &str| EmpiricalCdf::parse(t, "f.cdf").unwrap_err().to_string();
        assert_eq!(
            line("100 0.2\n50 0.4\n"),
            "f.cdf, line 2: sizes must increase (50 after 100)"
        );
        assert_eq!(
            line("100 0.2\n\n200 0.9\n"),
            "f.cdf, line 3: the last fraction must be 1, got 0.9"
        );
        assert!(line("100 x\n").contains("line 1: the fraction `x`"));
        assert!(line("# nothing\n").contains("no points"));
    }

    #[test]
    fn sizes_take_decimal_suffixes() {
        assert_eq!(parse_size("1.5M").unwrap(), 1.5e6);
        assert_eq!(parse_size("100k").unwrap(), 1e5);
        // 2^64 bytes is refused, not saturated.
        let e = parse_size("18446744073709551616").unwrap_err().to_string();
        assert!(
            e.contains("larger than the largest size supported, 1 PB"),
            "{e}"
        );
        assert_eq!(parse_size("1000000G").unwrap(), MAX_SIZE_BYTES);
        assert_eq!(
            SizeDist::parse("1000000").unwrap(),
            SizeDist::Fixed(1_000_000)
        );
    }
}
