//! Mahimahi packet-delivery traces.
//!
//! A trace is a text file with one non-negative integer per line: the millisecond at which one
//! delivery opportunity of 1504 bytes (a 1500-byte IP packet + Mahimahi's 4-byte TUN header)
//! occurs. Values are non-decreasing; repeated values are several opportunities in the same ms.
//! The schedule repeats with a period equal to the last value, which must be > 0. A constant
//! 10 Mbit/s is `1 2 3 4 6` (five 1500-byte packets every 6 ms). See `mahimahi.md` §2.4.

use std::path::Path;

/// Errors of trace parsing, naming the file and 1-based line as Mahimahi does.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TraceError {
    /// The file could not be read.
    #[error("{file}: {message}")]
    Io {
        /// The file.
        file: String,
        /// The OS error text.
        message: String,
    },
    /// A line is not a valid entry.
    #[error("{file}:{line}: {message}")]
    Line {
        /// The file.
        file: String,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// The file as a whole is unusable.
    #[error("{file}: {message}")]
    Whole {
        /// The file.
        file: String,
        /// What is wrong.
        message: String,
    },
}

/// The largest trace file read, bytes (256 MiB: minutes of a gigabit trace, hours of a 10 Mbit/s one;
/// Pantheon's last seconds to minutes). A larger file is refused before it is read.
pub const MAX_TRACE_BYTES: u64 = 256 << 20;

/// The largest time a trace line may give, ms: half of what nanoseconds in a `u64` hold, so
/// that a period and the time within it add up without overflow.
pub const MAX_TRACE_MS: u64 = u64::MAX / 1_000_000 / 2;

/// A parsed trace: opportunity times in ms within one period. The default is empty: a trace
/// not read yet (an mm-link described but not loaded), which no stage accepts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Trace {
    /// Opportunity times, ms, non-decreasing; the last one is the period.
    pub opportunities_ms: Vec<u64>,
}

impl Trace {
    /// Parses trace text; `file` names it in errors. Mahimahi's rules: every line one integer
    /// (no blanks, comments or empty lines — a trailing newline at the end of the file is fine),
    /// non-decreasing, at least one line, last value > 0.
    pub fn parse(text: &str, file: &str) -> Result<Trace, TraceError> {
        let line_err = |line, message: &str| TraceError::Line {
            file: file.to_owned(),
            line,
            message: message.to_owned(),
        };
        let body = text.strip_suffix('\n').unwrap_or(text);
        let mut opportunities_ms = Vec::new();
        if !body.is_empty() {
            for (i, raw) in body.split('\n').enumerate() {
                if raw.is_empty() {
                    return Err(line_err(i + 1, "invalid empty line"));
                }
                let v: u64 = raw.parse().map_err(|_| {
                    line_err(i + 1, &format!("not a non-negative integer: {raw:?}"))
                })?;
                if v > MAX_TRACE_MS {
                    return Err(line_err(
                        i + 1,
                        &format!("{v} ms is beyond the longest trace ({MAX_TRACE_MS} ms, about 290 years: times are kept in nanoseconds)"),
                    ));
                }
                if let Some(&prev) = opportunities_ms.last() {
                    if v < prev {
                        return Err(line_err(
                            i + 1,
                            &format!("timestamps must be non-decreasing ({v} after {prev})"),
                        ));
                    }
                }
                opportunities_ms.push(v);
            }
        }
        match opportunities_ms.last() {
            None => Err(TraceError::Whole {
                file: file.to_owned(),
                message: "empty trace".into(),
            }),
            Some(0) => Err(TraceError::Whole {
                file: file.to_owned(),
                message: "trace must last for a nonzero amount of time".into(),
            }),
            Some(_) => Ok(Trace { opportunities_ms }),
        }
    }

    /// Reads and parses a trace file.
    pub fn load(path: &Path) -> Result<Trace, TraceError> {
        let (file, text) = Trace::read_text(path)?;
        Trace::parse(&text, &file)
    }

    /// The name (for errors) and text of a trace or schedule file read as
    /// [`Trace::read_file`] does; errors if it is not UTF-8 text.
    pub fn read_text(path: &Path) -> Result<(String, String), TraceError> {
        let bytes = Trace::read_file(path)?;
        let file = path.display().to_string();
        let text = String::from_utf8(bytes).map_err(|e| TraceError::Io {
            file: file.clone(),
            message: format!("not a text file ({e})"),
        })?;
        Ok((file, text))
    }

    /// The bytes of trace file `path`, if it is a regular file of at most [`MAX_TRACE_BYTES`]
    /// (a FIFO or a device is refused by type, not read: it could block or never end).
    pub fn read_file(path: &Path) -> Result<Vec<u8>, TraceError> {
        analyzer::files::read_regular(path, "a trace", MAX_TRACE_BYTES).map_err(|e| {
            TraceError::Io {
                file: e.path,
                message: e.reason,
            }
        })
    }

    /// A constant-rate trace of `mbps` Mbit/s of 1500-byte packets (12 000 bit per line):
    /// with g = gcd(12000, 1000·R), period = 12000/g ms, K = 1000·R/g lines, line k = ⌊k·12000 /
    /// (1000·R)⌋. Errors unless `mbps` is positive with at most three decimals (kbit/s units).
    pub fn constant_rate(mbps: f64) -> Result<Trace, String> {
        let kbps = (mbps * 1000.0).round();
        if kbps.is_nan() || kbps < 1.0 || (mbps * 1000.0 - kbps).abs() > 1e-6 || kbps > 1e9 {
            return Err(format!(
                "rate must be a positive number of Mbit/s with at most 3 decimals, got {mbps}"
            ));
        }
        let kbps = kbps as u64;
        // Per ms, one line carries 12 000 bit = 12 kbit·ms; use kbit to stay integral.
        let bits_per_line = 12_000u64; // bit
        let rate_bits_per_ms = kbps; // kbit/s == bit/ms
        let g = gcd(bits_per_line, rate_bits_per_ms);
        let lines = rate_bits_per_ms / g;
        let opportunities_ms = (1..=lines)
            .map(|k| k * bits_per_line / rate_bits_per_ms)
            .collect();
        Ok(Trace { opportunities_ms })
    }

    /// Writes the constant-rate trace of `mbps` ([`Trace::constant_rate`]) to `path`. Errors
    /// name the rate or the file.
    pub fn write_constant(path: &Path, mbps: f64) -> Result<(), String> {
        let t = Trace::constant_rate(mbps)?;
        std::fs::write(path, t.to_text()).map_err(|e| format!("write {}: {e}", path.display()))
    }

    /// A Poisson trace of `mbps` Mbit/s mean (> 0) lasting about `duration_ms` (> 0): the
    /// opportunities of a Poisson process of rate `mbps`/12 per ms (1500-byte packets), each
    /// at the whole ms it falls in, as Pantheon's `*mbps-poisson` cellular traces. The trace
    /// repeats with period = its last opportunity, so the repeated schedule is not memoryless;
    /// `mm-link … --uplink-delivery=poisson` is. `seed` makes it reproducible.
    pub fn poisson(mbps: f64, duration_ms: u64, seed: u64) -> Result<Trace, String> {
        use rand::{Rng, SeedableRng};
        if !(mbps > 0.0 && mbps.is_finite()) {
            return Err(format!(
                "rate must be a positive number of Mbit/s, got {mbps}"
            ));
        }
        if duration_ms == 0 {
            return Err("duration must be at least 1 ms".into());
        }
        let mean_gap_ms = 12.0 / mbps;
        let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
        let mut t = 0.0f64;
        let mut opportunities_ms = Vec::new();
        loop {
            // Exponential by inversion; 1 − u ∈ (0, 1].
            t += -mean_gap_ms * (1.0 - rng.random::<f64>()).ln();
            if t >= duration_ms as f64 {
                break;
            }
            opportunities_ms.push(t as u64);
        }
        match opportunities_ms.last() {
            Some(&last) if last > 0 => Ok(Trace { opportunities_ms }),
            _ => Err(format!(
                "{duration_ms} ms at {mbps} Mbit/s gave no opportunity after 0 ms; use a longer \
                 duration"
            )),
        }
    }

    /// The trace as file text, one value per line.
    pub fn to_text(&self) -> String {
        let mut s = String::with_capacity(self.opportunities_ms.len() * 4);
        for v in &self.opportunities_ms {
            s.push_str(&v.to_string());
            s.push('\n');
        }
        s
    }

    /// Period in ms (the last value).
    pub fn period_ms(&self) -> u64 {
        *self
            .opportunities_ms
            .last()
            .expect("non-empty by construction")
    }

    /// Mean capacity in Mbit/s of 1500-byte IP packets.
    pub fn mean_mbps(&self) -> f64 {
        self.opportunities_ms.len() as f64 * 12_000.0 / (self.period_ms() as f64 * 1000.0)
    }
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constant_rate_rule_matches_mahimahi_reference() {
        assert_eq!(
            Trace::constant_rate(10.0).unwrap().opportunities_ms,
            [1, 2, 3, 4, 6]
        );
        assert_eq!(Trace::constant_rate(12.0).unwrap().opportunities_ms, [1]);
        let t100 = Trace::constant_rate(100.0).unwrap();
        assert_eq!(t100.opportunities_ms.len(), 25);
        assert_eq!(t100.period_ms(), 3);
        assert_eq!(&t100.opportunities_ms[..9], &[0, 0, 0, 0, 0, 0, 0, 0, 1]);
        assert_eq!(
            Trace::constant_rate(1000.0).unwrap().opportunities_ms.len(),
            250
        );
        assert!((Trace::constant_rate(24.0).unwrap().mean_mbps() - 24.0).abs() < 1e-9);
        assert!(Trace::constant_rate(0.0).is_err());
        assert!(Trace::constant_rate(-3.0).is_err());
    }

    #[test]
    fn poisson_trace_has_the_mean_rate_and_is_seeded() {
        let t = Trace::poisson(6.0, 600_000, 1).unwrap();
        // 6 Mbit/s = 0.5 packet/ms → ≈ 300 000 lines in 600 s.
        assert!((t.mean_mbps() - 6.0).abs() < 0.05, "{}", t.mean_mbps());
        assert!(t.opportunities_ms.windows(2).all(|w| w[0] <= w[1]));
        // Per-ms counts are Poisson: variance ≈ mean (a constant trace has variance ≈ 0.25).
        let mut counts = vec![0f64; 600_000];
        for &v in &t.opportunities_ms {
            counts[v as usize] += 1.0;
        }
        let mean = counts.iter().sum::<f64>() / counts.len() as f64;
        let var = counts.iter().map(|c| (c - mean).powi(2)).sum::<f64>() / counts.len() as f64;
        assert!(
            (var / mean - 1.0).abs() < 0.02,
            "variance/mean {}",
            var / mean
        );
        assert_eq!(Trace::poisson(6.0, 1000, 1), Trace::poisson(6.0, 1000, 1));
        assert_ne!(Trace::poisson(6.0, 1000, 1), Trace::poisson(6.0, 1000, 2));
        assert!(Trace::poisson(0.0, 1000, 1).is_err());
        assert!(Trace::poisson(1.0, 0, 1).is_err());
        // Round-trips through the file form.
        assert_eq!(Trace::parse(&t.to_text(), "p").unwrap(), t);
    }

    #[test]
    fn parse_errors_name_file_and_line() {
        let e = Trace::parse("1\n2\n\n3\n", "up.trace").unwrap_err();
        assert_eq!(e.to_string(), "up.trace:3: invalid empty line");
        // One opportunity per 584 years would wrap nanoseconds: refused, with its line.
        let e = Trace::parse("1\n18446744073709552\n", "far.trace").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("far.trace:2: 18446744073709552 ms is beyond"),
            "{e}"
        );
        assert!(Trace::parse(&format!("{MAX_TRACE_MS}\n"), "t").is_ok());
        let e = Trace::parse("1\nx2\n", "t").unwrap_err();
        assert!(
            e.to_string().starts_with("t:2: not a non-negative integer"),
            "{e}"
        );
        let e = Trace::parse("5\n3\n", "t").unwrap_err();
        assert!(e
            .to_string()
            .starts_with("t:2: timestamps must be non-decreasing"));
        assert_eq!(
            Trace::parse("0\n0\n", "t").unwrap_err().to_string(),
            "t: trace must last for a nonzero amount of time"
        );
        assert_eq!(
            Trace::parse("", "t").unwrap_err().to_string(),
            "t: empty trace"
        );
        assert!(Trace::parse("1\r\n", "t").is_err());
        assert_eq!(
            Trace::parse("1\n2\n3\n4\n6\n", "t")
                .unwrap()
                .opportunities_ms,
            [1, 2, 3, 4, 6]
        );
    }
}
