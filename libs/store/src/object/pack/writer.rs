//! The pack store's one writer: a thread that appends queued records to the active segment in
//! groups, has them made durable, and only then indexes them (making them visible) and
//! acknowledges them.
//!
//! Durability is pipelined: after writing a group, the writer hands an `fdatasync` of the
//! segment to a small pool of sync threads and goes on writing the next group while it runs.
//! A completed `fdatasync` makes durable everything written before it started, so the groups
//! written before it are then indexed and acknowledged, in order. Several flushes in flight
//! at once overlap on the device (a group no longer waits for the previous group's flush to
//! finish before its own can start), which is most of a put's latency.
//!
//! Every record is appended under a [`Condition`] that the writer checks against the index
//! and against the groups still waiting for their flush, at the moment it appends: so "put
//! unless present" is atomic, and compaction moves a record only if it is still the live
//! one (see `compact`).

use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use super::index::{Entry, FileState, Index, Mark, Op, Stats};
use super::record::{Encoded, Kind};
use super::{Shared, segment_path};
use crate::object::local::sync_dir;

/// Most records one group takes, and roughly most bytes (a single larger record still goes
/// alone): bounds the latency a group adds and the memory it holds.
const MAX_GROUP_RECORDS: usize = 1024;
const MAX_GROUP_BYTES: usize = 8 * 1024 * 1024;
/// Flushes in flight at once.
const MAX_SYNCS_IN_FLIGHT: usize = 4;
/// An index commit is made durable at least this often while writes arrive, and after this
/// long idle; the records after the last durable commit are read again on open after a crash.
const DURABLE_EVERY: Duration = Duration::from_secs(2);
/// … and at least every this many bytes appended.
const DURABLE_EVERY_BYTES: u64 = 32 * 1024 * 1024;

/// When a record is appended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Condition {
    /// Always (a delete only if the key is present: deleting nothing writes nothing).
    Always,
    /// Only if the key has no live object.
    Absent,
    /// Only if the key's live object is still the record whose body is here.
    At { segment: u32, body_offset: u64 },
}

/// What became of a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Outcome {
    /// The record was appended and is durable and visible.
    Written,
    /// Its condition did not hold: nothing was written.
    Skipped,
}

/// A record waiting to be appended.
pub(super) struct Request {
    pub kind: Kind,
    pub key: String,
    pub content_type: String,
    pub modified_nanos: i64,
    pub record: Encoded,
    pub condition: Condition,
    pub done: oneshot::Sender<io::Result<Outcome>>,
}

/// What the writer thread is sent.
pub(super) enum Message {
    Append(Request),
    /// An `fdatasync` of the segment written up to `upto` finished.
    Synced {
        generation: u64,
        upto: u64,
        result: io::Result<()>,
    },
    /// Answer once everything acknowledged so far is in a durable index commit.
    Checkpoint(oneshot::Sender<io::Result<()>>),
    /// The segment's file is gone: drop what the index knows of it.
    Forget {
        segment: u32,
        done: oneshot::Sender<io::Result<()>>,
    },
    /// The segment statistics and the segment being appended to.
    Stats(oneshot::Sender<(Stats, Option<u32>)>),
    /// Finish what is queued, make the index durable and stop.
    Shutdown,
}

/// The segment being appended to.
pub(super) struct Active {
    pub id: u32,
    pub file: Arc<File>,
    pub len: u64,
}

/// A group written to the segment, waiting for a flush to cover it.
struct Group {
    seq: u64,
    segment: u32,
    end: u64,
    ops: Vec<Op>,
    replies: Vec<(oneshot::Sender<io::Result<Outcome>>, Outcome)>,
}

struct SyncJob {
    generation: u64,
    upto: u64,
    file: Arc<File>,
}

/// Where the writer starts from.
pub(super) struct Setup {
    pub dir: PathBuf,
    pub shared: Arc<Shared>,
    pub index: Arc<Index>,
    pub stats: Stats,
    pub active: Option<Active>,
    pub next_segment: u32,
    pub segment_bytes: u64,
    /// Everything before this is indexed.
    pub covered: Mark,
}

pub(super) struct Writer {
    dir: PathBuf,
    shared: Arc<Shared>,
    index: Arc<Index>,
    stats: Stats,
    active: Option<Active>,
    next_segment: u32,
    segment_bytes: u64,
    covered: Mark,
    state: Pipeline,
}

/// The writer's bookkeeping between groups.
#[derive(Default)]
struct Pipeline {
    pending: VecDeque<Group>,
    /// The state each key touched by a pending group will have: `None` deleted.
    overlay: HashMap<String, (u64, Option<Entry>)>,
    seq: u64,
    /// Bumped whenever the segment's written state stops being trusted (a new segment, a
    /// failure): flushes of an earlier generation are ignored.
    generation: u64,
    /// Highest offset of the active segment a flush was asked for, and one has finished for.
    sync_requested: u64,
    synced: u64,
    syncs_in_flight: usize,
    sync_jobs: Option<Sender<SyncJob>>,
    last_durable: Option<Instant>,
    bytes_since_durable: u64,
    /// Index commits since the last durable one.
    not_durable: bool,
    checkpoints: Vec<(u64, oneshot::Sender<io::Result<()>>)>,
    /// Segments whose files are gone, to drop from the index with the next commit.
    forget: Vec<u32>,
    /// Why the writer takes no more writes (the index could not be updated).
    broken: Option<String>,
}

impl Writer {
    pub fn new(setup: Setup) -> Self {
        Writer {
            dir: setup.dir,
            shared: setup.shared,
            index: setup.index,
            stats: setup.stats,
            active: setup.active,
            next_segment: setup.next_segment,
            segment_bytes: setup.segment_bytes,
            covered: setup.covered,
            state: Pipeline::default(),
        }
    }

    /// Serve `messages` until [`Message::Shutdown`]; `sender` is how the sync threads report.
    pub fn run(mut self, messages: &Receiver<Message>, sender: &Sender<Message>) {
        self.state.sync_jobs = Some(start_sync_threads(sender));
        self.state.last_durable = Some(Instant::now());
        loop {
            let next = if self.state.not_durable {
                match messages.recv_timeout(DURABLE_EVERY) {
                    Ok(message) => Some(message),
                    Err(RecvTimeoutError::Timeout) => None,
                    Err(RecvTimeoutError::Disconnected) => break,
                }
            } else {
                match messages.recv() {
                    Ok(message) => Some(message),
                    Err(_) => break,
                }
            };
            match next {
                None => {
                    // Idle: make the index durable (a failure is logged, and the next
                    // commit tries again).
                    if self.state.pending.is_empty() {
                        let _ = self.commit_now(true, &[]);
                    }
                }
                Some(Message::Append(first)) => {
                    let mut bytes = first.record.bytes.len();
                    let mut group = vec![first];
                    let mut stop = false;
                    while group.len() < MAX_GROUP_RECORDS && bytes < MAX_GROUP_BYTES {
                        match messages.try_recv() {
                            Ok(Message::Append(next)) => {
                                bytes += next.record.bytes.len();
                                group.push(next);
                            }
                            Ok(Message::Shutdown) => {
                                stop = true;
                                break;
                            }
                            Ok(other) => self.handle(other),
                            Err(_) => break,
                        }
                    }
                    self.write_group(group);
                    if stop {
                        break;
                    }
                }
                Some(Message::Shutdown) => break,
                Some(other) => self.handle(other),
            }
        }
        self.shut_down();
    }

    fn handle(&mut self, message: Message) {
        match message {
            Message::Append(request) => self.write_group(vec![request]),
            Message::Synced {
                generation,
                upto,
                result,
            } => self.synced(generation, upto, result),
            Message::Checkpoint(done) => match self.state.pending.back() {
                Some(last) => self.state.checkpoints.push((last.seq, done)),
                None => {
                    let result = self.commit_now(true, &[]);
                    let _ = done.send(result);
                }
            },
            Message::Forget { segment, done } => {
                self.shared.remove_segment(segment);
                let result = if self.state.pending.is_empty() {
                    self.commit_now(false, &[segment])
                } else {
                    // Taken with the next group's commit.
                    self.state.forget.push(segment);
                    Ok(())
                };
                let _ = done.send(result);
            }
            Message::Stats(done) => {
                let _ = done.send((self.stats.clone(), self.active.as_ref().map(|a| a.id)));
            }
            Message::Shutdown => {}
        }
    }

    /// The state `key` has once every pending group is committed.
    fn current(&self, key: &str) -> io::Result<Option<Entry>> {
        match self.state.overlay.get(key) {
            Some((_, state)) => Ok(state.clone()),
            None => self.index.get(key),
        }
    }

    fn write_group(&mut self, requests: Vec<Request>) {
        if let Some(reason) = &self.state.broken {
            let reason = reason.clone();
            for request in requests {
                let _ = request.done.send(Err(io::Error::other(reason.clone())));
            }
            return;
        }
        let active = match self.prepare_segment() {
            Ok(active) => active,
            Err(e) => {
                tracing::error!(error = %e, "the pack store cannot start a segment");
                for request in requests {
                    let _ = request
                        .done
                        .send(Err(io::Error::new(e.kind(), e.to_string())));
                }
                return;
            }
        };
        let (segment, file, start) = (active.id, active.file.clone(), active.len);
        self.state.seq += 1;
        let seq = self.state.seq;
        let mut offset = start;
        let mut ops = Vec::new();
        let mut replies = Vec::with_capacity(requests.len());
        let mut failure = None;
        for request in requests {
            if failure.is_some() {
                replies.push((request.done, Outcome::Skipped));
                continue;
            }
            let current = match self.current(&request.key) {
                Ok(current) => current,
                Err(e) => {
                    let _ = request.done.send(Err(e));
                    continue;
                }
            };
            let applies = match (request.kind, request.condition) {
                (Kind::Delete, Condition::Always) => current.is_some(),
                (Kind::Put, Condition::Always) => true,
                (_, Condition::Absent) => current.is_none(),
                (
                    _,
                    Condition::At {
                        segment,
                        body_offset,
                    },
                ) => current.is_some_and(|e| e.segment == segment && e.body_offset == body_offset),
            };
            if !applies {
                replies.push((request.done, Outcome::Skipped));
                continue;
            }
            if let Err(e) = file.write_all_at(&request.record.bytes, offset) {
                failure = Some(e);
                replies.push((request.done, Outcome::Skipped));
                continue;
            }
            let len = request.record.bytes.len() as u64;
            let op = match request.kind {
                Kind::Put => Op::Put {
                    key: request.key.clone(),
                    entry: Entry {
                        segment,
                        body_offset: offset + request.record.body_start as u64,
                        body_len: request.record.body_len(),
                        modified_nanos: request.modified_nanos,
                        content_type: request.content_type,
                    },
                },
                Kind::Delete => Op::Delete {
                    key: request.key.clone(),
                    segment,
                    record_len: len,
                },
            };
            let state = match &op {
                Op::Put { entry, .. } => Some(entry.clone()),
                Op::Delete { .. } => None,
            };
            self.state.overlay.insert(request.key, (seq, state));
            ops.push(op);
            replies.push((request.done, Outcome::Written));
            offset += len;
        }
        if let Some(e) = failure {
            // Nothing of this group, nor of the groups still waiting for a flush, is
            // acknowledged: after a failed write the segment's state on disk is unknown.
            // Seal it; the next group starts a new one. Whatever did reach the disk comes
            // back at the next open as records nobody was told about, as after a crash.
            tracing::error!(error = %e, "pack store append failed; sealing the segment");
            self.fail_all(&e, replies);
            return;
        }
        if let Some(active) = self.active.as_mut() {
            active.len = offset;
        }
        self.state.bytes_since_durable += offset - start;
        self.state.pending.push_back(Group {
            seq,
            segment,
            end: offset,
            ops,
            replies,
        });
        self.request_sync();
        self.commit_ready();
    }

    /// The segment to append the next group to: the active one, unless it is full (then
    /// its pending groups are flushed and committed here, and the next one is started).
    fn prepare_segment(&mut self) -> io::Result<&Active> {
        let full = self
            .active
            .as_ref()
            .is_some_and(|a| a.len >= self.segment_bytes);
        if full && let Some(active) = self.active.take() {
            self.state.generation += 1;
            match active.file.sync_data() {
                Ok(()) => {
                    self.state.synced = active.len;
                    self.state.sync_requested = active.len;
                    self.commit_ready();
                }
                Err(e) => {
                    tracing::error!(error = %e, "pack store flush failed while sealing a segment");
                    self.fail_all(&e, Vec::new());
                }
            }
            self.state.last_durable = None; // a durable commit with the next group
        }
        if self.active.is_none() {
            let active = self.create_segment()?;
            self.state.generation += 1;
            self.state.sync_requested = 0;
            self.state.synced = 0;
            self.active = Some(active);
        }
        self.active
            .as_ref()
            .ok_or_else(|| io::Error::other("no active pack segment"))
    }

    /// Ask for a flush of everything written, if one is not already asked for and the pool
    /// has room; otherwise the next finished flush asks.
    fn request_sync(&mut self) {
        let Some(active) = &self.active else { return };
        if active.len <= self.state.sync_requested
            || self.state.syncs_in_flight >= MAX_SYNCS_IN_FLIGHT
        {
            return;
        }
        let job = SyncJob {
            generation: self.state.generation,
            upto: active.len,
            file: active.file.clone(),
        };
        let sent = self
            .state
            .sync_jobs
            .as_ref()
            .is_some_and(|jobs| jobs.send(job).is_ok());
        if sent {
            self.state.sync_requested = active.len;
            self.state.syncs_in_flight += 1;
        } else {
            // No sync thread to run it: flush here.
            let (generation, upto) = (self.state.generation, active.len);
            let result = active.file.sync_data();
            self.state.sync_requested = upto;
            self.state.syncs_in_flight += 1;
            self.synced(generation, upto, result);
        }
    }

    fn synced(&mut self, generation: u64, upto: u64, result: io::Result<()>) {
        self.state.syncs_in_flight = self.state.syncs_in_flight.saturating_sub(1);
        if generation != self.state.generation {
            self.request_sync();
            return; // a flush of a segment (or a state) since left behind
        }
        match result {
            Ok(()) => {
                self.state.synced = self.state.synced.max(upto);
                self.commit_ready();
            }
            Err(e) => {
                // Retrying an `fdatasync` can report success for pages the kernel already
                // dropped: nothing pending is acknowledged, and the segment is sealed.
                tracing::error!(error = %e, "pack store flush failed; sealing the segment");
                self.fail_all(&e, Vec::new());
            }
        }
        self.request_sync();
    }

    /// Index and acknowledge the pending groups a finished flush covers, in order.
    fn commit_ready(&mut self) {
        // Pending groups are all in the active segment: a segment's groups are committed (or
        // failed) before the next one starts.
        let ready = self
            .state
            .pending
            .iter()
            .take_while(|g| g.end <= self.state.synced)
            .count();
        if ready == 0 {
            return;
        }
        let groups: Vec<Group> = self.state.pending.drain(..ready).collect();
        let last = groups.last().map_or(self.covered, |g| Mark {
            segment: g.segment,
            offset: g.end,
        });
        let last_seq = groups.last().map_or(0, |g| g.seq);
        let checkpoint_due = self
            .state
            .checkpoints
            .iter()
            .any(|(seq, _)| *seq <= last_seq);
        let durable = checkpoint_due || self.durable_due();
        let forget = std::mem::take(&mut self.state.forget);
        let result = self.file_state(last.segment).and_then(|file| {
            self.index.commit(
                &mut self.stats,
                groups.iter().flat_map(|g| g.ops.iter()),
                last,
                file,
                durable,
                &forget,
            )
        });
        match result {
            Ok(()) => {
                self.covered = last;
                self.committed(durable);
                self.state.overlay.retain(|_, (seq, _)| *seq > last_seq);
                for group in groups {
                    for (done, outcome) in group.replies {
                        let _ = done.send(Ok(outcome));
                    }
                }
                let (answered, waiting): (Vec<_>, Vec<_>) =
                    std::mem::take(&mut self.state.checkpoints)
                        .into_iter()
                        .partition(|(seq, _)| *seq <= last_seq);
                self.state.checkpoints = waiting;
                for (_, done) in answered {
                    let _ = done.send(Ok(()));
                }
            }
            Err(e) => {
                let reason = format!("the pack index cannot be updated: {e}");
                tracing::error!(error = %e, "pack index commit failed; the store takes no more writes until it is reopened");
                self.state.broken = Some(reason);
                let replies = groups.into_iter().flat_map(|g| g.replies).collect();
                self.fail_all(&e, replies);
            }
        }
    }

    fn durable_due(&self) -> bool {
        self.state.bytes_since_durable >= DURABLE_EVERY_BYTES
            || self
                .state
                .last_durable
                .is_none_or(|at| at.elapsed() >= DURABLE_EVERY)
    }

    fn committed(&mut self, durable: bool) {
        if durable {
            self.state.last_durable = Some(Instant::now());
            self.state.bytes_since_durable = 0;
            self.state.not_durable = false;
        } else {
            self.state.not_durable = true;
        }
    }

    /// An index commit of nothing but the mark (and forgotten segments).
    fn commit_now(&mut self, durable: bool, forget: &[u32]) -> io::Result<()> {
        let covered = self.covered;
        let result = self.file_state(covered.segment).and_then(|file| {
            self.index
                .commit(&mut self.stats, [], covered, file, durable, forget)
        });
        match &result {
            Ok(()) => self.committed(durable),
            Err(e) => tracing::error!(error = %e, "pack index commit failed"),
        }
        result
    }

    /// The state of a segment's file now (nothing if it is gone).
    fn file_state(&self, segment: u32) -> io::Result<FileState> {
        match self.shared.segment(segment) {
            Some(file) => FileState::of(&file),
            None => Ok(FileState::default()),
        }
    }

    /// Answer `replies` and every pending group with `e`, and seal the segment.
    fn fail_all(
        &mut self,
        e: &io::Error,
        replies: Vec<(oneshot::Sender<io::Result<Outcome>>, Outcome)>,
    ) {
        let pending: Vec<_> = self
            .state
            .pending
            .drain(..)
            .flat_map(|g| g.replies)
            .collect();
        for (done, _) in replies.into_iter().chain(pending) {
            let _ = done.send(Err(io::Error::new(e.kind(), e.to_string())));
        }
        self.state.overlay.clear();
        self.active = None;
        self.state.generation += 1;
        for (_, done) in std::mem::take(&mut self.state.checkpoints) {
            let _ = done.send(Err(io::Error::new(e.kind(), e.to_string())));
        }
    }

    fn shut_down(&mut self) {
        if let Some(active) = &self.active
            && !self.state.pending.is_empty()
        {
            match active.file.sync_data() {
                Ok(()) => {
                    self.state.synced = active.len;
                    self.commit_ready();
                }
                Err(e) => self.fail_all(&e, Vec::new()),
            }
        }
        if self.state.broken.is_none() {
            let _ = self.commit_now(true, &[]);
        }
        for (_, done) in std::mem::take(&mut self.state.checkpoints) {
            let _ = done.send(Err(io::Error::other("the pack store is closing")));
        }
        self.state.sync_jobs = None;
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
        self.stats.entry(id).or_default();
        tracing::debug!(segment = id, "pack store started a segment");
        Ok(Active { id, file, len: 0 })
    }
}

/// The threads that run flushes for the writer and report back to it.
fn start_sync_threads(report: &Sender<Message>) -> Sender<SyncJob> {
    let (jobs, queue) = mpsc::channel::<SyncJob>();
    let queue = Arc::new(Mutex::new(queue));
    for n in 0..MAX_SYNCS_IN_FLIGHT {
        let queue = Arc::clone(&queue);
        let report = report.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("noema-pack-sync-{n}"))
            .spawn(move || {
                loop {
                    let job = {
                        let queue = queue.lock().unwrap_or_else(PoisonError::into_inner);
                        queue.recv()
                    };
                    let Ok(job) = job else { break };
                    let result = job.file.sync_data();
                    let message = Message::Synced {
                        generation: job.generation,
                        upto: job.upto,
                        result,
                    };
                    if report.send(message).is_err() {
                        break;
                    }
                }
            });
        if let Err(e) = spawned {
            tracing::error!(error = %e, "cannot start a pack store sync thread");
        }
    }
    jobs
}
