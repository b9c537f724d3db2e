//! The results archive of `pantheon serve`: every experiment with a stable number (Pantheon's
//! P123), its path, matrix entry, status, timings, runs and per-scheme metrics, and where its
//! results directory lives.
//!
//! [`Archive`] is the interface the daemon and its gRPC and web front ends use;
//! [`SqliteArchive`] keeps it in one SQLite file (embedded, no server; a server database
//! would implement the same trait). Every change is one transaction, so a daemon killed at any
//! instant leaves a consistent archive: on restart [`Archive::recover`] turns experiments that
//! were running into queued ones again (their finished runs stay, counted once) and returns the
//! runs that were in progress, for the daemon to stop on their agents.
//!
//! Times are UTC RFC 3339 strings (`2026-11-24T08:00:00.000Z`: they sort as text).

use std::path::Path;
use std::sync::Mutex;

use anyhow::{bail, Context};
use rusqlite::{params, Connection, OptionalExtension};
use serde::Serialize;

use super::schedule::{ExperimentSpec, Queued};

pub use crate::agent::stamp;

/// The current time as the archive writes it ([`stamp`]).
pub fn now() -> String {
    stamp(chrono::Utc::now())
}

/// Where an experiment is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Waiting for its two nodes.
    Queued,
    /// Its runs are going on.
    Running,
    /// Ran and was analysed (some runs may have failed; see its runs).
    Done,
    /// Could not be run or analysed at all (the error says why).
    Failed,
}

impl Status {
    /// Lowercase name, as stored.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Queued => "queued",
            Status::Running => "running",
            Status::Done => "done",
            Status::Failed => "failed",
        }
    }

    fn parse(s: &str) -> Status {
        match s {
            "running" => Status::Running,
            "done" => Status::Done,
            "failed" => Status::Failed,
            _ => Status::Queued,
        }
    }
}

/// What an experiment runs: a spec plus the scheme order and timings.
#[derive(Debug, Clone, PartialEq)]
pub struct NewExperiment {
    /// Path, link type, flows and runs.
    pub spec: ExperimentSpec,
    /// Schemes in run order.
    pub schemes: Vec<String>,
    /// Duration of each run, s.
    pub runtime_s: f64,
    /// Time between flows, s.
    pub interval_s: f64,
}

/// One archived experiment.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Experiment {
    /// Its number (P-number), never reused.
    pub id: i64,
    /// The tournament that queued it (none: submitted by hand).
    pub tournament: Option<i64>,
    /// Sending node.
    pub sender: String,
    /// Receiving node.
    pub receiver: String,
    /// `wired` or `cellular`.
    pub link: String,
    /// Flows per run.
    pub flows: u16,
    /// Runs per scheme.
    pub run_times: u32,
    /// Duration of each run, s.
    pub runtime_s: f64,
    /// Time between flows, s.
    pub interval_s: f64,
    /// Schemes in run order.
    pub schemes: Vec<String>,
    /// Where it is.
    pub status: Status,
    /// How many times it was started (more than 1: the daemon was restarted during it).
    pub attempts: u32,
    /// When it was queued, started (last attempt) and finished.
    pub queued_at: String,
    /// See `queued_at`.
    pub started_at: Option<String>,
    /// See `queued_at`.
    pub finished_at: Option<String>,
    /// Its results directory (Pantheon's layout, with the report).
    pub result_dir: Option<String>,
    /// Why it failed, or remarks.
    pub error: Option<String>,
}

/// One run of one scheme in an experiment.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Run {
    /// Scheme.
    pub scheme: String,
    /// Run id (1-based).
    pub run: u32,
    /// The name the agents know it by (to stop it after a daemon restart).
    pub name: String,
    /// `running`, `ok` or `failed`.
    pub status: String,
    /// Why it failed.
    pub reason: Option<String>,
    /// Throughput of all flows, Mbit/s (after analysis).
    pub tput_mbps: Option<f64>,
    /// 95th-percentile one-way delay, ms (after analysis).
    pub delay_ms: Option<f64>,
    /// Loss rate, 0–1 (after analysis).
    pub loss: Option<f64>,
}

/// A run's metrics from the experiment's analysis (`pantheon_perf.json`).
#[derive(Debug, Clone, PartialEq)]
pub struct RunMetrics {
    /// Scheme.
    pub scheme: String,
    /// Run id.
    pub run: u32,
    /// Mbit/s.
    pub tput_mbps: f64,
    /// ms.
    pub delay_ms: f64,
    /// 0–1.
    pub loss: f64,
}

/// A scheme's summary over an experiment's analysed runs (the report's table: means).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SchemeStats {
    /// Scheme.
    pub scheme: String,
    /// Runs analysed.
    pub runs: u32,
    /// Mean throughput, Mbit/s.
    pub tput_mbps: f64,
    /// Mean 95th-percentile one-way delay, ms.
    pub delay_ms: f64,
    /// Mean loss rate, 0–1.
    pub loss: f64,
}

/// One point of a scheme's history on a path: an experiment's summary.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HistoryPoint {
    /// The experiment.
    pub experiment: i64,
    /// When it finished.
    pub at: String,
    /// Flows per run.
    pub flows: u16,
    /// Its summary of the scheme.
    pub stats: SchemeStats,
}

/// Which experiments [`Archive::list`] returns (all `None`: every one).
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// A node name: experiments with it as sender or receiver; `a→b` (or `a>b`): that
    /// direction only.
    pub path: Option<String>,
    /// Experiments that run this scheme.
    pub scheme: Option<String>,
    /// Queued on or after this date/time (RFC 3339 prefix, e.g. `2026-11-24`).
    pub since: Option<String>,
    /// Queued before this date/time (prefix: `2026-11-25` excludes that day).
    pub until: Option<String>,
    /// Only these statuses.
    pub status: Option<Status>,
}

/// A run that was in progress when the daemon stopped, returned by [`Archive::recover`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interrupted {
    /// Its experiment.
    pub experiment: i64,
    /// The run's name on the agents.
    pub name: String,
    /// The experiment's two nodes.
    pub nodes: [String; 2],
}

/// The archive's operations (see the module doc). Errors are the store's (I/O, corruption).
pub trait Archive: Send + Sync {
    /// Queues `experiments` of a new tournament started at `now`, in order, in one
    /// transaction; returns the tournament's number.
    fn start_tournament(&self, now: &str, experiments: &[NewExperiment]) -> anyhow::Result<i64>;
    /// The last tournament: (number, start time).
    fn last_tournament(&self) -> anyhow::Result<Option<(i64, String)>>;
    /// Experiments of `tournament` still queued or running.
    fn unfinished(&self, tournament: i64) -> anyhow::Result<usize>;
    /// Queues one experiment outside any tournament (`pantheon submit`); returns its number.
    fn submit(&self, now: &str, experiment: &NewExperiment) -> anyhow::Result<i64>;
    /// Queued experiments, oldest first.
    fn queued(&self) -> anyhow::Result<Vec<Queued>>;
    /// Experiment `id`.
    fn experiment(&self, id: i64) -> anyhow::Result<Option<Experiment>>;
    /// Experiments matching `filter`, newest first.
    fn list(&self, filter: &Filter) -> anyhow::Result<Vec<Experiment>>;
    /// Marks `id` running in `result_dir` (one more attempt).
    fn set_running(&self, id: i64, result_dir: &str, now: &str) -> anyhow::Result<()>;
    /// Records that run `run` of `scheme` started under the agents' run `name`.
    fn run_started(&self, id: i64, scheme: &str, run: u32, name: &str) -> anyhow::Result<()>;
    /// Records how it ended: `Ok` or `Err(reason)`.
    fn run_finished(
        &self,
        id: i64,
        scheme: &str,
        run: u32,
        outcome: Result<(), &str>,
    ) -> anyhow::Result<()>;
    /// `id`'s runs in (scheme, run) order.
    fn runs(&self, id: i64) -> anyhow::Result<Vec<Run>>;
    /// Ends `id` as `Done` (with its analysis) or `Failed` (with `error`).
    fn finish(
        &self,
        id: i64,
        status: Status,
        error: Option<&str>,
        runs: &[RunMetrics],
        stats: &[SchemeStats],
        now: &str,
    ) -> anyhow::Result<()>;
    /// `id`'s per-scheme summary.
    fn scheme_stats(&self, id: i64) -> anyhow::Result<Vec<SchemeStats>>;
    /// After a restart: experiments left running are queued again, runs left running are
    /// forgotten (they will run again) and returned.
    fn recover(&self) -> anyhow::Result<Vec<Interrupted>>;
    /// `scheme`'s summaries on the path `sender` → `receiver`, oldest first (done
    /// experiments only).
    fn history(
        &self,
        sender: &str,
        receiver: &str,
        scheme: &str,
    ) -> anyhow::Result<Vec<HistoryPoint>>;
}

/// The archive in one SQLite file.
pub struct SqliteArchive {
    conn: Mutex<Connection>,
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS tournaments (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    started_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS experiments (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    tournament INTEGER REFERENCES tournaments(id),
    sender TEXT NOT NULL,
    receiver TEXT NOT NULL,
    link TEXT NOT NULL,
    flows INTEGER NOT NULL,
    run_times INTEGER NOT NULL,
    runtime_s REAL NOT NULL,
    interval_s REAL NOT NULL,
    schemes TEXT NOT NULL,
    status TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    queued_at TEXT NOT NULL,
    started_at TEXT,
    finished_at TEXT,
    result_dir TEXT,
    error TEXT
);
CREATE INDEX IF NOT EXISTS experiments_status ON experiments(status);
CREATE TABLE IF NOT EXISTS runs (
    experiment INTEGER NOT NULL REFERENCES experiments(id),
    scheme TEXT NOT NULL,
    run INTEGER NOT NULL,
    name TEXT NOT NULL,
    status TEXT NOT NULL,
    reason TEXT,
    tput_mbps REAL,
    delay_ms REAL,
    loss REAL,
    PRIMARY KEY (experiment, scheme, run)
);
CREATE TABLE IF NOT EXISTS scheme_stats (
    experiment INTEGER NOT NULL REFERENCES experiments(id),
    scheme TEXT NOT NULL,
    runs INTEGER NOT NULL,
    tput_mbps REAL NOT NULL,
    delay_ms REAL NOT NULL,
    loss REAL NOT NULL,
    PRIMARY KEY (experiment, scheme)
);
";

const EXPERIMENT_COLUMNS: &str = "id, tournament, sender, receiver, link, flows, run_times, \
    runtime_s, interval_s, schemes, status, attempts, queued_at, started_at, finished_at, \
    result_dir, error";

fn experiment_row(r: &rusqlite::Row) -> rusqlite::Result<Experiment> {
    Ok(Experiment {
        id: r.get(0)?,
        tournament: r.get(1)?,
        sender: r.get(2)?,
        receiver: r.get(3)?,
        link: r.get(4)?,
        flows: r.get(5)?,
        run_times: r.get(6)?,
        runtime_s: r.get(7)?,
        interval_s: r.get(8)?,
        schemes: r
            .get::<_, String>(9)?
            .split_whitespace()
            .map(str::to_owned)
            .collect(),
        status: Status::parse(&r.get::<_, String>(10)?),
        attempts: r.get(11)?,
        queued_at: r.get(12)?,
        started_at: r.get(13)?,
        finished_at: r.get(14)?,
        result_dir: r.get(15)?,
        error: r.get(16)?,
    })
}

fn stats_row(r: &rusqlite::Row) -> rusqlite::Result<SchemeStats> {
    Ok(SchemeStats {
        scheme: r.get(0)?,
        runs: r.get(1)?,
        tput_mbps: r.get(2)?,
        delay_ms: r.get(3)?,
        loss: r.get(4)?,
    })
}

impl SqliteArchive {
    /// Opens (or creates) the archive at `path`. Errors if the file cannot be opened or is not
    /// a SQLite database.
    pub fn open(path: &Path) -> anyhow::Result<SqliteArchive> {
        let conn = Connection::open(path).with_context(|| format!("open {}", path.display()))?;
        // WAL: readers (the web page) never block the daemon's writes; FULL: a committed
        // change survives even a machine crash.
        conn.pragma_update_and_check(None, "journal_mode", "WAL", |_| Ok(()))
            .and_then(|_| conn.pragma_update(None, "synchronous", "FULL"))
            .and_then(|_| conn.busy_timeout(std::time::Duration::from_secs(10)))
            .and_then(|_| conn.execute_batch(SCHEMA))
            .with_context(|| format!("{}: not a usable SQLite archive", path.display()))?;
        Ok(SqliteArchive {
            conn: Mutex::new(conn),
        })
    }

    fn with<T>(&self, f: impl FnOnce(&mut Connection) -> rusqlite::Result<T>) -> anyhow::Result<T> {
        let mut c = self.conn.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut c).context("archive")
    }
}

fn insert(
    c: &Connection,
    tournament: Option<i64>,
    now: &str,
    e: &NewExperiment,
) -> rusqlite::Result<i64> {
    c.execute(
        "INSERT INTO experiments (tournament, sender, receiver, link, flows, run_times, \
         runtime_s, interval_s, schemes, status, queued_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, 'queued', ?10)",
        params![
            tournament,
            e.spec.sender,
            e.spec.receiver,
            e.spec.link.as_str(),
            e.spec.flows,
            e.spec.run_times,
            e.runtime_s,
            e.interval_s,
            e.schemes.join(" "),
            now
        ],
    )?;
    Ok(c.last_insert_rowid())
}

impl Archive for SqliteArchive {
    fn start_tournament(&self, now: &str, experiments: &[NewExperiment]) -> anyhow::Result<i64> {
        self.with(|c| {
            let tx = c.transaction()?;
            tx.execute("INSERT INTO tournaments (started_at) VALUES (?1)", [now])?;
            let t = tx.last_insert_rowid();
            for e in experiments {
                insert(&tx, Some(t), now, e)?;
            }
            tx.commit()?;
            Ok(t)
        })
    }

    fn last_tournament(&self) -> anyhow::Result<Option<(i64, String)>> {
        self.with(|c| {
            c.query_row(
                "SELECT id, started_at FROM tournaments ORDER BY id DESC LIMIT 1",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
        })
    }

    fn unfinished(&self, tournament: i64) -> anyhow::Result<usize> {
        self.with(|c| {
            c.query_row(
                "SELECT COUNT(*) FROM experiments WHERE tournament = ?1 \
                 AND status IN ('queued', 'running')",
                [tournament],
                |r| r.get::<_, i64>(0),
            )
        })
        .map(|n| n as usize)
    }

    fn submit(&self, now: &str, experiment: &NewExperiment) -> anyhow::Result<i64> {
        self.with(|c| insert(c, None, now, experiment))
    }

    fn queued(&self) -> anyhow::Result<Vec<Queued>> {
        self.with(|c| {
            let mut s = c.prepare(
                "SELECT id, sender, receiver FROM experiments WHERE status = 'queued' ORDER BY id",
            )?;
            let rows = s.query_map([], |r| {
                Ok(Queued {
                    id: r.get(0)?,
                    nodes: [r.get(1)?, r.get(2)?],
                })
            })?;
            rows.collect()
        })
    }

    fn experiment(&self, id: i64) -> anyhow::Result<Option<Experiment>> {
        self.with(|c| {
            c.query_row(
                &format!("SELECT {EXPERIMENT_COLUMNS} FROM experiments WHERE id = ?1"),
                [id],
                experiment_row,
            )
            .optional()
        })
    }

    fn list(&self, f: &Filter) -> anyhow::Result<Vec<Experiment>> {
        let mut sql = format!("SELECT {EXPERIMENT_COLUMNS} FROM experiments WHERE 1");
        let mut args: Vec<String> = Vec::new();
        if let Some(p) = f.path.as_deref().filter(|p| !p.is_empty()) {
            match p.split_once('→').or_else(|| p.split_once('>')) {
                Some((a, b)) => {
                    sql.push_str(" AND sender = ? AND receiver = ?");
                    args.extend([a.trim().to_owned(), b.trim().to_owned()]);
                }
                None => {
                    sql.push_str(" AND (sender = ? OR receiver = ?)");
                    args.extend([p.to_owned(), p.to_owned()]);
                }
            }
        }
        if let Some(s) = f.scheme.as_deref().filter(|s| !s.is_empty()) {
            sql.push_str(" AND (' ' || schemes || ' ') LIKE ?");
            args.push(format!("% {s} %"));
        }
        if let Some(t) = f.since.as_deref().filter(|s| !s.is_empty()) {
            sql.push_str(" AND queued_at >= ?");
            args.push(t.to_owned());
        }
        if let Some(t) = f.until.as_deref().filter(|s| !s.is_empty()) {
            sql.push_str(" AND queued_at < ?");
            args.push(t.to_owned());
        }
        if let Some(s) = f.status {
            sql.push_str(" AND status = ?");
            args.push(s.as_str().to_owned());
        }
        sql.push_str(" ORDER BY id DESC");
        self.with(|c| {
            let mut s = c.prepare(&sql)?;
            let rows = s.query_map(rusqlite::params_from_iter(args.iter()), experiment_row)?;
            rows.collect()
        })
    }

    fn set_running(&self, id: i64, result_dir: &str, now: &str) -> anyhow::Result<()> {
        let n = self.with(|c| {
            c.execute(
                "UPDATE experiments SET status = 'running', attempts = attempts + 1, \
                 started_at = ?2, result_dir = ?3 WHERE id = ?1 AND status = 'queued'",
                params![id, now, result_dir],
            )
        })?;
        if n != 1 {
            bail!("experiment {id} is not queued");
        }
        Ok(())
    }

    fn run_started(&self, id: i64, scheme: &str, run: u32, name: &str) -> anyhow::Result<()> {
        self.with(|c| {
            c.execute(
                "INSERT INTO runs (experiment, scheme, run, name, status) \
                 VALUES (?1, ?2, ?3, ?4, 'running')",
                params![id, scheme, run, name],
            )
        })
        .with_context(|| format!("experiment {id}: {scheme} run {run} was already recorded"))?;
        Ok(())
    }

    fn run_finished(
        &self,
        id: i64,
        scheme: &str,
        run: u32,
        outcome: Result<(), &str>,
    ) -> anyhow::Result<()> {
        let (status, reason) = match outcome {
            Ok(()) => ("ok", None),
            Err(r) => ("failed", Some(r)),
        };
        self.with(|c| {
            c.execute(
                "UPDATE runs SET status = ?4, reason = ?5 \
                 WHERE experiment = ?1 AND scheme = ?2 AND run = ?3",
                params![id, scheme, run, status, reason],
            )
        })?;
        Ok(())
    }

    fn runs(&self, id: i64) -> anyhow::Result<Vec<Run>> {
        self.with(|c| {
            let mut s = c.prepare(
                "SELECT scheme, run, name, status, reason, tput_mbps, delay_ms, loss FROM runs \
                 WHERE experiment = ?1 ORDER BY scheme, run",
            )?;
            let rows = s.query_map([id], |r| {
                Ok(Run {
                    scheme: r.get(0)?,
                    run: r.get(1)?,
                    name: r.get(2)?,
                    status: r.get(3)?,
                    reason: r.get(4)?,
                    tput_mbps: r.get(5)?,
                    delay_ms: r.get(6)?,
                    loss: r.get(7)?,
                })
            })?;
            rows.collect()
        })
    }

    fn finish(
        &self,
        id: i64,
        status: Status,
        error: Option<&str>,
        runs: &[RunMetrics],
        stats: &[SchemeStats],
        now: &str,
    ) -> anyhow::Result<()> {
        self.with(|c| {
            let tx = c.transaction()?;
            tx.execute(
                "UPDATE experiments SET status = ?2, error = ?3, finished_at = ?4 WHERE id = ?1",
                params![id, status.as_str(), error, now],
            )?;
            for m in runs {
                tx.execute(
                    "UPDATE runs SET tput_mbps = ?4, delay_ms = ?5, loss = ?6 \
                     WHERE experiment = ?1 AND scheme = ?2 AND run = ?3",
                    params![id, m.scheme, m.run, m.tput_mbps, m.delay_ms, m.loss],
                )?;
            }
            tx.execute("DELETE FROM scheme_stats WHERE experiment = ?1", [id])?;
            for s in stats {
                tx.execute(
                    "INSERT INTO scheme_stats (experiment, scheme, runs, tput_mbps, delay_ms, \
                     loss) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                    params![id, s.scheme, s.runs, s.tput_mbps, s.delay_ms, s.loss],
                )?;
            }
            tx.commit()
        })
    }

    fn scheme_stats(&self, id: i64) -> anyhow::Result<Vec<SchemeStats>> {
        self.with(|c| {
            let mut s = c.prepare(
                "SELECT scheme, runs, tput_mbps, delay_ms, loss FROM scheme_stats \
                 WHERE experiment = ?1 ORDER BY scheme",
            )?;
            let rows = s.query_map([id], stats_row)?;
            rows.collect()
        })
    }

    fn recover(&self) -> anyhow::Result<Vec<Interrupted>> {
        self.with(|c| {
            let tx = c.transaction()?;
            let interrupted = {
                let mut s = tx.prepare(
                    "SELECT r.experiment, r.name, e.sender, e.receiver FROM runs r \
                     JOIN experiments e ON e.id = r.experiment WHERE r.status = 'running' \
                     ORDER BY r.experiment, r.name",
                )?;
                let rows = s.query_map([], |r| {
                    Ok(Interrupted {
                        experiment: r.get(0)?,
                        name: r.get(1)?,
                        nodes: [r.get(2)?, r.get(3)?],
                    })
                })?;
                rows.collect::<rusqlite::Result<Vec<_>>>()?
            };
            tx.execute("DELETE FROM runs WHERE status = 'running'", [])?;
            tx.execute(
                "UPDATE experiments SET status = 'queued' WHERE status = 'running'",
                [],
            )?;
            tx.commit()?;
            Ok(interrupted)
        })
    }

    fn history(
        &self,
        sender: &str,
        receiver: &str,
        scheme: &str,
    ) -> anyhow::Result<Vec<HistoryPoint>> {
        self.with(|c| {
            let mut s = c.prepare(
                "SELECT s.scheme, s.runs, s.tput_mbps, s.delay_ms, s.loss, e.id, e.finished_at, \
                 e.flows FROM scheme_stats s JOIN experiments e ON e.id = s.experiment \
                 WHERE e.sender = ?1 AND e.receiver = ?2 AND s.scheme = ?3 \
                 AND e.status = 'done' ORDER BY e.finished_at, e.id",
            )?;
            let rows = s.query_map(params![sender, receiver, scheme], |r| {
                Ok(HistoryPoint {
                    stats: stats_row(r)?,
                    experiment: r.get(5)?,
                    at: r.get::<_, Option<String>>(6)?.unwrap_or_default(),
                    flows: r.get(7)?,
                })
            })?;
            rows.collect()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testbed::config::LinkType;

    fn new(sender: &str, receiver: &str, flows: u16) -> NewExperiment {
        NewExperiment {
            spec: ExperimentSpec {
                sender: sender.into(),
                receiver: receiver.into(),
                link: LinkType::Wired,
                flows,
                run_times: 2,
            },
            schemes: vec!["cubic".into(), "bbr".into()],
            runtime_s: 30.0,
            interval_s: 10.0,
        }
    }

    #[test]
    fn experiments_keep_their_numbers_and_filter_by_path_scheme_and_date() {
        let dir = tempfile::tempdir().unwrap();
        let a = SqliteArchive::open(&dir.path().join("a.sqlite")).unwrap();
        assert_eq!(a.last_tournament().unwrap(), None);
        let t = a
            .start_tournament(
                "2026-11-24T08:00:00.000Z",
                &[new("x", "y", 1), new("y", "x", 1), new("y", "z-1", 3)],
            )
            .unwrap();
        assert_eq!(
            a.last_tournament().unwrap(),
            Some((t, "2026-11-24T08:00:00.000Z".into()))
        );
        let mut by_hand = new("x", "z-1", 1);
        by_hand.schemes = vec!["copa".into()];
        assert_eq!(a.submit("2026-11-25T09:00:00.000Z", &by_hand).unwrap(), 4);
        let ids = |f: Filter| a.list(&f).unwrap().iter().map(|e| e.id).collect::<Vec<_>>();
        assert_eq!(ids(Filter::default()), vec![4, 3, 2, 1]);
        let path = |p: &str| Filter {
            path: Some(p.into()),
            ..Filter::default()
        };
        assert_eq!(ids(path("y")), vec![3, 2, 1]);
        assert_eq!(ids(path("y→x")), vec![2]);
        assert_eq!(ids(path("x>z-1")), vec![4]);
        assert_eq!(ids(path("z-1")), vec![4, 3]);
        let scheme = |s: &str| Filter {
            scheme: Some(s.into()),
            ..Filter::default()
        };
        assert_eq!(ids(scheme("bbr")), vec![3, 2, 1]);
        assert_eq!(ids(scheme("copa")), vec![4]);
        assert!(ids(scheme("cub")).is_empty());
        let day = Filter {
            since: Some("2026-11-25".into()),
            until: Some("2026-11-26".into()),
            ..Filter::default()
        };
        assert_eq!(ids(day), vec![4]);
        let e = a.experiment(3).unwrap().unwrap();
        assert_eq!(
            (
                e.tournament,
                &e.sender[..],
                &e.receiver[..],
                e.flows,
                e.status
            ),
            (Some(t), "y", "z-1", 3, Status::Queued)
        );
        assert_eq!(e.schemes, vec!["cubic", "bbr"]);
        assert_eq!(a.unfinished(t).unwrap(), 3);
        assert!(a.experiment(5).unwrap().is_none());
    }

    #[test]
    fn a_restart_requeues_interrupted_experiments_and_keeps_finished_runs_once() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("a.sqlite");
        {
            let a = SqliteArchive::open(&db).unwrap();
            a.start_tournament("2026-11-24T08:00:00.000Z", &[new("x", "y", 1)])
                .unwrap();
            a.set_running(1, "/r/1", "2026-11-24T08:00:01.000Z")
                .unwrap();
            assert!(a.set_running(1, "/r/1", "now").is_err(), "already running");
            assert_eq!(a.queued().unwrap(), vec![]);
            a.run_started(1, "cubic", 1, "e1-0").unwrap();
            a.run_finished(1, "cubic", 1, Ok(())).unwrap();
            a.run_started(1, "bbr", 1, "e1-1").unwrap();
            a.run_finished(1, "bbr", 1, Err("sender died")).unwrap();
            a.run_started(1, "cubic", 2, "e1-2").unwrap();
            // The daemon is killed here: the archive is simply dropped.
        }
        let a = SqliteArchive::open(&db).unwrap();
        assert_eq!(
            a.recover().unwrap(),
            vec![Interrupted {
                experiment: 1,
                name: "e1-2".into(),
                nodes: ["x".into(), "y".into()],
            }]
        );
        assert!(
            a.recover().unwrap().is_empty(),
            "recovering twice changes nothing"
        );
        let e = a.experiment(1).unwrap().unwrap();
        assert_eq!((e.status, e.attempts), (Status::Queued, 1));
        let runs: Vec<_> = a
            .runs(1)
            .unwrap()
            .into_iter()
            .map(|r| (r.scheme, r.run, r.status, r.reason))
            .collect();
        assert_eq!(
            runs,
            vec![
                ("bbr".into(), 1, "failed".into(), Some("sender died".into())),
                ("cubic".into(), 1, "ok".into(), None),
            ]
        );
        assert_eq!(a.queued().unwrap()[0].id, 1);
        a.set_running(1, "/r/1", "2026-11-24T09:00:00.000Z")
            .unwrap();
        assert_eq!(a.experiment(1).unwrap().unwrap().attempts, 2);
        let again = a.run_started(1, "cubic", 1, "e1-9").unwrap_err();
        assert!(
            format!("{again:#}").contains("already recorded"),
            "{again:#}"
        );
    }

    #[test]
    fn finished_experiments_carry_metrics_and_make_a_history() {
        let dir = tempfile::tempdir().unwrap();
        let a = SqliteArchive::open(&dir.path().join("a.sqlite")).unwrap();
        a.start_tournament(
            "t0",
            &[new("x", "y", 1), new("x", "y", 1), new("y", "x", 1)],
        )
        .unwrap();
        for (id, tput) in [(1, 90.0), (2, 80.0)] {
            a.set_running(id, "/r", "t1").unwrap();
            a.run_started(id, "cubic", 1, &format!("e{id}")).unwrap();
            a.run_finished(id, "cubic", 1, Ok(())).unwrap();
            let m = RunMetrics {
                scheme: "cubic".into(),
                run: 1,
                tput_mbps: tput,
                delay_ms: 50.0,
                loss: 0.01,
            };
            let s = SchemeStats {
                scheme: "cubic".into(),
                runs: 1,
                tput_mbps: tput,
                delay_ms: 50.0,
                loss: 0.01,
            };
            a.finish(id, Status::Done, None, &[m], &[s], &format!("t{}", id + 1))
                .unwrap();
        }
        a.set_running(3, "/r", "t1").unwrap();
        a.finish(
            3,
            Status::Failed,
            Some("node y unreachable"),
            &[],
            &[],
            "t9",
        )
        .unwrap();
        assert_eq!(a.runs(1).unwrap()[0].tput_mbps, Some(90.0));
        assert_eq!(a.scheme_stats(2).unwrap()[0].tput_mbps, 80.0);
        let h: Vec<_> = a
            .history("x", "y", "cubic")
            .unwrap()
            .into_iter()
            .map(|p| (p.experiment, p.at, p.stats.tput_mbps))
            .collect();
        assert_eq!(h, vec![(1, "t2".into(), 90.0), (2, "t3".into(), 80.0)]);
        assert!(a.history("y", "x", "cubic").unwrap().is_empty());
        let f = a.experiment(3).unwrap().unwrap();
        assert_eq!(
            (f.status, f.error.as_deref()),
            (Status::Failed, Some("node y unreachable"))
        );
        assert_eq!(a.unfinished(1).unwrap(), 0);
    }
}
