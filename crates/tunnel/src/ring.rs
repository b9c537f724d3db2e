//! Packet-log records off the forwarding thread.
//!
//! The forwarding thread copies each [`Record`] into the current chunk of a ring of
//! preallocated chunks ([`CHUNK_RECORDS`] records each, [`CHUNKS`] of them); a full chunk goes
//! to a writer thread, which encodes it ([`LogWriter`]: binary or Pantheon text) in large
//! writes and hands the emptied chunk back. Nothing is allocated per packet and the forwarding
//! thread never waits for the disk. If the disk falls so far behind that every chunk is full,
//! further records are counted in [`LogRing::dropped`] and reported, never silently lost.

use std::io;
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::thread::JoinHandle;

use crate::log::{LogWriter, Record};

/// Records per chunk.
pub const CHUNK_RECORDS: usize = 4096;
/// Chunks per ring: 131 072 records, about 0.3 s of a 400 000 packet/s flow.
pub const CHUNKS: usize = 32;

/// The forwarding thread's end of one log's ring.
#[derive(Debug)]
pub struct LogRing {
    chunk: Vec<Record>,
    full: Option<SyncSender<Vec<Record>>>,
    free: Receiver<Vec<Record>>,
    dropped: u64,
    writer: Option<JoinHandle<io::Result<()>>>,
}

impl LogRing {
    /// Preallocates the ring and starts the writer thread that owns `writer`.
    pub fn spawn(writer: LogWriter, name: String) -> io::Result<LogRing> {
        let (full_tx, full_rx) = mpsc::sync_channel::<Vec<Record>>(CHUNKS);
        let (free_tx, free_rx) = mpsc::sync_channel::<Vec<Record>>(CHUNKS);
        for _ in 1..CHUNKS {
            free_tx
                .send(Vec::with_capacity(CHUNK_RECORDS))
                .expect("receiver alive");
        }
        let mut writer = writer;
        let handle = std::thread::Builder::new().name(name).spawn(move || {
            for mut chunk in full_rx {
                for r in &chunk {
                    writer.push(r)?;
                }
                chunk.clear();
                let _ = free_tx.send(chunk);
            }
            writer.flush()
        })?;
        Ok(LogRing {
            chunk: Vec::with_capacity(CHUNK_RECORDS),
            full: Some(full_tx),
            free: free_rx,
            dropped: 0,
            writer: Some(handle),
        })
    }

    /// Appends one record; counts it as dropped if every chunk is waiting for the disk.
    #[inline]
    pub fn push(&mut self, record: Record) {
        if self.chunk.len() == CHUNK_RECORDS && !self.rotate() {
            self.dropped += 1;
            return;
        }
        self.chunk.push(record);
    }

    /// Hands the current chunk to the writer if an empty one is available.
    fn rotate(&mut self) -> bool {
        let Ok(empty) = self.free.try_recv() else {
            return false;
        };
        let full = std::mem::replace(&mut self.chunk, empty);
        if let Some(tx) = &self.full {
            // Never blocks: at most CHUNKS chunks exist.
            let _ = tx.send(full);
        }
        true
    }

    /// Sends what is left, waits for the writer to write and flush everything, and returns
    /// the number of dropped records, or the writer's error.
    pub fn finish(mut self) -> io::Result<u64> {
        self.close()?;
        Ok(self.dropped)
    }

    fn close(&mut self) -> io::Result<()> {
        if let Some(tx) = self.full.take() {
            if !self.chunk.is_empty() {
                let _ = tx.send(std::mem::take(&mut self.chunk));
            }
        }
        match self.writer.take().map(|h| h.join()) {
            Some(Ok(result)) => result,
            Some(Err(_)) => Err(io::Error::other("log writer thread panicked")),
            None => Ok(()),
        }
    }
}

impl Drop for LogRing {
    fn drop(&mut self) {
        let _ = self.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::{read_log, Direction, Header, Kind, LogFormat, Role};

    #[test]
    fn every_record_reaches_the_file_in_order() {
        let dir = std::env::temp_dir().join(format!("ptring-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("r.ptlog");
        let header = Header {
            role: Role::Server,
            kind: Kind::Ingress,
            flow: 1,
            direction: Direction::Datalink,
            base_realtime_ns: 0,
            clock_offset_ns: None,
            clock_drift_ppb: 0,
        };
        let w = LogWriter::create(&path, &header, &LogFormat::Binary).unwrap();
        let mut ring = LogRing::spawn(w, "test-log".into()).unwrap();
        let n = 3 * CHUNK_RECORDS as u64 + 17;
        for uid in 0..n {
            let rec = Record {
                t_ns: uid,
                uid,
                size: 100,
                flow: 1,
                kind: Kind::Ingress,
                ecn: None,
            };
            ring.push(rec);
            if uid % 1000 == 0 {
                // Let the writer keep up, so that this test checks order, not dropping.
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        }
        assert_eq!(ring.finish().unwrap(), 0);
        let log = read_log(&path).unwrap();
        assert_eq!(log.records.len() as u64, n);
        assert!(log
            .records
            .iter()
            .enumerate()
            .all(|(i, r)| r.uid == i as u64));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
