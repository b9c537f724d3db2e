//! `pantheon-guest-clock FILE`: sets a guest's real-time clock from the host's, through a file
//! on a 9p share of the host's filesystem ([`pantheon_guest::clock`] explains how). Run by the guest's
//! script (crates/guest) before the guest says it is up; prints and writes to FILE what it did.
//! Exit status 1 with a message on stderr if FILE cannot be written or read back, or the clock
//! cannot be set.

use std::fs::File;
use std::io::{Seek, Write};
use std::os::unix::fs::MetadataExt;
use std::process::ExitCode;

use pantheon_guest::clock::{estimate, Sample};

/// Exchanges with the host; the first also makes the host's filesystem stamp the next ones
/// finely (Linux ≥ 6.13 gives a file's next change a fine-grained time once it was read).
const SAMPLES: usize = 12;

fn now_ns() -> i128 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid pointer to a timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut t) };
    i128::from(t.tv_sec) * 1_000_000_000 + i128::from(t.tv_nsec)
}

fn run(path: &str) -> std::io::Result<String> {
    let mut f = File::create(path)?;
    let mut samples = Vec::with_capacity(SAMPLES);
    for _ in 0..SAMPLES {
        let before_ns = now_ns();
        f.rewind()?;
        f.write_all(b"x")?;
        let m = f.metadata()?;
        let after_ns = now_ns();
        let host_ns = i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec());
        samples.push(Sample {
            before_ns,
            host_ns,
            after_ns,
        });
    }
    let e = estimate(&samples[1..]).ok_or_else(|| std::io::Error::other("no usable sample"))?;
    let set = now_ns() + e.offset_ns;
    let t = libc::timespec {
        tv_sec: (set.div_euclid(1_000_000_000)) as libc::time_t,
        tv_nsec: (set.rem_euclid(1_000_000_000)) as libc::c_long,
    };
    // SAFETY: a valid pointer to a timespec.
    if unsafe { libc::clock_settime(libc::CLOCK_REALTIME, &t) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let text = format!("guest clock set from the host's: {}", e.describe());
    std::fs::write(path, format!("{text}\n"))?;
    Ok(text)
}

fn main() -> ExitCode {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: pantheon-guest-clock FILE (a file on a 9p share of the host's)");
        return ExitCode::from(2);
    };
    match run(&path) {
        Ok(text) => {
            println!("pantheon guest: {text}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("pantheon-guest-clock: {path}: {e}");
            ExitCode::FAILURE
        }
    }
}
