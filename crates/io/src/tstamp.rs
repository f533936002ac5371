//! Kernel software timestamps (`SO_TIMESTAMPING`): when a datagram was received and when a
//! TCP write left, as the kernel saw them, for wire-to-wire latency on loopback.
//!
//! * [`enable_rx`] asks for receive timestamps; [`recv`] returns a datagram with its.
//! * [`enable_tx`] asks for transmit timestamps of a TCP socket, keyed by byte offset
//!   (`SOF_TIMESTAMPING_OPT_ID`: the key of a write is the offset of its last byte, counted
//!   from the first byte written after enabling); [`drain_tx`] reads them from the socket's
//!   error queue without blocking.
//!
//! The kernel turns receive stamping on shortly after the first socket asks for it (a
//! deferred switch), so a datagram that arrives in the first milliseconds may come without
//! a time: [`recv`] says so with `None`.
//!
//! Written against libc directly: std has no `recvmsg`, and the control messages must be
//! walked by hand.

use std::io;
use std::os::fd::AsRawFd;

#[allow(unsafe_code)] // setsockopt
fn setsockopt_u32(fd: i32, opt: i32, v: u32) -> io::Result<()> {
    // SAFETY: `v` lives across the call and its size is passed; the kernel only reads it.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            opt,
            (&v as *const u32).cast(),
            std::mem::size_of::<u32>() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Ask for software receive timestamps on a socket.
pub fn enable_rx(s: &impl AsRawFd) -> io::Result<()> {
    setsockopt_u32(
        s.as_raw_fd(),
        libc::SO_TIMESTAMPING,
        libc::SOF_TIMESTAMPING_RX_SOFTWARE | libc::SOF_TIMESTAMPING_SOFTWARE,
    )
}

/// Ask for software transmit timestamps on a TCP socket, keyed by byte offset, without the
/// payload echoed back.
pub fn enable_tx(s: &impl AsRawFd) -> io::Result<()> {
    setsockopt_u32(
        s.as_raw_fd(),
        libc::SO_TIMESTAMPING,
        libc::SOF_TIMESTAMPING_TX_SOFTWARE
            | libc::SOF_TIMESTAMPING_SOFTWARE
            | libc::SOF_TIMESTAMPING_OPT_ID
            | libc::SOF_TIMESTAMPING_OPT_TSONLY,
    )
}

/// What one `recvmsg` found in its control messages.
#[derive(Debug, Clone, Copy, Default)]
struct Found {
    ts_ns: Option<u64>,
    key: Option<u32>,
}

#[allow(unsafe_code)] // recvmsg and the walk of its control messages
fn recvmsg(fd: i32, buf: &mut [u8], flags: i32) -> io::Result<(usize, Found)> {
    let mut iov = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() };
    // u64s keep the control buffer aligned for cmsghdr.
    let mut control = [0u64; 64];
    // SAFETY: msghdr is plain data; all-zero is a valid empty header, filled in below.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control) as _;
    // SAFETY: `msg` points at `iov` (over `buf`) and `control`, both alive and of the sizes
    // given, for the whole call.
    let n = unsafe { libc::recvmsg(fd, &mut msg, flags) };

    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut found = Found::default();
    // SAFETY: the CMSG_* walk stays inside `control` as the kernel filled it
    // (`msg_controllen` was updated by recvmsg); each header is read before its data.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            let h = &*c;
            if h.cmsg_level == libc::SOL_SOCKET && h.cmsg_type == libc::SCM_TIMESTAMPING {
                // struct scm_timestamping { struct timespec ts[3]; }: [0] is software.
                let ts = (libc::CMSG_DATA(c) as *const libc::timespec).read_unaligned();
                if ts.tv_sec != 0 || ts.tv_nsec != 0 {
                    found.ts_ns = Some(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64);
                }
            } else if (h.cmsg_level == libc::SOL_IP && h.cmsg_type == libc::IP_RECVERR)
                || (h.cmsg_level == libc::SOL_IPV6 && h.cmsg_type == libc::IPV6_RECVERR)
            {
                let ee = (libc::CMSG_DATA(c) as *const libc::sock_extended_err).read_unaligned();
                if ee.ee_origin == libc::SO_EE_ORIGIN_TIMESTAMPING {
                    found.key = Some(ee.ee_data);
                }
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    Ok((n as usize, found))
}

/// Receive one datagram (without blocking when the socket does not) and its kernel
/// receive time in UNIX ns, when the kernel gave one.
pub fn recv(s: &impl AsRawFd, buf: &mut [u8]) -> io::Result<(usize, Option<u64>)> {
    let (n, f) = recvmsg(s.as_raw_fd(), buf, 0)?;
    Ok((n, f.ts_ns))
}

/// Read every transmit timestamp waiting in the socket's error queue: `f(key, ns)`.
/// Returns how many were read.
pub fn drain_tx(s: &impl AsRawFd, mut f: impl FnMut(u32, u64)) -> io::Result<usize> {
    let mut n = 0;
    let mut buf = [0u8; 64];
    loop {
        match recvmsg(s.as_raw_fd(), &mut buf, libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT) {
            Ok((_, Found { ts_ns: Some(ts), key: Some(k) })) => {
                f(k, ts);
                n += 1;
            }
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(n),
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream, UdpSocket};

    #[test]
    fn loopback_gives_receive_and_transmit_times() {
        let r = UdpSocket::bind("127.0.0.1:0").unwrap();
        enable_rx(&r).unwrap();
        // The kernel turns receive stamping on a moment after the first socket asks.
        std::thread::sleep(std::time::Duration::from_millis(20));
        let s = UdpSocket::bind("127.0.0.1:0").unwrap();
        s.send_to(b"md", r.local_addr().unwrap()).unwrap();
        let mut buf = [0u8; 16];
        let (n, ts) = recv(&r, &mut buf).unwrap();
        assert_eq!(&buf[..n], b"md");
        let rx = ts.expect("a receive timestamp");
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut a, _) = l.accept().unwrap();
        enable_tx(&c).unwrap();
        c.write_all(&[1; 10]).unwrap();
        c.write_all(&[2; 5]).unwrap();
        let mut got = [0u8; 15];
        a.read_exact(&mut got).unwrap();
        let mut seen = Vec::new();
        for _ in 0..100 {
            drain_tx(&c, |k, t| seen.push((k, t))).unwrap();
            if seen.len() == 2 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        // Keyed by the offset of each write's last byte.
        assert_eq!(seen.iter().map(|s| s.0).collect::<Vec<_>>(), [9, 14]);
        assert!(seen.iter().all(|&(_, t)| t >= rx));
    }
}
