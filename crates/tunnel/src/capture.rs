//! pcapng captures of the inner packets a tunnel endpoint forwarded (issue 54), for Wireshark
//! and tshark.
//!
//! The packet logs ([`crate::log`]) keep each packet's UID, size, time and ECN codepoint:
//! enough for throughput and delay, not for "why did this flow stall". A capture keeps the
//! first `snaplen` bytes of every inner IP packet (headers: IP, TCP or UDP, the start of a QUIC
//! packet) beside the log, one file per log: `….egress.ptlog` → `….egress.pcapng`.
//!
//! The format is pcapng (IETF draft-ietf-opsawg-pcapng): one Section Header Block, one
//! Interface Description Block (link type `LINKTYPE_RAW` = 101: packets start with their IP
//! header; `if_tsresol` = 9: nanosecond timestamps), then one Enhanced Packet Block per packet:
//!
//! - its timestamp is the endpoint's clock (`CLOCK_REALTIME` at the endpoint's start + the
//!   monotonic time since), the same instant as the packet's log record — each side's own
//!   clock, uncorrected, like the log;
//! - `epb_flags` gives the direction: outbound for the egress capture (read from the TUN
//!   device, sent into the path), inbound for the ingress one (arrived from the path);
//! - `epb_packetid` (option 5) carries the packet's UID, the same on both sides, so the sender's
//!   egress capture and the receiver's ingress capture of one flow join on it, as the logs do;
//!   the UID is also the packet's comment, `uid N` (`frame.comment` in tshark), for tools that
//!   do not show `epb_packetid`.
//!
//! The blocks are encoded here, into a preallocated chunk of a [`Ring`], so capturing costs the
//! forwarding thread a copy of `snaplen` bytes and no allocation; the file is written by the
//! ring's thread.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::ring::{Ring, Sink};

/// Bytes of each packet kept by default: IPv4 + TCP with options, or the start of a QUIC
/// packet, with room to spare.
pub const DEFAULT_SNAPLEN: u32 = 128;
/// Largest snap length (a whole packet of the largest inner MTU).
pub const MAX_SNAPLEN: u32 = 65_535;
/// pcapng's link type for packets that begin with an IPv4 or IPv6 header.
pub const LINKTYPE_RAW: u16 = 101;
/// Bytes of a chunk of the capture ring: 256 KiB, ~1 500 packets at the default snap length
/// (the ring's 32 chunks: 8 MiB, ~45 000 packets, while the disk catches up).
const CHUNK_BYTES: usize = 256 << 10;

const SHB: u32 = 0x0A0D_0D0A;
const IDB: u32 = 0x0000_0001;
const EPB: u32 = 0x0000_0006;
const BYTE_ORDER_MAGIC: u32 = 0x1A2B_3C4D;
const OPT_END: u16 = 0;
const OPT_COMMENT: u16 = 1;
const SHB_USERAPPL: u16 = 4;
const IF_NAME: u16 = 2;
const IF_TSRESOL: u16 = 9;
const EPB_FLAGS: u16 = 2;
const EPB_PACKETID: u16 = 5;
/// `epb_flags` bits 0–1: the packet's direction.
const INBOUND: u32 = 0b01;
const OUTBOUND: u32 = 0b10;
/// Longest `uid N` comment: "uid " and 20 digits.
const COMMENT_MAX: usize = 24;

/// The capture written beside the packet log `log`: its name with `.ptlog` replaced by
/// `.pcapng` (`…_flow1.egress.ptlog` → `…_flow1.egress.pcapng`), or `.pcapng` appended.
pub fn capture_path(log: &Path) -> PathBuf {
    let name = log
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let stem = name.strip_suffix(".ptlog").unwrap_or(&name);
    log.with_file_name(format!("{stem}.pcapng"))
}

/// What a capture's interface is called: the log's direction and kind and the flow, e.g.
/// `datalink egress, flow 1`.
pub fn interface_name(direction: &str, kind: &str, flow: u16) -> String {
    format!("{direction} {kind}, flow {flow}")
}

/// `n` rounded up to a multiple of 4 (pcapng pads every field to 32 bits).
const fn padded(n: usize) -> usize {
    (n + 3) & !3
}

fn put_u16(out: &mut Vec<u8>, v: u16) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// An option: code, length, value, zero padding.
fn put_option(out: &mut Vec<u8>, code: u16, value: &[u8]) {
    put_u16(out, code);
    put_u16(out, value.len() as u16);
    out.extend_from_slice(value);
    out.resize(out.len() + padded(value.len()) - value.len(), 0);
}

/// Starts a block of type `kind` at the end of `out`; returns where it starts, for
/// [`end_block`].
fn begin_block(out: &mut Vec<u8>, kind: u32) -> usize {
    let at = out.len();
    put_u32(out, kind);
    put_u32(out, 0); // total length, set by end_block
    at
}

/// Ends the block that starts at `at` (every block here has options): the end-of-options
/// marker, then the total length, written at both ends.
fn end_block(out: &mut Vec<u8>, at: usize) {
    put_u16(out, OPT_END);
    put_u16(out, 0);
    let total = (out.len() - at + 4) as u32;
    put_u32(out, total);
    out[at + 4..at + 8].copy_from_slice(&total.to_le_bytes());
}

/// The file's first two blocks: a Section Header Block naming `application`, and the one
/// interface — `interface` (e.g. `datalink egress, flow 1`), link type [`LINKTYPE_RAW`],
/// `snaplen`, nanosecond timestamps.
pub fn file_header(application: &str, interface: &str, snaplen: u32) -> Vec<u8> {
    let mut out = Vec::new();
    let at = begin_block(&mut out, SHB);
    put_u32(&mut out, BYTE_ORDER_MAGIC);
    put_u16(&mut out, 1); // major version
    put_u16(&mut out, 0); // minor version
    out.extend_from_slice(&u64::MAX.to_le_bytes()); // section length: not given
    put_option(&mut out, SHB_USERAPPL, application.as_bytes());
    end_block(&mut out, at);
    let at = begin_block(&mut out, IDB);
    put_u16(&mut out, LINKTYPE_RAW);
    put_u16(&mut out, 0); // reserved
    put_u32(&mut out, snaplen);
    put_option(&mut out, IF_NAME, interface.as_bytes());
    put_option(&mut out, IF_TSRESOL, &[9]);
    end_block(&mut out, at);
    out
}

/// Bytes [`enhanced_packet`] appends for a packet of which `captured` bytes are kept.
pub const fn enhanced_packet_len(captured: usize) -> usize {
    // Header 28, data, flags option 8, packet id option 12, comment option 4 + 24,
    // end of options 4, trailing length 4.
    28 + padded(captured) + 8 + 12 + 4 + COMMENT_MAX + 4 + 4
}

/// Appends one Enhanced Packet Block to `out`: the first `snaplen` bytes of `packet` (an IP
/// packet), its time `t_ns` (ns since the Unix epoch), its UID (as `epb_packetid` and as the
/// comment `uid N`) and its direction (`inbound`: arrived from the path; else sent into it).
/// Appends at most [`enhanced_packet_len`]`(min(len, snaplen))` bytes; allocates nothing when
/// `out` has that room.
pub fn enhanced_packet(
    out: &mut Vec<u8>,
    t_ns: u64,
    packet: &[u8],
    snaplen: u32,
    uid: u64,
    inbound: bool,
) {
    let captured = packet.len().min(snaplen as usize);
    let at = begin_block(out, EPB);
    put_u32(out, 0); // interface 0
    put_u32(out, (t_ns >> 32) as u32);
    put_u32(out, t_ns as u32);
    put_u32(out, captured as u32);
    put_u32(out, packet.len() as u32);
    out.extend_from_slice(&packet[..captured]);
    out.resize(out.len() + padded(captured) - captured, 0);
    let flags = if inbound { INBOUND } else { OUTBOUND };
    put_option(out, EPB_FLAGS, &flags.to_le_bytes());
    put_option(out, EPB_PACKETID, &uid.to_le_bytes());
    let mut comment = [0u8; COMMENT_MAX];
    comment[..4].copy_from_slice(b"uid ");
    let len = 4 + write_decimal(&mut comment[4..], uid);
    put_option(out, OPT_COMMENT, &comment[..len]);
    end_block(out, at);
}

/// Writes `v` in decimal at the start of `buf` (at least 20 bytes); returns the digits written.
fn write_decimal(buf: &mut [u8], mut v: u64) -> usize {
    let mut digits = [0u8; 20];
    let mut n = 0;
    loop {
        digits[n] = b'0' + (v % 10) as u8;
        n += 1;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    for (i, d) in digits[..n].iter().rev().enumerate() {
        buf[i] = *d;
    }
    n
}

/// A capture file being written (the ring's writer thread owns it).
struct CaptureFile(BufWriter<File>);

impl Sink<u8> for CaptureFile {
    fn write(&mut self, items: &[u8]) -> io::Result<()> {
        self.0.write_all(items)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

/// One capture: the forwarding thread's end (blocks are encoded into the ring's chunks and
/// written by its thread).
#[derive(Debug)]
pub struct Capture {
    ring: Ring<u8>,
    snaplen: u32,
    base_realtime_ns: i64,
    inbound: bool,
}

impl Capture {
    /// Creates (truncates) `path` and writes the file's header: `interface` names what is
    /// captured, `snaplen` (1 ..= [`MAX_SNAPLEN`]) the bytes kept of each packet,
    /// `base_realtime_ns` the wall-clock time of the endpoint's time 0 (as the log's header),
    /// `inbound` the direction of every packet. Errors: the file cannot be created or written,
    /// or `snaplen` is out of range.
    pub fn create(
        path: &Path,
        interface: &str,
        snaplen: u32,
        base_realtime_ns: i64,
        inbound: bool,
    ) -> io::Result<Capture> {
        if !(1..=MAX_SNAPLEN).contains(&snaplen) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("snap length {snaplen} bytes: give 1 to {MAX_SNAPLEN}"),
            ));
        }
        let mut out = BufWriter::with_capacity(CHUNK_BYTES, File::create(path)?);
        let app = format!("pantheon-tunnel {}", env!("CARGO_PKG_VERSION"));
        out.write_all(&file_header(&app, interface, snaplen))?;
        let ring = Ring::with_sink(CaptureFile(out), CHUNK_BYTES, "tunnel-capture".into())?;
        Ok(Capture {
            ring,
            snaplen,
            base_realtime_ns,
            inbound,
        })
    }

    /// Captures `packet` (an inner IP packet), forwarded at `t_ns` on the endpoint's clock (ns
    /// since its time 0, as the log record), with its UID. Counted as dropped if the disk fell
    /// behind.
    #[inline]
    pub fn packet(&mut self, t_ns: u64, packet: &[u8], uid: u64) {
        let captured = packet.len().min(self.snaplen as usize);
        let at = (self.base_realtime_ns as u64).wrapping_add(t_ns);
        if let Some(chunk) = self.ring.room(enhanced_packet_len(captured)) {
            enhanced_packet(chunk, at, packet, self.snaplen, uid, self.inbound);
        }
    }

    /// Writes everything and closes the file; returns the packets dropped because the disk
    /// fell behind, or the writer's error.
    pub fn finish(self) -> io::Result<u64> {
        self.ring.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The blocks of a pcapng file: (type, body without type and lengths), checking that each
    /// block's two lengths agree and are multiples of 4 — an independent reading of the format.
    fn blocks(bytes: &[u8]) -> Vec<(u32, Vec<u8>)> {
        let u32_at = |i: usize| u32::from_le_bytes(bytes[i..i + 4].try_into().unwrap());
        let mut out = Vec::new();
        let mut at = 0;
        while at < bytes.len() {
            let (kind, len) = (u32_at(at), u32_at(at + 4) as usize);
            assert_eq!(len % 4, 0, "block at {at}: length {len}");
            assert_eq!(
                u32_at(at + len - 4) as usize,
                len,
                "block at {at}: trailing length"
            );
            out.push((kind, bytes[at + 8..at + len - 4].to_vec()));
            at += len;
        }
        assert_eq!(at, bytes.len());
        out
    }

    /// The options of a block body from `from`: (code, value).
    fn options(body: &[u8], from: usize) -> Vec<(u16, Vec<u8>)> {
        let mut out = Vec::new();
        let mut at = from;
        loop {
            let code = u16::from_le_bytes([body[at], body[at + 1]]);
            let len = u16::from_le_bytes([body[at + 2], body[at + 3]]) as usize;
            if code == OPT_END {
                assert_eq!(at + 4, body.len(), "end of options ends the block");
                return out;
            }
            out.push((code, body[at + 4..at + 4 + len].to_vec()));
            at += 4 + padded(len);
        }
    }

    #[test]
    fn header_and_packets_are_pcapng_blocks() {
        let mut bytes = file_header("pantheon-tunnel test", "datalink egress, flow 1", 128);
        let packet: Vec<u8> = (0..200u8).collect();
        let mut epb = Vec::with_capacity(enhanced_packet_len(128));
        let room = epb.capacity();
        enhanced_packet(&mut epb, 1_700_000_000_123_456_789, &packet, 128, 42, false);
        assert!(epb.len() <= enhanced_packet_len(128));
        assert_eq!(epb.capacity(), room, "no reallocation");
        bytes.extend_from_slice(&epb);
        enhanced_packet(&mut bytes, 5, &packet[..30], 128, u64::MAX - 4, true);
        let b = blocks(&bytes);
        assert_eq!(
            b.iter().map(|x| x.0).collect::<Vec<_>>(),
            [SHB, IDB, EPB, EPB]
        );
        // Section header: byte-order magic, version 1.0, section length -1, the application.
        let shb = &b[0].1;
        assert_eq!(&shb[..4], &BYTE_ORDER_MAGIC.to_le_bytes());
        assert_eq!(&shb[4..8], &[1, 0, 0, 0]);
        assert_eq!(&shb[8..16], &[0xff; 8]);
        assert_eq!(
            options(shb, 16),
            [(SHB_USERAPPL, b"pantheon-tunnel test".to_vec())]
        );
        // Interface: raw IP, snap length 128, its name, nanoseconds.
        let idb = &b[1].1;
        assert_eq!(&idb[..4], &[101, 0, 0, 0]);
        assert_eq!(&idb[4..8], &128u32.to_le_bytes());
        assert_eq!(
            options(idb, 8),
            [
                (IF_NAME, b"datalink egress, flow 1".to_vec()),
                (IF_TSRESOL, vec![9])
            ]
        );
        // The first packet: 128 of its 200 bytes, its time split high/low, outbound, UID 42.
        let e = &b[2].1;
        let word = |i: usize| u32::from_le_bytes(e[i..i + 4].try_into().unwrap());
        assert_eq!(word(0), 0, "interface 0");
        let t = (u64::from(word(4)) << 32) | u64::from(word(8));
        assert_eq!(t, 1_700_000_000_123_456_789);
        assert_eq!((word(12), word(16)), (128, 200));
        assert_eq!(&e[20..148], &packet[..128]);
        assert_eq!(
            options(e, 148),
            [
                (EPB_FLAGS, OUTBOUND.to_le_bytes().to_vec()),
                (EPB_PACKETID, 42u64.to_le_bytes().to_vec()),
                (OPT_COMMENT, b"uid 42".to_vec())
            ]
        );
        // The second: 30 bytes padded to 32, inbound, the largest data UID in full.
        let e = &b[3].1;
        assert_eq!(&e[12..20], &[30, 0, 0, 0, 30, 0, 0, 0]);
        assert_eq!(&e[50..52], &[0, 0], "padding");
        let opts = options(e, 52);
        assert_eq!(opts[0].1, INBOUND.to_le_bytes());
        assert_eq!(opts[2].1, format!("uid {}", u64::MAX - 4).into_bytes());
    }

    #[test]
    fn a_capture_is_named_after_its_log() {
        let p = |s: &str| capture_path(Path::new(s));
        assert_eq!(
            p("/r/cubic_datalink_run1_flow1.egress.ptlog"),
            Path::new("/r/cubic_datalink_run1_flow1.egress.pcapng")
        );
        assert_eq!(p("a.log.egress"), Path::new("a.log.egress.pcapng"));
    }

    #[test]
    fn a_capture_file_holds_every_packet_in_order() {
        let dir = std::env::temp_dir().join(format!("ptcapture-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("c.pcapng");
        let mut c = Capture::create(&path, "acklink ingress, flow 2", 64, 1_000, true).unwrap();
        // Several chunks' worth (blocks of 136 bytes, ~1 900 a chunk).
        let n = 20_000u64;
        let packet = [0x45u8; 100];
        for uid in 0..n {
            c.packet(uid * 10, &packet, uid);
            if uid % 2000 == 0 {
                // Let the writer keep up, so that this test checks order, not dropping.
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        }
        assert_eq!(c.finish().unwrap(), 0);
        let bytes = std::fs::read(&path).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        let b = blocks(&bytes);
        assert_eq!(b.len() as u64, 2 + n);
        for (uid, (kind, body)) in b[2..].iter().enumerate() {
            assert_eq!(*kind, EPB);
            let t = (u64::from(u32::from_le_bytes(body[4..8].try_into().unwrap())) << 32)
                | u64::from(u32::from_le_bytes(body[8..12].try_into().unwrap()));
            assert_eq!(t, 1_000 + uid as u64 * 10);
            assert_eq!(&body[12..16], &64u32.to_le_bytes());
            let id = &options(body, 20 + 64)[1].1;
            assert_eq!(id, &(uid as u64).to_le_bytes());
        }
        assert!(Capture::create(&path, "x", 0, 0, true).is_err());
    }
}
