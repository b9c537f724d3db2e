//! Mixed experiments: flows of different schemes on one bottleneck (issue 27).
//!
//! A run of Pantheon carries `--flows N` flows of one scheme. A *mix* lists the flows one by
//! one, each with its own scheme, start and stop time and extra one-way delay, so that the
//! questions researchers ask first of a new scheme — is it fair to itself, is it friendly to
//! Cubic, does a scavenger yield — can be asked. Two ways to write one:
//!
//! - the short form of `--mix`, parsed by [`parse_short`]: flows separated by spaces, each
//!   `SCHEME[@START[-STOP]][+DELAY][(WORKLOAD)]` — `"cubic bbr@10 ledbat@20-40 cubic+60"` is
//!   cubic from the start, bbr from 10 s, ledbat from 20 s to 40 s, and a second cubic with
//!   60 ms of extra one-way delay. START and STOP are seconds after the run starts (Pantheon's
//!   `Start at:`), DELAY milliseconds; WORKLOAD what the flow sends (`cubic(page) ledbat` is
//!   page loads over cubic beside a bulk ledbat flow; `workload::spec`, `docs/workloads.md`),
//!   full throttle without it;
//! - Pantheon's YAML config file (`test.py -c`), read by [`Config::from_yaml`]: `test-name`,
//!   `flows: [{scheme: cubic}, {scheme: ledbat, start: 20}]` with the same optional per-flow
//!   keys `start`, `stop`, `delay`, `workload` (`workload: bytes=1000000`), and any other key as the default of the flag of that name
//!   (`runtime: 60`, `run-times: 3`, `uplink-trace: …`), the command line overriding it.
//!
//! Both are checked in full before anything runs: errors name the token or the key. A flow's
//! extra delay is added by the emulator to that flow's packets only, in each direction before
//! the shared bottleneck (`emucal::stage::FlowDelayStage`), so its RTT grows by twice DELAY.

use std::collections::BTreeMap;

pub use analyzer::results::{FlowSpec, Mix};

/// A `--mix` token or config key that cannot be read; nothing has run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{at}: {reason}")]
pub struct MixError {
    /// Where: the token (`` `bbr@x` ``) or the key (`flows[2].start`).
    pub at: String,
    /// What is wrong with it.
    pub reason: String,
}

/// Parses the short form `SCHEME[@START[-STOP]][+DELAY] …` (module docs). The name is the
/// schemes joined with `-` (`cubic-bbr-ledbat`). Errors name the token, prefixed `--mix`.
pub fn parse_short(text: &str) -> Result<Mix, MixError> {
    let flows = text
        .split_whitespace()
        .map(parse_token)
        .collect::<Result<Vec<_>, _>>()?;
    if flows.is_empty() {
        return Err(MixError {
            at: "--mix".into(),
            reason: "no flows: give e.g. --mix \"cubic bbr@10\"".into(),
        });
    }
    let name = flows
        .iter()
        .map(|f| f.scheme.as_str())
        .collect::<Vec<_>>()
        .join("-");
    Ok(Mix { name, flows })
}

/// Checks the flows against the run's length: every start before `runtime_s`, every stop at
/// most `runtime_s`. Errors name the flow (`flow 3 (ledbat@20-90)`).
pub fn check_runtime(mix: &Mix, runtime_s: f64) -> Result<(), MixError> {
    for (i, f) in mix.flows.iter().enumerate() {
        let at = || format!("flow {} ({})", i + 1, f.short());
        if f.start >= runtime_s {
            return Err(MixError {
                at: at(),
                reason: format!("starts at or after the end of the run ({runtime_s} s)"),
            });
        }
        if f.stop.is_some_and(|s| s > runtime_s) {
            return Err(MixError {
                at: at(),
                reason: format!("stops after the end of the run ({runtime_s} s)"),
            });
        }
    }
    Ok(())
}

/// Checks the numbers: finite, not negative, the stop after the start. `what` names the
/// flow in the error (a token of `--mix`, or `flows[2]` of a config file).
fn check_flow(flow: &FlowSpec, what: &str) -> Result<(), MixError> {
    let bad = |reason: String| MixError {
        at: what.to_owned(),
        reason,
    };
    if flow.scheme.is_empty() {
        return Err(bad("no scheme name".into()));
    }
    // At most a day each: the run's own bound (s) and the emulator's (ms).
    let day_s = crate::bounds::MAX_RUNTIME.as_secs_f64();
    for (name, v, max, unit) in [
        ("start", flow.start, day_s, "s"),
        ("delay", flow.delay, day_s * 1000.0, "ms"),
    ] {
        if !(v.is_finite() && (0.0..=max).contains(&v)) {
            return Err(bad(format!(
                "{name} must be a number from 0 to {max} {unit} (a day), got {v}"
            )));
        }
    }
    if let Some(stop) = flow.stop {
        if !stop.is_finite() || stop <= flow.start {
            return Err(bad(format!(
                "stop ({stop} s) must come after start ({} s)",
                flow.start
            )));
        }
    }
    if let Some(w) = &flow.workload {
        workload::Workload::parse(w).map_err(|e| bad(e.to_string()))?;
    }
    Ok(())
}

/// One token of the short form.
fn parse_token(token: &str) -> Result<FlowSpec, MixError> {
    let at = format!("--mix: `{token}`");
    let bad = |reason: &str| MixError {
        at: at.clone(),
        reason: reason.to_owned(),
    };
    let number = |s: &str, what: &str| -> Result<f64, MixError> {
        s.parse::<f64>()
            .ok()
            .filter(|v| v.is_finite() && *v >= 0.0)
            .ok_or_else(|| bad(&format!("{what} must be a non-negative number, got `{s}`")))
    };
    let (token_head, workload) = match token.split_once('(') {
        Some((h, w)) => match w.strip_suffix(')') {
            Some(w) if !w.is_empty() => (h, Some(w.to_owned())),
            _ => {
                return Err(bad(
                    "a workload goes in parentheses at the end: `cubic(bytes=1M)`",
                ))
            }
        },
        None => (token, None),
    };
    let (head, delay) = match token_head.split_once('+') {
        Some((h, d)) => (h, number(d, "DELAY (ms, after `+`)")?),
        None => (token_head, 0.0),
    };
    let (scheme, start, stop) = match head.split_once('@') {
        Some((s, times)) => match times.split_once('-') {
            Some((a, b)) => (
                s,
                number(a, "START (s, after `@`)")?,
                Some(number(b, "STOP (s, after `-`)")?),
            ),
            None => (s, number(times, "START (s, after `@`)")?, None),
        },
        None => (head, 0.0, None),
    };
    let valid_name = !scheme.is_empty()
        && scheme
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.');
    if !valid_name {
        return Err(bad(
            "expected SCHEME[@START[-STOP]][+DELAY][(WORKLOAD)], e.g. `ledbat@20-40`, `cubic+60` \
             or `cubic(page)`",
        ));
    }
    let flow = FlowSpec {
        scheme: scheme.to_owned(),
        start,
        stop,
        delay,
        workload,
    };
    check_flow(&flow, &at)?;
    Ok(flow)
}

/// Pantheon's YAML config file (`test.py -c`): the mix, and the other keys as defaults of the
/// flags of the same name.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// `test-name` and `flows`.
    pub mix: Mix,
    /// Every other key, with `_` written `-` (`run_times` → `run-times`), and its value as the
    /// command line would give it (`60`, `"mm-delay 20"`, `true`).
    pub defaults: BTreeMap<String, String>,
}

/// The largest config file read, bytes (1 MiB; Pantheon's are a few hundred bytes).
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;

impl Config {
    /// Reads and parses config file `path` ([`Config::from_yaml`]), if it is a regular file of
    /// at most [`MAX_CONFIG_BYTES`] (a FIFO or a device is refused by type, never read).
    /// Errors name the file (and the key, or the YAML error's line).
    pub fn load(path: &std::path::Path) -> anyhow::Result<Config> {
        let text = analyzer::files::read_regular_text(path, "a config file", MAX_CONFIG_BYTES)?;
        Ok(Config::from_yaml(&text, &path.display().to_string())?)
    }

    /// Reads a config file's text. `file` names it in errors. Requires `test-name` (a string
    /// that can name files: [`analyzer::files::check_name`]) and `flows` (a non-empty list of `{scheme, start?, stop?, delay?}`); other values must be
    /// scalars. Errors name the file and the key (`flows[2].start`), or the YAML error's line.
    pub fn from_yaml(text: &str, file: &str) -> Result<Config, MixError> {
        let at = |key: &str| format!("{file}: {key}");
        let bad = |key: &str, reason: String| MixError {
            at: at(key),
            reason,
        };
        let value: serde_yaml_ng::Value =
            serde_yaml_ng::from_str(text).map_err(|e| bad("YAML", e.to_string()))?;
        let serde_yaml_ng::Value::Mapping(map) = value else {
            return Err(bad("top level", "expected a mapping of keys".into()));
        };
        let mut name = None;
        let mut flows = None;
        let mut defaults = BTreeMap::new();
        for (k, v) in map {
            let Some(key) = k.as_str().map(|k| k.replace('_', "-")) else {
                return Err(bad(&format!("{k:?}"), "keys must be strings".into()));
            };
            match key.as_str() {
                "test-name" => match v.as_str() {
                    Some(s) if !s.trim().is_empty() => {
                        let s = s.trim();
                        analyzer::files::check_name(s).map_err(|e| {
                            bad(
                                "test-name",
                                format!("{e} (it is the prefix of the run's files)"),
                            )
                        })?;
                        name = Some(s.to_owned());
                    }
                    _ => return Err(bad("test-name", "must be a non-empty string".into())),
                },
                "flows" => flows = Some(read_flows(v, &|k, r| bad(k, r))?),
                _ => {
                    let text = match &v {
                        serde_yaml_ng::Value::String(s) => s.clone(),
                        serde_yaml_ng::Value::Number(n) => n.to_string(),
                        serde_yaml_ng::Value::Bool(b) => b.to_string(),
                        _ => return Err(bad(&key, "must be a string, number or boolean".into())),
                    };
                    defaults.insert(key, text);
                }
            }
        }
        let name = name.ok_or_else(|| bad("test-name", "missing (Pantheon requires it)".into()))?;
        let flows = flows.ok_or_else(|| bad("flows", "missing: a list of {scheme: …}".into()))?;
        Ok(Config {
            mix: Mix { name, flows },
            defaults,
        })
    }
}

/// The `flows` list of a config file.
fn read_flows(
    v: serde_yaml_ng::Value,
    bad: &dyn Fn(&str, String) -> MixError,
) -> Result<Vec<FlowSpec>, MixError> {
    let serde_yaml_ng::Value::Sequence(items) = v else {
        return Err(bad("flows", "must be a list of {scheme: …}".into()));
    };
    if items.is_empty() {
        return Err(bad("flows", "is empty".into()));
    }
    items
        .into_iter()
        .enumerate()
        .map(|(i, item)| {
            let key = format!("flows[{}]", i + 1);
            let flow: FlowSpec = serde_yaml_ng::from_value(item).map_err(|e| {
                bad(
                    &key,
                    format!("{e} (keys: scheme, start, stop, delay, workload)"),
                )
            })?;
            check_flow(&flow, &key).map_err(|e| bad(&key, e.reason))?;
            Ok(flow)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flow(scheme: &str, start: f64, stop: Option<f64>, delay: f64) -> FlowSpec {
        FlowSpec {
            scheme: scheme.into(),
            start,
            stop,
            delay,
            workload: None,
        }
    }

    #[test]
    fn a_flow_carries_its_workload_in_parentheses_or_under_its_key() {
        let m = parse_short("cubic@5(page,objects=20,every=10) ledbat+10(bytes=1M)").unwrap();
        assert_eq!(
            m.flows[0].workload.as_deref(),
            Some("page,objects=20,every=10")
        );
        assert_eq!(m.flows[0].start, 5.0);
        assert_eq!(m.flows[1].workload.as_deref(), Some("bytes=1M"));
        assert_eq!(m.flows[1].delay, 10.0);
        assert_eq!(m.name, "cubic-ledbat");
        let back: Vec<String> = m.flows.iter().map(FlowSpec::short).collect();
        assert_eq!(parse_short(&back.join(" ")).unwrap(), m);
        // Bad workloads are refused naming the token or the key, and the workload's key.
        let e = parse_short("cubic(poisson,load=1.2)").unwrap_err();
        assert!(e.at.contains("`cubic(poisson,load=1.2)`"), "{e}");
        assert!(
            e.reason.contains(": load: must be above 0 and below 1"),
            "{e}"
        );
        assert!(parse_short("cubic(page")
            .unwrap_err()
            .reason
            .contains("parentheses"));
        let text = "test-name: web\nflows:\n  - {scheme: cubic, workload: \"bytes=-3\"}\n";
        let e = Config::from_yaml(text, "w.yml").unwrap_err();
        assert_eq!(e.at, "w.yml: flows[1]");
        assert!(e.reason.contains("bytes: "), "{e}");
        let text = "test-name: web\nflows:\n  - {scheme: cubic, workload: bytes=1000000}\n";
        let c = Config::from_yaml(text, "w.yml").unwrap();
        assert_eq!(c.mix.flows[0].workload.as_deref(), Some("bytes=1000000"));
    }

    #[test]
    fn the_short_form() {
        let m = parse_short("  cubic bbr@10 ledbat@20-40\tcubic@2.5+60 quic_bbr3+5.5 ").unwrap();
        assert_eq!(m.name, "cubic-bbr-ledbat-cubic-quic_bbr3");
        assert_eq!(
            m.flows,
            [
                flow("cubic", 0.0, None, 0.0),
                flow("bbr", 10.0, None, 0.0),
                flow("ledbat", 20.0, Some(40.0), 0.0),
                flow("cubic", 2.5, None, 60.0),
                flow("quic_bbr3", 0.0, None, 5.5),
            ]
        );
        assert_eq!(m.schemes(), ["cubic", "bbr", "ledbat", "quic_bbr3"]);
        // Written back in the same form.
        let back: Vec<String> = m.flows.iter().map(FlowSpec::short).collect();
        assert_eq!(
            back,
            [
                "cubic",
                "bbr@10",
                "ledbat@20-40",
                "cubic@2.5+60",
                "quic_bbr3+5.5"
            ]
        );
        assert_eq!(parse_short(&back.join(" ")).unwrap(), m);
    }

    #[test]
    fn bad_tokens_are_named() {
        for (text, token, says) in [
            ("cubic bbr@x", "`bbr@x`", "START"),
            ("cubic bbr@10-y", "`bbr@10-y`", "STOP"),
            ("cubic+ms", "`cubic+ms`", "DELAY"),
            ("ledbat@40-20", "`ledbat@40-20`", "must come after start"),
            ("ledbat@5-5", "`ledbat@5-5`", "must come after start"),
            ("@10", "`@10`", "expected SCHEME"),
            ("cu/bic", "`cu/bic`", "expected SCHEME"),
            ("bbr@-3", "`bbr@-3`", "START"),
            ("bbr+-3", "`bbr+-3`", "DELAY"),
            ("bbr@inf", "`bbr@inf`", "START"),
        ] {
            let e = parse_short(text).unwrap_err();
            assert!(e.at.contains(token), "{text}: {e}");
            assert!(e.to_string().contains(says), "{text}: {e}");
        }
        assert!(parse_short("  ").unwrap_err().reason.contains("no flows"));
    }

    #[test]
    fn flows_must_fit_in_the_run() {
        let m = parse_short("cubic ledbat@20-40").unwrap();
        assert!(check_runtime(&m, 40.0).is_ok());
        let e = check_runtime(&m, 30.0).unwrap_err();
        assert_eq!(e.at, "flow 2 (ledbat@20-40)");
        assert!(e.reason.contains("stops after the end"));
        let e = check_runtime(&m, 20.0).unwrap_err();
        assert!(e.reason.contains("starts at or after the end"), "{e}");
    }

    #[test]
    fn pantheons_config_file() {
        let text = "\
test-name: cubic-vs-ledbat
runtime: 60
run_times: 3
prepend-mm-cmds: mm-delay 20
random-order: true
flows:
  - scheme: cubic
  - {scheme: ledbat, start: 20, stop: 40}
  - scheme: cubic
    delay: 60
";
        let c = Config::from_yaml(text, "exp.yml").unwrap();
        assert_eq!(c.mix.name, "cubic-vs-ledbat");
        assert_eq!(
            c.mix.flows,
            [
                flow("cubic", 0.0, None, 0.0),
                flow("ledbat", 20.0, Some(40.0), 0.0),
                flow("cubic", 0.0, None, 60.0),
            ]
        );
        let d: Vec<(&str, &str)> = c
            .defaults
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        assert_eq!(
            d,
            [
                ("prepend-mm-cmds", "mm-delay 20"),
                ("random-order", "true"),
                ("run-times", "3"),
                ("runtime", "60"),
            ]
        );
    }

    #[test]
    fn bad_config_files_name_the_key() {
        for (text, key, says) in [
            ("flows: [{scheme: cubic}]", "exp.yml: test-name", "missing"),
            ("test-name: x", "exp.yml: flows", "missing"),
            ("test-name: x\nflows: []", "exp.yml: flows", "empty"),
            ("test-name: x\nflows: cubic", "exp.yml: flows", "list"),
            (
                "test-name: [a]\nflows: [{scheme: a}]",
                "exp.yml: test-name",
                "string",
            ),
            (
                "test-name: x\nflows: [{scheme: a}, {scheme: b, start: soon}]",
                "exp.yml: flows[2]",
                "invalid type",
            ),
            (
                "test-name: x\nflows: [{scheme: a, rate: 5}]",
                "exp.yml: flows[1]",
                "unknown field `rate`",
            ),
            (
                "test-name: x\nflows: [{scheme: a, start: 9, stop: 3}]",
                "exp.yml: flows[1]",
                "after start",
            ),
            (
                "test-name: x\nflows: [{start: 3}]",
                "exp.yml: flows[1]",
                "scheme",
            ),
            (
                "test-name: x\nflows: [{scheme: a}]\nruntime: [1, 2]",
                "exp.yml: runtime",
                "string, number",
            ),
            ("test-name: x\n  flows: : [", "exp.yml: YAML", "line"),
            (
                "test-name: ../good/cubic\nflows: [{scheme: a}]",
                "exp.yml: test-name",
                "path separator",
            ),
            (
                "test-name: ..\nflows: [{scheme: a}]",
                "exp.yml: test-name",
                "starts with `.`",
            ),
            ("- a\n- b", "exp.yml: top level", "mapping"),
        ] {
            let e = Config::from_yaml(text, "exp.yml").unwrap_err();
            assert_eq!(e.at, key, "{text:?}: {e}");
            assert!(e.reason.contains(says), "{text:?}: {e}");
        }
    }
}
