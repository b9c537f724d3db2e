//! Time-varying paths: a one-way delay or a loss rate that changes over time, read from a
//! schedule file (`pt-delay-schedule uplink|downlink FILE`, `pt-loss-schedule uplink|downlink
//! FILE`; Mahimahi's own has neither: ravinet/mahimahi#135 proposed an `mm-file-delay`).
//!
//! A schedule file is text, one step per line: `TIME_MS VALUE`, the time in ms since the
//! emulator started (the clock of mm-link's traces) and the value from then on — the one-way
//! delay in ms (fractions allowed, up to a day) or the loss rate in [0, 1]. The first step is
//! at time 0; times increase strictly; after the last step its value holds. Blank lines and
//! `#` comments are ignored. A delay that rises from 20 to 80 ms five seconds in, then falls
//! to 30:
//!
//! ```text
//! # time_ms  delay_ms
//! 0      20
//! 5000   80
//! 12000  30
//! ```
//!
//! Semantics ([`crate::stage::DelayStage`], [`crate::stage::LossStage`]): a packet takes the
//! value in force when it reaches the stage. Delayed packets keep their order, as on a
//! Mahimahi path: a packet leaves at its arrival time plus its delay, or with the packet before
//! it if that one leaves later (when the delay falls by more than the gap between two packets,
//! the later ones wait behind the earlier ones instead of overtaking them).

use std::path::Path;

use crate::queue::MAX_DELAY_MS;
use crate::queue::MS;
use crate::trace::{Trace, TraceError, MAX_TRACE_MS};

/// What a schedule's values are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ScheduleKind {
    /// One-way delay, ms, from 0 to [`MAX_DELAY_MS`].
    Delay,
    /// Loss rate per packet, 0–1.
    Loss,
}

impl ScheduleKind {
    /// The shell that reads a schedule of this kind: `pt-delay-schedule`, `pt-loss-schedule`.
    pub fn program(self) -> &'static str {
        match self {
            ScheduleKind::Delay => "pt-delay-schedule",
            ScheduleKind::Loss => "pt-loss-schedule",
        }
    }

    /// The values allowed, and what they are, for errors.
    fn check(self, v: f64) -> Result<f64, String> {
        let ok = match self {
            ScheduleKind::Delay => (0.0..=MAX_DELAY_MS as f64).contains(&v),
            ScheduleKind::Loss => (0.0..=1.0).contains(&v),
        };
        if ok {
            return Ok(v);
        }
        Err(match self {
            ScheduleKind::Delay => {
                format!("one-way delay must be from 0 to {MAX_DELAY_MS} ms (a day), got {v}")
            }
            ScheduleKind::Loss => format!("loss rate must be in [0, 1], got {v}"),
        })
    }
}

/// A step function of time: `values[i]` holds from `times_ns[i]` until the next time, the last
/// value for ever. The default is empty: a schedule not read yet (a shell described but not
/// loaded), which no stage accepts.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Schedule {
    /// Step times, ns on the emulator's clock; the first is 0, strictly increasing.
    pub times_ns: Vec<u64>,
    /// The value from each step on, in the schedule's unit (ms or a rate; see
    /// [`Schedule::scaled`]).
    pub values: Vec<f64>,
}

impl Schedule {
    /// One value for ever.
    pub fn constant(value: f64) -> Schedule {
        Schedule {
            times_ns: vec![0],
            values: vec![value],
        }
    }

    /// The value in force at `t` ns.
    pub fn at(&self, t: u64) -> f64 {
        if self.values.len() == 1 {
            return self.values[0];
        }
        let after = self.times_ns.partition_point(|&s| s <= t);
        self.values[after.saturating_sub(1)]
    }

    /// The same steps with every value multiplied by `factor` (ms → ns: [`MS`]).
    pub fn scaled(&self, factor: f64) -> Schedule {
        Schedule {
            times_ns: self.times_ns.clone(),
            values: self.values.iter().map(|v| v * factor).collect(),
        }
    }

    /// Parses schedule text (the module's format); `file` names it in errors, which give the
    /// 1-based line.
    pub fn parse(text: &str, file: &str, kind: ScheduleKind) -> Result<Schedule, TraceError> {
        let line_err = |line, message: String| TraceError::Line {
            file: file.to_owned(),
            line,
            message,
        };
        let mut s = Schedule::default();
        for (i, raw) in text.lines().enumerate() {
            let body = raw.split('#').next().unwrap_or("").trim();
            if body.is_empty() {
                continue;
            }
            let fields: Vec<&str> = body.split_whitespace().collect();
            let [time, value] = fields[..] else {
                return Err(line_err(
                    i + 1,
                    format!("expected `TIME_MS VALUE`, got {raw:?}"),
                ));
            };
            let time_ms: u64 = time
                .parse()
                .ok()
                .filter(|t| *t <= MAX_TRACE_MS)
                .ok_or_else(|| {
                    line_err(
                        i + 1,
                        format!(
                            "time `{time}` is not an integer number of ms from 0 to {MAX_TRACE_MS}"
                        ),
                    )
                })?;
            let value = value
                .parse::<f64>()
                .map_err(|_| format!("`{value}` is not a number"))
                .and_then(|v| kind.check(v))
                .map_err(|m| line_err(i + 1, m))?;
            let t = time_ms * MS;
            match s.times_ns.last() {
                None if t != 0 => {
                    return Err(line_err(
                        i + 1,
                        format!("the first step must be at time 0, got {time_ms} ms"),
                    ))
                }
                Some(&prev) if t <= prev => {
                    return Err(line_err(
                        i + 1,
                        format!("times must increase ({time_ms} ms after {} ms)", prev / MS),
                    ))
                }
                _ => {}
            }
            s.times_ns.push(t);
            s.values.push(value);
        }
        if s.values.is_empty() {
            return Err(TraceError::Whole {
                file: file.to_owned(),
                message: "empty schedule: no `TIME_MS VALUE` line".into(),
            });
        }
        Ok(s)
    }

    /// Reads and parses a schedule file (a regular file of at most
    /// [`crate::trace::MAX_TRACE_BYTES`]); errors name the file, and the line of a malformed
    /// one.
    pub fn load(path: &Path, kind: ScheduleKind) -> Result<Schedule, TraceError> {
        let (file, text) = Trace::read_text(path)?;
        Schedule::parse(&text, &file, kind)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str, kind: ScheduleKind) -> Result<Schedule, String> {
        Schedule::parse(text, "s.txt", kind).map_err(|e| e.to_string())
    }

    #[test]
    fn steps_hold_until_the_next_and_the_last_for_ever() {
        let s = parse(
            "# t delay\n0 20\n\n5000 80 # up\n12000 30.5\n",
            ScheduleKind::Delay,
        )
        .unwrap();
        assert_eq!(s.times_ns, vec![0, 5000 * MS, 12000 * MS]);
        assert_eq!(s.at(0), 20.0);
        assert_eq!(s.at(5000 * MS - 1), 20.0);
        assert_eq!(s.at(5000 * MS), 80.0);
        assert_eq!(s.at(11_999 * MS), 80.0);
        assert_eq!(s.at(12_000 * MS), 30.5);
        assert_eq!(s.at(u64::MAX), 30.5);
        assert_eq!(s.scaled(MS as f64).at(6000 * MS), 80.0 * MS as f64);
        assert_eq!(Schedule::constant(0.25).at(7), 0.25);
    }

    #[test]
    fn malformed_files_name_file_and_line() {
        let cases = [
            (
                "0 20\n5 x\n",
                ScheduleKind::Delay,
                "s.txt:2: `x` is not a number",
            ),
            (
                "0 20\n5\n",
                ScheduleKind::Delay,
                "s.txt:2: expected `TIME_MS VALUE`",
            ),
            (
                "5 20\n",
                ScheduleKind::Delay,
                "s.txt:1: the first step must be at time 0",
            ),
            (
                "0 1\n# c\n9 2\n9 3\n",
                ScheduleKind::Delay,
                "s.txt:4: times must increase",
            ),
            (
                "0 -1\n",
                ScheduleKind::Delay,
                "s.txt:1: one-way delay must be from 0",
            ),
            (
                "0 0\n1 1.5\n",
                ScheduleKind::Loss,
                "s.txt:2: loss rate must be in [0, 1]",
            ),
            (
                "-3 0\n",
                ScheduleKind::Loss,
                "s.txt:1: time `-3` is not an integer",
            ),
            ("# nothing\n\n", ScheduleKind::Loss, "s.txt: empty schedule"),
        ];
        for (text, kind, want) in cases {
            let e = parse(text, kind).unwrap_err();
            assert!(e.starts_with(want), "{text:?}: {e}");
        }
    }
}
