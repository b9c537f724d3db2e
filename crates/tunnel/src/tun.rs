//! Batched I/O on a TUN device with offload (`IFF_VNET_HDR`, TSO/USO), shared by the tunnel's
//! relay and the emulator's ferries.
//!
//! A TUN device opened with offload hands the reader whole GSO packets (up to 64 KiB of TCP or
//! UDP segments behind one virtio-net header) and accepts GRO-merged ones, so one system call
//! moves tens of packets instead of one. What this module keeps from that is:
//!
//! - [`TunReader`]: one `read` of the device, split by tun-rs into its MTU-sized segments — the
//!   packets a device without offload would have given one by one, checksums completed;
//! - [`TunWriter`]: packets to write, held until [`TUN_BATCH`] are waiting (or the caller
//!   flushes), then written with tun-rs's GRO, which merges consecutive segments of one flow
//!   (same addresses, ports, ToS — so ECN marks are never merged away — and TTL).
//!
//! Both only batch system calls: every packet the caller pushes is written, in order, with its
//! bytes unchanged, by the next [`TunWriter::flush`].

use std::io;

/// Most segments one TUN read can yield (a 64 KiB GSO packet of ≥ 512-byte segments).
pub const MAX_GSO_SEGMENTS: usize = 128;
/// Packets written to the TUN device per batch (coalesced by GRO where possible).
pub const TUN_BATCH: usize = tun_rs::IDEAL_BATCH_SIZE;
/// One raw read: the virtio-net header and a GSO packet of up to 64 KiB.
pub const RAW_READ: usize = tun_rs::VIRTIO_NET_HDR_LEN + 65_535;

/// Reads a TUN device opened with offload, one GSO packet (or one plain packet) per
/// [`TunReader::read`], as its segments.
pub struct TunReader {
    raw: Vec<u8>,
    segments: Vec<Vec<u8>>,
    sizes: Vec<usize>,
    segment_len: usize,
}

impl TunReader {
    /// A reader whose segments are at most `segment_len` bytes (the device's MTU or more).
    pub fn new(segment_len: usize) -> TunReader {
        TunReader {
            raw: vec![0; RAW_READ],
            segments: vec![vec![0; segment_len]; MAX_GSO_SEGMENTS],
            sizes: vec![0; MAX_GSO_SEGMENTS],
            segment_len,
        }
    }

    /// Reads what the device holds next and returns how many segments it split into
    /// (`1..=MAX_GSO_SEGMENTS`); segment `i` is then [`TunReader::take`]`(i, …)`. Errors when
    /// the device is empty (`WouldBlock` on a non-blocking device) or tun-rs could not split
    /// the packet (it is then lost, as a kernel would drop a malformed one).
    pub fn read(&mut self, tun: &tun_rs::SyncDevice) -> io::Result<usize> {
        tun.recv_multiple(&mut self.raw, &mut self.segments, &mut self.sizes, 0)
    }

    /// Segment `i` of the last read, swapped out for `spare` (a buffer of any length, reused
    /// for the next read) so that the segment's bytes are not copied.
    pub fn take(&mut self, i: usize, mut spare: Vec<u8>) -> Vec<u8> {
        spare.resize(self.segment_len, 0);
        let mut segment = std::mem::replace(&mut self.segments[i], spare);
        segment.truncate(self.sizes[i]);
        segment
    }
}

/// Packets on their way to a TUN device opened with offload, written [`TUN_BATCH`] at a time
/// so that tun-rs's GRO can coalesce them.
pub struct TunWriter {
    /// One buffer per packet: `VIRTIO_NET_HDR_LEN` bytes of headroom, then the packet.
    out: Vec<Vec<u8>>,
    len: usize,
    gro: tun_rs::GROTable,
}

impl Default for TunWriter {
    fn default() -> TunWriter {
        TunWriter::new()
    }
}

impl TunWriter {
    /// An empty batch.
    pub fn new() -> TunWriter {
        TunWriter {
            // GRO only coalesces into a buffer whose capacity holds the whole merged packet
            // (tun-rs: 2 × header + up to 64 KiB).
            out: (0..TUN_BATCH)
                .map(|_| Vec::with_capacity(2 * tun_rs::VIRTIO_NET_HDR_LEN + 65_535))
                .collect(),
            len: 0,
            gro: tun_rs::GROTable::default(),
        }
    }

    /// Packets pushed and not yet written.
    pub fn held(&self) -> usize {
        self.len
    }

    /// Adds `packet` (an IP packet); writes the batch once it is full. Errors as
    /// [`TunWriter::flush`].
    pub fn push(&mut self, packet: &[u8], tun: &tun_rs::SyncDevice) -> io::Result<()> {
        let out = &mut self.out[self.len];
        out.clear();
        out.resize(tun_rs::VIRTIO_NET_HDR_LEN, 0);
        out.extend_from_slice(packet);
        self.len += 1;
        if self.len == TUN_BATCH {
            return self.flush(tun);
        }
        Ok(())
    }

    /// Writes the packets held to the device (GRO coalesces what it can). Errors when the
    /// device refused the batch (full, or gone); the batch is dropped either way.
    pub fn flush(&mut self, tun: &tun_rs::SyncDevice) -> io::Result<()> {
        if self.len == 0 {
            return Ok(());
        }
        let sent = tun.send_multiple(
            &mut self.gro,
            &mut self.out[..self.len],
            tun_rs::VIRTIO_NET_HDR_LEN,
        );
        self.len = 0;
        sent.map(|_| ())
    }
}
