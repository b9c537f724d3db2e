//! The I/O shell of a workload (issue 29, `docs/workloads.md`), shared by the scheme programs
//! that run one: kernel TCP (`pantheon-tcp`), QUIC (`pantheon-quinn`), LEDBAT
//! (`pantheon-ledbat`). The workload's logic — spec, schedule, header, records — is the sans-IO
//! `pantheon-workload` crate; a program only says how to reach the receiver ([`Transport`]).
//!
//! Sender ([`run_sender`]): each arrival of the schedule at its time, on a task of its own. A
//! transfer goes over a fresh [`Transport::open`] — a connection (TCP, uTP: it pays the
//! handshake) or a stream of the flow's one connection (QUIC): header
//! (`pantheon_workload::wire`), bytes, then the receiver's one-byte acknowledgement. A page's
//! objects go over at most `parallel` of them at once; where [`Transport::REUSE`] (a TCP or uTP
//! connection, kept alive as HTTP/1.1 keeps it), the next object of a slot follows on the same
//! connection when the previous one is acknowledged.
//!
//! Receiver ([`serve`]): transfers one after another on a connection or stream until it ends,
//! each recorded when its last byte is in (or as aborted when the connection ends inside it)
//! and acknowledged.

use std::collections::VecDeque;
use std::future::Future;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use workload::record::{Received, Started, Status, RECEIVER_HEADER, SENDER_HEADER};
use workload::spec::Arrivals;
use workload::wire::{Header, ACK, HEADER_LEN};
use workload::{Schedule, Start, Workload};

use crate::{now_ns, Recorder};

/// How a program's transfers reach the receiver.
pub trait Transport: Send + Sync + 'static {
    /// A connection or stream: bytes both ways.
    type Conn: AsyncRead + AsyncWrite + Unpin + Send + 'static;
    /// Whether a connection may carry one transfer after another (TCP, uTP), or each transfer
    /// opens its own (QUIC streams).
    const REUSE: bool;
    /// Whether [`Transport::open`] pays a handshake (its transfer's time includes it).
    const HANDSHAKE: bool;
    /// A new connection (TCP, uTP) or stream (QUIC) to the receiver.
    fn open(&self) -> impl Future<Output = Result<Self::Conn>> + Send;
}

/// Bytes per write or read.
const CHUNK: usize = 1 << 16;

/// The workload flags of a scheme program (global: given after `receiver PORT` or `sender IP
/// PORT`), as a scheme descriptor's `[workloads]` commands pass them (`docs/schemes.md`).
#[derive(Debug, Clone, clap::Args)]
pub struct WorkloadArgs {
    /// The sender's workload instead of full throttle (`bytes=1000000`, `poisson,rate=…`,
    /// `page,…`; a Poisson load must come as a rate: the harness converts `load=`).
    #[arg(long, global = true)]
    pub workload: Option<String>,
    /// Seed of the workload schedule's draws.
    #[arg(long, default_value_t = 1, global = true)]
    pub seed: u64,
    /// Seconds the flow has in the run: arrivals after it are not started.
    #[arg(long, global = true)]
    pub duration: Option<f64>,
    /// Where this side writes its transfer records (CSV); a receiver records only with it.
    #[arg(long, global = true)]
    pub transfers: Option<PathBuf>,
}

/// A sender's workload, ready to run over a transport ([`WorkloadArgs::sender`]).
#[derive(Debug)]
pub struct SenderWorkload {
    workload: Workload,
    seed: u64,
    until: Option<Duration>,
    record: Arc<Recorder>,
    /// The schedule's clock origin: when the sender was given its workload (at its start,
    /// before any connection), so that a slow handshake does not push arrivals past the run.
    t0: tokio::time::Instant,
}

impl WorkloadArgs {
    /// The receiver's record file (created, its header written) if `--transfers` was given.
    pub fn receiver_record(&self) -> Result<Option<Arc<Recorder>>> {
        self.transfers
            .as_deref()
            .map(|p| Ok(Arc::new(Recorder::create(p, RECEIVER_HEADER)?)))
            .transpose()
    }

    /// The sender's workload if `--workload` was given (`None`: full throttle); errors on a
    /// spec that does not parse and without `--transfers`. Its schedule's clock starts now:
    /// call it when the sender starts, before connecting (arrivals due while a transport
    /// connects start as soon as it is up).
    pub fn sender(&self) -> Result<Option<SenderWorkload>> {
        let Some(spec) = &self.workload else {
            return Ok(None);
        };
        let path = self
            .transfers
            .as_deref()
            .context("--workload needs --transfers FILE")?;
        Ok(Some(SenderWorkload {
            workload: Workload::parse(spec)?,
            seed: self.seed,
            until: self.duration.map(Duration::from_secs_f64),
            record: Arc::new(Recorder::create(path, SENDER_HEADER)?),
            t0: tokio::time::Instant::now(),
        }))
    }
}

impl SenderWorkload {
    /// The workload, as parsed.
    pub fn workload(&self) -> &Workload {
        &self.workload
    }

    /// Runs it over `transport` ([`run_sender`]).
    pub async fn run<T: Transport>(self, transport: T) -> Result<()> {
        run_sender(
            Arc::new(transport),
            &self.workload,
            self.seed,
            self.until,
            self.record,
            self.t0,
        )
        .await
    }
}

/// Runs `w`'s schedule drawn from `seed` over `transport`, its clock starting at `t0`,
/// recording each transfer's start in `record`; arrivals at or after `until` (the flow's time left in the run, the harness's
/// `{duration}`) are not started, so that what the sender started is what the schedule drew
/// for the run. Returns once the schedule ends (only `bytes=N`'s does) or `until` passes, and
/// every transfer started is acknowledged; a failed transfer ends the program with status 1
/// and the reason on stderr (the harness fails the run with it). Errors at once for bulk and
/// for an unresolved load.
pub async fn run_sender<T: Transport>(
    transport: Arc<T>,
    w: &Workload,
    seed: u64,
    until: Option<Duration>,
    record: Arc<Recorder>,
    t0: tokio::time::Instant,
) -> Result<()> {
    let parallel = match w {
        Workload::Bulk => bail!("bulk runs through the scheme's full-throttle command"),
        Workload::Poisson {
            arrivals: Arrivals::Load(_),
            ..
        } => bail!("give the Poisson workload as rate=R: load=L needs the path's rate"),
        Workload::Page(p) => p.parallel as usize,
        _ => 1,
    };
    let payload: Arc<[u8]> = {
        let mut b = vec![0u8; CHUNK];
        crate::fill_random(&mut b);
        b.into()
    };
    let mut tasks = tokio::task::JoinSet::new();
    for a in Schedule::new(w, seed) {
        let at = Duration::from_nanos(a.at_ns);
        if until.is_some_and(|u| at >= u) {
            break;
        }
        tokio::time::sleep_until(t0 + at).await;
        let (t, record, payload) = (
            Arc::clone(&transport),
            Arc::clone(&record),
            Arc::clone(&payload),
        );
        tasks.spawn(async move {
            let (page, objects) = match a.what {
                Start::Transfer { id, size } => (0, vec![(id, size)]),
                Start::Page { id, objects } => (id, objects),
            };
            let slots = if page == 0 { 1 } else { parallel };
            if let Err(e) = fetch(&t, &record, &payload, page, objects, slots).await {
                eprintln!("sender: {e:#}");
                std::process::exit(1);
            }
        });
        while tasks.try_join_next().is_some() {}
    }
    while tasks.join_next().await.is_some() {}
    eprintln!("sender: every transfer acknowledged");
    Ok(())
}

/// `objects` (`(id, bytes)`; one, or a page's) over at most `slots` connections or streams at
/// once, each slot taking the next object when its previous one is acknowledged. `page`: the
/// page id, 0 for a lone transfer.
async fn fetch<T: Transport>(
    t: &Arc<T>,
    record: &Arc<Recorder>,
    payload: &Arc<[u8]>,
    page: u64,
    objects: Vec<(u64, u64)>,
    slots: usize,
) -> Result<()> {
    let count = objects.len() as u64;
    let page_objects = if page == 0 { 0 } else { count };
    let queue = Arc::new(Mutex::new(VecDeque::from(objects)));
    let mut running = tokio::task::JoinSet::new();
    for _ in 0..slots.min(count as usize) {
        let (t, record, payload, queue) = (
            Arc::clone(t),
            Arc::clone(record),
            Arc::clone(payload),
            Arc::clone(&queue),
        );
        running.spawn(async move {
            let mut conn: Option<T::Conn> = None;
            loop {
                let next = queue.lock().unwrap_or_else(|p| p.into_inner()).pop_front();
                let Some((id, size)) = next else {
                    return Ok::<(), anyhow::Error>(());
                };
                let fresh = conn.is_none() || !T::REUSE;
                let s = Started {
                    id,
                    page,
                    page_objects,
                    new_connection: fresh && T::HANDSHAKE,
                    size,
                    start_ns: now_ns(),
                };
                record.row(s);
                let what = || match page {
                    0 => format!("transfer {id} ({size} bytes)"),
                    p => format!("page {p}, object {id} ({size} bytes)"),
                };
                if fresh {
                    conn = Some(t.open().await.with_context(what)?);
                }
                let c = conn.as_mut().expect("opened above");
                send(c, &s, &payload).await.with_context(what)?;
            }
        });
    }
    while let Some(done) = running.join_next().await {
        done??;
    }
    Ok(())
}

/// Writes one transfer (header, bytes) and waits for its acknowledgement.
async fn send<C: AsyncRead + AsyncWrite + Unpin>(
    conn: &mut C,
    s: &Started,
    payload: &[u8],
) -> Result<()> {
    conn.write_all(&Header::from(s).encode()).await?;
    let mut left = s.size;
    while left > 0 {
        let n = left.min(payload.len() as u64) as usize;
        conn.write_all(&payload[..n]).await?;
        left -= n as u64;
    }
    let mut ack = [0u8; 1];
    conn.read_exact(&mut ack)
        .await
        .context("no acknowledgement")?;
    if ack[0] != ACK {
        bail!("acknowledged with {:#04x}", ack[0]);
    }
    Ok(())
}

/// Receives transfers one after another on `conn` until it ends, recording each in `record`
/// when its last byte is in and acknowledging it. A connection that ends inside a transfer
/// records it as aborted and errors; one that ends between transfers returns. `peer` names
/// it in errors.
pub async fn serve<C: AsyncRead + AsyncWrite + Unpin>(
    mut conn: C,
    record: &Recorder,
    peer: &str,
) -> Result<()> {
    let mut buf = vec![0u8; CHUNK];
    loop {
        let mut raw = [0u8; HEADER_LEN];
        let mut got = 0;
        while got < HEADER_LEN {
            match conn.read(&mut raw[got..]).await {
                Ok(0) if got == 0 => return Ok(()),
                Ok(0) => bail!("{peer}: the connection ended inside a transfer header"),
                Ok(n) => got += n,
                Err(e) => return Err(e).with_context(|| format!("{peer}: reading a header")),
            }
        }
        let Some(h) = Header::decode(&raw) else {
            bail!("{peer}: not a transfer header (another program on this port?)");
        };
        let mut r = Received {
            id: h.id,
            page: h.page,
            size: h.size,
            start_ns: h.start_ns,
            first_byte_ns: 0,
            done_ns: 0,
            received: 0,
            status: Status::Done,
        };
        while r.received < h.size {
            let want = (h.size - r.received).min(CHUNK as u64) as usize;
            match conn.read(&mut buf[..want]).await {
                Ok(0) | Err(_) => {
                    r.status = Status::Aborted;
                    break;
                }
                Ok(n) => {
                    if r.received == 0 {
                        r.first_byte_ns = now_ns();
                    }
                    r.received += n as u64;
                }
            }
        }
        r.done_ns = now_ns();
        record.row(r);
        if r.status == Status::Aborted {
            bail!(
                "{peer}: transfer {} ended after {} of {} bytes",
                h.id,
                r.received,
                h.size
            );
        }
        conn.write_all(&[ACK])
            .await
            .with_context(|| format!("{peer}: acknowledging transfer {}", h.id))?;
    }
}
