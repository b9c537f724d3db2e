//! End hosts' TCP buffer limits: the `pt-host` shell (ours, not Mahimahi's).
//!
//! A flow that neither loses packets nor builds a queue is held by its end hosts, not by the
//! network: Linux lets a TCP connection keep at most its send buffer (`net.ipv4.tcp_wmem`'s
//! third value, bytes of socket memory, of which payload is a part) queued or in flight, and
//! advertises at most a share of its receive buffer (`net.ipv4.tcp_rmem`'s third value) as
//! its window. Over 100 Mbit/s × 180 ms (2.25 MB in flight to fill the path), 2017's default
//! Linux (tcp_wmem max 4 MiB, tcp_rmem max 6 MiB with half advertised) held a Cubic flow near
//! 89 Mbit/s: what Pantheon's report of seed 001 shows. A path replicated with today's
//! defaults is not that path.
//!
//! `pt-host SIDE KEY=MIN,DEFAULT,MAX …` sets those limits in the run's namespaces — `SIDE` is
//! `sender`, `receiver` or `both`; `KEY` is `tcp_rmem` or `tcp_wmem`, three byte counts as the
//! sysctl takes them — so that they travel with the emulator: in presets, in
//! `pantheon_metadata.json`, in a calibration's candidates. It is no stage of the path: packets
//! do not cross it, and its place in the chain does not matter (the last one given for a side
//! and key holds). The kernel applies both sysctls per network namespace (Linux ≥ 4.15). Since
//! Linux 6.6 the advertised share of the receive buffer is the payload-to-memory ratio measured
//! on arriving packets (`tcp_adv_win_scale`, 2017's fixed half, is no longer read), so the same
//! `tcp_rmem` may advertise another window than a 2017 kernel did; the send side is unchanged.
//!
//! ```
//! use pantheon_emucal::host::{HostLimits, HostSide, TcpMem};
//! let (side, limits) = HostLimits::parse(&["sender", "tcp_wmem=4096,16384,1048576"]).unwrap();
//! assert_eq!(side, HostSide::Sender);
//! assert_eq!(limits.tcp_wmem, Some(TcpMem { min: 4096, default: 16384, max: 1 << 20 }));
//! assert_eq!(limits.sysctls(), [("net.ipv4.tcp_wmem", "4096 16384 1048576".to_owned())]);
//! ```

use std::fmt;

/// Which end host a `pt-host` applies to: the scheme's sender (inside the emulated path, as
/// in Pantheon's local mode), its receiver, or both.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HostSide {
    /// The sender's host.
    Sender,
    /// The receiver's host.
    Receiver,
    /// Both.
    Both,
}

impl HostSide {
    /// The word in `pt-host SIDE`.
    pub fn word(self) -> &'static str {
        match self {
            HostSide::Sender => "sender",
            HostSide::Receiver => "receiver",
            HostSide::Both => "both",
        }
    }

    /// Whether limits given for `self` apply to the host `side` (`Sender` or `Receiver`).
    pub fn covers(self, side: HostSide) -> bool {
        self == HostSide::Both || self == side
    }
}

/// One of the kernel's three-value TCP memory settings (`net.ipv4.tcp_rmem`,
/// `net.ipv4.tcp_wmem`): bytes of socket memory a connection starts with at least (`min`),
/// starts with (`default`) and may grow to (`max`, what limits a bulk flow).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TcpMem {
    /// Least buffer under memory pressure, bytes.
    pub min: u64,
    /// Initial buffer, bytes.
    pub default: u64,
    /// Largest buffer autotuning may reach, bytes.
    pub max: u64,
}

impl fmt::Display for TcpMem {
    /// As the sysctl reads and writes it: `4096 16384 1048576`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} {}", self.min, self.default, self.max)
    }
}

/// The TCP buffer limits of one end host (`pt-host`); `None`: the machine's own.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct HostLimits {
    /// `net.ipv4.tcp_rmem`: receive buffer, which bounds the window the host advertises.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_rmem: Option<TcpMem>,
    /// `net.ipv4.tcp_wmem`: send buffer, which bounds the bytes queued and in flight.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_wmem: Option<TcpMem>,
}

impl HostLimits {
    /// Parses `pt-host`'s arguments: `SIDE KEY=MIN,DEFAULT,MAX …` (at least one key). Errors
    /// name the word that is wrong: an unknown side or key, a value that is not three byte
    /// counts with `0 < MIN ≤ DEFAULT ≤ MAX`.
    pub fn parse<S: AsRef<str>>(args: &[S]) -> Result<(HostSide, HostLimits), String> {
        let side = match args.first().map(AsRef::as_ref) {
            Some("sender") => HostSide::Sender,
            Some("receiver") => HostSide::Receiver,
            Some("both") => HostSide::Both,
            other => {
                return Err(format!(
                    "pt-host: SIDE must be sender, receiver or both, got `{}`",
                    other.unwrap_or("")
                ))
            }
        };
        let mut limits = HostLimits::default();
        for word in &args[1..] {
            let word = word.as_ref();
            let (key, value) = word.split_once('=').unwrap_or((word, ""));
            let slot = match key {
                "tcp_rmem" => &mut limits.tcp_rmem,
                "tcp_wmem" => &mut limits.tcp_wmem,
                _ => {
                    return Err(format!(
                        "pt-host: `{word}` is not tcp_rmem=MIN,DEFAULT,MAX or \
                         tcp_wmem=MIN,DEFAULT,MAX"
                    ))
                }
            };
            *slot = Some(parse_mem(key, value)?);
        }
        if limits == HostLimits::default() {
            return Err("pt-host: give tcp_rmem=MIN,DEFAULT,MAX and/or tcp_wmem=…".into());
        }
        Ok((side, limits))
    }

    /// The words after `pt-host SIDE`: `tcp_rmem=4096,87380,6291456 tcp_wmem=…`.
    pub fn words(&self) -> Vec<String> {
        self.named()
            .map(|(key, m)| format!("{key}={},{},{}", m.min, m.default, m.max))
            .collect()
    }

    /// The sysctls to write in a host's namespace: (name, value as the sysctl takes it).
    pub fn sysctls(&self) -> Vec<(&'static str, String)> {
        self.named()
            .map(|(key, m)| {
                let name = match key {
                    "tcp_rmem" => "net.ipv4.tcp_rmem",
                    _ => "net.ipv4.tcp_wmem",
                };
                (name, m.to_string())
            })
            .collect()
    }

    /// The limits a Pantheon report's "System info" states: its `net.ipv4.tcp_rmem = MIN
    /// DEFAULT MAX` and `net.ipv4.tcp_wmem = …` lines (as the report's text has them, e.g.
    /// `pdftotext pantheon_report.pdf`), wherever they are in `text`; all `None` if it states
    /// neither. Errors name the line (1-based) whose value is not three byte counts.
    pub fn from_system_info(text: &str) -> Result<HostLimits, String> {
        let mut limits = HostLimits::default();
        for (n, line) in text.lines().enumerate() {
            let Some((name, value)) = line.split_once('=') else {
                continue;
            };
            let (key, slot) = match name.trim() {
                "net.ipv4.tcp_rmem" => ("tcp_rmem", &mut limits.tcp_rmem),
                "net.ipv4.tcp_wmem" => ("tcp_wmem", &mut limits.tcp_wmem),
                _ => continue,
            };
            let value = value.split_whitespace().collect::<Vec<_>>().join(",");
            *slot = Some(parse_mem(key, &value).map_err(|e| format!("line {}: {e}", n + 1))?);
        }
        Ok(limits)
    }

    /// `self` with every limit `later` sets replaced by its.
    pub fn overridden_by(self, later: HostLimits) -> HostLimits {
        HostLimits {
            tcp_rmem: later.tcp_rmem.or(self.tcp_rmem),
            tcp_wmem: later.tcp_wmem.or(self.tcp_wmem),
        }
    }

    fn named(&self) -> impl Iterator<Item = (&'static str, TcpMem)> {
        [("tcp_rmem", self.tcp_rmem), ("tcp_wmem", self.tcp_wmem)]
            .into_iter()
            .filter_map(|(k, m)| Some((k, m?)))
    }
}

fn parse_mem(key: &str, value: &str) -> Result<TcpMem, String> {
    let bad = || {
        format!(
            "pt-host: {key} must be MIN,DEFAULT,MAX in bytes with 0 < MIN <= DEFAULT <= MAX, \
             got `{value}`"
        )
    };
    let v: Vec<u64> = value
        .split(',')
        .map(|n| n.trim().parse::<u64>())
        .collect::<Result<_, _>>()
        .map_err(|_| bad())?;
    match v[..] {
        [min, default, max] if 0 < min && min <= default && default <= max => {
            Ok(TcpMem { min, default, max })
        }
        _ => Err(bad()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_parse_back() {
        let (side, l) =
            HostLimits::parse(&["both", "tcp_rmem=4096,87380,6291456", "tcp_wmem=1,2,3"]).unwrap();
        assert_eq!(side, HostSide::Both);
        let mut again = vec![side.word().to_owned()];
        again.extend(l.words());
        assert_eq!(HostLimits::parse(&again).unwrap(), (side, l));
        assert_eq!(
            l.sysctls(),
            [
                ("net.ipv4.tcp_rmem", "4096 87380 6291456".to_owned()),
                ("net.ipv4.tcp_wmem", "1 2 3".to_owned())
            ]
        );
    }

    #[test]
    fn bad_arguments_name_the_word() {
        let e = |a: &[&str]| HostLimits::parse(a).unwrap_err();
        assert!(e(&["middle", "tcp_rmem=1,2,3"]).contains("`middle`"));
        assert!(e(&["sender"]).contains("give tcp_rmem"));
        assert!(e(&["sender", "tcp_mem=1,2,3"]).contains("`tcp_mem=1,2,3`"));
        assert!(e(&["sender", "tcp_wmem=1,2"]).contains("got `1,2`"));
        assert!(e(&["sender", "tcp_wmem=3,2,1"]).contains("got `3,2,1`"));
        assert!(e(&["sender", "tcp_wmem=0,2,3"]).contains("got `0,2,3`"));
        assert!(e(&["sender", "tcp_wmem=a,2,3"]).contains("got `a,2,3`"));
    }

    #[test]
    fn a_reports_system_info_gives_its_hosts_limits() {
        // Seed 000's report (2018): the hosts' buffers raised to 512 MiB.
        let text = "System info:\n\nLinux 4.15.0-1020-aws\n\nnet.core.default_qdisc = fq\n\n\
                    net.core.rmem_max = 536870912\n\nnet.ipv4.tcp_rmem = 4096 16777216 536870912\n\n\
                    net.ipv4.tcp_wmem = 4096\t16777216\t536870912\n";
        let l = HostLimits::from_system_info(text).unwrap();
        let m = TcpMem {
            min: 4096,
            default: 16_777_216,
            max: 536_870_912,
        };
        assert_eq!((l.tcp_rmem, l.tcp_wmem), (Some(m), Some(m)));
        assert_eq!(
            HostLimits::from_system_info("Linux 4.9\n").unwrap(),
            HostLimits::default()
        );
        let e = HostLimits::from_system_info("x\nnet.ipv4.tcp_wmem = 4096 lots\n").unwrap_err();
        assert!(
            e.starts_with("line 2: ") && e.contains("`4096,lots`"),
            "{e}"
        );
    }

    #[test]
    fn a_later_limit_overrides_an_earlier_one() {
        let m = |max| TcpMem {
            min: 1,
            default: 1,
            max,
        };
        let a = HostLimits {
            tcp_rmem: Some(m(10)),
            tcp_wmem: Some(m(20)),
        };
        let b = HostLimits {
            tcp_rmem: None,
            tcp_wmem: Some(m(30)),
        };
        assert_eq!(
            a.overridden_by(b),
            HostLimits {
                tcp_rmem: Some(m(10)),
                tcp_wmem: Some(m(30))
            }
        );
        assert!(HostSide::Both.covers(HostSide::Sender));
        assert!(!HostSide::Receiver.covers(HostSide::Sender));
    }
}
