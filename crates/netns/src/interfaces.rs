//! The network interfaces of a namespace as typed values: name, MTU, addresses and byte
//! counters, read from iproute2's JSON (`ip -j -s addr show`) — one parser for every caller
//! (the runner's loopback counter, the agent's MTU and machine description).

use serde::Deserialize;

use crate::{Error, Result};

/// One interface, as `ip -j -s addr show` describes it (keys it has that we do not use are
/// ignored; missing ones take their default).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct Interface {
    /// Its name (`lo`, `eth0`, `tunnel`).
    #[serde(rename = "ifname", default)]
    pub name: String,
    /// Its MTU, bytes.
    #[serde(default)]
    pub mtu: u32,
    /// Its addresses.
    #[serde(rename = "addr_info", default)]
    pub addresses: Vec<Address>,
    /// Its counters since it came up (`-s`).
    #[serde(rename = "stats64", default)]
    pub stats: Option<Stats>,
}

/// One address of an interface.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct Address {
    /// `inet` or `inet6`.
    #[serde(default)]
    pub family: String,
    /// The address (`10.0.0.1`, `::1`).
    #[serde(default)]
    pub local: String,
    /// Its prefix length, bits.
    #[serde(rename = "prefixlen", default)]
    pub prefix_len: u8,
}

impl Address {
    /// `10.0.0.1/24`.
    pub fn with_prefix(&self) -> String {
        format!("{}/{}", self.local, self.prefix_len)
    }
}

/// An interface's counters.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct Stats {
    /// Received.
    #[serde(default)]
    pub rx: Counters,
    /// Sent.
    #[serde(default)]
    pub tx: Counters,
}

/// Bytes and packets one way.
#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize)]
pub struct Counters {
    /// Bytes.
    #[serde(default)]
    pub bytes: u64,
    /// Packets.
    #[serde(default)]
    pub packets: u64,
}

/// Parses `ip -j -s addr show`'s output. Errors name what was expected.
pub fn parse(json: &[u8]) -> std::result::Result<Vec<Interface>, serde_json::Error> {
    serde_json::from_slice(json)
}

/// The interfaces of network namespace `namespace` (`ip -n NAME`), or of this process's when
/// `None`. Errors: `ip` missing or failing ([`Error::Command`]), or output that is not
/// iproute2's JSON.
pub fn interfaces(namespace: Option<&str>) -> Result<Vec<Interface>> {
    let mut args: Vec<&str> = Vec::new();
    if let Some(ns) = namespace {
        args.extend(["-n", ns]);
    }
    args.extend(["-j", "-s", "addr", "show"]);
    let out = crate::command_output("ip", &args)?;
    parse(&out).map_err(|e| Error::Command {
        command: format!("ip {}", args.join(" ")),
        detail: format!("output not understood: {e}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iproute2s_json_reads_with_names_mtu_addresses_and_counters() {
        let json = br#"[{"ifindex":1,"ifname":"lo","flags":["LOOPBACK","UP"],"mtu":65536,
            "addr_info":[{"family":"inet","local":"127.0.0.1","prefixlen":8,"scope":"host"},
                         {"family":"inet6","local":"::1","prefixlen":128}],
            "stats64":{"rx":{"bytes":1200,"packets":3,"errors":0},
                       "tx":{"bytes":1200,"packets":3,"dropped":0}}},
            {"ifindex":4,"ifname":"tunnel","mtu":1500,"addr_info":[]}]"#;
        let ifs = parse(json).unwrap();
        assert_eq!(ifs.len(), 2);
        assert_eq!((ifs[0].name.as_str(), ifs[0].mtu), ("lo", 65536));
        assert_eq!(ifs[0].addresses[1].with_prefix(), "::1/128");
        assert_eq!(ifs[0].stats.as_ref().unwrap().tx.bytes, 1200);
        assert_eq!(ifs[1].stats, None);
        assert!(parse(b"not json").is_err());
    }

    #[test]
    fn this_namespaces_loopback_is_found() {
        let ifs = interfaces(None).unwrap();
        let lo = ifs.iter().find(|i| i.name == "lo").expect("lo");
        assert!(lo.mtu > 0);
        assert!(lo.stats.is_some());
    }
}
