//! Emulator benchmark (run by `bench/emulator.sh`; root): two namespaces joined by the emulator,
//! traffic generated and timed here, every figure printed next to its target.
//!
//! ```text
//! emubench rate  [SECS]        UDP at 1.05× the trace rate through constant 1, 10, 100, 1000
//!                              Mbit/s traces: delivered rate (receiver side) / trace rate
//! emubench delay [SECS]        UDP, 4 packets per ms sent 0.2–0.65 ms into each ms of the
//!                              emulator's clock (clear of the ms boundaries where opportunities
//!                              are, so that the µs between send() and the emulator's read
//!                              cannot move a packet to another opportunity), through mm-delay 10
//!                              + a 100 Mbit/s link: each packet's receive time minus its
//!                              departure in the ideal schedule (the same model run offline on
//!                              the send times)
//! emubench tcp RATE [SECS] [REPS]  iperf3 TCP cubic through a constant RATE Mbit/s link
//! emubench density [N,N,…] [SECS]   for each N, N paths of 16 Mbit/s + mm-delay 20 at once,
//!                              one iperf3 TCP flow each: how many deliver within 1 % of one
//!                              path alone with p95 lateness within 1 ms of its
//! ```
use std::io::Write;
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use netns::NetNs;
use pantheon_emucal::emulator::Emulator;
use pantheon_emucal::mm::{EmulatedPath, LinkDirection};
use pantheon_emucal::runtime::{DirectionStats, RunningEmulator, OUTER_ADDR};
use pantheon_emucal::trace::Trace;
use std::sync::atomic::Ordering;

const PAYLOAD: usize = 1472; // + 28 bytes of IP/UDP = one 1500-byte packet per opportunity
const PORT: u16 = 9311;

struct Setup {
    _dir: TempDir,
    path: EmulatedPath,
    outer: NetNs,
    inner: NetNs,
}

struct TempDir(std::path::PathBuf);
impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn setup(tag: &str, rate_mbps: f64, prepend: &str) -> Setup {
    let dir = std::env::temp_dir().join(format!("emubench-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let trace = dir.join("link.trace");
    std::fs::write(&trace, Trace::constant_rate(rate_mbps).unwrap().to_text()).unwrap();
    let path = Emulator::from_pantheon_flags(prepend, &trace, &trace, "", "")
        .and_then(|e| e.load())
        .unwrap();
    let pid = std::process::id();
    let outer = NetNs::create(&format!("emb-{pid}-{tag}-o")).unwrap();
    let inner = NetNs::create(&format!("emb-{pid}-{tag}-i")).unwrap();
    Setup {
        _dir: TempDir(dir),
        path,
        outer,
        inner,
    }
}

/// How the sender paces: at a constant rate, or in fixed slots inside each millisecond.
#[derive(Clone, Copy)]
enum Pacing {
    /// Evenly, at this IP rate, Mbit/s.
    Rate(f64),
    /// At these µs offsets inside every ms of the emulator's clock (well clear of the ms
    /// boundaries where opportunities are, so the ideal schedule is unambiguous).
    Slots(&'static [u64]),
}

/// Sends `PAYLOAD`-byte datagrams for `secs` from the inner namespace to the outer one, each
/// stamped with its sequence number and send time (ns since the emulator's epoch); returns
/// (sent, (send ns, receive ns) per received packet in sequence order).
fn udp_run(s: &Setup, emu: &RunningEmulator, pacing: Pacing, secs: f64) -> (u64, Vec<(u64, u64)>) {
    let epoch = emu.epoch();
    let rx = s
        .outer
        .run_in(|| UdpSocket::bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, PORT)))
        .unwrap()
        .unwrap();
    set_rcvbuf(&rx, 64 << 20);
    rx.set_read_timeout(Some(Duration::from_millis(700)))
        .unwrap();
    let tx = s
        .inner
        .run_in(|| UdpSocket::bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0)))
        .unwrap()
        .unwrap();
    tx.connect(SocketAddrV4::new(OUTER_ADDR, PORT)).unwrap();
    let pps = match pacing {
        Pacing::Rate(mbps) => mbps * 1e6 / (1500.0 * 8.0),
        Pacing::Slots(slots) => slots.len() as f64 * 1000.0,
    };
    let total = (pps * secs) as u64;
    let receiver = std::thread::spawn(move || {
        let mut got = Vec::with_capacity(total as usize);
        let mut buf = [0u8; 2048];
        while let Ok(n) = rx.recv(&mut buf) {
            let now = epoch.elapsed().as_nanos() as u64;
            if n >= 16 {
                let seq = u64::from_le_bytes(buf[..8].try_into().unwrap());
                let sent = u64::from_le_bytes(buf[8..16].try_into().unwrap());
                got.push((seq, sent, now));
            }
        }
        got
    });
    let mut pkt = [0u8; PAYLOAD];
    let mut send = |seq: u64| {
        let now = epoch.elapsed().as_nanos() as u64;
        pkt[..8].copy_from_slice(&seq.to_le_bytes());
        pkt[8..16].copy_from_slice(&now.to_le_bytes());
        let _ = tx.send(&pkt);
        now
    };
    let mut sent = 0u64;
    match pacing {
        Pacing::Rate(_) => {
            let start = Instant::now();
            while sent < total {
                let due = ((start.elapsed().as_secs_f64() * pps) as u64).min(total);
                if sent >= due {
                    std::thread::sleep(Duration::from_micros(50));
                }
                while sent < due {
                    send(sent);
                    sent += 1;
                }
            }
        }
        Pacing::Slots(slots) => {
            let first_ms = epoch.elapsed().as_millis() as u64 + 2;
            let last_ms = first_ms + (secs * 1000.0) as u64;
            'ms: for ms in first_ms..last_ms {
                for &us in slots {
                    let at = ms * 1_000_000 + us * 1000;
                    let now = epoch.elapsed().as_nanos() as u64;
                    if now > at + 100_000 {
                        continue 'ms; // woke too late for this ms: skip its remaining slots
                    }
                    if at > now + 60_000 {
                        std::thread::sleep(Duration::from_nanos(at - now - 50_000));
                    }
                    while (epoch.elapsed().as_nanos() as u64) < at {
                        std::hint::spin_loop();
                    }
                    send(sent);
                    sent += 1;
                }
            }
        }
    }
    let mut got = receiver.join().unwrap();
    got.sort_unstable();
    (sent, got.into_iter().map(|(_, s, r)| (s, r)).collect())
}

fn set_rcvbuf(s: &UdpSocket, bytes: i32) {
    use std::os::fd::AsRawFd;
    // SAFETY: setsockopt with a valid fd and an int option.
    unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUFFORCE,
            (&bytes as *const i32).cast(),
            4,
        );
    }
}

fn rate(secs: f64) {
    println!("delivered rate vs trace rate (UDP offered at 1.05×, {secs} s; target within 1 %)");
    println!(
        "{:>10} {:>10} {:>14} {:>9} {:>8}",
        "trace", "sent", "delivered", "Mbit/s", "ratio"
    );
    for r in [1.0, 10.0, 100.0, 1000.0] {
        let s = setup(&format!("r{r}"), r, "");
        let emu = RunningEmulator::start(&s.path, &s.outer, &s.inner, 1).unwrap();
        let secs = if r < 5.0 { secs.max(10.0) } else { secs };
        let (sent, got) = udp_run(&s, &emu, Pacing::Rate(r * 1.05), secs);
        let (first, last) = (got.first().unwrap().1, got.last().unwrap().1);
        let mbps = (got.len() - 1) as f64 * 1500.0 * 8.0 / ((last - first) as f64 / 1e9) / 1e6;
        println!(
            "{:>6} Mb/s {:>10} {:>14} {:>9.3} {:>7.2}%",
            r,
            sent,
            got.len(),
            mbps,
            100.0 * mbps / r
        );
    }
}

fn quantile(sorted: &[i64], q: f64) -> i64 {
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

fn delay(secs: f64) {
    println!(
        "per-packet delay error vs the ideal schedule: UDP, 4 packets per ms (48 Mbit/s) sent \
         0.2–0.65 ms into each ms, through mm-delay 10 + a 100 Mbit/s link, {secs} s \
         (target p99 ≤ 0.1 ms; Mahimahi up to 1 ms)"
    );
    println!(
        "{:>10} {:>9} {:>9} {:>9} {:>9} {:>9}",
        "timing", "packets", "p50 µs", "p99 µs", "p99.9 µs", "max µs"
    );
    {
        let s = setup("d", 100.0, "mm-delay 10");
        let emu = RunningEmulator::start(&s.path, &s.outer, &s.inner, 1).unwrap();
        let (_, got) = udp_run(&s, &emu, Pacing::Slots(&[200, 350, 500, 650]), secs);
        drop(emu);
        // The ideal schedule: the same model fed the send times.
        let (mut p, _) = s.path.pipeline(LinkDirection::Uplink, 1);
        let mut departures = Vec::with_capacity(got.len());
        for &(sent, _) in &got {
            p.advance(sent);
            while let Some((t, _)) = p.pop() {
                departures.push(t);
            }
            p.push(sent, vec![0u8; 1500]);
        }
        p.advance(got.last().map_or(0, |g| g.0) + 1_000_000_000);
        while let Some((t, _)) = p.pop() {
            departures.push(t);
        }
        let mut err: Vec<i64> = got
            .iter()
            .zip(&departures)
            .map(|(&(_, recv), &ideal)| (recv as i64 - ideal as i64) / 1000)
            .collect();
        err.sort_unstable();
        println!(
            "{:>10} {:>9} {:>9} {:>9} {:>9} {:>9}",
            "ns",
            err.len(),
            quantile(&err, 0.5),
            quantile(&err, 0.99),
            quantile(&err, 0.999),
            err.last().unwrap()
        );
    }
}

/// `iperf3 -s -1 -p PORT` in `s`'s outer namespace.
fn iperf3_server(s: &Setup, port: u16) -> std::process::Child {
    Command::new("ip")
        .args(["netns", "exec", s.outer.name(), "iperf3", "-s", "-1", "-p"])
        .arg(port.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// `iperf3 -c` (TCP cubic, `secs` long, JSON) from `s`'s inner namespace to the server on
/// `port`, started.
fn iperf3_client(s: &Setup, port: u16, secs: u32) -> std::process::Child {
    Command::new("ip")
        .args([
            "netns",
            "exec",
            s.inner.name(),
            "iperf3",
            "-c",
            "100.64.0.1",
            "-p",
        ])
        .arg(port.to_string())
        .args(["-C", "cubic", "-J", "-t", &secs.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// (goodput Mbit/s at the receiver, retransmits) of a finished `iperf3_client`.
fn iperf3_result(client: std::process::Child) -> (f64, u64) {
    let out = client.wait_with_output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    let mbps = v["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .unwrap_or(0.0)
        / 1e6;
    (
        mbps,
        v["end"]["sum_sent"]["retransmits"].as_u64().unwrap_or(0),
    )
}

fn tcp(rate_mbps: f64, secs: u32, reps: u32) {
    println!("TCP cubic through a {rate_mbps} Mbit/s trace link (iperf3, {secs} s × {reps})");
    let mut results = Vec::new();
    for rep in 0..reps {
        let s = setup(&format!("t{rep}"), rate_mbps, "");
        let emu = RunningEmulator::start(&s.path, &s.outer, &s.inner, 1).unwrap();
        let mut server = iperf3_server(&s, 9312);
        std::thread::sleep(Duration::from_millis(300));
        let (mbps, retr) = iperf3_result(iperf3_client(&s, 9312, secs));
        let _ = server.kill();
        let _ = server.wait();
        let dropped = |d: &DirectionStats| d.dropped.load(Ordering::Relaxed);
        println!(
            "  rep {}: {mbps:.0} Mbit/s, {retr} retransmits; emulator dropped {} up / {} down",
            rep + 1,
            dropped(&emu.uplink),
            dropped(&emu.downlink)
        );
        results.push(mbps);
    }
    results.sort_by(f64::total_cmp);
    println!("  median {:.0} Mbit/s", results[results.len() / 2]);
}

/// What one path of the density benchmark gave: goodput (Mbit/s) and the p95 of how late the
/// emulator wrote its packets (µs, the worse of the two directions) — the delay it added beyond
/// the link model's.
struct PathResult {
    mbps: f64,
    late_p95_us: u64,
}

/// `n` emulated paths of `rate_mbps` / `mm-delay delay_ms` at once, each with one iperf3 TCP
/// cubic flow for `secs`.
fn paths_at_once(n: usize, rate_mbps: f64, delay_ms: u32, secs: u32) -> Vec<PathResult> {
    let prepend = format!("mm-delay {delay_ms}");
    let setups: Vec<Setup> = (0..n)
        .map(|i| setup(&format!("d{i}"), rate_mbps, &prepend))
        .collect();
    let emus: Vec<RunningEmulator> = setups
        .iter()
        .map(|s| RunningEmulator::start(&s.path, &s.outer, &s.inner, 1).unwrap())
        .collect();
    let mut servers: Vec<_> = setups.iter().map(|s| iperf3_server(s, 9313)).collect();
    std::thread::sleep(Duration::from_millis(300 + 20 * n as u64));
    let clients: Vec<_> = setups
        .iter()
        .map(|s| iperf3_client(s, 9313, secs))
        .collect();
    let results = clients
        .into_iter()
        .zip(&emus)
        .map(|(c, emu)| {
            let (mbps, _) = iperf3_result(c);
            let late = |d: &DirectionStats| d.lateness_quantile_us(0.95).unwrap_or(0);
            PathResult {
                mbps,
                late_p95_us: late(&emu.uplink).max(late(&emu.downlink)),
            }
        })
        .collect();
    for server in &mut servers {
        let _ = server.kill();
        let _ = server.wait();
    }
    results
}

/// Issue 53's density benchmark: for each N, N paths of 16 Mbit/s and mm-delay 20 at once,
/// each with a TCP flow; a path is faithful when its goodput is within 1 % of one path alone
/// and its p95 lateness within 1 ms of one path alone's.
fn density(counts: &[usize], secs: u32) {
    println!(
        "density: N paths of 16 Mbit/s + mm-delay 20 at once, one iperf3 TCP cubic flow each, \
         {secs} s (faithful: goodput within 1 % and p95 lateness within 1 ms of one path alone)"
    );
    let alone = &paths_at_once(1, 16.0, 20, secs)[0];
    println!(
        "  one path alone: {:.2} Mbit/s, p95 lateness {} µs",
        alone.mbps, alone.late_p95_us
    );
    println!("      N  faithful  min Mbit/s  median Mbit/s  worst p95 lateness µs");
    for &n in counts {
        let mut r = paths_at_once(n, 16.0, 20, secs);
        let faithful = r
            .iter()
            .filter(|p| {
                (p.mbps - alone.mbps).abs() <= 0.01 * alone.mbps
                    && p.late_p95_us <= alone.late_p95_us + 1000
            })
            .count();
        r.sort_by(|a, b| a.mbps.total_cmp(&b.mbps));
        let worst = r.iter().map(|p| p.late_p95_us).max().unwrap_or(0);
        println!(
            "  {n:>5}  {faithful:>4}/{n:<4}  {:>10.2}  {:>13.2}  {worst:>21}",
            r[0].mbps,
            r[n / 2].mbps
        );
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let num = |i: usize, d: f64| args.get(i).and_then(|a| a.parse().ok()).unwrap_or(d);
    match args.first().map(String::as_str) {
        Some("rate") => rate(num(1, 5.0)),
        Some("delay") => delay(num(1, 5.0)),
        Some("tcp") => tcp(num(1, 2000.0), num(2, 10.0) as u32, num(3, 3.0) as u32),
        Some("density") => {
            let counts: Vec<usize> = args
                .get(1)
                .map_or("1,8,16,32,64", String::as_str)
                .split(',')
                .filter_map(|n| n.parse().ok())
                .collect();
            density(&counts, num(2, 10.0) as u32)
        }
        _ => {
            eprintln!(
                "usage: emubench rate [SECS] | delay [SECS] | tcp RATE [SECS] [REPS] \
                 | density [N,N,…] [SECS]"
            );
            std::process::exit(2);
        }
    }
    let _ = std::io::stdout().flush();
}
