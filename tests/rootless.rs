//! Experiments without root (issue 33): `pantheon run local` with cubic over an emulated link,
//! run by an unprivileged user (created by this test, removed after), enters a user namespace
//! of its own and analyses its run; with `/dev/net/tun` unreadable it fails before anything
//! runs, naming the missing piece and its fix; on a machine without `/run/netns` it makes a
//! private one. Needs root (to create the user and the mount namespaces that hide
//! `/dev/net/tun` and `/run` from the runs) and iperf3.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

mod common;
use common::{read_json, text};

/// An unprivileged user of this test's own, and a directory it owns with a copy of
/// `pantheon` it can run; both removed on drop.
struct User {
    name: String,
    dir: PathBuf,
}

impl User {
    fn create() -> User {
        let name = format!("ptrl{}", std::process::id());
        let o = Command::new("useradd")
            .args([
                "--system",
                "--no-create-home",
                "--shell",
                "/usr/sbin/nologin",
            ])
            .arg(&name)
            .output()
            .unwrap();
        assert!(o.status.success(), "useradd: {}", text(&o));
        let dir = std::env::temp_dir().join(format!("pantheon-rootless-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let user = User { name, dir };
        // The build's pantheon is under root's home; the user gets a copy.
        std::fs::copy(env!("CARGO_BIN_EXE_pantheon"), user.pantheon()).unwrap();
        std::fs::set_permissions(&user.dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let o = Command::new("chown")
            .arg("-R")
            .arg(&user.name)
            .arg(&user.dir)
            .output()
            .unwrap();
        assert!(o.status.success(), "chown: {}", text(&o));
        user
    }

    fn pantheon(&self) -> PathBuf {
        self.dir.join("pantheon")
    }

    /// `sh -c SETUP` as root in a mount namespace of its own (nothing it mounts is seen
    /// outside), then `pantheon run local` with cubic as the user into `data`.
    fn run_local(&self, setup: &str, data: &Path) -> Output {
        let script = format!(
            "{setup} exec runuser -u {} -- {} run local --schemes cubic --runtime 5 \
             --data-dir {}",
            self.name,
            self.pantheon().display(),
            data.display()
        );
        Command::new("unshare")
            .args([
                "--mount",
                "--propagation",
                "private",
                "--",
                "sh",
                "-c",
                &script,
            ])
            .current_dir(&self.dir)
            .output()
            .unwrap()
    }

    /// Processes of this user still running (from /proc: no `ps` needed).
    fn processes(&self) -> Vec<String> {
        let o = Command::new("id")
            .arg("-u")
            .arg(&self.name)
            .output()
            .unwrap();
        let uid = String::from_utf8_lossy(&o.stdout).trim().to_owned();
        let mut found = Vec::new();
        for e in std::fs::read_dir("/proc").unwrap().flatten() {
            let Ok(status) = std::fs::read_to_string(e.path().join("status")) else {
                continue;
            };
            let owner = status
                .lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|l| l.split_whitespace().next());
            if owner == Some(uid.as_str()) {
                let cmd = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
                found.push(format!(
                    "{}: {}",
                    e.file_name().to_string_lossy(),
                    String::from_utf8_lossy(&cmd).replace('\0', " ")
                ));
            }
        }
        found
    }
}

impl Drop for User {
    fn drop(&mut self) {
        let _ = Command::new("userdel").arg(&self.name).status();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn check_analysed_cubic(data: &Path, out: &str) {
    let meta = read_json(&data.join("pantheon_metadata.json"));
    assert_eq!(meta["rootless"], true, "recorded rootless: {meta}");
    let perf = read_json(&data.join("pantheon_perf.json"));
    let tput = perf["cubic"]["1"]["all"]["tput"]
        .as_f64()
        .unwrap_or_else(|| {
            panic!("no cubic throughput in pantheon_perf.json: {perf}\n{out}");
        });
    // The default link is 12 Mbit/s each way.
    assert!(
        (9.0..=12.5).contains(&tput),
        "cubic got {tput} Mbit/s\n{out}"
    );
}

#[test]
fn an_ordinary_user_runs_and_analyses_an_experiment() {
    let user = User::create();

    // 1. As the user: the run enters namespaces of its own and is analysed.
    let data = user.dir.join("r1");
    let o = user.run_local("", &data);
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    assert!(out.contains("| cubic | 1 | ok |"), "{out}");
    check_analysed_cubic(&data, &out);

    // 2. /dev/net/tun unreadable: refused before anything runs, naming it and its fix.
    let blocker = user.dir.join("no-tun");
    std::fs::write(&blocker, "").unwrap();
    std::fs::set_permissions(&blocker, std::fs::Permissions::from_mode(0o000)).unwrap();
    let data = user.dir.join("r2");
    let o = user.run_local(
        &format!("mount --bind {} /dev/net/tun &&", blocker.display()),
        &data,
    );
    let out = text(&o);
    assert_eq!(o.status.code(), Some(2), "{out}");
    assert!(
        out.contains("/dev/net/tun is not readable and writable by this user")
            && out.contains("chmod 0666 /dev/net/tun"),
        "{out}"
    );
    assert!(!data.exists(), "nothing ran, nothing was written");

    // 3. A machine where `ip netns` was never used (no /run/netns, /run root's): a private
    // /run holding the old one's entries and an empty netns/.
    let data = user.dir.join("r3");
    let o = user.run_local("mount -t tmpfs tmpfs /run && mkdir /run/lock &&", &data);
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    check_analysed_cubic(&data, &out);

    // Nothing left: the namespaces were the run's own (gone with it), and no process.
    let left = user.processes();
    assert!(left.is_empty(), "processes left: {left:?}");
    let stage: Vec<String> = std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".pantheon-run-stage-"))
        .collect();
    assert!(stage.is_empty(), "staging directories left: {stage:?}");
}
