//! Source schemes: schemes no registry offers, built by `pantheon schemes setup` from their
//! upstream git repository at a pinned commit, with small named patches — as Pantheon built its
//! third-party submodules (reference `pantheon.md` §1.2–1.3), without its submodules.
//!
//! A descriptor's `[source]` names the repository, the commit (all 40 hex digits), optionally
//! the paths to check out, the patches and the build steps. Setup:
//!
//! 1. takes the repository from a local **mirror** if one is given (`--source-mirror DIR` or
//!    [`MIRROR_ENV`]; a directory of git mirrors, one per repository, named as
//!    [`Source::mirror_names`] lists), else clones it over the network;
//! 2. checks the commit out and **verifies** it: the commit exists and the checked-out files are
//!    exactly the commit's; then the same for each of the section's **modules** (other
//!    repositories at pins of their own, checked out at a path inside the tree, as submodules);
//! 3. applies the **patches**: each replaces every occurrence of a string in one file, and fails
//!    the build if the string is not there (so a patch never silently stops applying);
//! 4. runs the **build steps** in the tree, each one's output kept in the tree's build log;
//! 5. writes the **stamp** (`.pantheon-source.json`: what was built, when, with which compiler).
//!
//! The tree lives in `{tools}/src/<repository>-<commit7>-<key>`, where the key is a hash of the
//! whole `[source]` section: a changed pin, patch or step is a new tree, built anew; schemes with
//! the same section (PCC Proteus's three priorities) share one tree. A tree without a stamp
//! (a build that failed or was killed) is never taken for a built scheme: it is removed and
//! built again. A failed build is removed at once, its log kept beside it for reading.
//!
//! The pure parts — the key, the tree's name, mirror names, patching — are functions with unit
//! tests; [`build`] is the I/O around them.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::step::{shown, Step};

/// The environment variable naming the directory of git mirrors (as `--source-mirror DIR`).
pub const MIRROR_ENV: &str = "PANTHEON_SOURCE_MIRROR";

/// The stamp file a complete build leaves in its tree.
pub const STAMP: &str = ".pantheon-source.json";

/// A descriptor's `[source]`: where a scheme's code comes from and how it is built.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Source {
    /// The upstream git repository's URL (`https://github.com/modong/pcc`).
    pub repository: String,
    /// The pinned commit: all 40 hex digits (Pantheon's pin where Pantheon had the scheme).
    pub commit: String,
    /// Paths to check out (files or directories); empty: the whole tree. For repositories whose
    /// other parts are large and not needed to build.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<String>,
    /// Patches, applied in order after checkout.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub patches: Vec<Patch>,
    /// Build steps, argv each (`["sh", "-c", "…"]` for a shell line), run in the tree in
    /// order; `{src}` is the tree's path.
    pub build: Vec<Step>,
    /// Other repositories checked out inside the tree before the patches and the build, as git
    /// submodules would be (Pantheon's SCReAM wrapper builds against `third_party/sourdough`
    /// and `third_party/scream` of Pantheon's own tree). Each is pinned and verified as the
    /// main repository is, from the same mirror directory.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub modules: Vec<Module>,
}

/// One repository checked out at `path` inside a source tree ([`Source::modules`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Module {
    /// Where in the tree, relative (`third_party/sourdough`); no `..`, not absolute.
    pub path: String,
    /// The repository's URL.
    pub repository: String,
    /// The pinned commit: all 40 hex digits.
    pub commit: String,
    /// Paths to check out; empty: the whole tree.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<String>,
}

impl Module {
    /// The module as a section of its own (no patches, no steps), for the mirror lookup and the
    /// checkout that a main repository has.
    fn pin(&self) -> Source {
        Source {
            repository: self.repository.clone(),
            commit: self.commit.clone(),
            paths: self.paths.clone(),
            patches: Vec::new(),
            build: Vec::new(),
            modules: Vec::new(),
        }
    }
}

/// Whether `commit` is a full commit name: 40 hex digits.
pub(crate) fn is_full_commit(commit: &str) -> bool {
    commit.len() == 40 && commit.bytes().all(|b| b.is_ascii_hexdigit())
}

/// One patch: every occurrence of `find` in `file` becomes `replace`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Patch {
    /// Short name (`mss-1464`), printed when applied and listed in `docs/schemes.md`.
    pub name: String,
    /// Why: what upstream does and what the patch changes (a sentence or two).
    pub why: String,
    /// The file, relative to the tree.
    pub file: String,
    /// The text to replace (exact, may span lines).
    pub find: String,
    /// Its replacement.
    pub replace: String,
}

impl Source {
    /// Checks the section: a URL, a full commit, at least one build step, patches with a
    /// name and a non-empty `find`. Errors say which.
    pub fn check(&self) -> anyhow::Result<()> {
        if self.repository.trim().is_empty() {
            bail!("source.repository is empty");
        }
        if !is_full_commit(&self.commit) {
            bail!(
                "source.commit {:?}: give all 40 hex digits of the commit (a pin, not a branch)",
                self.commit
            );
        }
        for m in &self.modules {
            let inside = Path::new(&m.path)
                .components()
                .all(|c| matches!(c, std::path::Component::Normal(_)));
            if m.path.is_empty() || !inside {
                bail!(
                    "source.modules: path {:?} must be a relative path inside the tree",
                    m.path
                );
            }
            if m.repository.trim().is_empty() || !is_full_commit(&m.commit) {
                bail!(
                    "source.modules ({}): give the repository and all 40 hex digits of its commit",
                    m.path
                );
            }
        }
        if self.build.is_empty() || self.build.iter().any(Vec::is_empty) {
            bail!("source.build: at least one step, each a non-empty argv");
        }
        for p in &self.patches {
            if p.name.is_empty() || p.find.is_empty() || p.file.is_empty() {
                bail!("source.patches: each needs a name, a file and a non-empty find");
            }
        }
        Ok(())
    }

    /// The repository's name: the URL's last component without `.git` (`pcc`).
    pub fn repo_name(&self) -> &str {
        let url = self.repository.trim_end_matches('/');
        let last = url.rsplit(['/', ':']).next().unwrap_or(url);
        last.strip_suffix(".git").unwrap_or(last)
    }

    /// The repository's owner, the URL's second-to-last component (`modong`), if any.
    pub fn owner(&self) -> Option<&str> {
        let url = self.repository.trim_end_matches('/');
        let mut parts = url.rsplit(['/', ':']);
        parts.next();
        parts.next().filter(|o| !o.is_empty())
    }

    /// A hash of the whole section (first 12 hex digits of the SHA-256 of its JSON): any change
    /// of pin, paths, patch or step changes it.
    pub fn key(&self) -> String {
        let json = serde_json::to_vec(self).expect("a source section serializes");
        Sha256::digest(&json)[..6]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    /// The tree this section builds into: `<tools>/src/<repo>-<commit7>-<key>`.
    pub fn tree(&self, tools: &Path) -> PathBuf {
        tools.join("src").join(format!(
            "{}-{}-{}",
            self.repo_name(),
            &self.commit[..7.min(self.commit.len())],
            self.key()
        ))
    }

    /// Whether the tree was built completely (its stamp exists).
    pub fn is_built(&self, tools: &Path) -> bool {
        self.tree(tools).join(STAMP).is_file()
    }

    /// The names a mirror of this repository may have in a mirror directory, in the order
    /// they are tried: `owner+name` (a fetched snapshot: a git directory, or one holding `repo`
    /// or `repo/.git`), `owner/name.git`, `owner/name`, `name.git`, `name`.
    pub fn mirror_names(&self) -> Vec<String> {
        let name = self.repo_name();
        let mut v = Vec::new();
        if let Some(owner) = self.owner() {
            v.push(format!("{owner}+{name}"));
            v.push(format!("{owner}/{name}.git"));
            v.push(format!("{owner}/{name}"));
        }
        v.push(format!("{name}.git"));
        v.push(name.to_owned());
        v
    }

    /// The host the repository is served from (`github.com`), for the network check.
    pub fn host(&self) -> &str {
        self.repository
            .split("://")
            .nth(1)
            .and_then(|r| r.split('/').next())
            .filter(|h| !h.is_empty())
            .unwrap_or("github.com")
    }

    /// The git directory of this repository's mirror in `dir`, if there is one.
    pub fn find_mirror(&self, dir: &Path) -> Option<PathBuf> {
        self.mirror_names().iter().find_map(|n| {
            let base = dir.join(n);
            [
                base.clone(),
                base.join(".git"),
                base.join("repo"),
                base.join("repo/.git"),
            ]
            .into_iter()
            .find(|g| g.join("HEAD").is_file() && g.join("objects").is_dir())
        })
    }

    /// What `schemes list` says when the source cannot be had here: not built, no mirror
    /// holds it, and the network does not reach `host`.
    pub fn unreachable_reason(&self, scheme: &str, host: &str) -> String {
        format!(
            "not built, and its source ({} at {}) cannot be had here: this machine does not \
             reach {host}, and no --source-mirror DIR ({MIRROR_ENV}) holds it. With a mirror: \
             `pantheon schemes setup {scheme} --source-mirror DIR`",
            self.repository,
            &self.commit[..12.min(self.commit.len())]
        )
    }

    /// What `schemes list` says of an unbuilt source scheme `scheme`: where its source would
    /// come from and the one command that builds it.
    pub fn not_built_reason(&self, scheme: &str, mirror: Option<&Path>) -> String {
        let pin = format!(
            "{} at {}",
            self.repository,
            &self.commit[..12.min(self.commit.len())]
        );
        match mirror {
            Some(dir) => match self.find_mirror(dir) {
                Some(g) => format!(
                    "not built; its source ({pin}) is in the mirror {}: `pantheon schemes setup \
                     {scheme} --source-mirror {}` builds it",
                    g.display(),
                    dir.display()
                ),
                None => format!(
                    "not built, and the mirror directory {} has no mirror of {} (looked for {}): \
                     put one there, or run `pantheon schemes setup {scheme}` where the network \
                     reaches it",
                    dir.display(),
                    self.repository,
                    self.mirror_names().join(", ")
                ),
            },
            None => format!(
                "not built; its source is {pin}: `pantheon schemes setup {scheme}` clones and \
                 builds it (needs the network; without it, give --source-mirror DIR or \
                 {MIRROR_ENV}=DIR, a directory of git mirrors)"
            ),
        }
    }
}

/// `text` with `patch` applied: every occurrence of `find` replaced. Errors if `find` does not
/// occur (upstream changed, or the patch is wrong).
pub fn apply_patch(text: &str, patch: &Patch) -> anyhow::Result<String> {
    if !text.contains(&patch.find) {
        bail!(
            "patch {}: {:?} not found in {}",
            patch.name,
            patch.find,
            patch.file
        );
    }
    Ok(text.replace(&patch.find, &patch.replace))
}

/// The mirror directory: `--source-mirror DIR` sets [`MIRROR_ENV`]; `None` without it.
pub fn mirror_dir() -> Option<PathBuf> {
    std::env::var_os(MIRROR_ENV)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// Whether `host:443` answers within 3 s (`schemes list` says so when a source cannot be
/// had here).
pub fn network_reaches(host: &str) -> bool {
    use std::net::ToSocketAddrs;
    let host = format!("{host}:443");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let ok = host
            .to_socket_addrs()
            .ok()
            .and_then(|mut a| a.next())
            .is_some_and(|a| {
                std::net::TcpStream::connect_timeout(&a, Duration::from_secs(2)).is_ok()
            });
        let _ = tx.send(ok);
    });
    rx.recv_timeout(Duration::from_secs(3)).unwrap_or(false)
}

/// Builds `source` (of scheme `scheme`, for messages) into its tree under `tools` (nothing if
/// it is built already); returns the tree. The repository comes from the mirror in `mirror` if there is one, else from the
/// network. Errors name the failing step and end with its last output lines; the tree is then
/// removed (its log is kept as `<tree>.failed.log`).
pub fn build(
    scheme: &str,
    source: &Source,
    tools: &Path,
    mirror: Option<&Path>,
) -> anyhow::Result<PathBuf> {
    source.check()?;
    let tree = source.tree(tools);
    if source.is_built(tools) {
        tracing::info!("   source tree {} already built", tree.display());
        return Ok(tree);
    }
    if tree.exists() {
        tracing::info!("   removing {} (an unfinished build)", tree.display());
        std::fs::remove_dir_all(&tree).with_context(|| format!("remove {}", tree.display()))?;
    }
    std::fs::create_dir_all(tree.parent().expect("tree has a parent"))?;
    let failed_log = tree.with_extension("failed.log");
    let _ = std::fs::remove_file(&failed_log);
    let log = tree.with_extension("log.tmp");
    let _ = std::fs::remove_file(&log);
    let result = build_in(scheme, source, &tree, &log, mirror);
    if let Err(e) = &result {
        let _ = std::fs::rename(&log, &failed_log);
        let _ = std::fs::remove_dir_all(&tree);
        return Err(anyhow::anyhow!(
            "{e:#}\n(nothing was installed; the whole log is {})",
            failed_log.display()
        ));
    }
    result.map(|()| tree)
}

/// The log of a tree's checkout and build steps.
const BUILD_LOG: &str = ".pantheon-build.log";

fn build_in(
    scheme: &str,
    source: &Source,
    tree: &Path,
    log: &Path,
    mirror: Option<&Path>,
) -> anyhow::Result<()> {
    let origin = checkout(scheme, source, tree, log, mirror)?;
    for m in &source.modules {
        checkout(scheme, &m.pin(), &tree.join(&m.path), log, mirror)
            .with_context(|| format!("module {}", m.path))?;
    }
    let step = |what: &str, cmd: &mut Command| run_logged(what, cmd, log);
    for p in &source.patches {
        let path = tree.join(&p.file);
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("patch {}: read {}", p.name, p.file))?;
        std::fs::write(&path, apply_patch(&text, p)?)
            .with_context(|| format!("patch {}: write {}", p.name, p.file))?;
        tracing::info!("   patch {}: {} ({})", p.name, p.file, p.why);
    }
    let src = tree.display().to_string();
    for (i, s) in source.build.iter().enumerate() {
        let argv: Vec<String> = s.iter().map(|a| a.replace("{src}", &src)).collect();
        let mut cmd = Command::new(&argv[0]);
        cmd.args(&argv[1..]).current_dir(tree);
        step(&format!("build step {}", i + 1), &mut cmd)?;
    }
    let stamp = serde_json::json!({
        "source": source,
        "origin": origin,
        "built_at": chrono::Utc::now().to_rfc3339(),
        "compiler": compiler_version(),
    });
    let _ = std::fs::rename(log, tree.join(BUILD_LOG));
    std::fs::write(
        tree.join(STAMP),
        serde_json::to_string_pretty(&stamp)? + "\n",
    )
    .context("write the build stamp")?;
    Ok(())
}

/// Clones `pin`'s repository into `dest` (from its mirror in `mirror` if there is one), checks
/// its commit out (only `pin.paths` if given) and verifies that the files are the commit's;
/// returns where it was cloned from.
fn checkout(
    scheme: &str,
    pin: &Source,
    dest: &Path,
    log: &Path,
    mirror: Option<&Path>,
) -> anyhow::Result<String> {
    let origin = origin(scheme, pin, mirror)?;
    let step = |what: &str, cmd: &mut Command| run_logged(what, cmd, log);
    let git = || {
        let mut c = Command::new("git");
        c.arg("-C")
            .arg(dest)
            .args(["-c", "advice.detachedHead=false"]);
        c
    };
    step(
        "clone",
        Command::new("git")
            .args(["clone", "--quiet", "--no-checkout", &origin])
            .arg(dest),
    )?;
    let commit = &pin.commit;
    let has_commit = |c: &str| {
        git()
            .args(["cat-file", "-e", &format!("{c}^{{commit}}")])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if !has_commit(commit) {
        // A network clone may not have a commit no branch reaches: ask for it.
        let _ = step(
            "fetch the commit",
            git().args(["fetch", "--quiet", "origin", commit]),
        );
        if !has_commit(commit) {
            bail!("verify: commit {commit} is not in {origin}");
        }
    }
    let mut checkout = git();
    checkout.args(["checkout", "--quiet", commit]);
    if !pin.paths.is_empty() {
        checkout.arg("--").args(&pin.paths);
    }
    step("checkout", &mut checkout)?;
    // Verify: the files are the commit's, byte for byte.
    let mut diff = git();
    diff.args(["diff", "--quiet", commit, "--"])
        .args(&pin.paths);
    step("verify the checkout against the commit", &mut diff)?;
    Ok(origin)
}

/// Where `source` is cloned from: its mirror in `mirror` if there is one, else its repository
/// over the network. Errors (the reason, for `scheme`) when there is no mirror and the
/// network does not reach the repository's host.
fn origin(scheme: &str, source: &Source, mirror: Option<&Path>) -> anyhow::Result<String> {
    if let Some(g) = mirror.and_then(|d| source.find_mirror(d)) {
        tracing::info!("   source: mirror {}", g.display());
        return Ok(g.display().to_string());
    }
    if let Some(d) = mirror {
        tracing::info!(
            "   no mirror of {} in {}: cloning over the network",
            source.repository,
            d.display()
        );
    }
    let host = source.host();
    if !network_reaches(host) {
        bail!("{}", source.unreachable_reason(scheme, host));
    }
    Ok(source.repository.clone())
}

/// The first line of `cc --version` (empty if there is no `cc`), for the build stamp.
fn compiler_version() -> String {
    Command::new("cc")
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .next()
                .map(str::to_owned)
        })
        .unwrap_or_default()
}

/// Runs `cmd` with its output appended to `log`; printed before it runs. An error names the
/// step, the command and its status, and ends with the last 25 lines of the log.
fn run_logged(what: &str, cmd: &mut Command, log: &Path) -> anyhow::Result<()> {
    use std::io::Write as _;
    let shown = shown(cmd);
    tracing::info!("   {what}: $ {shown}");
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .with_context(|| format!("open {}", log.display()))?;
    writeln!(file, "### {what}: $ {shown}")?;
    let status = cmd
        .stdin(Stdio::null())
        .stdout(file.try_clone()?)
        .stderr(file)
        .status()
        .with_context(|| format!("{what}: could not start `{shown}`"))?;
    if !status.success() {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let tail = lines[lines.len().saturating_sub(25)..].join("\n");
        bail!("{what} failed: `{shown}` ({status}); its last output:\n{tail}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pcc() -> Source {
        toml::from_str(
            r#"
repository = "https://github.com/modong/pcc"
commit = "1afc958fa0d66d18b623c091a55fec872b4981e1"
build = [["make", "-C", "sender"]]
[[patches]]
name = "mss-1464"
why = "UDT's packets of 1500 bytes do not fit the tunnel"
file = "sender/src/core.cpp"
find = "m_iMSS = 1500;"
replace = "m_iMSS = 1464;"
"#,
        )
        .unwrap()
    }

    #[test]
    fn the_tree_is_named_by_repository_commit_and_a_key_that_every_change_moves() {
        let s = pcc();
        s.check().unwrap();
        let tree = s.tree(Path::new("/t"));
        let name = tree.file_name().unwrap().to_str().unwrap();
        assert!(name.starts_with("pcc-1afc958-"), "{name}");
        assert_eq!(name.len(), "pcc-1afc958-".len() + 12);
        assert_eq!(tree.parent().unwrap(), Path::new("/t/src"));
        // Same section, same tree (schemes share it); any change, another.
        assert_eq!(pcc().key(), s.key());
        let mut changed = pcc();
        changed.patches[0].replace = "m_iMSS = 1400;".into();
        assert_ne!(changed.key(), s.key());
        let mut changed = pcc();
        changed.commit = "0".repeat(40);
        assert_ne!(changed.key(), s.key());
        let mut changed = pcc();
        changed.build.push(vec!["true".into()]);
        assert_ne!(changed.key(), s.key());
    }

    #[test]
    fn bad_sections_are_refused_saying_why() {
        let mut s = pcc();
        s.commit = "1afc958".into();
        assert!(s.check().unwrap_err().to_string().contains("40 hex digits"));
        let mut s = pcc();
        s.build.clear();
        assert!(s
            .check()
            .unwrap_err()
            .to_string()
            .contains("at least one step"));
        let mut s = pcc();
        s.patches[0].find.clear();
        assert!(s
            .check()
            .unwrap_err()
            .to_string()
            .contains("non-empty find"));
        let mut s = pcc();
        s.modules.push(Module {
            path: "../outside".into(),
            repository: "https://example.org/x".into(),
            commit: "1".repeat(40),
            paths: vec![],
        });
        assert!(s
            .check()
            .unwrap_err()
            .to_string()
            .contains("inside the tree"));
        s.modules[0].path = "third_party/x".into();
        s.check().unwrap();
        s.modules[0].commit = "main".into();
        assert!(s.check().unwrap_err().to_string().contains("40 hex digits"));
        let unknown = toml::from_str::<Source>(
            "repository = \"x\"\ncommit = \"y\"\nbuild = []\nbranch = \"main\"\n",
        );
        assert!(unknown.unwrap_err().to_string().contains("branch"));
    }

    #[test]
    fn patches_replace_every_occurrence_and_fail_when_upstream_moved() {
        let p = &pcc().patches[0];
        let out = apply_patch("a\nm_iMSS = 1500;\nb m_iMSS = 1500;\n", p).unwrap();
        assert_eq!(out, "a\nm_iMSS = 1464;\nb m_iMSS = 1464;\n");
        let err = apply_patch("m_iMSS = 1452;", p).unwrap_err().to_string();
        assert!(
            err.contains("patch mss-1464") && err.contains("sender/src/core.cpp"),
            "{err}"
        );
    }

    #[test]
    fn mirrors_are_found_under_the_names_a_fetch_or_a_bare_clone_gives() {
        let s = pcc();
        assert_eq!(
            s.mirror_names(),
            [
                "modong+pcc",
                "modong/pcc.git",
                "modong/pcc",
                "pcc.git",
                "pcc"
            ]
        );
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(s.find_mirror(dir.path()), None);
        let why = s.not_built_reason("pcc", Some(dir.path()));
        assert!(
            why.contains("has no mirror of https://github.com/modong/pcc"),
            "{why}"
        );
        assert!(why.contains("modong+pcc, modong/pcc.git"), "{why}");
        // A fetched snapshot: <owner>+<name>/repo is the git directory.
        let g = dir.path().join("modong+pcc/repo");
        std::fs::create_dir_all(g.join("objects")).unwrap();
        std::fs::write(g.join("HEAD"), "ref: refs/heads/master\n").unwrap();
        assert_eq!(s.find_mirror(dir.path()), Some(g.clone()));
        let why = s.not_built_reason("pcc", Some(dir.path()));
        assert!(
            why.contains("`pantheon schemes setup pcc --source-mirror"),
            "{why}"
        );
        let why = s.not_built_reason("pcc", None);
        assert!(
            why.contains("--source-mirror DIR") && why.contains("1afc958fa0d6"),
            "{why}"
        );
    }

    #[test]
    fn a_build_from_a_mirror_is_verified_patched_stamped_and_a_failed_one_leaves_nothing() {
        // A tiny upstream repository, its mirror, and a source section pinned to its commit.
        let dir = tempfile::tempdir().unwrap();
        let up = dir.path().join("up");
        std::fs::create_dir_all(up.join("src")).unwrap();
        std::fs::write(up.join("src/core.cpp"), "int mss = 1500;\n").unwrap();
        let git = |args: &[&str]| {
            let o = Command::new("git")
                .arg("-C")
                .arg(&up)
                .args(["-c", "user.name=t", "-c", "user.email=t@t"])
                .args(args)
                .output()
                .unwrap();
            assert!(o.status.success(), "{o:?}");
            String::from_utf8(o.stdout).unwrap()
        };
        git(&["init", "-q"]);
        git(&["add", "."]);
        git(&["commit", "-qm", "one"]);
        let commit = git(&["rev-parse", "HEAD"]).trim().to_owned();
        let mirrors = dir.path().join("mirrors");
        std::fs::create_dir_all(mirrors.join("someone")).unwrap();
        let o = Command::new("git")
            .args(["clone", "-q", "--mirror"])
            .arg(&up)
            .arg(mirrors.join("someone/tiny.git"))
            .output()
            .unwrap();
        assert!(o.status.success(), "{o:?}");
        let section = |find: &str, step: &str| Source {
            repository: "https://example.org/someone/tiny".into(),
            commit: commit.clone(),
            paths: vec![],
            patches: vec![Patch {
                name: "mss".into(),
                why: "fits the tunnel".into(),
                file: "src/core.cpp".into(),
                find: find.into(),
                replace: "int mss = 1464;".into(),
            }],
            build: vec![vec!["sh".into(), "-c".into(), step.into()]],
            modules: vec![],
        };
        let tools = dir.path().join("tools");
        // The whole error of a build that must fail.
        let failure = |s: &Source| {
            format!(
                "{:#}",
                build("tiny", s, &tools, Some(&mirrors)).unwrap_err()
            )
        };
        let good = section("int mss = 1500;", "cp src/core.cpp built && test -d {src}");
        let tree = build("tiny", &good, &tools, Some(&mirrors)).unwrap();
        assert!(good.is_built(&tools));
        assert_eq!(
            std::fs::read_to_string(tree.join("built")).unwrap(),
            "int mss = 1464;\n"
        );
        let stamp: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(tree.join(STAMP)).unwrap()).unwrap();
        assert_eq!(stamp["source"]["commit"], commit.as_str());
        assert!(stamp["origin"]
            .as_str()
            .unwrap()
            .ends_with("someone/tiny.git"));
        // A module: another pinned repository inside the tree, before the patches and steps.
        let mut with_module = section("int mss = 1500;", "test -f third_party/tiny/src/core.cpp");
        with_module.modules.push(Module {
            path: "third_party/tiny".into(),
            repository: "https://example.org/someone/tiny".into(),
            commit: commit.clone(),
            paths: vec!["src".into()],
        });
        with_module.check().unwrap();
        assert_ne!(with_module.key(), good.key());
        let t = build("tiny", &with_module, &tools, Some(&mirrors)).unwrap();
        assert_eq!(
            std::fs::read_to_string(t.join("third_party/tiny/src/core.cpp")).unwrap(),
            "int mss = 1500;\n",
            "the module is its commit's, unpatched"
        );
        let mut absent_module = with_module.clone();
        absent_module.modules[0].commit = "0123456789".repeat(4);
        let err = failure(&absent_module);
        assert!(
            err.contains("module third_party/tiny") && err.contains("verify: commit"),
            "{err}"
        );
        assert!(!absent_module.tree(&tools).exists());
        // Built already: nothing runs again.
        std::fs::write(tree.join("marker"), "").unwrap();
        assert_eq!(build("tiny", &good, &tools, Some(&mirrors)).unwrap(), tree);
        assert!(tree.join("marker").exists());

        // A failing step: named with its output; no tree is left, the log is.
        let bad = section(
            "int mss = 1500;",
            "echo compiling; echo 'core.cpp:1: error' >&2; exit 2",
        );
        let err = failure(&bad);
        assert!(
            err.contains("build step 1 failed") && err.contains("exit status: 2"),
            "{err}"
        );
        assert!(err.contains("core.cpp:1: error"), "{err}");
        assert!(!bad.tree(&tools).exists() && !bad.is_built(&tools));
        assert!(bad.tree(&tools).with_extension("failed.log").exists());
        // A patch that no longer applies: the same.
        let stale = section("int mss = 1452;", "true");
        let err = failure(&stale);
        assert!(
            err.contains("patch mss") && err.contains("not found"),
            "{err}"
        );
        assert!(!stale.tree(&tools).exists());
        // A commit the repository does not have.
        let mut absent = good.clone();
        absent.commit = "0123456789".repeat(4);
        let err = failure(&absent);
        assert!(err.contains("verify: commit 0123456789"), "{err}");
        assert!(!absent.tree(&tools).exists());
    }
}
