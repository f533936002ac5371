//! `tickplant bench recv`: what receiving a datagram costs on one core, the live source's
//! way (`recvmmsg` batches with kernel time stamps, the frame's headers built) beside plain
//! `recv` one datagram a call, in the same run.
//!
//! Each round fills a socket's buffer with datagrams first (a buffer large enough for all
//! of them), then drains it, timed: the receive side alone, with no sender running beside
//! it on the machine's two cores.

use std::net::UdpSocket;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Result};
use tickplant_io::live::{LiveOptions, LiveSource, UdpUrl};
use tickplant_io::Source;

/// Fill a fresh socket bound to `url`'s port with `n` datagrams of `size` bytes; the
/// receiver is made by `open` before the sends.
fn fill(port: u16, n: u64, size: usize) -> Result<()> {
    let tx = UdpSocket::bind("127.0.0.1:0")?;
    let mut d = vec![0u8; size];
    for i in 0..n {
        d[..8].copy_from_slice(&i.to_be_bytes());
        tx.send_to(&d, ("127.0.0.1", port))?;
    }
    Ok(())
}

fn free_port() -> Result<u16> {
    Ok(UdpSocket::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// ns a datagram, draining `n` with the live source.
fn live_round(n: u64, size: usize) -> Result<f64> {
    let port = free_port()?;
    let url: UdpUrl = format!("udp://127.0.0.1:{port}?rcvbuf=268435456").parse().map_err(|e| anyhow!("{e}"))?;
    let mut src =
        LiveSource::open(&[url], LiveOptions { busy_poll: true, ..Default::default() }).map_err(|e| anyhow!("{e}"))?;
    fill(port, n, size)?;
    let t0 = Instant::now();
    let mut got = 0u64;
    while got < n {
        match src.next_frame().map_err(|e| anyhow!("{e}"))? {
            Some((_, f)) => {
                std::hint::black_box(f.data);
                got += 1;
            }
            None => bail!(
                "the socket ran dry after {got} of {n}: the kernel dropped (raise net.core.rmem_max or run as root)"
            ),
        }
    }
    Ok(t0.elapsed().as_nanos() as f64 / n as f64)
}

/// ns a datagram, draining `n` with one `recv` a datagram.
fn plain_round(n: u64, size: usize) -> Result<f64> {
    let rx = UdpSocket::bind("127.0.0.1:0")?;
    let port = rx.local_addr()?.port();
    tickplant_io::live::set_rcvbuf(&socket2::SockRef::from(&rx), 268_435_456)?;
    rx.set_read_timeout(Some(Duration::from_millis(100)))?;
    fill(port, n, size)?;
    let mut buf = vec![0u8; 9216];
    let t0 = Instant::now();
    for got in 0..n {
        if rx.recv(&mut buf).is_err() {
            bail!("the socket ran dry after {got} of {n}");
        }
        std::hint::black_box(&buf);
    }
    Ok(t0.elapsed().as_nanos() as f64 / n as f64)
}

/// Run `rounds` of each, alternated; print and return the best of each (live, plain).
pub fn recv_cost(n: u64, size: usize, rounds: usize, mut out: impl FnMut(&str)) -> Result<(f64, f64)> {
    if n == 0 || rounds == 0 {
        bail!("--datagrams and --rounds must be at least 1");
    }
    let (mut live, mut plain) = (f64::MAX, f64::MAX);
    for r in 0..rounds {
        let l = live_round(n, size)?;
        let p = plain_round(n, size)?;
        out(&format!("  round {}: recvmmsg (live source) {l:.0} ns, recv {p:.0} ns", r + 1));
        live = live.min(l);
        plain = plain.min(p);
    }
    out(&format!(
        "receive cost, {n} datagrams of {size} bytes drained from a full buffer, one core, best of {rounds}: \
         live source (recvmmsg batches of 32, kernel stamps, headers built) {live:.0} ns/datagram | plain recv {plain:.0} ns | recv/ours = {:.2}",
        plain / live
    ));
    Ok((live, plain))
}
