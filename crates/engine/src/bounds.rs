//! The bounds of every duration a user gives (flags, config files, plans): checked with
//! [`seconds`], so that no input panics and no clock arithmetic overflows.

use std::time::Duration;

use anyhow::{bail, Context};

/// The longest run, and the longest drain timeout: a day (Pantheon's runs last 30–60 s;
/// every duration has a bound so that no clock arithmetic can overflow).
pub const MAX_RUNTIME: Duration = Duration::from_secs(24 * 3600);
/// The longest `--first-side-setup`: an hour (a side that is not ready by then is not
/// starting).
pub const MAX_FIRST_SIDE_SETUP: Duration = Duration::from_secs(3600);
/// The longest `--drain-timeout`: a day, as [`MAX_RUNTIME`].
pub const MAX_DRAIN_TIMEOUT: Duration = MAX_RUNTIME;

/// `value` seconds (a flag's or a file's) as a [`Duration`], if it is a finite number ≥ 0 and at
/// most `max`. Errors name `what` (`--drain-timeout`, `exp.yml: runtime`) and the bound; no
/// input panics.
pub fn seconds(value: f64, what: &str, max: Duration) -> anyhow::Result<Duration> {
    if !(value.is_finite() && value >= 0.0) {
        bail!("{what} must be a non-negative number of seconds, got {value}");
    }
    if value > max.as_secs_f64() {
        bail!(
            "{what} is {value} s, longer than the longest supported, {} s ({})",
            max.as_secs(),
            duration_words(max)
        );
    }
    Duration::try_from_secs_f64(value)
        .with_context(|| format!("{what}: {value} s is not a duration"))
}

/// `a day`, `an hour`, `10 minutes` for errors.
fn duration_words(d: Duration) -> String {
    match d.as_secs() {
        86_400 => "a day".into(),
        3_600 => "an hour".into(),
        s if s % 60 == 0 => format!("{} minutes", s / 60),
        s => format!("{s} s"),
    }
}
