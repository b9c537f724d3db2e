//! Whose namespace is this, and is its owner alive? Our commands name what they create after
//! their own pid (`pt-1234-0-host`), which says who created it but not whether that process
//! still runs: a killed command that its parent has not reaped yet is a zombie whose
//! `/proc/<pid>` exists, and a pid is reused once reaped. So an owner also *claims* its pid
//! ([`claim`]): it holds an `flock(2)` on `/run/pantheon/owners/<pid>` from before it creates
//! its first namespace until it exits. The kernel drops the lock when the process dies — before
//! it becomes a zombie — and a later process with the same pid does not hold it. [`is_alive`]
//! reads that lock; for an owner that could not claim (no writable `/run`), it falls back to
//! the process's state (`/proc/<pid>/stat`: not a zombie).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Where owners claim their pids.
pub const OWNERS_DIR: &str = "/run/pantheon/owners";

/// This process's claim, held until it exits.
static CLAIM: OnceLock<Option<std::fs::File>> = OnceLock::new();

fn claim_file(pid: u32) -> PathBuf {
    Path::new(OWNERS_DIR).join(pid.to_string())
}

/// Claims this process's pid as an owner of namespaces (module docs), once per process; later
/// calls do nothing. Returns whether the claim is held: without a writable `/run` it is not,
/// and [`is_alive`] then judges this process by its state alone.
pub fn claim() -> bool {
    CLAIM
        .get_or_init(|| {
            std::fs::create_dir_all(OWNERS_DIR).ok()?;
            let path = claim_file(std::process::id());
            let file = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .open(path)
                .ok()?;
            file.try_lock().ok()?;
            Some(file)
        })
        .is_some()
}

/// Whether owner `pid` is alive: it holds its claim (module docs) and is not a zombie, or — if
/// it never claimed — it is a process that is not a zombie. A dead owner's unheld claim file is
/// removed.
pub fn is_alive(pid: u32) -> bool {
    if pid == std::process::id() {
        return true;
    }
    let path = claim_file(pid);
    match std::fs::OpenOptions::new().write(true).open(&path) {
        Ok(file) => match file.try_lock() {
            // Nobody holds it: the owner exited (or was killed), whether or not reaped.
            Ok(()) => {
                let _ = std::fs::remove_file(&path);
                false
            }
            // Held: by the owner itself (only it claims its pid) — unless it is a zombie whose
            // threads are still exiting (the leader is `Z` before the last thread lets go of
            // its files), which is dead all the same.
            Err(std::fs::TryLockError::WouldBlock) => is_running(pid),
            Err(std::fs::TryLockError::Error(_)) => is_running(pid),
        },
        Err(_) => is_running(pid),
    }
}

/// Whether process `pid` runs: `/proc/<pid>/stat` exists and its state is neither zombie
/// (`Z`) nor dead (`X`, `x`).
pub fn is_running(pid: u32) -> bool {
    state(pid).is_some_and(|s| !matches!(s, 'Z' | 'X' | 'x'))
}

/// The state letter of process `pid` (`/proc/<pid>/stat`: `R`, `S`, … `Z` for a zombie);
/// `None` if there is no such process.
pub fn state(pid: u32) -> Option<char> {
    state_of(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// The state letter of a `/proc/<pid>/stat` line: the first field after the command name's
/// closing parenthesis (the name may hold spaces and parentheses itself).
fn state_of(stat: &str) -> Option<char> {
    stat.rsplit_once(')')?.1.trim_start().chars().next()
}

/// Removes the claim files of owners that are gone (unlocked), left by commands that ended:
/// each is checked by [`is_alive`].
pub fn forget_the_dead() {
    let Ok(entries) = std::fs::read_dir(OWNERS_DIR) else {
        return;
    };
    for e in entries.flatten() {
        if let Some(pid) = e.file_name().to_str().and_then(|n| n.parse().ok()) {
            is_alive(pid);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_state_is_read_after_the_command_name() {
        assert_eq!(state_of("42 (pantheon) S 1 42 42 0"), Some('S'));
        assert_eq!(state_of("42 (a) Z) Z 1 42"), Some('Z'));
        assert_eq!(state_of("42 (x y) R 1"), Some('R'));
        assert_eq!(state_of("garbage"), None);
    }

    #[test]
    fn a_killed_child_is_dead_before_it_is_reaped() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id();
        assert!(is_running(pid));
        child.kill().unwrap();
        // Not reaped: a zombie, whose /proc entry stays.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while is_running(pid) && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(Path::new(&format!("/proc/{pid}")).exists());
        assert!(!is_running(pid));
        assert!(!is_alive(pid));
        child.wait().unwrap();
        assert!(is_alive(std::process::id()));
    }
}
