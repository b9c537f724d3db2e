//! The tunnel's wire format: one UDP datagram per inner IP packet, prefixed by an 8-byte UID.
//!
//! ```text
//!  0               8                         8 + ip_len
//!  +---------------+--------------------------+
//!  | uid (u64, LE) | inner IP packet (as read |
//!  |               | from the TUN device)     |
//!  +---------------+--------------------------+
//! ```
//! This is pantheon-tunnel's `wrapped_packet_header` (a host-order `uint64_t`, little-endian on
//! x86), so the per-packet overhead on the wire is the same 36 bytes: 20 (outer IPv4) + 8 (UDP) +
//! 8 (UID). A datagram of exactly 8 bytes is a control message: UID `u64::MAX` is the client's
//! SYN, `u64::MAX - 1` the server's ACK (both as pantheon-tunnel); ours add `u64::MAX - 2`, FIN
//! (the sender is closing the tunnel), and `u64::MAX - 3`, KEEPALIVE (sent by an idle endpoint
//! that watches for a vanished peer). pantheon-tunnel has neither: to run opposite an original
//! mm-tunnelserver/mm-tunnelclient, turn the peer timeout off.

/// Length of the UID header in bytes.
pub const UID_LEN: usize = 8;
/// Outer IPv4 (20) + UDP (8) header bytes added around every tunnelled datagram.
pub const OUTER_HEADERS: usize = 28;
/// Total per-packet overhead of the tunnel: outer headers + UID = 36 bytes.
pub const OVERHEAD: usize = OUTER_HEADERS + UID_LEN;
/// Control UID sent by the client to open the tunnel.
pub const SYN: u64 = u64::MAX;
/// Control UID sent by the server in answer to every SYN.
pub const ACK: u64 = u64::MAX - 1;
/// Control UID sent (a few times) by an endpoint that is closing the tunnel.
pub const FIN: u64 = u64::MAX - 2;
/// Control UID sent by an idle endpoint so that its peer knows it is alive.
pub const KEEPALIVE: u64 = u64::MAX - 3;

/// Inner MTU for a path MTU `path_mtu`: `path_mtu − 36` (1464 for 1500), as pantheon-tunnel.
pub const fn inner_mtu(path_mtu: u16) -> u16 {
    path_mtu.saturating_sub(OVERHEAD as u16)
}

/// Why a datagram is not a tunnel packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// Shorter than the 8-byte UID header.
    #[error("datagram of {0} bytes is shorter than the 8-byte UID header")]
    Truncated(usize),
    /// An 8-byte datagram whose UID is neither SYN nor ACK.
    #[error("8-byte control datagram with unknown UID {0:#x}")]
    UnknownControl(u64),
    /// The inner packet does not start with an IPv4/IPv6 version nibble.
    #[error("inner packet is not IPv4 or IPv6 (first byte {0:#04x})")]
    NotIp(u8),
}

/// A parsed datagram, borrowing the input buffer.
#[derive(Debug, PartialEq, Eq)]
pub enum Datagram<'a> {
    /// Client → server handshake request.
    Syn,
    /// Server → client handshake answer.
    Ack,
    /// The peer is closing the tunnel.
    Fin,
    /// The peer is alive (and idle).
    Keepalive,
    /// A tunnelled packet: its UID and the inner IP packet.
    Data {
        /// The sender's per-packet unique id.
        uid: u64,
        /// The inner IP packet, to be written to the TUN device.
        packet: &'a [u8],
    },
}

/// Parses one received UDP payload. Never panics; malformed input gives an [`Error`].
pub fn parse(buf: &[u8]) -> Result<Datagram<'_>, Error> {
    let Some(uid) = uid(buf) else {
        return Err(Error::Truncated(buf.len()));
    };
    let packet = &buf[UID_LEN..];
    if packet.is_empty() {
        return match uid {
            SYN => Ok(Datagram::Syn),
            ACK => Ok(Datagram::Ack),
            FIN => Ok(Datagram::Fin),
            KEEPALIVE => Ok(Datagram::Keepalive),
            other => Err(Error::UnknownControl(other)),
        };
    }
    match packet[0] >> 4 {
        4 | 6 => Ok(Datagram::Data { uid, packet }),
        _ => Err(Error::NotIp(packet[0])),
    }
}

/// The UID a datagram starts with; `None` if it is shorter than [`UID_LEN`].
pub fn uid(buf: &[u8]) -> Option<u64> {
    Some(u64::from_le_bytes(buf.get(..UID_LEN)?.try_into().ok()?))
}

/// Writes the UID header into `buf[..8]` (the headroom left before the inner packet).
pub fn write_uid(buf: &mut [u8], uid: u64) {
    buf[..UID_LEN].copy_from_slice(&uid.to_le_bytes());
}

/// An 8-byte control datagram.
pub fn control(uid: u64) -> [u8; UID_LEN] {
    uid.to_le_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_control_and_data() {
        assert_eq!(parse(&control(SYN)), Ok(Datagram::Syn));
        assert_eq!(parse(&control(ACK)), Ok(Datagram::Ack));
        assert_eq!(parse(&control(FIN)), Ok(Datagram::Fin));
        assert_eq!(parse(&control(KEEPALIVE)), Ok(Datagram::Keepalive));
        assert_eq!(parse(&control(7)), Err(Error::UnknownControl(7)));
        assert_eq!(parse(&[1, 2, 3]), Err(Error::Truncated(3)));
        // uid 0x0102 followed by a (fake) IPv4 packet.
        let bytes = [2, 1, 0, 0, 0, 0, 0, 0, 0x45, 0, 0, 20];
        assert_eq!(
            parse(&bytes),
            Ok(Datagram::Data {
                uid: 0x0102,
                packet: &bytes[8..]
            })
        );
        let mut not_ip = bytes;
        not_ip[8] = 0x12;
        assert_eq!(parse(&not_ip), Err(Error::NotIp(0x12)));
    }

    #[test]
    fn mtu_matches_pantheon() {
        assert_eq!(inner_mtu(1500), 1464);
        assert_eq!(OVERHEAD, 36);
    }
}
