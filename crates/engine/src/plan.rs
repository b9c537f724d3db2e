//! Flags → a validated, immutable [`ExperimentPlan`]; its JSON form is
//! `pantheon_metadata.json` (Pantheon's keys, plus ours).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use analyzer::results::{Metadata, Mode};
use anyhow::{bail, Context};
use emucal::emulator::Emulator;
use emucal::mm::{EmulatedPath, Shell};
use emucal::trace::Trace;
use serde_json::json;
use workload::Workload;

use crate::mix::{check_runtime, Mix};
use crate::schemes::Registry;

/// `pantheon run local`'s default `--drain-timeout`, seconds.
pub const DRAIN_TIMEOUT_S: f64 = 10.0;
/// `pantheon run`'s default `--first-side-setup`, seconds (Pantheon waited 3).
pub const FIRST_SIDE_SETUP_S: f64 = 1.0;

pub use crate::bounds::{seconds, MAX_DRAIN_TIMEOUT, MAX_FIRST_SIDE_SETUP, MAX_RUNTIME};

/// Everything an experiment needs, checked before anything starts: what
/// [`crate::experiment`] runs, whoever starts it (serde: durations as `{secs, nanos}`, the
/// emulator as its list of shells, the host latency as `--host-latency` writes it).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct ExperimentPlan {
    /// Scheme names in run order.
    pub schemes: Vec<String>,
    /// Runs per scheme.
    pub run_times: u32,
    /// Id of the first run.
    pub start_run_id: u32,
    /// Duration of each run (from the second side's start).
    pub runtime: Duration,
    /// Flows per run.
    pub flows: u16,
    /// Time between flow starts.
    pub interval: Duration,
    /// Wait after starting the first side.
    pub first_side_setup: Duration,
    /// Longest wait for in-flight packets to leave the path after the run.
    pub drain_timeout: Duration,
    /// Shuffled scheme order.
    pub random_order: bool,
    /// Results directory.
    pub data_dir: PathBuf,
    /// Seed of the emulator's loss generators (runs differ by run id).
    pub seed: u64,
    /// The emulated path of a local run (`--emulator NAME`, or Pantheon's `--uplink-trace`,
    /// `--downlink-trace`, `--prepend-mm-cmds`, `--extra-mm-link-args` and
    /// `--append-mm-cmds`); `None` in a remote run, whose path is real.
    pub emulator: Option<Emulator>,
    /// Extra scheme descriptors directory.
    pub schemes_dir: Option<PathBuf>,
    /// A mixed experiment's flows (`--mix`, `--config-file`): then `schemes` is the mix's name
    /// alone, and `flows` and `interval` are not used.
    pub mix: Option<Mix>,
    /// `--workload`: what every flow of a run of single schemes sends (a `workload` spec:
    /// `bytes=1000000`, `poisson,load=0.5,size=web`, `page`); `None`: full throttle. A mix's
    /// flows carry their own.
    pub workload: Option<String>,
    /// `pantheon run sim`: every run is simulated on a virtual clock ([`crate::simulate`])
    /// instead of run in real time through namespaces, tunnels and the emulator.
    pub simulate: bool,
    /// Simulated runs only: the hosts' latency between the path and the QUIC endpoints
    /// (`--host-latency`; default ideal, none).
    #[serde(with = "host_latency_text")]
    pub host_latency: sim::run::HostLatency,
    /// `--capture` (with `--snaplen`): every tunnel endpoint writes a pcapng of the inner
    /// packets it forwarded beside each of its logs, keeping this many bytes of each packet
    /// (1 ..= [`tunnel::capture::MAX_SNAPLEN`]; `tunnel::capture`); `None`: no capture.
    #[serde(default)]
    pub capture: Option<u32>,
}

/// Checks a `--capture` snap length: the bytes kept of each packet, 1 ..=
/// [`tunnel::capture::MAX_SNAPLEN`].
pub fn check_capture(snaplen: u32) -> anyhow::Result<()> {
    let max = tunnel::capture::MAX_SNAPLEN;
    if !(1..=max).contains(&snaplen) {
        bail!("--snaplen {snaplen}: the bytes kept of each packet must be 1 to {max}");
    }
    Ok(())
}

/// [`sim::run::HostLatency`] as the text `--host-latency` takes (`ideal`, `measured`,
/// `MIN+MEAN`).
mod host_latency_text {
    use serde::{Deserialize, Deserializer, Serializer};
    use sim::run::HostLatency;

    pub fn serialize<S: Serializer>(h: &HostLatency, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(h)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<HostLatency, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

impl Default for ExperimentPlan {
    /// One run of 30 s, one flow, the first side 1 s ahead, 5 s of drain, emulator seed 1, in
    /// `results/`; no schemes and no emulator yet.
    fn default() -> ExperimentPlan {
        ExperimentPlan {
            schemes: Vec::new(),
            run_times: 1,
            start_run_id: 1,
            runtime: Duration::from_secs(30),
            flows: 1,
            interval: Duration::ZERO,
            first_side_setup: Duration::from_secs(1),
            drain_timeout: Duration::from_secs(5),
            random_order: false,
            data_dir: PathBuf::from("results"),
            seed: 1,
            emulator: None,
            schemes_dir: None,
            mix: None,
            workload: None,
            simulate: false,
            host_latency: sim::run::HostLatency::NONE,
            capture: None,
        }
    }
}

impl ExperimentPlan {
    /// Checks the plan against the registry and loads its emulator (traces read), so that a
    /// missing or malformed trace fails before any run starts. Errors also without an emulator.
    pub fn validate(&self, registry: &Registry) -> anyhow::Result<EmulatedPath> {
        self.check(registry)?;
        let emulator = self
            .emulator
            .as_ref()
            .context("a local experiment needs an emulated path")?;
        let path = emulator.load()?;
        // An offered load needs the bottleneck's rate.
        for (_, w) in self.flow_workloads()? {
            w.resolve(path.uplink_mbps())?;
        }
        Ok(path)
    }

    /// Every flow's (scheme, workload) of the plan, parsed: a mix's flows', or `--workload`
    /// for each scheme (bulk without it). Errors name the workload's key.
    pub fn flow_workloads(&self) -> anyhow::Result<Vec<(String, Workload)>> {
        let parse = |w: Option<&str>| w.map_or(Ok(Workload::Bulk), Workload::parse);
        Ok(match &self.mix {
            Some(mix) => mix
                .flows
                .iter()
                .map(|f| Ok((f.scheme.clone(), parse(f.workload.as_deref())?)))
                .collect::<anyhow::Result<_>>()?,
            None => {
                let w = parse(self.workload.as_deref())?;
                self.schemes
                    .iter()
                    .map(|s| (s.clone(), w.clone()))
                    .collect()
            }
        })
    }

    /// The checks of local and remote runs alike: schemes known, names that can name files
    /// ([`analyzer::files::check_name`]: they prefix the run's files), durations and flows sane.
    pub fn check(&self, registry: &Registry) -> anyhow::Result<()> {
        for name in self.schemes.iter().chain(self.mix.iter().map(|m| &m.name)) {
            analyzer::files::check_name(name)?;
        }
        if self.data_dir.to_str().is_none() {
            bail!(
                "--data-dir {}: not valid UTF-8; a results directory's name is written into its \
                 files and reports: rename it",
                self.data_dir.display()
            );
        }
        if let Some(mix) = &self.mix {
            self.check_mix(mix, registry)?;
        } else if self.schemes.is_empty() {
            bail!("no schemes given: use --schemes \"cubic bbr\" or --all");
        }
        for s in self.schemes.iter().filter(|_| self.mix.is_none()) {
            registry.get(s)?;
        }
        if self.run_times == 0 {
            bail!("--run-times must be at least 1");
        }
        self.check_run_ids()?;
        if self.runtime.is_zero() {
            bail!("--runtime must be positive");
        }
        for (d, what, max) in [
            (self.runtime, "--runtime", MAX_RUNTIME),
            (
                self.first_side_setup,
                "--first-side-setup",
                MAX_FIRST_SIDE_SETUP,
            ),
            (self.drain_timeout, "--drain-timeout", MAX_DRAIN_TIMEOUT),
            (self.interval, "--interval", MAX_RUNTIME),
        ] {
            seconds(d.as_secs_f64(), what, max)?;
        }
        if self.flows == 0 {
            bail!("--flows must be at least 1 (running without the tunnel is not supported yet)");
        }
        if self.interval * u32::from(self.flows - 1) > self.runtime {
            bail!("(flows − 1) × interval exceeds the runtime");
        }
        let mut shells = self.emulator.iter().flat_map(|e| &e.shells);
        if self.simulate && shells.any(|s| matches!(s, Shell::Host { .. })) {
            bail!(
                "pt-host sets the end hosts' kernel TCP buffers; simulated runs have no kernel \
                 TCP (docs/simulation.md): run it with `pantheon run local`"
            );
        }
        if let Some(snaplen) = self.capture {
            check_capture(snaplen)?;
        }
        if self.mix.is_some() && self.workload.is_some() {
            bail!(
                "--workload is for runs of single schemes; a mix's flows carry their own: \
                 --mix \"cubic(page) ledbat\", or `workload:` in a config file's flows"
            );
        }
        for (scheme, w) in self.flow_workloads()? {
            let s = registry.get(&scheme)?;
            if !s.runs_workload(w.kind()) {
                bail!(
                    "scheme {scheme} cannot run workload `{w}`: its programs run {} \
                     (docs/workloads.md)",
                    s.workload_kinds().join(", ")
                );
            }
            if self.simulate {
                s.check_simulated()?;
                if w != Workload::Bulk {
                    bail!(
                        "workload `{w}` of {scheme}: simulated runs are full throttle only (the \
                         workloads' programs run in real time; docs/simulation.md)"
                    );
                }
            }
        }
        Ok(())
    }

    /// A mix's checks: its schemes known, every flow inside the run.
    fn check_mix(&self, mix: &Mix, registry: &Registry) -> anyhow::Result<()> {
        if self.schemes != [mix.name.clone()] {
            bail!("a mixed experiment runs its mix only");
        }
        for s in mix.schemes() {
            registry.get(&s)?;
        }
        check_runtime(mix, self.runtime.as_secs_f64())?;
        Ok(())
    }

    /// The run ids of each scheme: `start_run_id` onwards, `run_times` of them (those that fit
    /// a `u32`: [`ExperimentPlan::check_run_ids`] refuses a plan whose do not).
    pub fn run_ids(&self) -> impl Iterator<Item = u32> + '_ {
        (0..self.run_times).map_while(|k| self.start_run_id.checked_add(k))
    }

    /// Errors if the last run's id would not fit a run id (`--start-run-id 4294967295
    /// --run-times 2`), naming both flags.
    pub fn check_run_ids(&self) -> anyhow::Result<()> {
        if self
            .start_run_id
            .checked_add(self.run_times.saturating_sub(1))
            .is_none()
        {
            bail!(
                "--start-run-id {} with --run-times {}: the last run's id would exceed the \
                 largest run id, {}",
                self.start_run_id,
                self.run_times,
                u32::MAX
            );
        }
        Ok(())
    }

    /// What a remote run cannot do, refused before anything starts: a mix's flow with an extra
    /// delay (a real path has no emulator to add it). Errors name the flow.
    pub fn check_remote(&self) -> anyhow::Result<()> {
        if let Some((scheme, w)) = self
            .flow_workloads()?
            .into_iter()
            .find(|(_, w)| *w != Workload::Bulk)
        {
            bail!(
                "{scheme} with workload `{w}`: workloads beyond full throttle run in local \
                 experiments only so far (the agents do not collect transfer records yet)"
            );
        }
        let Some(mix) = &self.mix else { return Ok(()) };
        for (i, f) in mix.flows.iter().enumerate() {
            if f.delay > 0.0 {
                bail!(
                    "flow {} ({}): a per-flow extra delay needs the emulator: local runs only",
                    i + 1,
                    f.short()
                );
            }
        }
        Ok(())
    }

    /// Checks `--baseline DIR` (solo runs of the mix's schemes over the same path): this plan
    /// is a mix and `dir` a results directory; warns on stderr of each scheme of the mix it has
    /// no runs of. Returns its absolute path, for the metadata.
    pub fn check_baseline(&self, dir: &Path) -> anyhow::Result<String> {
        if self.mix.is_none() {
            bail!("--baseline goes with --mix or --config-file");
        }
        let meta = Metadata::read(dir).context("--baseline")?;
        for scheme in self.scheme_names() {
            if !meta.cc_schemes.contains(&scheme) {
                tracing::warn!(
                    "warning: --baseline {} has no runs of {scheme}: its flows get no \
                     throughput ratio or harm",
                    dir.display()
                );
            }
        }
        let abs =
            std::path::absolute(dir).with_context(|| format!("--baseline {}", dir.display()))?;
        Ok(abs.display().to_string())
    }

    /// The schemes that run in this plan: its schemes, or the mix's.
    pub fn scheme_names(&self) -> Vec<String> {
        match &self.mix {
            Some(mix) => mix.schemes(),
            None => self.schemes.clone(),
        }
    }

    /// `pantheon_metadata.json` of a local run: Pantheon's keys (`cc_schemes`, `run_times`,
    /// `runtime`, `flows`, `interval`, `mode`, traces as basenames, the mm strings rendered
    /// from the emulator…) and ours (the emulator itself, its command line, the seed, the
    /// scheme versions).
    pub fn metadata(&self, registry: &Registry) -> Metadata {
        let base = |p: &Path| p.file_name().map(|f| f.to_string_lossy().into_owned());
        let given = |s: String| (!s.is_empty()).then_some(s);
        // Traces inside the results directory are named relative to it: it can be moved.
        let emulator = self
            .emulator
            .as_ref()
            .map(|e| e.with_traces_relative_to(&self.data_dir));
        let flags = emulator.as_ref().and_then(Emulator::pantheon_flags);
        let mut m = Metadata {
            mode: Some(Mode::Local),
            emulator_command: emulator.as_ref().map(Emulator::command_line),
            seed: Some(self.seed),
            drain_timeout: Some(self.drain_timeout.as_secs_f64()),
            scheme_versions: self.scheme_versions(registry),
            simulated: self.simulate,
            host_latency: self.simulate.then(|| self.host_latency.to_string()),
            ..self.common_metadata()
        };
        if let Some(f) = flags {
            m.uplink_trace = base(&f.uplink_trace);
            m.downlink_trace = base(&f.downlink_trace);
            m.prepend_mm_cmds = given(f.prepend_mm_cmds);
            m.append_mm_cmds = given(f.append_mm_cmds);
            m.extra_mm_link_args = given(f.extra_mm_link_args);
        }
        if let Some(e) = &emulator {
            m.other.insert("emulator".into(), json!(e));
        }
        m
    }

    /// The emulated path as a value ([`Metadata::emulator_identity`]): the emulator's command
    /// line with every trace and schedule file named by the SHA-256 of its content,
    /// `content(file)` giving the bytes (the file's, or those about to be written into it).
    /// `None` without an emulator.
    /// Errors: `content`'s.
    pub fn path_identity(
        &self,
        content: &dyn Fn(&Path) -> anyhow::Result<Vec<u8>>,
    ) -> anyhow::Result<Option<String>> {
        use sha2::{Digest, Sha256};
        let Some(emulator) = &self.emulator else {
            return Ok(None);
        };
        let named = emulator.try_map_traces(|trace| {
            let digest = Sha256::digest(content(trace)?);
            let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
            anyhow::Ok(PathBuf::from(format!("sha256:{hex}")))
        })?;
        Ok(Some(named.command_line()))
    }

    /// The keys of `pantheon_metadata.json` that local and remote runs share (`mode`, the
    /// path's keys and the scheme versions are the caller's).
    pub fn common_metadata(&self) -> Metadata {
        let mut sorted = self.schemes.clone();
        sorted.sort();
        Metadata {
            cc_schemes: sorted,
            run_order: self.schemes.clone(),
            run_times: self.run_times,
            start_run_id: self.start_run_id,
            runtime: self.runtime.as_secs_f64(),
            flows: match &self.mix {
                Some(mix) => u16::try_from(mix.flows.len()).unwrap_or(u16::MAX),
                None => self.flows,
            },
            interval: if self.mix.is_some() {
                0.0
            } else {
                self.interval.as_secs_f64()
            },
            mix: self.mix.clone(),
            workload: self.workload.clone(),
            random_order: self.random_order,
            first_side_setup: Some(self.first_side_setup.as_secs_f64()),
            harness: Some(format!("pantheon-rs {}", env!("CARGO_PKG_VERSION"))),
            generated_at: Some(utc_now()),
            ..Metadata::default()
        }
    }

    /// What runs each of the plan's schemes on this machine ([`crate::schemes::Scheme::version`]),
    /// by scheme name: recorded in the metadata when the experiment starts, so that a report
    /// made later, or on another machine, names the programs that ran.
    pub fn scheme_versions(&self, registry: &Registry) -> BTreeMap<String, String> {
        self.scheme_names()
            .iter()
            .filter_map(|name| Some((name.clone(), registry.get(name).ok()?.version())))
            .collect()
    }
}

/// What to do with a results directory that already holds results (`pantheon_metadata.json`
/// or `pantheon_runs.json`): results are never lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Reuse {
    /// Refuse, saying what is there (the default).
    #[default]
    Refuse,
    /// Add the new runs to it (`--append`).
    Append,
    /// Move its content to a dated sibling first (`--overwrite`).
    Overwrite,
}

/// What [`prepare_results_dir`] found.
#[derive(Debug, Clone)]
pub enum Existing {
    /// No results there: the directory is new, empty or holds other files only.
    Fresh,
    /// Results to append to: their metadata.
    Append(Box<Metadata>),
    /// The earlier results were moved here.
    MovedTo(PathBuf),
}

/// Checks the results directory `dir` before anything is written into it. A directory without
/// results is [`Existing::Fresh`]; one with results is refused unless `reuse` says to append
/// (its metadata is returned) or to overwrite (the directory is renamed to
/// `<dir>.replaced-<UTC time>` and a fresh one will be created). Errors: results there and
/// `Reuse::Refuse` (naming what is there and the flags), unreadable metadata when appending, or
/// a failed rename.
pub fn prepare_results_dir(dir: &Path, reuse: Reuse) -> anyhow::Result<Existing> {
    use analyzer::results::{METADATA_FILE, RUNS_FILE};
    let has = |f: &str| dir.join(f).is_file();
    if !has(METADATA_FILE) && !has(RUNS_FILE) {
        return Ok(Existing::Fresh);
    }
    match reuse {
        Reuse::Refuse => {
            let what = match Metadata::read(dir) {
                Ok(m) => format!(
                    "{} run(s) of {} from {}",
                    m.runs().len(),
                    m.cc_schemes.join(", "),
                    m.generated_at.as_deref().unwrap_or("an earlier experiment")
                ),
                Err(_) => "the records of earlier runs".to_owned(),
            };
            bail!(
                "{} already holds results ({what}): give --append to add runs to them, \
                 --overwrite to move them aside first, or another --data-dir",
                dir.display()
            )
        }
        Reuse::Append => Ok(Existing::Append(Box::new(
            Metadata::read(dir).context("--append")?,
        ))),
        Reuse::Overwrite => {
            let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%SZ");
            let mut aside = dir.as_os_str().to_owned();
            aside.push(format!(".replaced-{stamp}"));
            let aside = PathBuf::from(aside);
            std::fs::rename(dir, &aside)
                .with_context(|| format!("move {} to {}", dir.display(), aside.display()))?;
            Ok(Existing::MovedTo(aside))
        }
    }
}

impl ExperimentPlan {
    /// Checks that this plan can add its runs to the results described by `earlier`: the same
    /// kind of run over the same path, and none of its runs already there. Errors say which.
    pub fn check_append(&self, earlier: &Metadata, new: &Metadata) -> anyhow::Result<()> {
        // The same path by value where both say what it is (traces by content), else by text.
        let same_path = match (&earlier.emulator_identity, &new.emulator_identity) {
            (Some(a), Some(b)) => a == b,
            _ => earlier.emulator_command == new.emulator_command,
        };
        if earlier.mode != new.mode || !same_path {
            let path = |m: &Metadata| {
                m.emulator_command
                    .clone()
                    .unwrap_or_else(|| format!("{:?} mode", m.mode))
            };
            bail!(
                "--append: {} holds runs over `{}`, this experiment runs over `{}`: use another \
                 --data-dir",
                self.data_dir.display(),
                path(earlier),
                path(new)
            );
        }
        if earlier.simulated != new.simulated {
            let how = |m: &Metadata| {
                if m.simulated {
                    "simulated"
                } else {
                    "real-time"
                }
            };
            bail!(
                "--append: {} holds {} runs, this experiment's are {}: use another --data-dir",
                self.data_dir.display(),
                how(earlier),
                how(new)
            );
        }
        if earlier.mix != new.mix {
            bail!(
                "--append: {} holds runs of {}, this experiment is {}: a results directory holds \
                 one mix, or runs of single schemes; use another --data-dir",
                self.data_dir.display(),
                mix_words(earlier.mix.as_ref()),
                mix_words(new.mix.as_ref())
            );
        }
        let there = earlier.runs();
        if let Some((s, id)) = new.runs().into_iter().find(|r| there.contains(r)) {
            bail!(
                "--append: run {id} of {s} is already in {} (leave out --start-run-id to \
                 number the new runs after the last one)",
                self.data_dir.display()
            );
        }
        Ok(())
    }
}

/// `the mix "cubic bbr@10"`, or `single schemes`, for errors.
fn mix_words(mix: Option<&Mix>) -> String {
    match mix {
        Some(m) => {
            let flows: Vec<String> = m.flows.iter().map(|f| f.short()).collect();
            format!("the mix {} (\"{}\")", m.name, flows.join(" "))
        }
        None => "single schemes".into(),
    }
}

/// UTC now as Pantheon prints it (`Wed 25 Nov 2026 13:11:47 +0000`).
pub fn utc_now() -> String {
    chrono::Utc::now()
        .format("%a %d %b %Y %H:%M:%S %z")
        .to_string()
}

/// Pantheon's JSON format: sorted keys, four-space indentation.
pub use analyzer::results::write_json;

/// Writes a constant-rate trace of `mbps` Mbit/s to `path`; errors name the file.
pub fn write_constant_trace(path: &Path, mbps: f64) -> anyhow::Result<()> {
    Trace::write_constant(path, mbps).map_err(anyhow::Error::msg)
}
