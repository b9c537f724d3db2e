//! Queue disciplines of `mm-link` (`--uplink-queue=TYPE --uplink-queue-args=ARGS`).
//!
//! Byte counts include Mahimahi's 4-byte TUN header (a full-size packet counts 1504 bytes), so
//! `bytes=` limits mean what they mean in Mahimahi. The packet being transmitted (partly sent
//! in an opportunity) is outside the queue, as in Mahimahi: `packets=50` holds 50 + 1 in transit.

use std::collections::VecDeque;

use crate::Packet;

/// Mahimahi's per-packet header that all of mm-link's byte accounting includes.
pub const TUN_HEADER: usize = 4;

/// A parsed queue specification.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum QueueSpec {
    /// Unbounded FIFO (mm-link's default).
    Infinite,
    /// Tail drop: an arriving packet is accepted iff afterwards the queue holds at most
    /// `packets` packets (if set) and at most `bytes` bytes (if set).
    DropTail {
        /// Packet limit, if set.
        packets: Option<u64>,
        /// Byte limit (including 4-byte headers), if set.
        bytes: Option<u64>,
    },
}

impl QueueSpec {
    /// Parses Mahimahi's `TYPE` and `ARGS` (`"packets=50"`, `"bytes=30000, packets=20"`).
    /// Errors name the offending word. Types other than `infinite` and `droptail` are not
    /// implemented yet (drophead, codel, pie: tracked in the emulator issue).
    pub fn parse(kind: &str, args: &str) -> Result<QueueSpec, String> {
        let arg = |name: &str| -> Result<Option<u64>, String> {
            let key = format!("{name}=");
            match args.find(&key) {
                None => Ok(None),
                Some(i) => {
                    let rest = &args[i + key.len()..];
                    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
                    digits
                        .parse::<u64>()
                        .map(|v| (v > 0).then_some(v))
                        .map_err(|_| {
                            format!("queue argument `{name}=` needs an integer in {args:?}")
                        })
                }
            }
        };
        match kind {
            "infinite" => {
                if args.trim().is_empty() {
                    Ok(QueueSpec::Infinite)
                } else {
                    Err(format!("queue type `infinite` takes no arguments, got {args:?}"))
                }
            }
            "droptail" => {
                let (packets, bytes) = (arg("packets")?, arg("bytes")?);
                if packets.is_none() && bytes.is_none() {
                    return Err(format!(
                        "queue type `droptail` needs packets=N and/or bytes=N, got {args:?}"
                    ));
                }
                Ok(QueueSpec::DropTail { packets, bytes })
            }
            "drophead" | "codel" | "pie" => Err(format!(
                "queue type `{kind}` is not implemented yet (supported: infinite, droptail)"
            )),
            other => Err(format!(
                "unknown queue type `{other}` (Mahimahi's are infinite, droptail, drophead, codel, pie)"
            )),
        }
    }

    /// The mm-link log's description of the queue, e.g. `droptail [packets=50]`.
    pub fn describe(&self) -> String {
        match self {
            QueueSpec::Infinite => "infinite".into(),
            QueueSpec::DropTail { packets, bytes } => {
                let mut parts = Vec::new();
                if let Some(b) = bytes {
                    parts.push(format!("bytes={b}"));
                }
                if let Some(p) = packets {
                    parts.push(format!("packets={p}"));
                }
                format!("droptail [{}]", parts.join(", "))
            }
        }
    }
}

/// A FIFO of packets with their arrival times and the spec's admission rule.
#[derive(Debug)]
pub struct PacketQueue {
    spec: QueueSpec,
    items: VecDeque<(u64, Packet)>,
    bytes: u64,
    dropped: u64,
}

impl PacketQueue {
    /// An empty queue.
    pub fn new(spec: QueueSpec) -> PacketQueue {
        PacketQueue {
            spec,
            items: VecDeque::new(),
            bytes: 0,
            dropped: 0,
        }
    }

    /// Offers a packet that arrived at `t` (ns); returns it back if the discipline drops it.
    pub fn enqueue(&mut self, t: u64, pkt: Packet) -> Result<(), Packet> {
        let size = (pkt.len() + TUN_HEADER) as u64;
        if let QueueSpec::DropTail { packets, bytes } = self.spec {
            let over_p = packets.is_some_and(|p| self.items.len() as u64 + 1 > p);
            let over_b = bytes.is_some_and(|b| self.bytes + size > b);
            if over_p || over_b {
                self.dropped += 1;
                return Err(pkt);
            }
        }
        self.bytes += size;
        self.items.push_back((t, pkt));
        Ok(())
    }

    /// Arrival time of the head packet.
    pub fn head_arrival(&self) -> Option<u64> {
        self.items.front().map(|(t, _)| *t)
    }

    /// Removes the head packet.
    pub fn dequeue(&mut self) -> Option<(u64, Packet)> {
        let item = self.items.pop_front()?;
        self.bytes -= (item.1.len() + TUN_HEADER) as u64;
        Some(item)
    }

    /// Packets queued.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Packets dropped by the discipline so far.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_mahimahi_args() {
        assert_eq!(
            QueueSpec::parse("infinite", "").unwrap(),
            QueueSpec::Infinite
        );
        assert_eq!(
            QueueSpec::parse("droptail", "packets=50").unwrap(),
            QueueSpec::DropTail {
                packets: Some(50),
                bytes: None
            }
        );
        assert_eq!(
            QueueSpec::parse("droptail", "bytes=30000, packets=20").unwrap(),
            QueueSpec::DropTail {
                packets: Some(20),
                bytes: Some(30000)
            }
        );
        assert!(QueueSpec::parse("droptail", "").is_err());
        assert!(QueueSpec::parse("infinite", "packets=3").is_err());
        assert!(QueueSpec::parse("fifo", "").unwrap_err().contains("`fifo`"));
    }

    #[test]
    fn droptail_counts_packets_and_bytes_with_header() {
        let mut q = PacketQueue::new(QueueSpec::parse("droptail", "packets=2").unwrap());
        assert!(q.enqueue(0, vec![0; 1500]).is_ok());
        assert!(q.enqueue(0, vec![0; 1500]).is_ok());
        assert!(q.enqueue(0, vec![0; 40]).is_err());
        assert_eq!(q.dropped(), 1);
        // 2 × 1504 = 3008 bytes fit exactly; one more byte does not.
        let mut q = PacketQueue::new(QueueSpec::parse("droptail", "bytes=3008").unwrap());
        assert!(q.enqueue(0, vec![0; 1500]).is_ok());
        assert!(q.enqueue(0, vec![0; 1500]).is_ok());
        assert!(q.enqueue(0, vec![0; 1]).is_err());
        q.dequeue();
        assert!(q.enqueue(0, vec![0; 1500]).is_ok());
    }
}
