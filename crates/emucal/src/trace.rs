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

/// A parsed trace: opportunity times in ms within one period.
#[derive(Debug, Clone, PartialEq, Eq)]
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
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| TraceError::Io {
            file: file.clone(),
            message: e.to_string(),
        })?;
        Trace::parse(&text, &file)
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
    fn parse_errors_name_file_and_line() {
        let e = Trace::parse("1\n2\n\n3\n", "up.trace").unwrap_err();
        assert_eq!(e.to_string(), "up.trace:3: invalid empty line");
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
