//! What a killed command leaves behind, found and removed. Our commands name what they create
//! after their own process id — namespaces `pt-<pid>-…` (`pantheon run local`, `calibrate`),
//! `ptc-<pid>-…` (`schemes check`), `pshell-<pid>` (`pantheon shell`, also the comment of its
//! NAT rule) and `ptun-<pid>-…` (`pantheon-tunnel`) — and remove it on every exit they see.
//! SIGKILL is one they do not see: a namespace whose owner is gone is an orphan, and so are
//! the processes still inside it (a scheme's sender reparented to init) and a NAT rule of a
//! shell that is gone. "Gone" is decided by the owner's claim on its pid
//! ([`netns::owner`]: a lock the kernel drops when it dies), so a killed owner that its parent
//! has not reaped yet (a zombie) is gone, and a later process that reuses its pid is not it. Every `pantheon` command run as root removes orphans first
//! ([`remove_orphans_noisily`]), and so does every command that creates namespaces (the engine's
//! [`before_creating_namespaces`], for library callers too); `pantheon clean` does it on demand.

use std::process::Command;

/// Prefixes of the namespace names our commands create, each followed by the creator's pid.
pub const OWNED_PREFIXES: &[&str] = &["pt-", "ptc-", "pshell-", "ptun-"];

/// What [`remove_orphans`] removed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Removed {
    /// Network namespaces (with every process that was still inside).
    pub namespaces: Vec<String>,
    /// `pantheon shell` NAT rules (`iptables -t nat` POSTROUTING, by comment).
    pub nat_rules: Vec<String>,
    /// Guests' job directories (`pantheon-guests-<pid>-…` in the temporary directory; their
    /// QEMU processes die with their owner, and are in its namespaces anyway).
    pub guest_jobs: Vec<String>,
}

impl Removed {
    /// Nothing was left behind.
    pub fn is_empty(&self) -> bool {
        self.namespaces.is_empty() && self.nat_rules.is_empty() && self.guest_jobs.is_empty()
    }
}

/// Removes the orphans of killed commands: their namespaces (killing the processes inside)
/// and `pantheon shell`'s NAT rules. Needs root; without it, nothing is removed.
pub fn remove_orphans() -> Removed {
    Removed {
        namespaces: netns::remove_orphans(OWNED_PREFIXES),
        nat_rules: remove_orphan_nat_rules(),
        guest_jobs: crate::guests::remove_orphan_jobs(),
    }
}

/// What a command that creates namespaces does first: as an ordinary user, runs again inside
/// namespaces of its own ([`crate::rootless::enter`]; errors naming what the machine lacks for
/// that), then removes the orphans of killed commands, saying so.
pub fn before_creating_namespaces(command: &str) -> anyhow::Result<()> {
    crate::rootless::enter(command)?;
    require_root(command, "network namespaces and TUN devices")?;
    remove_orphans_noisily();
    Ok(())
}

/// Whether this process runs as root (effective uid 0).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Errors unless this process runs as root: "`{command}` needs root ({why})".
pub fn require_root(command: &str, why: &str) -> anyhow::Result<()> {
    if !is_root() {
        anyhow::bail!("`{command}` needs root ({why})");
    }
    Ok(())
}

/// [`remove_orphans`], saying on stderr what it removed, if anything.
pub fn remove_orphans_noisily() {
    let r = remove_orphans();
    if !r.is_empty() {
        tracing::info!("removed what killed commands left behind: {}", describe(&r));
    }
}

/// `3 namespaces (pt-1-0-host, …), 1 NAT rule (pshell-7)`.
pub fn describe(r: &Removed) -> String {
    let mut parts = Vec::new();
    if !r.namespaces.is_empty() {
        parts.push(format!(
            "{} network namespace(s) ({})",
            r.namespaces.len(),
            r.namespaces.join(", ")
        ));
    }
    if !r.nat_rules.is_empty() {
        parts.push(format!(
            "{} NAT rule(s) ({})",
            r.nat_rules.len(),
            r.nat_rules.join(", ")
        ));
    }
    if !r.guest_jobs.is_empty() {
        parts.push(format!(
            "{} guest job directory(ies) ({})",
            r.guest_jobs.len(),
            r.guest_jobs.join(", ")
        ));
    }
    parts.join(", ")
}

/// The `pshell-<pid>` comment of a `iptables -S` rule line, if it has one.
fn shell_rule_owner(rule: &str) -> Option<(&str, u32)> {
    let mut words = rule.split_whitespace();
    words.find(|w| *w == "--comment")?;
    let comment = words.next()?.trim_matches('"');
    Some((comment, netns::owner_pid(comment, &["pshell-"])?))
}

fn remove_orphan_nat_rules() -> Vec<String> {
    let Ok(out) = Command::new("iptables")
        .args(["-w", "-t", "nat", "-S", "POSTROUTING"])
        .output()
    else {
        return Vec::new();
    };
    let mut removed = Vec::new();
    for rule in String::from_utf8_lossy(&out.stdout).lines() {
        let Some((comment, owner)) = shell_rule_owner(rule) else {
            continue;
        };
        let Some(spec) = rule.strip_prefix("-A ") else {
            continue;
        };
        if netns::owner::is_alive(owner) {
            continue;
        }
        let args: Vec<&str> = spec
            .split_whitespace()
            .map(|w| w.trim_matches('"'))
            .collect();
        let ok = Command::new("iptables")
            .args(["-w", "-t", "nat", "-D"])
            .args(&args)
            .output()
            .is_ok_and(|o| o.status.success());
        if ok {
            removed.push(comment.to_owned());
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owners_are_read_off_names_and_rule_comments() {
        assert_eq!(
            netns::owner_pid("pt-1234-0-host", OWNED_PREFIXES),
            Some(1234)
        );
        assert_eq!(
            netns::owner_pid("pt-1234-e3-0-rx1", OWNED_PREFIXES),
            Some(1234)
        );
        assert_eq!(netns::owner_pid("ptc-77-0-lo", OWNED_PREFIXES), Some(77));
        assert_eq!(netns::owner_pid("pshell-9", OWNED_PREFIXES), Some(9));
        assert_eq!(netns::owner_pid("ptun-5-server", OWNED_PREFIXES), Some(5));
        // Not ours, or no pid where ours put it.
        assert_eq!(netns::owner_pid("ptun-bad-5-s", OWNED_PREFIXES), None);
        assert_eq!(netns::owner_pid("a-r12-0-rx1", OWNED_PREFIXES), None);
        assert_eq!(netns::owner_pid("pt-", OWNED_PREFIXES), None);
        let rule = "-A POSTROUTING -s 100.64.0.4/32 -m comment --comment pshell-4242 -j MASQUERADE";
        assert_eq!(shell_rule_owner(rule), Some(("pshell-4242", 4242)));
        assert_eq!(
            shell_rule_owner("-A POSTROUTING -s 10.0.0.0/8 -j MASQUERADE"),
            None
        );
    }
}
