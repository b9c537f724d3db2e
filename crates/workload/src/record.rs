//! The transfer records the scheme programs write, one CSV file per side and flow in the
//! results directory, beside the side's `.out` file:
//!
//! - `<scheme>_run<N>_flow<i>.sender.transfers.csv`: a row when a transfer *starts* —
//!   `id,page,page_objects,new_connection,size_bytes,start_ns`: its id (1-based in the flow),
//!   its page (0: not a page) and that page's object count, whether it opened its connection
//!   (1: its time includes the handshake), its size, and when the sender began it (before
//!   connecting), ns since the Unix epoch on the sender's clock;
//! - `<scheme>_run<N>_flow<i>.receiver.transfers.csv`: a row when a transfer *ends* —
//!   `id,page,size_bytes,start_ns,first_byte_ns,done_ns,received_bytes,status`: the sender's
//!   id, page, size and start (carried in the transfer's header), when its first and last byte
//!   arrived (receiver's clock), the bytes received, and `done` (all of them) or `aborted` (the
//!   connection ended first; `done_ns` is then when it ended).
//!
//! A transfer the sender started and the receiver never ended was unfinished when the run
//! stopped. Each row is written with one `write` as it happens, so a program that is killed
//! leaves whole rows; a last row cut short is reported where it stopped, and the rows before
//! it are kept ([`read_sender`], [`read_receiver`]).

use std::fmt;
use std::str::FromStr;

/// The sender file's header row.
pub const SENDER_HEADER: &str = "id,page,page_objects,new_connection,size_bytes,start_ns";
/// The receiver file's header row.
pub const RECEIVER_HEADER: &str =
    "id,page,size_bytes,start_ns,first_byte_ns,done_ns,received_bytes,status";

/// A transfer as the sender started it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Started {
    /// Transfer id, 1-based in the flow.
    pub id: u64,
    /// Page id, 0 when the transfer is not an object of a page.
    pub page: u64,
    /// Objects of its page (0 when not a page).
    pub page_objects: u64,
    /// Whether it opened its own connection (its time includes the handshake).
    pub new_connection: bool,
    /// Bytes.
    pub size: u64,
    /// When the sender began it (before connecting), ns since the Unix epoch.
    pub start_ns: u64,
}

/// How a transfer ended at the receiver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Every byte arrived.
    Done,
    /// The connection ended before every byte arrived.
    Aborted,
}

/// A transfer as the receiver ended it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Received {
    /// Transfer id (from its header).
    pub id: u64,
    /// Page id (from its header).
    pub page: u64,
    /// Bytes announced (from its header).
    pub size: u64,
    /// The sender's start (from its header), ns since the Unix epoch, sender's clock.
    pub start_ns: u64,
    /// First byte of data in, receiver's clock.
    pub first_byte_ns: u64,
    /// Last byte in (or the connection's end, when aborted), receiver's clock.
    pub done_ns: u64,
    /// Bytes of data received.
    pub received: u64,
    /// Done or aborted.
    pub status: Status,
}

impl fmt::Display for Started {
    /// Its row, no newline.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{},{},{},{},{},{}",
            self.id,
            self.page,
            self.page_objects,
            u8::from(self.new_connection),
            self.size,
            self.start_ns
        )
    }
}

impl fmt::Display for Received {
    /// Its row, no newline.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let status = match self.status {
            Status::Done => "done",
            Status::Aborted => "aborted",
        };
        write!(
            f,
            "{},{},{},{},{},{},{},{status}",
            self.id,
            self.page,
            self.size,
            self.start_ns,
            self.first_byte_ns,
            self.done_ns,
            self.received
        )
    }
}

fn numbers<const N: usize>(fields: &[&str]) -> Option<[u64; N]> {
    let mut out = [0; N];
    for (o, f) in out.iter_mut().zip(fields) {
        *o = f.parse().ok()?;
    }
    Some(out)
}

impl FromStr for Started {
    type Err = ();
    fn from_str(row: &str) -> Result<Started, ()> {
        let fields: Vec<&str> = row.split(',').collect();
        if fields.len() != 6 {
            return Err(());
        }
        let [id, page, page_objects, new_connection, size, start_ns] =
            numbers::<6>(&fields).ok_or(())?;
        if new_connection > 1 {
            return Err(());
        }
        Ok(Started {
            id,
            page,
            page_objects,
            new_connection: new_connection == 1,
            size,
            start_ns,
        })
    }
}

impl FromStr for Received {
    type Err = ();
    fn from_str(row: &str) -> Result<Received, ()> {
        let fields: Vec<&str> = row.split(',').collect();
        if fields.len() != 8 {
            return Err(());
        }
        let [id, page, size, start_ns, first_byte_ns, done_ns, received] =
            numbers::<7>(&fields[..7]).ok_or(())?;
        let status = match fields[7] {
            "done" => Status::Done,
            "aborted" => Status::Aborted,
            _ => return Err(()),
        };
        Ok(Received {
            id,
            page,
            size,
            start_ns,
            first_byte_ns,
            done_ns,
            received,
            status,
        })
    }
}

/// The rows read from one file, and where reading stopped if it did not reach the end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rows<T> {
    /// Every whole row before the first that cannot be read.
    pub rows: Vec<T>,
    /// `line N: …` — the first row that cannot be read (a row cut short by a killed program,
    /// or not a row of this file), after which nothing was read.
    pub stopped: Option<String>,
}

fn read_rows<T: FromStr>(text: &str, header: &str) -> Rows<T> {
    let mut rows = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || (i == 0 && line == header) {
            continue;
        }
        match line.parse::<T>() {
            Ok(r) => rows.push(r),
            Err(_) => {
                let cut = i + 1 == text.lines().count() && !text.ends_with('\n');
                return Rows {
                    rows,
                    stopped: Some(format!(
                        "line {}: {} `{line}`; the rows before it are kept",
                        i + 1,
                        if cut {
                            "a row cut short"
                        } else {
                            "not a row of this file"
                        }
                    )),
                };
            }
        }
    }
    Rows {
        rows,
        stopped: None,
    }
}

/// Reads a sender's transfer file (module docs).
pub fn read_sender(text: &str) -> Rows<Started> {
    read_rows(text, SENDER_HEADER)
}

/// Reads a receiver's transfer file (module docs).
pub fn read_receiver(text: &str) -> Rows<Received> {
    read_rows(text, RECEIVER_HEADER)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_read_back_and_a_cut_row_is_reported_where_it_stopped() {
        let s = Started {
            id: 3,
            page: 1,
            page_objects: 70,
            new_connection: true,
            size: 12_345,
            start_ns: 1_700_000_000_000_000_000,
        };
        let r = Received {
            id: 3,
            page: 1,
            size: 12_345,
            start_ns: s.start_ns,
            first_byte_ns: s.start_ns + 60_000_000,
            done_ns: s.start_ns + 90_000_000,
            received: 12_345,
            status: Status::Done,
        };
        let text = format!("{SENDER_HEADER}\n{s}\n{s}\n");
        assert_eq!(read_sender(&text).rows, [s, s]);
        assert_eq!(read_sender(&text).stopped, None);
        let text = format!("{RECEIVER_HEADER}\n{r}\n3,1,123");
        let rows = read_receiver(&text);
        assert_eq!(rows.rows, [r]);
        assert_eq!(
            rows.stopped.as_deref(),
            Some("line 3: a row cut short `3,1,123`; the rows before it are kept")
        );
        assert!(read_receiver(&format!("{s}\n"))
            .stopped
            .unwrap()
            .contains("not a row"));
    }
}
