//! A durable [`SessionStore`]: a FIX session's sequence numbers and sent messages in files,
//! so that a restarted process neither reuses nor loses a sequence number and can answer a
//! ResendRequest for messages it sent before the restart.
//!
//! Layout of the store's folder:
//! * `seqnums`: `NEXT_SENDER NEXT_TARGET\n`, two 20-digit numbers, rewritten in place.
//! * `messages`: the sent messages, appended: per message `[seq: u64 LE][len: u32 LE][bytes]`.
//!   A record cut short by a crash is dropped (and the file truncated) at the next open.
//!
//! Writes go to the OS at once (one `pwrite` or `write` per change, no user-space
//! buffering), so they survive the process; with `fsync` they also survive the machine.
//! The first I/O error is kept ([`FileStore::take_error`]): the store then stops writing,
//! and its owner must stop the session rather than go on without a durable record.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use tickplant_core::fix_session::SessionStore;

#[derive(Debug)]
pub struct FileStore {
    dir: PathBuf,
    seqnums: File,
    messages: File,
    index: BTreeMap<u64, (u64, u32)>,
    end: u64,
    sender: u64,
    target: u64,
    /// The next target sequence number as the file has it: with [`FileStore::holding_target`]
    /// it lags `target` until the owner has acted on what it received
    /// ([`SessionStore::commit_target`]).
    durable_target: u64,
    hold_target: bool,
    fsync: bool,
    error: Option<std::io::Error>,
}

const SEQ_LEN: usize = 42;

impl FileStore {
    /// Keep each received message's number in memory only until the owner says it has
    /// acted on what it received ([`SessionStore::commit_target`]): a process that stops in
    /// between (after a fill came, before the order it calls for went out) asks for those
    /// messages again at its next logon, rather than lose them.
    pub fn holding_target(mut self) -> Self {
        self.hold_target = true;
        self
    }

    /// Open (or create) the store in `dir`.
    pub fn open(dir: &Path, fsync: bool) -> std::io::Result<Self> {
        std::fs::create_dir_all(dir)?;
        let ctx =
            |what: &str, e: std::io::Error| std::io::Error::new(e.kind(), format!("{}: {what}: {e}", dir.display()));
        let mut seqnums = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(dir.join("seqnums"))
            .map_err(|e| ctx("seqnums", e))?;
        let mut text = String::new();
        seqnums.read_to_string(&mut text).map_err(|e| ctx("seqnums", e))?;
        let (sender, target) = if text.trim().is_empty() {
            (1, 1)
        } else {
            let mut it = text.split_whitespace().map(str::parse::<u64>);
            match (it.next(), it.next()) {
                (Some(Ok(s)), Some(Ok(t))) => (s, t),
                _ => {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        format!("{}: seqnums: expected two numbers, found {text:?}", dir.display()),
                    ))
                }
            }
        };
        let mut messages = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(dir.join("messages"))
            .map_err(|e| ctx("messages", e))?;
        let mut all = Vec::new();
        messages.seek(SeekFrom::Start(0)).map_err(|e| ctx("messages", e))?;
        messages.read_to_end(&mut all).map_err(|e| ctx("messages", e))?;
        let mut index = BTreeMap::new();
        let mut at = 0usize;
        while at + 12 <= all.len() {
            let seq = u64::from_le_bytes(all[at..at + 8].try_into().expect("8 bytes"));
            let len = u32::from_le_bytes(all[at + 8..at + 12].try_into().expect("4 bytes"));
            if at + 12 + len as usize > all.len() {
                break;
            }
            index.insert(seq, ((at + 12) as u64, len));
            at += 12 + len as usize;
        }
        if at != all.len() {
            // A record cut short by a crash: it was never sent whole.
            messages.set_len(at as u64).map_err(|e| ctx("messages", e))?;
        }
        let mut s = FileStore {
            dir: dir.to_path_buf(),
            seqnums,
            messages,
            index,
            end: at as u64,
            sender,
            target,
            durable_target: target,
            hold_target: false,
            fsync,
            error: None,
        };
        // A message saved but whose sequence number was not yet recorded.
        if let Some((&last, _)) = s.index.last_key_value() {
            if last >= s.sender {
                s.sender = last + 1;
                s.write_seqnums();
            }
        }
        Ok(s)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The first I/O error since the last call, if any.
    pub fn take_error(&mut self) -> Option<std::io::Error> {
        self.error.take()
    }

    fn keep(&mut self, r: std::io::Result<()>) {
        if let Err(e) = r {
            self.error.get_or_insert(e);
        }
    }

    fn write_seqnums(&mut self) {
        if self.error.is_some() {
            return;
        }
        let line = format!("{:020} {:020}\n", self.sender, self.durable_target);
        debug_assert_eq!(line.len(), SEQ_LEN);
        let r = self.seqnums.write_all_at(line.as_bytes(), 0);
        let r = r.and_then(|()| if self.fsync { self.seqnums.sync_data() } else { Ok(()) });
        self.keep(r);
    }
}

impl SessionStore for FileStore {
    fn next_sender_seq(&self) -> u64 {
        self.sender
    }
    fn next_target_seq(&self) -> u64 {
        self.target
    }
    fn set_next_sender_seq(&mut self, n: u64) {
        self.sender = n;
        self.write_seqnums();
    }
    fn set_next_target_seq(&mut self, n: u64) {
        self.target = n;
        if !self.hold_target {
            self.durable_target = n;
            self.write_seqnums();
        }
    }
    fn commit_target(&mut self) {
        if self.durable_target != self.target {
            self.durable_target = self.target;
            self.write_seqnums();
        }
    }
    fn save(&mut self, seq: u64, message: &[u8]) {
        if self.error.is_some() {
            return;
        }
        let mut rec = Vec::with_capacity(12 + message.len());
        rec.extend_from_slice(&seq.to_le_bytes());
        rec.extend_from_slice(&(message.len() as u32).to_le_bytes());
        rec.extend_from_slice(message);
        let r = self.messages.write_all(&rec);
        let r = r.and_then(|()| if self.fsync { self.messages.sync_data() } else { Ok(()) });
        if r.is_ok() {
            self.index.insert(seq, (self.end + 12, message.len() as u32));
            self.end += rec.len() as u64;
        }
        self.keep(r);
    }
    fn failure(&mut self) -> Option<String> {
        self.take_error().map(|e| format!("{}: {e}", self.dir.display()))
    }
    fn get(&self, seq: u64) -> Option<Vec<u8>> {
        let &(at, len) = self.index.get(&seq)?;
        let mut b = vec![0u8; len as usize];
        self.messages.read_exact_at(&mut b, at).ok()?;
        Some(b)
    }
    fn reset(&mut self) {
        let r = self.messages.set_len(0);
        self.keep(r);
        self.index.clear();
        self.end = 0;
        self.sender = 1;
        self.target = 1;
        self.durable_target = 1;
        self.write_seqnums();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn survives_a_restart_and_a_torn_record() {
        let d = tempfile::tempdir().unwrap();
        {
            let mut s = FileStore::open(d.path(), false).unwrap();
            assert_eq!((s.next_sender_seq(), s.next_target_seq()), (1, 1));
            s.save(1, b"first");
            s.set_next_sender_seq(2);
            s.save(2, b"second");
            // Crash before the sequence number of message 2 was recorded.
            s.set_next_target_seq(7);
            assert!(s.take_error().is_none());
        }
        // A torn record at the end.
        let mut f = OpenOptions::new().append(true).open(d.path().join("messages")).unwrap();
        f.write_all(&[3, 0, 0, 0, 0, 0, 0, 0, 50, 0]).unwrap();
        let mut s = FileStore::open(d.path(), false).unwrap();
        assert_eq!(s.next_sender_seq(), 3, "never reuse 2, which was saved");
        assert_eq!(s.next_target_seq(), 7);
        assert_eq!(s.get(1).unwrap(), b"first");
        assert_eq!(s.get(2).unwrap(), b"second");
        assert_eq!(s.get(3), None);
        s.save(3, b"third");
        let s = FileStore::open(d.path(), false).unwrap();
        assert_eq!(s.get(3).unwrap(), b"third");
        let mut s = s;
        s.reset();
        let s = FileStore::open(d.path(), false).unwrap();
        assert_eq!((s.next_sender_seq(), s.next_target_seq(), s.get(1)), (1, 1, None));
        std::fs::write(d.path().join("seqnums"), "x y\n").unwrap();
        let e = FileStore::open(d.path(), false).unwrap_err();
        assert!(e.to_string().contains("seqnums: expected two numbers"), "{e}");
    }

    /// Holding the target: a message's number reaches the file only once the owner has
    /// acted on it; a process that stops before asks for it again. The sender's number is
    /// never held.
    #[test]
    fn a_held_target_is_kept_once_committed() {
        let d = tempfile::tempdir().unwrap();
        {
            let mut s = FileStore::open(d.path(), false).unwrap().holding_target();
            s.set_next_target_seq(5);
            s.commit_target();
            s.set_next_target_seq(6);
            s.set_next_target_seq(7);
            assert_eq!(s.next_target_seq(), 7, "the session sees what it received");
            s.save(1, b"an order");
            s.set_next_sender_seq(2);
            // Stops here: messages 5 and 6 were received, not acted on.
        }
        let mut s = FileStore::open(d.path(), false).unwrap().holding_target();
        assert_eq!((s.next_sender_seq(), s.next_target_seq()), (2, 5));
        s.set_next_target_seq(9);
        s.commit_target();
        let s = FileStore::open(d.path(), false).unwrap();
        assert_eq!(s.next_target_seq(), 9);
    }
}
