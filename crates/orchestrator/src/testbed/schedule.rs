//! What runs when: Pantheon's round-robin tournament over node pairs, and the choice of which
//! queued experiments may start now. Pure functions (no clock, no I/O): the daemon gives them
//! the time and what is busy.
//!
//! A *tournament* covers every pair of nodes once, in rounds of disjoint pairs (the circle
//! method: with `n` nodes, `n − 1` rounds, or `n` with a bye when `n` is odd), so that a whole
//! round can run at once. Each pair gets one experiment per direction (if both are asked) and
//! per flow count of the matrix, each experiment every scheme `runs` times.

use std::collections::BTreeSet;

use super::config::{LinkType, TestbedConfig};

/// One experiment a tournament asks for: a results directory of its own, one report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExperimentSpec {
    /// The node whose scheme sender runs (data flows from it), by name.
    pub sender: String,
    /// The node whose scheme receiver runs.
    pub receiver: String,
    /// Cellular if either node is.
    pub link: LinkType,
    /// Flows per run.
    pub flows: u16,
    /// Runs per scheme.
    pub run_times: u32,
}

/// The rounds of a round-robin tournament of `n` players: each round a list of disjoint pairs
/// `(i, j)`, `i < j`, every pair in exactly one round. Empty for `n < 2`.
pub fn round_robin(n: usize) -> Vec<Vec<(usize, usize)>> {
    if n < 2 {
        return Vec::new();
    }
    // Even number of seats; seat `n` (if any) is the bye. Seat 0 stays, the others rotate.
    let m = n + n % 2;
    (0..m - 1)
        .map(|r| {
            let seat = |i: usize| if i == 0 { 0 } else { (i - 1 + r) % (m - 1) + 1 };
            (0..m / 2)
                .map(|i| (seat(i), seat(m - 1 - i)))
                .filter(|&(a, b)| a < n && b < n)
                .map(|(a, b)| (a.min(b), a.max(b)))
                .collect()
        })
        .collect()
}

/// One tournament of `config`: its experiments in order (round by round; within a pair, the
/// lower-numbered node sends first, then the other direction, each flow count in the matrix's
/// order).
pub fn tournament(config: &TestbedConfig) -> Vec<ExperimentSpec> {
    let m = &config.matrix;
    let mut out = Vec::new();
    for round in round_robin(config.nodes.len()) {
        for (a, b) in round {
            let (na, nb) = (&config.nodes[a], &config.nodes[b]);
            let link = na.link.max(nb.link);
            let directions: &[(&str, &str)] = if m.both_directions {
                &[(&na.name, &nb.name), (&nb.name, &na.name)]
            } else {
                &[(&na.name, &nb.name)]
            };
            for &(sender, receiver) in directions {
                for &flows in &m.flows {
                    out.push(ExperimentSpec {
                        sender: sender.to_owned(),
                        receiver: receiver.to_owned(),
                        link,
                        flows,
                        run_times: m.runs.of(link),
                    });
                }
            }
        }
    }
    out
}

/// A queued experiment, as the scheduler sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Queued {
    /// Its number.
    pub id: i64,
    /// Its two nodes.
    pub nodes: [String; 2],
}

/// Which of the `queued` experiments (oldest first) start now: in queue order, each whose two
/// nodes are not `busy` and not taken by one picked before it. A node is never in two
/// experiments at once; an experiment waiting for a busy node does not hold back later ones
/// on other nodes.
pub fn pick(queued: &[Queued], busy: &BTreeSet<String>) -> Vec<i64> {
    let mut taken = busy.clone();
    let mut out = Vec::new();
    for q in queued {
        if q.nodes.iter().all(|n| !taken.contains(n)) {
            taken.extend(q.nodes.iter().cloned());
            out.push(q.id);
        }
    }
    out
}

/// Whether a new tournament is due at `now_s` (seconds on any fixed clock): always when none
/// was started (`last_start_s` is `None`); otherwise once `every_s` have passed since the last
/// one started *and* none of its experiments is still queued or running (`unfinished`), so a
/// slow tournament delays the next instead of piling experiments up.
pub fn tournament_due(
    last_start_s: Option<f64>,
    every_s: f64,
    now_s: f64,
    unfinished: usize,
) -> bool {
    match last_start_s {
        None => true,
        Some(t) => unfinished == 0 && now_s - t >= every_s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_robin_pairs_everyone_once_in_disjoint_rounds() {
        for n in 2..=9 {
            let rounds = round_robin(n);
            assert_eq!(rounds.len(), n - 1 + n % 2, "n = {n}");
            let mut seen = BTreeSet::new();
            for round in &rounds {
                let mut in_round = BTreeSet::new();
                for &(a, b) in round {
                    assert!(a < b && b < n);
                    assert!(
                        in_round.insert(a) && in_round.insert(b),
                        "n = {n}: {round:?}"
                    );
                    assert!(seen.insert((a, b)), "n = {n}: ({a}, {b}) twice");
                }
                assert_eq!(round.len(), n / 2, "n = {n}: a round leaves a pair idle");
            }
            assert_eq!(seen.len(), n * (n - 1) / 2);
        }
        assert!(round_robin(1).is_empty());
    }

    #[test]
    fn a_tournament_runs_each_pair_both_ways_for_each_flow_count() {
        let c = TestbedConfig::parse(
            r#"
credentials = "c"
[[node]]
name = "a"
agent = "h1"
[[node]]
name = "b"
agent = "h2"
[[node]]
name = "c"
agent = "h3"
link = "cellular"
[matrix]
schemes = ["cubic"]
runs = { wired = 4, cellular = 2 }
[schedule]
every = 60
"#,
        )
        .unwrap();
        let t = tournament(&c);
        // 3 pairs × 2 directions × flows [1, 3].
        assert_eq!(t.len(), 12);
        let ab: Vec<_> = t
            .iter()
            .filter(|e| [&e.sender[..], &e.receiver[..]].contains(&"a"))
            .filter(|e| [&e.sender[..], &e.receiver[..]].contains(&"b"))
            .map(|e| (e.sender.as_str(), e.flows, e.run_times, e.link))
            .collect();
        assert_eq!(
            ab,
            vec![
                ("a", 1, 4, LinkType::Wired),
                ("a", 3, 4, LinkType::Wired),
                ("b", 1, 4, LinkType::Wired),
                ("b", 3, 4, LinkType::Wired)
            ]
        );
        assert!(t
            .iter()
            .filter(|e| e.sender == "c" || e.receiver == "c")
            .all(|e| e.link == LinkType::Cellular && e.run_times == 2));
    }

    #[test]
    fn pick_never_puts_a_node_in_two_experiments() {
        let q = |id, a: &str, b: &str| Queued {
            id,
            nodes: [a.into(), b.into()],
        };
        let queued = [
            q(1, "a", "b"),
            q(2, "b", "c"),
            q(3, "c", "d"),
            q(4, "e", "f"),
        ];
        assert_eq!(pick(&queued, &BTreeSet::new()), vec![1, 3, 4]);
        let busy: BTreeSet<String> = ["a".to_owned(), "e".to_owned()].into();
        assert_eq!(pick(&queued, &busy), vec![2]);
        assert!(pick(&[], &busy).is_empty());
    }

    #[test]
    fn a_tournament_is_due_after_the_period_once_the_last_one_finished() {
        assert!(tournament_due(None, 60.0, 0.0, 5));
        assert!(!tournament_due(Some(0.0), 60.0, 59.0, 0));
        assert!(tournament_due(Some(0.0), 60.0, 60.0, 0));
        assert!(!tournament_due(Some(0.0), 60.0, 600.0, 1));
    }
}
