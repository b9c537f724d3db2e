//! The files of a results directory, kept whole: what may name them, how they are written and
//! read, and who may write them.
//!
//! - [`check_name`]: a name that becomes part of a file name (a scheme's, a mix's `test-name`)
//!   is one path component, so `../good/cubic` cannot write into another directory.
//! - [`write_atomic`], [`replace_with`]: a file is written under a temporary name beside it (`.tmp.<name>`)
//!   and renamed over the old one: a reader, a kill or a full disk never leaves half a file where a
//!   whole one was.
//! - [`read_regular`]: an input file (a trace, a config file) is read only if it is a regular
//!   file and no larger than a bound, so a FIFO or `/dev/zero` is an error, not a hang or an
//!   exhausted memory.
//! - [`lock_results_dir`]: one writer per results directory, for the whole of its command. The
//!   lock is `flock(2)` on [`LOCK_FILE`] inside the directory: advisory (only our commands
//!   honour it), held by the open file, released by the kernel when the holder exits however it
//!   exits (SIGKILL leaves no stale lock). A second writer is refused at once, naming the
//!   holder's pid and command line as the kernel lists them (`/proc/locks`), or waits.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// The lock file inside a results directory (empty; its `flock` is the lock).
pub const LOCK_FILE: &str = ".pantheon.lock";

/// Longest name that may become part of a file name, bytes: file names add at most ~60 bytes
/// to it (`_datalink_run4294967295_flow65535_<uid>.log.ingress`) and Linux allows 255.
pub const MAX_NAME_BYTES: usize = 128;

/// A name that cannot become part of a file name; `rule` says why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{name}` cannot name files: {rule}")]
pub struct NameError {
    /// The name, with control characters escaped.
    pub name: String,
    /// The rule it breaks.
    pub rule: &'static str,
}

/// Checks `name`, which becomes part of file names in a results directory (`<name>_stats_run1.log`),
/// against the rules of one path component: not empty, at most [`MAX_NAME_BYTES`] bytes, no
/// `/` or `\`, not starting with `.` (no `..`, no hidden files) or `-` (taken for an option by
/// the tools that open it), no whitespace or control characters. Errors name the rule.
pub fn check_name(name: &str) -> Result<(), NameError> {
    let rule = if name.is_empty() {
        Some("it is empty")
    } else if name.len() > MAX_NAME_BYTES {
        Some("it is longer than 128 bytes")
    } else if name.contains(['/', '\\']) {
        Some("it contains a path separator (`/` or `\\`); a name is one path component")
    } else if name.starts_with('.') {
        Some("it starts with `.` (`..` would leave the results directory)")
    } else if name.starts_with('-') {
        Some("it starts with `-` (tools would take the file for an option)")
    } else if name.chars().any(|c| c.is_control() || c.is_whitespace()) {
        Some("it contains whitespace or a control character")
    } else {
        None
    };
    match rule {
        Some(rule) => Err(NameError {
            name: name.escape_debug().to_string(),
            rule,
        }),
        None => Ok(()),
    }
}

/// `.tmp.<name>` beside `path`: where [`write_atomic`] and [`replace_with`] write before
/// renaming (hidden, and with the file's own extension, which some writers go by: a plot's).
fn temporary(path: &Path) -> PathBuf {
    let mut name = std::ffi::OsString::from(".tmp.");
    name.push(path.file_name().unwrap_or_default());
    path.with_file_name(name)
}

/// Writes `bytes` to `path`, replacing it whole or not at all: written to `.tmp.<name>`, then
/// renamed over `path` (a failed write removes the temporary file and leaves the old one).
/// Errors name the file.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    replace_with(path, |tmp| {
        let mut f = std::fs::File::create(tmp)?;
        f.write_all(bytes)
    })
}

/// Makes `path` by calling `write` with a temporary name beside it (`.tmp.<name>`), then renames
/// that over `path`: for writers that take a path (a plot library). If `write` fails, the
/// temporary file is removed and `path` is left as it was. Errors name the file.
pub fn replace_with(
    path: &Path,
    write: impl FnOnce(&Path) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let tmp = temporary(path);
    write(&tmp)
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            std::io::Error::new(e.kind(), format!("write {}: {e}", path.display()))
        })
}

/// Why an input file could not be read ([`read_regular`]): `{path}: {reason}`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {reason}")]
pub struct ReadError {
    /// The file.
    pub path: String,
    /// What is wrong: the system's error, `is a FIFO, not a regular file: …`, `larger than …`.
    pub reason: String,
}

/// Reads the regular file `path` whole, if it is no larger than `max_bytes`. Errors (naming the
/// file): it cannot be read, it is not a regular file (a FIFO would block, a device may never
/// end: refused by type before it is opened), or it is larger than `max_bytes` (`what` says what
/// the file was meant to be, for the message: "a trace").
pub fn read_regular(path: &Path, what: &str, max_bytes: u64) -> Result<Vec<u8>, ReadError> {
    let err = |reason: String| ReadError {
        path: path.display().to_string(),
        reason,
    };
    let meta = std::fs::metadata(path).map_err(|e| err(e.to_string()))?;
    if !meta.is_file() {
        return Err(err(format!(
            "is {}, not a regular file: {what} must be a file",
            file_kind(&meta)
        )));
    }
    let too_big = || {
        err(format!(
            "larger than {max_bytes} bytes: too large for {what}"
        ))
    };
    if meta.len() > max_bytes {
        return Err(too_big());
    }
    let file = std::fs::File::open(path).map_err(|e| err(e.to_string()))?;
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(max_bytes.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| err(e.to_string()))?;
    if bytes.len() as u64 > max_bytes {
        return Err(too_big());
    }
    Ok(bytes)
}

/// [`read_regular`] as UTF-8 text; errors also if it is not UTF-8.
pub fn read_regular_text(path: &Path, what: &str, max_bytes: u64) -> Result<String, ReadError> {
    String::from_utf8(read_regular(path, what, max_bytes)?).map_err(|e| ReadError {
        path: path.display().to_string(),
        reason: format!("not UTF-8 text ({e})"),
    })
}

/// `a FIFO`, `a directory`, … for errors.
fn file_kind(meta: &std::fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

/// The lock of a results directory, held until dropped (or until the process exits, however).
#[derive(Debug)]
pub struct ResultsLock {
    _file: std::fs::File,
    dir: PathBuf,
}

impl ResultsLock {
    /// The directory locked.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

/// Why a results directory could not be locked.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another command writes it.
    #[error(
        "{dir} is being written by {holder}: wait for it to end (`pantheon run` and `pantheon \
         analyze` wait with --wait-lock), or write elsewhere"
    )]
    Held {
        /// The directory.
        dir: String,
        /// `pid 1234 (pantheon run local …)`, or `another process` if the kernel does not say.
        holder: String,
    },
    /// The directory or its lock file cannot be created or locked.
    #[error("lock {path}: {source}")]
    Io {
        /// The lock file.
        path: String,
        /// The system's error.
        source: std::io::Error,
    },
}

/// Locks results directory `dir` (created if missing) for this process: `flock` on
/// `dir/.pantheon.lock` (module docs). If another process holds it: with `wait`, calls
/// `waiting` with the holder (`pid 1234 (pantheon run local …)`) and blocks until it is free;
/// without, errors with [`LockError::Held`] naming the holder. Nothing in `dir` but the empty
/// lock file is created or changed.
pub fn lock_results_dir(
    dir: &Path,
    wait: bool,
    waiting: &dyn Fn(&str),
) -> Result<ResultsLock, LockError> {
    let path = dir.join(LOCK_FILE);
    let io = |source| LockError::Io {
        path: path.display().to_string(),
        source,
    };
    std::fs::create_dir_all(dir).map_err(io)?;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(io)?;
    match file.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            let holder = lock_holder(&file).unwrap_or_else(|| "another process".into());
            if !wait {
                return Err(LockError::Held {
                    dir: dir.display().to_string(),
                    holder,
                });
            }
            waiting(&holder);
            file.lock().map_err(io)?;
        }
        Err(std::fs::TryLockError::Error(e)) => return Err(io(e)),
    }
    Ok(ResultsLock {
        _file: file,
        dir: dir.to_owned(),
    })
}

/// `pid 1234 (pantheon run local --schemes cubic)`: the process the kernel lists as holding a
/// `flock` on `file` (`/proc/locks`), with its command line.
fn lock_holder(file: &std::fs::File) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let ino = file.metadata().ok()?.ino();
    let locks = std::fs::read_to_string("/proc/locks").ok()?;
    let pid = holder_in_proc_locks(&locks, ino)?;
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let words: Vec<String> = cmdline
        .split(|&b| b == 0)
        .filter(|w| !w.is_empty())
        .map(|w| String::from_utf8_lossy(w).into_owned())
        .collect();
    Some(if words.is_empty() {
        format!("pid {pid}")
    } else {
        format!("pid {pid} ({})", words.join(" "))
    })
}

/// The pid of the `FLOCK` on inode `ino` in `/proc/locks`' text (`1: FLOCK ADVISORY WRITE 1234
/// 00:2a:5678 0 EOF`): the device is left out (overlay filesystems show another), the inode
/// is enough among the few locks a machine holds.
fn holder_in_proc_locks(text: &str, ino: u64) -> Option<u32> {
    text.lines().find_map(|line| {
        let words: Vec<&str> = line.split_whitespace().collect();
        let flock = words.iter().position(|w| *w == "FLOCK")?;
        // After FLOCK: ADVISORY, WRITE, pid, dev:ino.
        let pid = words.get(flock + 3)?.parse().ok()?;
        let inode = words
            .get(flock + 4)?
            .rsplit(':')
            .next()?
            .parse::<u64>()
            .ok()?;
        (inode == ino && !line.contains("->")).then_some(pid)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_one_printable_path_component() {
        for good in [
            "cubic",
            "cubic-vs-ledbat",
            "quic_cubic",
            "pcc+x",
            "bbr2",
            "Ünïcode",
        ] {
            assert_eq!(check_name(good), Ok(()), "{good}");
        }
        let long = "x".repeat(129);
        for (bad, rule) in [
            ("", "empty"),
            ("../good/cubic", "path separator"),
            ("sub/dir", "path separator"),
            ("a\\b", "path separator"),
            ("..", "starts with `.`"),
            (".hidden", "starts with `.`"),
            ("-rf", "starts with `-`"),
            ("two words", "whitespace"),
            ("tab\there", "whitespace"),
            ("bell\u{7}", "control"),
            (long.as_str(), "longer than 128"),
        ] {
            let e = check_name(bad).unwrap_err();
            assert!(e.rule.contains(rule), "{bad:?}: {e}");
            assert!(!e.to_string().contains('\u{7}'), "{e}");
        }
    }

    #[test]
    fn a_failed_atomic_write_leaves_the_old_file_whole() {
        let dir = tempdir("atomic");
        let f = dir.join("pantheon_summary.md");
        write_atomic(&f, b"first").unwrap();
        write_atomic(&f, b"second").unwrap();
        assert_eq!(std::fs::read(&f).unwrap(), b"second");
        let e = replace_with(&f, |tmp| {
            std::fs::write(tmp, b"half")?;
            Err(std::io::Error::other("disk full"))
        })
        .unwrap_err();
        assert!(e.to_string().contains("pantheon_summary.md"), "{e}");
        assert_eq!(std::fs::read(&f).unwrap(), b"second");
        assert!(!dir.join(".tmp.pantheon_summary.md").exists());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn special_and_oversized_files_are_refused_by_type_and_size() {
        let e = read_regular(Path::new("/dev/zero"), "a trace", 1 << 20).unwrap_err();
        assert!(e.to_string().contains("a character device"), "{e}");
        let e = read_regular(Path::new("/"), "a config file", 1 << 20).unwrap_err();
        assert!(e.to_string().contains("a directory"), "{e}");
        let dir = tempdir("regular");
        let fifo = dir.join("fifo");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        let e = read_regular(&fifo, "a trace", 1 << 20).unwrap_err();
        assert!(e.to_string().contains("a FIFO, not a regular file"), "{e}");
        let big = dir.join("big");
        std::fs::write(&big, vec![b'1'; 2000]).unwrap();
        let e = read_regular(&big, "a config file", 1000).unwrap_err();
        assert!(e.to_string().contains("too large for a config file"), "{e}");
        assert_eq!(read_regular(&big, "a trace", 2000).unwrap().len(), 2000);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_second_writer_is_refused_naming_the_holder_and_the_lock_dies_with_it() {
        let dir = tempdir("lock");
        let held = lock_results_dir(&dir, false, &|_| {}).unwrap();
        assert_eq!(held.dir(), dir);
        // A second open file (as a second process would have) is refused, naming this process.
        let e = lock_results_dir(&dir, false, &|_| {}).unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains(&format!("pid {} (", std::process::id())),
            "{text}"
        );
        assert!(text.contains("--wait-lock"), "{text}");
        drop(held);
        // Free again. Taken waiting: another test of this binary that starts a program forks
        // a child holding a copy of every descriptor (the lock's too) until its exec closes
        // them, so for those microseconds the lock may still be held (seen in CI: the
        // read_regular test's mkfifo).
        let again = lock_results_dir(&dir, true, &|_| {}).unwrap();
        // The lock file is empty: locking writes nothing into a results directory.
        assert_eq!(std::fs::read(dir.join(LOCK_FILE)).unwrap(), b"");
        drop(again);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_holder_is_read_off_proc_locks() {
        let text = "1: FLOCK  ADVISORY  WRITE 4242 00:2a:77 0 EOF\n\
                    2: POSIX  ADVISORY  WRITE 99 00:2a:78 0 EOF\n\
                    3: -> FLOCK  ADVISORY  WRITE 17 00:2a:79 0 EOF\n\
                    4: FLOCK  ADVISORY  WRITE 5 fd:01:79 0 EOF\n";
        assert_eq!(holder_in_proc_locks(text, 77), Some(4242));
        assert_eq!(holder_in_proc_locks(text, 78), None);
        assert_eq!(holder_in_proc_locks(text, 79), Some(5));
        assert_eq!(holder_in_proc_locks(text, 80), None);
    }

    fn tempdir(what: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("pt-files-{what}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }
}
