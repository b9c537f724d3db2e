//! Which of Pantheon's schemes a descriptor stands for, and how faithfully (issue 55): a
//! descriptor's `[pantheon]` table.
//!
//! A replication error compares *our* run of a scheme over an emulator with *Pantheon's* run of
//! it over a real path. That comparison means something only if our program is started as
//! Pantheon's wrapper started its own — same program, arguments, environment and roles — or, where
//! ours is another implementation, with the original's settings. So every descriptor that carries
//! one of Pantheon's scheme names ([`PANTHEON_SCHEMES`]) records the wrapper it follows (repository,
//! commit, file: `src/<scheme>.py` until April 2018, `src/wrappers/<scheme>.py` after), the era of
//! Pantheon's history in which that wrapper ran it, what the wrapper ran, how close ours is
//! ([`Fidelity`]) and every deviation with its reason:
//!
//! ```toml
//! [pantheon]
//! scheme = "copa"
//! commit = "5ea146acdebe79f5b9acfb2d9044554a7d2582ea"   # seed 001's Pantheon, 2017-08-30
//! wrapper = "src/copa.py"
//! era = "2017-08-27 – 2018-06-18"
//! ran = "genericCC f7ca42f: receiver PORT (first); MIN_RTT=1000000 sender … delta_conf=do_ss:auto"
//! fidelity = "original"
//!
//! [[pantheon.deviations]]
//! what = "built without -Werror"
//! why = "GCC 12 warns where 2017's compilers did not; the code is unchanged"
//! ```
//!
//! `pantheon schemes list --json` carries the table; `docs/schemes.md` gives the eras and the
//! fidelity table.

use serde::{Deserialize, Serialize};

/// Pantheon's repository, the default of [`Provenance::repository`].
pub const PANTHEON_REPOSITORY: &str = "https://github.com/StanfordSNR/pantheon";

/// Every scheme name Pantheon's `src/config.yml` listed, in any era (2017: `default_tcp` for TCP
/// Cubic, `koho_cc`, `calibrated_koho`; 2018 on: `cubic`, `vivace`, `pcc_experimental`,
/// `fillp`, `fillp_sheep`; `indigo` from August 2017). A built-in descriptor with one of these
/// names must have a `[pantheon]` table (a unit test of `schemes` checks it).
pub const PANTHEON_SCHEMES: [&str; 20] = [
    "default_tcp",
    "cubic",
    "vegas",
    "bbr",
    "ledbat",
    "pcc",
    "verus",
    "sprout",
    "quic",
    "scream",
    "webrtc",
    "copa",
    "taova",
    "koho_cc",
    "calibrated_koho",
    "vivace",
    "pcc_experimental",
    "fillp",
    "fillp_sheep",
    "indigo",
];

/// How close a descriptor's scheme is to the Pantheon scheme it stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Fidelity {
    /// Pantheon's own program (the same source at a pin, patched only as listed), started with
    /// the wrapper's arguments, environment and roles.
    Original,
    /// Another implementation of the same algorithm, with the settings that shape its behaviour
    /// (windows, packet size, constants) set to the original's where it exposes them; the
    /// deviations say which could not be.
    Reimplemented,
    /// Not Pantheon's scheme (then it is not called by Pantheon's name: `tquic_copa`): the
    /// reason is in the deviations, and [`Provenance::instead`] names the descriptor that is
    /// (if any).
    NotReproduced,
}

impl Fidelity {
    /// As written in a descriptor: `original`, `reimplemented`, `not_reproduced`.
    pub fn as_str(self) -> &'static str {
        match self {
            Fidelity::Original => "original",
            Fidelity::Reimplemented => "reimplemented",
            Fidelity::NotReproduced => "not_reproduced",
        }
    }
}

/// One difference between our scheme and Pantheon's, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Deviation {
    /// What differs (a sentence).
    pub what: String,
    /// Why: what forces it, or what it changes in the numbers.
    pub why: String,
}

/// A descriptor's `[pantheon]` table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Provenance {
    /// Pantheon's name of the scheme (one of [`PANTHEON_SCHEMES`]; `default_tcp` for 2017's
    /// TCP Cubic).
    pub scheme: String,
    /// The repository of the wrapper; default [`PANTHEON_REPOSITORY`].
    #[serde(default = "pantheon_repository")]
    pub repository: String,
    /// The Pantheon commit whose wrapper this follows: all 40 hex digits.
    pub commit: String,
    /// The wrapper's path at that commit (`src/copa.py`, `src/wrappers/vivace.py`).
    pub wrapper: String,
    /// The span of Pantheon's history in which the wrapper ran the scheme this way: first and
    /// last date, `YYYY-MM-DD – YYYY-MM-DD` or `YYYY-MM-DD – today` for the last era, then
    /// optionally a note (`2017-08-27 – 2018-06-18 (genericCC f7ca42f)`); [`Provenance::span`]
    /// reads it.
    pub era: String,
    /// What the wrapper ran: programs, arguments, environment, which side went first.
    pub ran: String,
    /// How close ours is.
    pub fidelity: Fidelity,
    /// With `not_reproduced`: the descriptor that reproduces Pantheon's scheme, if one does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instead: Option<String>,
    /// Every difference from Pantheon's run, with its reason: at least one (a compiler, a
    /// kernel, a tool's version always differs).
    pub deviations: Vec<Deviation>,
}

fn pantheon_repository() -> String {
    PANTHEON_REPOSITORY.to_owned()
}

impl Provenance {
    /// Checks the table: a known Pantheon name, a full commit, a wrapper path, an era, what ran,
    /// at least one deviation with both parts. Errors say which field.
    pub fn check(&self) -> Result<(), String> {
        if !PANTHEON_SCHEMES.contains(&self.scheme.as_str()) {
            return Err(format!(
                "pantheon.scheme `{}` is none of Pantheon's scheme names ({})",
                self.scheme,
                PANTHEON_SCHEMES.join(", ")
            ));
        }
        if !crate::source::is_full_commit(&self.commit) {
            return Err(format!(
                "pantheon.commit {:?}: give all 40 hex digits of Pantheon's commit",
                self.commit
            ));
        }
        for (field, value) in [
            ("repository", &self.repository),
            ("wrapper", &self.wrapper),
            ("era", &self.era),
            ("ran", &self.ran),
        ] {
            if value.trim().is_empty() {
                return Err(format!("pantheon.{field} is empty"));
            }
        }
        if self.deviations.is_empty() {
            return Err(
                "pantheon.deviations: list every difference from Pantheon's run, \
                        with its reason (at least one)"
                    .into(),
            );
        }
        if let Some(i) = self
            .deviations
            .iter()
            .position(|d| d.what.trim().is_empty() || d.why.trim().is_empty())
        {
            return Err(format!(
                "pantheon.deviations[{i}]: give both `what` and `why`"
            ));
        }
        if self.instead.is_some() && self.fidelity != Fidelity::NotReproduced {
            return Err("pantheon.instead is for fidelity = \"not_reproduced\"".into());
        }
        self.span()?;
        Ok(())
    }

    /// The era's first and last day (`None`: to this day), read from [`Provenance::era`].
    /// Errors name the field and the form expected.
    pub fn span(&self) -> Result<(Day, Option<Day>), String> {
        let bad = || {
            format!(
                "pantheon.era {:?}: write `YYYY-MM-DD – YYYY-MM-DD` or `YYYY-MM-DD – today`, \
                 then any note",
                self.era
            )
        };
        let era = self.era.trim();
        let (first, rest) = era.split_once(" – ").ok_or_else(bad)?;
        let first = Day::parse(first).map_err(|_| bad())?;
        let last = rest.get(..10).unwrap_or(rest);
        let last = if rest.starts_with("today") {
            None
        } else {
            Some(Day::parse(last).map_err(|_| bad())?)
        };
        if last.is_some_and(|l| l < first) {
            return Err(format!("pantheon.era {:?} ends before it starts", self.era));
        }
        Ok((first, last))
    }

    /// Whether Pantheon ran the scheme this way on `day` (the era's first and last day
    /// included).
    pub fn covers(&self, day: Day) -> bool {
        self.span()
            .is_ok_and(|(first, last)| first <= day && last.is_none_or(|l| day <= l))
    }
}

/// A calendar day, `YYYY-MM-DD`: the unit of Pantheon's eras. Ordered by date.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Day {
    /// Year.
    pub year: u16,
    /// Month, 1–12.
    pub month: u8,
    /// Day of the month, 1–31.
    pub day: u8,
}

impl Day {
    /// The seed reports' era: 2017-08-30, the day of Pantheon `5ea146a`, the commit seed 001's
    /// report names. A Pantheon name that no descriptor here carries (`copa`: ours from tquic is
    /// `tquic_copa`) is read as of this day unless `--pantheon-era` says another
    /// ([`crate::schemes::Registry::read_as_of`]).
    pub const SEEDS: Day = Day {
        year: 2017,
        month: 8,
        day: 30,
    };

    /// Reads `YYYY-MM-DD` (a day of a month of up to 31 days; the calendar is not checked
    /// further). Errors say what was expected.
    pub fn parse(s: &str) -> Result<Day, String> {
        let bad = || format!("{s:?} is not a day: write YYYY-MM-DD, e.g. 2017-08-30");
        let b = s.as_bytes();
        if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
            return Err(bad());
        }
        let num = |r: std::ops::Range<usize>| {
            s.get(r)
                .filter(|p| p.bytes().all(|c| c.is_ascii_digit()))
                .and_then(|p| p.parse::<u16>().ok())
                .ok_or_else(bad)
        };
        let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
        if !(1..=12).contains(&month) || !(1..=31).contains(&day) {
            return Err(bad());
        }
        Ok(Day {
            year,
            month: month as u8,
            day: day as u8,
        })
    }
}

impl std::str::FromStr for Day {
    type Err = String;

    /// As [`Day::parse`] (so that a command-line flag can be a `Day`).
    fn from_str(s: &str) -> Result<Day, String> {
        Day::parse(s)
    }
}

impl std::fmt::Display for Day {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:04}-{:02}-{:02}", self.year, self.month, self.day)
    }
}

/// Pantheon's names that mean the same scheme: `default_tcp` (2017) became `cubic` (2018).
pub fn same_pantheon_scheme(a: &str, b: &str) -> bool {
    fn canonical(n: &str) -> &str {
        if n == "default_tcp" {
            "cubic"
        } else {
            n
        }
    }
    canonical(a) == canonical(b)
}

/// Whether a scheme named `name` must carry a `[pantheon]` table: it has one of Pantheon's
/// names.
pub fn needs_provenance(name: &str) -> bool {
    PANTHEON_SCHEMES.contains(&name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn good() -> Provenance {
        toml::from_str(
            r#"
scheme = "copa"
commit = "5ea146acdebe79f5b9acfb2d9044554a7d2582ea"
wrapper = "src/copa.py"
era = "2017-08-27 – 2018-06-18"
ran = "genericCC sender/receiver"
fidelity = "original"
[[deviations]]
what = "built without -Werror"
why = "GCC 12"
"#,
        )
        .expect("parses")
    }

    #[test]
    fn a_complete_table_passes_and_defaults_to_pantheons_repository() {
        let p = good();
        assert_eq!(p.check(), Ok(()));
        assert_eq!(p.repository, PANTHEON_REPOSITORY);
    }

    #[test]
    fn each_missing_part_is_named() {
        let mut p = good();
        p.deviations.clear();
        assert!(p.check().unwrap_err().contains("pantheon.deviations"));
        let mut p = good();
        p.commit = "5ea146a".into();
        assert!(p.check().unwrap_err().contains("40 hex digits"));
        let mut p = good();
        p.scheme = "quinn_cubic".into();
        assert!(p.check().unwrap_err().contains("none of Pantheon's"));
        let mut p = good();
        p.era = " ".into();
        assert_eq!(p.check().unwrap_err(), "pantheon.era is empty");
        let mut p = good();
        p.deviations[0].why.clear();
        assert!(p.check().unwrap_err().contains("deviations[0]"));
        let mut p = good();
        p.instead = Some("copa_orig".into());
        assert!(p.check().unwrap_err().contains("not_reproduced"));
    }

    #[test]
    fn an_era_is_read_with_its_note_and_covers_its_days() {
        let day = |s| Day::parse(s).unwrap();
        let mut p = good();
        p.era = "2017-08-27 – 2018-06-18 (genericCC f7ca42f)".into();
        assert_eq!(p.span(), Ok((day("2017-08-27"), Some(day("2018-06-18")))));
        assert!(p.covers(day("2017-08-27")) && p.covers(day("2018-06-18")));
        assert!(!p.covers(day("2017-08-26")) && !p.covers(day("2018-06-19")));
        p.era = "2020-03-13 – today".into();
        assert!(p.covers(day("2026-11-27")) && !p.covers(day("2019-12-31")));
        for bad in [
            "2017-08-27",
            "2017-8-27 – today",
            "2018-06-18 – 2017-08-27",
            "since 2017",
        ] {
            p.era = bad.into();
            assert!(p.check().unwrap_err().contains("pantheon.era"), "{bad}");
        }
        assert!(Day::parse("2017-13-01").is_err());
        assert_eq!(day("2017-08-30").to_string(), "2017-08-30");
        assert!(
            same_pantheon_scheme("default_tcp", "cubic") && !same_pantheon_scheme("copa", "cubic")
        );
    }

    #[test]
    fn only_pantheons_names_need_a_table() {
        assert!(needs_provenance("quic"));
        assert!(needs_provenance("cubic"));
        assert!(!needs_provenance("quic_bbr2"));
        assert!(!needs_provenance("copa_orig"));
    }
}
