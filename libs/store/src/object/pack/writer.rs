//! The pack store's one writer: a thread that appends queued records to the active segment in
//! groups, with one `fdatasync` per group, and only then makes them visible and acknowledges
//! them.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc::Receiver;

use tokio::sync::oneshot;

use super::record::{Encoded, Kind};
use super::{Entry, Shared, segment_path};
use crate::object::local::sync_dir;

/// Most records one group takes, and roughly most bytes (a single larger record still goes
/// alone): bounds the latency a group adds and the memory it holds.
const MAX_GROUP_RECORDS: usize = 1024;
const MAX_GROUP_BYTES: usize = 8 * 1024 * 1024;

/// A record waiting to be appended.
pub(super) struct Append {
    pub kind: Kind,
    pub key: String,
    pub content_type: Option<Arc<str>>,
    pub modified_nanos: i64,
    pub record: Encoded,
    pub done: oneshot::Sender<io::Result<()>>,
}

/// The segment being appended to.
pub(super) struct Active {
    pub id: u32,
    pub file: Arc<File>,
    pub len: u64,
}

pub(super) struct Writer {
    pub dir: PathBuf,
    pub shared: Arc<Shared>,
    pub active: Option<Active>,
    pub next_segment: u32,
    pub segment_bytes: u64,
}

impl Writer {
    /// Append groups until every sender is gone.
    pub fn run(mut self, appends: &Receiver<Append>) {
        while let Ok(first) = appends.recv() {
            let mut bytes = first.record.bytes.len();
            let mut group = vec![first];
            while group.len() < MAX_GROUP_RECORDS && bytes < MAX_GROUP_BYTES {
                match appends.try_recv() {
                    Ok(next) => {
                        bytes += next.record.bytes.len();
                        group.push(next);
                    }
                    Err(_) => break,
                }
            }
            self.commit(group);
        }
    }

    fn commit(&mut self, group: Vec<Append>) {
        match self.append(&group) {
            Ok((segment, offsets)) => {
                // Durable: now readers may see the records, and then their writers hear.
                {
                    let mut index = self.shared.write_index();
                    for (append, body_offset) in group.iter().zip(offsets) {
                        match append.kind {
                            Kind::Put => {
                                index.insert(
                                    append.key.clone(),
                                    Entry {
                                        segment,
                                        body_offset,
                                        body_len: append.record.body_len(),
                                        modified_nanos: append.modified_nanos,
                                        content_type: append.content_type.clone(),
                                    },
                                );
                            }
                            Kind::Delete => {
                                index.remove(&append.key);
                            }
                        }
                    }
                }
                for append in group {
                    let _ = append.done.send(Ok(()));
                }
            }
            Err(e) => {
                // Nothing of this group is acknowledged. After a failed write or `fdatasync`
                // the segment's state on disk is unknown, and retrying an `fdatasync` can
                // report success for pages the kernel already dropped: seal the segment and
                // start the next group in a new one. Whatever of this group did reach the disk
                // comes back at the next open as records nobody was told about, as after a
                // crash.
                tracing::error!(error = %e, records = group.len(), "pack store append failed; sealing the segment");
                self.active = None;
                for append in group {
                    let _ = append
                        .done
                        .send(Err(io::Error::new(e.kind(), e.to_string())));
                }
            }
        }
    }

    /// Write the group at the end of the active segment and `fdatasync` it. Returns the
    /// segment and the offset of each record's body.
    fn append(&mut self, group: &[Append]) -> io::Result<(u32, Vec<u64>)> {
        let segment_bytes = self.segment_bytes;
        if self.active.as_ref().is_some_and(|a| a.len >= segment_bytes) {
            self.active = None;
        }
        let active = match self.active.take() {
            Some(active) => active,
            None => self.create_segment()?,
        };
        let active = self.active.insert(active);
        let mut offset = active.len;
        let mut offsets = Vec::with_capacity(group.len());
        for append in group {
            active.file.write_all_at(&append.record.bytes, offset)?;
            offsets.push(offset + append.record.body_start as u64);
            offset += append.record.bytes.len() as u64;
        }
        active.file.sync_data()?;
        active.len = offset;
        Ok((active.id, offsets))
    }

    /// Create the next segment, durably (its directory entry too), and make it readable.
    fn create_segment(&mut self) -> io::Result<Active> {
        let id = self.next_segment;
        self.next_segment = id
            .checked_add(1)
            .ok_or_else(|| io::Error::other("the pack store ran out of segment numbers"))?;
        let file = File::options()
            .read(true)
            .write(true)
            .create_new(true)
            .open(segment_path(&self.dir, id))?;
        sync_dir(&self.dir)?;
        let file = Arc::new(file);
        self.shared.add_segment(id, file.clone());
        tracing::debug!(segment = id, "pack store started a segment");
        Ok(Active { id, file, len: 0 })
    }
}
