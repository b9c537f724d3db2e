//! UDP segmentation and receive offload (Linux ≥ 4.18 / 5.0) for the tunnel socket.
//!
//! With `UDP_SEGMENT` one `sendmsg` carries up to 64 datagrams laid end to end in one buffer,
//! all `segment` bytes long but the last; the kernel splits them (late, or in the NIC). With
//! `UDP_GRO` one `recvmsg` may return several datagrams from one sender coalesced the same
//! way, with their size in a control message. Every datagram still travels on the wire as
//! its own UDP datagram: the peer (or a Pantheon endpoint) sees no difference.
//!
//! The IP header's TOS byte travels beside them (RFC 6040's ECN copy, [`crate::ecn`]): a send
//! sets it with an `IP_TOS` control message (one value for every datagram of the send), and with
//! `IP_RECVTOS` on (see [`enable_recv_tos`]) a receive reports it — the kernel coalesces only
//! datagrams whose headers agree, TOS included.

use std::io;
use std::mem::{size_of, zeroed};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::RawFd;

/// `UDP_SEGMENT` from `<linux/udp.h>` (not in the libc crate for glibc).
const UDP_SEGMENT: libc::c_int = 103;
/// `UDP_GRO` from `<linux/udp.h>`.
const UDP_GRO: libc::c_int = 104;
/// Most datagrams the kernel accepts in one segmented send (`UDP_MAX_SEGMENTS`).
pub const MAX_SEGMENTS: usize = 64;
/// Most payload bytes of one segmented send (an IPv4 datagram's limit).
pub const MAX_SEND_BYTES: usize = 65_507;

/// Asks the kernel to coalesce received datagrams (`UDP_GRO`); false if it cannot.
pub fn enable_gro(fd: RawFd) -> bool {
    turn_on(fd, libc::SOL_UDP, UDP_GRO)
}

/// Asks the kernel to report each received datagram's TOS byte (`IP_RECVTOS`), which carries
/// its ECN field; false if it cannot.
pub fn enable_recv_tos(fd: RawFd) -> bool {
    turn_on(fd, libc::IPPROTO_IP, libc::IP_RECVTOS)
}

/// Sets the int socket option `level`/`name` to 1; false if the kernel refuses.
fn turn_on(fd: RawFd, level: libc::c_int, name: libc::c_int) -> bool {
    let on: libc::c_int = 1;
    // SAFETY: setsockopt with an int option on a socket the caller owns.
    unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            &on as *const libc::c_int as *const libc::c_void,
            size_of::<libc::c_int>() as libc::socklen_t,
        ) == 0
    }
}

fn sockaddr(to: SocketAddrV4) -> libc::sockaddr_in {
    // SAFETY: sockaddr_in is plain old data; all-zero is a valid value.
    let mut sa: libc::sockaddr_in = unsafe { zeroed() };
    sa.sin_family = libc::AF_INET as libc::sa_family_t;
    sa.sin_port = to.port().to_be();
    sa.sin_addr.s_addr = u32::from(*to.ip()).to_be();
    sa
}

/// A message header naming `sa` and the one buffer `iov`, without control data; valid for as
/// long as both are.
fn msghdr(sa: &mut libc::sockaddr_in, iov: &mut libc::iovec) -> libc::msghdr {
    // SAFETY: msghdr is plain old data; all-zero is a valid value.
    let mut msg: libc::msghdr = unsafe { zeroed() };
    msg.msg_name = sa as *mut libc::sockaddr_in as *mut libc::c_void;
    msg.msg_namelen = size_of::<libc::sockaddr_in>() as libc::socklen_t;
    msg.msg_iov = iov;
    msg.msg_iovlen = 1;
    msg
}

/// Sends `buf` to `to`: as one datagram if `segment` is 0 or not smaller than `buf`, else as
/// datagrams of `segment` bytes (the last may be shorter) with one `UDP_SEGMENT` send. Every
/// datagram's IP header gets TOS byte `tos` (0: the socket's default, Not-ECT; the ECN field is
/// its low two bits). Blocks while the socket buffer is full, up to the socket's send timeout.
pub fn send_segments(
    fd: RawFd,
    buf: &[u8],
    segment: u16,
    tos: u8,
    to: SocketAddrV4,
) -> io::Result<usize> {
    let mut sa = sockaddr(to);
    let mut iov = libc::iovec {
        iov_base: buf.as_ptr() as *mut libc::c_void,
        iov_len: buf.len(),
    };
    // Room for two cmsgs of at most an int each, 8-byte aligned.
    let mut control = [0u64; 8];
    let mut msg = msghdr(&mut sa, &mut iov);
    let segmented = segment != 0 && (segment as usize) < buf.len();
    // SAFETY: the control buffer is large enough for both cmsgs (2 × CMSG_SPACE(4) = 48 bytes
    // of 64), and CMSG_* only compute offsets inside it.
    unsafe {
        let space_u16 = libc::CMSG_SPACE(size_of::<u16>() as u32) as usize;
        let space_int = libc::CMSG_SPACE(size_of::<libc::c_int>() as u32) as usize;
        let len = usize::from(segmented) * space_u16 + usize::from(tos != 0) * space_int;
        if len > 0 {
            msg.msg_control = control.as_mut_ptr() as *mut libc::c_void;
            msg.msg_controllen = len;
            let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
            if segmented {
                (*cmsg).cmsg_level = libc::SOL_UDP;
                (*cmsg).cmsg_type = UDP_SEGMENT;
                (*cmsg).cmsg_len = libc::CMSG_LEN(size_of::<u16>() as u32) as usize;
                std::ptr::write_unaligned(libc::CMSG_DATA(cmsg) as *mut u16, segment);
                cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
            }
            if tos != 0 {
                (*cmsg).cmsg_level = libc::IPPROTO_IP;
                (*cmsg).cmsg_type = libc::IP_TOS;
                (*cmsg).cmsg_len = libc::CMSG_LEN(size_of::<libc::c_int>() as u32) as usize;
                std::ptr::write_unaligned(
                    libc::CMSG_DATA(cmsg) as *mut libc::c_int,
                    libc::c_int::from(tos),
                );
            }
        }
    }
    // SAFETY: msg points to live buffers for the duration of the call.
    let n = unsafe { libc::sendmsg(fd, &msg, 0) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// One receive: its byte count, sender, the size of each coalesced datagram if the kernel
/// coalesced several (`UDP_GRO`), and the datagrams' TOS byte (0 unless `IP_RECVTOS` is on).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Received {
    /// Bytes received.
    pub len: usize,
    /// The sender.
    pub from: SocketAddrV4,
    /// Size of each coalesced datagram (the last may be shorter), if several were coalesced.
    pub segment: Option<u16>,
    /// The IP header's TOS byte (its low two bits: the ECN field).
    pub tos: u8,
}

/// Receives without blocking into `buf` ([`Received`]); `WouldBlock` if nothing is waiting.
pub fn recv_coalesced(fd: RawFd, buf: &mut [u8]) -> io::Result<Received> {
    let mut sa = sockaddr(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0));
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr() as *mut libc::c_void,
        iov_len: buf.len(),
    };
    let mut control = [0u64; 8];
    let mut msg = msghdr(&mut sa, &mut iov);
    msg.msg_control = control.as_mut_ptr() as *mut libc::c_void;
    msg.msg_controllen = size_of::<[u64; 8]>();
    // SAFETY: msg points to live buffers for the duration of the call.
    let n = unsafe { libc::recvmsg(fd, &mut msg, libc::MSG_DONTWAIT) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let (mut segment, mut tos) = (None, 0);
    // SAFETY: walks the control messages the kernel wrote into `control`.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            let data = libc::CMSG_DATA(cmsg);
            match ((*cmsg).cmsg_level, (*cmsg).cmsg_type) {
                (libc::SOL_UDP, UDP_GRO) => {
                    let size = std::ptr::read_unaligned(data as *const libc::c_int);
                    segment = u16::try_from(size).ok();
                }
                // IP_RECVTOS delivers one byte.
                (libc::IPPROTO_IP, libc::IP_TOS) => tos = *data,
                _ => {}
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
    }
    let from = SocketAddrV4::new(
        Ipv4Addr::from(u32::from_be(sa.sin_addr.s_addr)),
        u16::from_be(sa.sin_port),
    );
    Ok(Received {
        len: n as usize,
        from,
        segment,
        tos,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;
    use std::os::fd::AsRawFd;

    #[test]
    fn segmented_send_arrives_as_separate_datagrams_with_their_tos() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        assert!(enable_recv_tos(rx.as_raw_fd()));
        let to = match rx.local_addr().unwrap() {
            std::net::SocketAddr::V4(a) => a,
            _ => unreachable!(),
        };
        // Three datagrams: 100, 100 and 37 bytes, each starting with its index, sent ECT(1);
        // then one alone, CE, and one without a TOS (the socket's default, 0).
        let mut buf = vec![0u8; 237];
        buf[100] = 1;
        buf[200] = 2;
        assert_eq!(
            send_segments(tx.as_raw_fd(), &buf, 100, 0x01, to).unwrap(),
            237
        );
        assert_eq!(
            send_segments(tx.as_raw_fd(), &[3; 10], 0, 0x03, to).unwrap(),
            10
        );
        assert_eq!(
            send_segments(tx.as_raw_fd(), &[4; 10], 0, 0, to).unwrap(),
            10
        );

        // Without UDP_GRO the receiver sees five datagrams, each with the TOS it was sent with.
        std::thread::sleep(std::time::Duration::from_millis(20));
        let mut got = Vec::new();
        let mut rbuf = vec![0u8; 65536];
        while let Ok(r) = recv_coalesced(rx.as_raw_fd(), &mut rbuf) {
            assert_eq!(r.from.port(), tx.local_addr().unwrap().port());
            assert_eq!(r.segment, None);
            got.push((r.len, rbuf[0], r.tos));
        }
        assert_eq!(
            got,
            vec![(100, 0, 1), (100, 1, 1), (37, 2, 1), (10, 3, 3), (10, 4, 0)]
        );
    }
}
