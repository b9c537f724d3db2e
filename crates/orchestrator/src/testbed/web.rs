//! The daemon's web pages: the archive for people, read-only, plain HTML (no script).
//!
//! - `/` — the experiments, newest first; a form filters them by path (`a`, or `a→b`), scheme
//!   and queue date (`since`, `until`: `YYYY-MM-DD`).
//! - `/experiments/<n>` — one experiment: path, matrix entry, status, timings, the summary
//!   table (mean throughput, p95 one-way delay and loss per scheme), the summary plot, each run,
//!   links to the report (HTML and PDF) and to every file of its results directory.
//! - `/experiments/<n>/files/<name>` — a file of its results directory.
//! - `/history?sender=a&receiver=b&scheme=cubic` — the scheme's throughput and delay on that
//!   path over time (Pantheon's Finding 3), one point per experiment; `/history.svg?…` the plot.
//! - `/api/experiments` — the list as JSON (same filters).

// Handlers return their error page early as `Err(Response)`, axum's idiom; its size is moot.
#![allow(clippy::result_large_err)]

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::extract::{Path as UrlPath, Query, State};
use axum::http::{header, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::Router;

use super::archive::{Archive, Experiment, Filter, HistoryPoint, Run, SchemeStats, Status};

/// What the pages read: the archive and where history plots are drawn.
#[derive(Clone)]
pub struct WebState {
    /// The archive.
    pub archive: Arc<dyn Archive>,
    /// A directory for the history plots (made on request).
    pub scratch: PathBuf,
}

/// The pages' router.
pub fn router(state: WebState) -> Router {
    Router::new()
        .route("/", get(list))
        .route("/api/experiments", get(list_json))
        .route("/experiments/{id}", get(experiment))
        .route("/experiments/{id}/files/{name}", get(file))
        .route("/history", get(history))
        .route("/history.svg", get(history_svg))
        .with_state(state)
}

/// `s` with `& < > " '` escaped for HTML text and attribute values.
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

/// `s` percent-encoded for a URL query value.
fn url(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            b => format!("%{b:02X}"),
        })
        .collect()
}

const STYLE: &str = "body{font-family:sans-serif;margin:2em;max-width:75em}\
table{border-collapse:collapse}td,th{border:1px solid #bbb;padding:.25em .6em;text-align:left}\
th{background:#eee}td.num{text-align:right}.failed{color:#b00}.running{color:#06c}\
form input{margin-right:1em}";

fn page(title: &str, body: &str) -> Html<String> {
    Html(format!(
        "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>{t}</title>\
         <style>{STYLE}</style></head><body><p><a href=\"/\">Pantheon-rs testbed</a></p>\
         <h1>{t}</h1>{body}</body></html>",
        t = esc(title)
    ))
}

fn error(code: StatusCode, message: String) -> Response {
    (
        code,
        page(code.as_str(), &format!("<p>{}</p>", esc(&message))),
    )
        .into_response()
}

fn internal(e: anyhow::Error) -> Response {
    error(StatusCode::INTERNAL_SERVER_ERROR, format!("{e:#}"))
}

fn filter(q: &HashMap<String, String>) -> Filter {
    let get = |k: &str| {
        q.get(k)
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
    };
    Filter {
        path: get("path"),
        scheme: get("scheme"),
        since: get("since"),
        until: get("until"),
        status: None,
    }
}

async fn list(State(s): State<WebState>, Query(q): Query<HashMap<String, String>>) -> Response {
    let f = filter(&q);
    let rows = match s.archive.list(&f) {
        Ok(r) => r,
        Err(e) => return internal(e),
    };
    let v = |x: &Option<String>| esc(x.as_deref().unwrap_or(""));
    let mut b = format!(
        "<form method=\"get\" action=\"/\">Path <input name=\"path\" value=\"{}\" \
         placeholder=\"node or a→b\"> Scheme <input name=\"scheme\" value=\"{}\"> \
         Since <input name=\"since\" value=\"{}\" placeholder=\"YYYY-MM-DD\"> \
         Until <input name=\"until\" value=\"{}\" placeholder=\"YYYY-MM-DD\"> \
         <input type=\"submit\" value=\"Filter\"></form>\
         <p id=\"count\">{} experiment(s)</p>",
        v(&f.path),
        v(&f.scheme),
        v(&f.since),
        v(&f.until),
        rows.len()
    );
    b.push_str(
        "<table id=\"experiments\"><tr><th>#</th><th>Path</th><th>Link</th><th>Flows</th>\
         <th>Schemes</th><th>Runs</th><th>Status</th><th>Queued</th><th>Finished</th></tr>",
    );
    for e in &rows {
        let _ = write!(
            b,
            "<tr><td><a href=\"/experiments/{id}\">P{id}</a></td><td>{} → {}</td><td>{}</td>\
             <td class=\"num\">{}</td><td>{}</td><td class=\"num\">{}</td>\
             <td class=\"{st}\">{st}</td><td>{}</td><td>{}</td></tr>",
            esc(&e.sender),
            esc(&e.receiver),
            esc(&e.link),
            e.flows,
            esc(&e.schemes.join(" ")),
            e.run_times,
            esc(&e.queued_at),
            v(&e.finished_at),
            id = e.id,
            st = e.status.as_str(),
        );
    }
    b.push_str("</table>");
    page("Experiments", &b).into_response()
}

async fn list_json(
    State(s): State<WebState>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    match s.archive.list(&filter(&q)) {
        Ok(rows) => (
            [(header::CONTENT_TYPE, "application/json")],
            serde_json::to_string_pretty(&rows).unwrap_or_default(),
        )
            .into_response(),
        Err(e) => internal(e),
    }
}

fn load(s: &WebState, id: i64) -> Result<Experiment, Response> {
    match s.archive.experiment(id) {
        Ok(Some(e)) => Ok(e),
        Ok(None) => Err(error(StatusCode::NOT_FOUND, format!("no experiment {id}"))),
        Err(e) => Err(internal(e)),
    }
}

async fn experiment(State(s): State<WebState>, UrlPath(id): UrlPath<i64>) -> Response {
    let e = match load(&s, id) {
        Ok(e) => e,
        Err(r) => return r,
    };
    let (stats, runs) = match (s.archive.scheme_stats(id), s.archive.runs(id)) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(x), _) | (_, Err(x)) => return internal(x),
    };
    let files: Vec<String> = e
        .result_dir
        .as_deref()
        .map(|d| crate::agent::files_in(Path::new(d)))
        .unwrap_or_default()
        .iter()
        .filter_map(|p| p.file_name()?.to_str().map(str::to_owned))
        .collect();
    let mut b = about(&e);
    b.push_str(&summary_table(&e, &stats));
    b.push_str(&plot_and_report(id, &files));
    b.push_str(&runs_table(&runs));
    b.push_str(&files_list(id, &files));
    let title = format!(
        "P{id}: {} → {}, {} flow(s){}",
        e.sender,
        e.receiver,
        e.flows,
        if e.status == Status::Done { "" } else { " …" }
    );
    page(&title, &b).into_response()
}

/// The experiment page's first table: path, matrix entry, schemes, status, times, results.
fn about(e: &Experiment) -> String {
    let opt = |x: &Option<String>| esc(x.as_deref().unwrap_or("—"));
    format!(
        "<table id=\"about\"><tr><th>Path</th><td>{} → {} ({})</td></tr>\
         <tr><th>Matrix entry</th><td>{} flow(s), {} s apart; {} run(s) of {} s per scheme</td></tr>\
         <tr><th>Schemes</th><td>{}</td></tr><tr><th>Status</th><td class=\"{st}\">{st}{}</td></tr>\
         <tr><th>Queued</th><td>{}</td></tr><tr><th>Started</th><td>{}</td></tr>\
         <tr><th>Finished</th><td>{}</td></tr><tr><th>Attempts</th><td>{}</td></tr>\
         <tr><th>Results</th><td>{}</td></tr></table>",
        esc(&e.sender),
        esc(&e.receiver),
        esc(&e.link),
        e.flows,
        e.interval_s,
        e.run_times,
        e.runtime_s,
        esc(&e.schemes.join(" ")),
        e.error
            .as_deref()
            .map(|x| format!(": {}", esc(x)))
            .unwrap_or_default(),
        esc(&e.queued_at),
        opt(&e.started_at),
        opt(&e.finished_at),
        e.attempts,
        opt(&e.result_dir),
        st = e.status.as_str(),
    )
}

/// The experiment page's per-scheme means, each with a link to its history; empty without.
fn summary_table(e: &Experiment, stats: &[SchemeStats]) -> String {
    let mut b = String::new();
    if !stats.is_empty() {
        b.push_str(
            "<h2>Summary</h2><table id=\"summary\"><tr><th>Scheme</th><th>Runs</th>\
             <th>Mean throughput (Mbit/s)</th><th>Mean 95th-percentile one-way delay (ms)</th>\
             <th>Mean loss rate (%)</th><th>History</th></tr>",
        );
        for st in stats {
            let _ = write!(
                b,
                "<tr><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{:.2}</td>\
                 <td class=\"num\">{:.2}</td><td class=\"num\">{:.2}</td><td><a href=\"\
                 /history?sender={}&amp;receiver={}&amp;scheme={}\">over time</a></td></tr>",
                esc(&st.scheme),
                st.runs,
                st.tput_mbps,
                st.delay_ms,
                st.loss * 100.0,
                url(&e.sender),
                url(&e.receiver),
                url(&st.scheme)
            );
        }
        b.push_str("</table>");
    }
    b
}

/// The experiment page's summary plot and report links, of the results `files` it has.
fn plot_and_report(id: i64, files: &[String]) -> String {
    let mut b = String::new();
    let has = |n: &str| files.iter().any(|f| f == n);
    if has("pantheon_summary.svg") {
        let _ = write!(
            b,
            "<h2>Summary plot</h2><img id=\"summary-plot\" alt=\"summary plot\" \
             src=\"/experiments/{id}/files/pantheon_summary.svg\">"
        );
    }
    if has("pantheon_report.html") || has("pantheon_report.pdf") {
        b.push_str("<h2>Report</h2><p>");
        for (f, label) in [
            ("pantheon_report.html", "HTML"),
            ("pantheon_report.pdf", "PDF"),
        ] {
            if has(f) {
                let _ = write!(
                    b,
                    "<a class=\"report\" href=\"/experiments/{id}/files/{f}\">{label}</a> "
                );
            }
        }
        b.push_str("</p>");
    }
    b
}

/// The experiment page's table of runs; empty without.
fn runs_table(runs: &[Run]) -> String {
    let mut b = String::new();
    if !runs.is_empty() {
        b.push_str(
            "<h2>Runs</h2><table id=\"runs\"><tr><th>Scheme</th><th>Run</th><th>Status</th>\
             <th>Throughput (Mbit/s)</th><th>p95 delay (ms)</th><th>Loss (%)</th></tr>",
        );
        let num = |x: Option<f64>, k: f64| x.map_or("—".to_owned(), |v| format!("{:.2}", v * k));
        for r in runs {
            let _ = write!(
                b,
                "<tr><td>{}</td><td class=\"num\">{}</td><td class=\"{st}\">{st}{}</td>\
                 <td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
                esc(&r.scheme),
                r.run,
                r.reason
                    .as_deref()
                    .map(|x| format!(": {}", esc(x)))
                    .unwrap_or_default(),
                num(r.tput_mbps, 1.0),
                num(r.delay_ms, 1.0),
                num(r.loss, 100.0),
                st = esc(&r.status),
            );
        }
        b.push_str("</table>");
    }
    b
}

/// The experiment page's list of results files, each a link.
fn files_list(id: i64, files: &[String]) -> String {
    let mut b = String::new();
    if !files.is_empty() {
        b.push_str("<h2>Files</h2><ul id=\"files\">");
        for f in files {
            let _ = write!(
                b,
                "<li><a href=\"/experiments/{id}/files/{}\">{}</a></li>",
                url(f),
                esc(f)
            );
        }
        b.push_str("</ul>");
    }
    b
}

/// The content type of a results file, by extension.
fn content_type(name: &str) -> &'static str {
    match name.rsplit_once('.').map(|x| x.1) {
        Some("svg") => "image/svg+xml",
        Some("png") => "image/png",
        Some("pdf") => "application/pdf",
        Some("html") => "text/html; charset=utf-8",
        Some("json") => "application/json",
        Some("md" | "log" | "txt" | "csv") => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}

async fn file(State(s): State<WebState>, UrlPath((id, name)): UrlPath<(i64, String)>) -> Response {
    // Plain names only: never outside the results directory.
    if !crate::agent::is_plain_file_name(&name) {
        return error(StatusCode::BAD_REQUEST, format!("bad file name {name:?}"));
    }
    let e = match load(&s, id) {
        Ok(e) => e,
        Err(r) => return r,
    };
    let Some(dir) = e.result_dir else {
        return error(
            StatusCode::NOT_FOUND,
            format!("experiment {id} has no results yet"),
        );
    };
    match tokio::fs::read(PathBuf::from(dir).join(&name)).await {
        Ok(bytes) => ([(header::CONTENT_TYPE, content_type(&name))], bytes).into_response(),
        Err(_) => error(
            StatusCode::NOT_FOUND,
            format!("experiment {id} has no {name}"),
        ),
    }
}

/// The history pages' `sender`, `receiver` and `scheme`, and the archive's points for them.
fn history_points(
    s: &WebState,
    q: &HashMap<String, String>,
) -> Result<(String, String, String, Vec<HistoryPoint>), Response> {
    let get = |k: &str| {
        q.get(k)
            .filter(|v| !v.is_empty())
            .cloned()
            .ok_or_else(|| error(StatusCode::BAD_REQUEST, format!("missing ?{k}=")))
    };
    let (snd, rcv, scheme) = (get("sender")?, get("receiver")?, get("scheme")?);
    let points = s.archive.history(&snd, &rcv, &scheme).map_err(internal)?;
    Ok((snd, rcv, scheme, points))
}

async fn history(State(s): State<WebState>, Query(q): Query<HashMap<String, String>>) -> Response {
    let (snd, rcv, scheme, points) = match history_points(&s, &q) {
        Ok(a) => a,
        Err(r) => return r,
    };
    let mut b = format!(
        "<p>{} experiment(s).</p><img id=\"history-plot\" alt=\"history plot\" \
         src=\"/history.svg?sender={}&amp;receiver={}&amp;scheme={}\">\
         <table id=\"history\"><tr><th>Experiment</th><th>Finished</th><th>Flows</th>\
         <th>Runs</th><th>Mean throughput (Mbit/s)</th><th>Mean p95 delay (ms)</th>\
         <th>Mean loss (%)</th></tr>",
        points.len(),
        url(&snd),
        url(&rcv),
        url(&scheme)
    );
    for p in &points {
        let _ = write!(
            b,
            "<tr><td><a href=\"/experiments/{id}\">P{id}</a></td><td>{}</td>\
             <td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{:.2}</td>\
             <td class=\"num\">{:.2}</td><td class=\"num\">{:.2}</td></tr>",
            esc(&p.at),
            p.flows,
            p.stats.runs,
            p.stats.tput_mbps,
            p.stats.delay_ms,
            p.stats.loss * 100.0,
            id = p.experiment
        );
    }
    b.push_str("</table>");
    page(&format!("{scheme} on {snd} → {rcv} over time"), &b).into_response()
}

async fn history_svg(
    State(s): State<WebState>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let (snd, rcv, scheme, points) = match history_points(&s, &q) {
        Ok(a) => a,
        Err(r) => return r,
    };
    let t = |at: &str| {
        chrono::DateTime::parse_from_rfc3339(at)
            .map(|t| t.timestamp_millis() as f64 / 86_400_000.0)
            .unwrap_or(0.0)
    };
    let t0 = points.first().map_or(0.0, |p| t(&p.at));
    let mut groups: std::collections::BTreeMap<u16, Vec<(f64, f64, f64)>> = Default::default();
    for p in &points {
        groups.entry(p.flows).or_default().push((
            t(&p.at) - t0,
            p.stats.tput_mbps,
            p.stats.delay_ms,
        ));
    }
    let series: Vec<analyzer::report::HistorySeries> = groups
        .into_iter()
        .map(|(f, v)| (format!("{f} flow{}", if f == 1 { "" } else { "s" }), v))
        .collect();
    let x_desc = format!(
        "Days since {}",
        points
            .first()
            .map_or("the first experiment", |p| &p.at[..p.at.len().min(10)])
    );
    let scratch = s.scratch.clone();
    let title = format!("{scheme}: {snd} → {rcv}");
    let drawn = tokio::task::spawn_blocking(move || -> anyhow::Result<Vec<u8>> {
        std::fs::create_dir_all(&scratch)?;
        let f = tempfile::Builder::new()
            .suffix(".svg")
            .tempfile_in(&scratch)?;
        analyzer::report::history_plot(f.path(), &title, &x_desc, &series)?;
        Ok(std::fs::read(f.path())?)
    })
    .await;
    match drawn {
        Ok(Ok(svg)) => ([(header::CONTENT_TYPE, "image/svg+xml")], svg).into_response(),
        Ok(Err(e)) => internal(e),
        Err(e) => internal(anyhow::anyhow!("{e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_html_and_urls() {
        assert_eq!(
            esc("<a href=\"x\">&'"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
        assert_eq!(url("a b→c"), "a%20b%E2%86%92c");
        assert_eq!(content_type("pantheon_report.pdf"), "application/pdf");
    }
}
