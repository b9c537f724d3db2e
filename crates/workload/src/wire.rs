//! The transfer header a sending program writes before each transfer's bytes, so that the
//! receiving program can record what it received against what was sent, and the one-byte
//! acknowledgement the receiver returns when the last byte is in.
//!
//! ```text
//!  0       4       8              16             24             32             40
//!  | magic | 0     | id (u64)     | page (u64)   | size (u64)   | start_ns (u64)|  then `size` bytes
//! ```
//!
//! Little-endian. `magic` is `PTW1`; `start_ns` is the sender's start of the transfer, ns since
//! the Unix epoch. After the last byte the receiver writes [`ACK`]: a transfer on a connection
//! that carries more (a page's objects) begins when the sender reads it, as an HTTP/1.1
//! request follows the previous response; a single transfer's sender knows it is complete.

use crate::record::Started;

/// Bytes of a header.
pub const HEADER_LEN: usize = 40;
/// First four bytes of every header.
pub const MAGIC: [u8; 4] = *b"PTW1";
/// The receiver's acknowledgement of a complete transfer.
pub const ACK: u8 = 0x06;

/// What a header says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Transfer id.
    pub id: u64,
    /// Page id (0: none).
    pub page: u64,
    /// Bytes that follow.
    pub size: u64,
    /// The sender's start, ns since the Unix epoch.
    pub start_ns: u64,
}

impl From<&Started> for Header {
    fn from(s: &Started) -> Header {
        Header {
            id: s.id,
            page: s.page,
            size: s.size,
            start_ns: s.start_ns,
        }
    }
}

impl Header {
    /// Its 40 bytes.
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[..4].copy_from_slice(&MAGIC);
        for (i, v) in [self.id, self.page, self.size, self.start_ns]
            .iter()
            .enumerate()
        {
            b[8 + 8 * i..16 + 8 * i].copy_from_slice(&v.to_le_bytes());
        }
        b
    }

    /// Reads 40 bytes; `None` if the magic is not there (not one of our senders).
    pub fn decode(b: &[u8; HEADER_LEN]) -> Option<Header> {
        if b[..4] != MAGIC {
            return None;
        }
        let field = |i: usize| u64::from_le_bytes(b[8 + 8 * i..16 + 8 * i].try_into().unwrap());
        Some(Header {
            id: field(0),
            page: field(1),
            size: field(2),
            start_ns: field(3),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_header_reads_back_and_anything_else_is_refused() {
        let h = Header {
            id: 7,
            page: 2,
            size: 1_000_000,
            start_ns: 1_764_000_000_123_456_789,
        };
        let b = h.encode();
        assert_eq!(&b[..4], b"PTW1");
        assert_eq!(Header::decode(&b), Some(h));
        let mut other = b;
        other[0] = b'G';
        assert_eq!(Header::decode(&other), None);
    }
}
