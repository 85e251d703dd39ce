//! The recorder's bounded on-disk ring of frames.
//!
//! A ring is a directory of `segments` files `segment-NNN.ring`, each at most `size / segments` bytes. Records
//! are appended to the current segment; when the next record does not fit, the writer moves to the next
//! segment (wrapping to 0) and truncates it, which drops that segment's frames: the oldest ones. So the ring
//! never holds more than `size` bytes and always holds the newest `size - size / segments` bytes of frames.
//!
//! A record is a 56-byte little-endian header, the payload (an encoded image), and zero padding to a multiple
//! of 8 bytes:
//!
//! | offset | field | |
//! |---|---|---|
//! | 0 | magic `PTFR` | |
//! | 4 | payload length, u32 | |
//! | 8 | camera, u32 | |
//! | 12 | width, u32 | |
//! | 16 | height, u32 | |
//! | 20 | encoding, u32 | 0 = PNG |
//! | 24 | seq, u64 | ring-wide record number, grows by one per record, across restarts |
//! | 32 | frame, u64 | the camera's frame number |
//! | 40 | captured_ns, i64 | wall-clock capture time, ns since the Unix epoch |
//! | 48 | CRC-32 (IEEE) of bytes 0..48 and the payload | |
//! | 52 | format version, u32 = 1 | |
//!
//! Each record is written with one positioned write of header, payload and padding together, and only then
//! entered in the in-memory index, so readers never see a record being written. A process killed in the middle
//! leaves at most a torn record at the end of the current segment; a damaged disk block leaves a record whose
//! CRC does not match. Opening a ring scans every segment, accepts only records whose magic, version, length and
//! CRC are right, steps over anything else 8 bytes at a time until the next valid record, and cuts the current
//! segment (the one holding the highest `seq`) back to the end of its last valid record before appending again.
//!
//! Opening reads each segment through one buffer of [`SCAN_CHUNK`] bytes (a record's CRC is computed as its
//! payload streams through), so the memory it takes does not depend on how large the files are: a ring with two
//! sparse 512 MiB segment files opens with the peak resident size 60 KiB higher, where reading each file whole,
//! as opening did before, took 512 MiB. A writer never writes past the segment size, so only the first `size /
//! segments` bytes of a segment file are scanned: the bytes after them (a stray or hostile file, or a ring
//! reopened with a smaller size) are one damaged stretch, counted without being read, and cut off. A record whose
//! length field is beyond the segment size is damage like any other. A stretch of damage that holds headers with
//! the right magic and version costs a CRC over each one's claimed payload; once a segment's failed checks add up
//! to [`CHECK_BUDGET`] segment sizes (a segment of genuine records, damaged or not, cannot reach one), the rest
//! of it is taken as damage. Without that bound an 8 MiB segment of such headers held the open for 44 s here, and
//! the time grows with the square of the segment size. A segment path that is not a regular file (a FIFO, a
//! device, a directory) is refused with [`RingError::NotAFile`].
//!
//! One writer per ring: [`RingWriter::open`] takes an exclusive `flock` on the file `ring.lock` in the ring's
//! directory and holds it until the writer is dropped; the kernel releases it when the process dies, however it
//! dies, so a lock is never left behind by a crash. The holder writes its pid and host name (inside a
//! partition: its PID namespace's pid and the partition's name) into the file, and a second writer, in this
//! process or another, gets [`RingError::InUse`] naming the directory and the holder. Without the lock two
//! writers would both append at their own idea of the current offset and truncate each other's segments while
//! both reported success. Readers take no lock.
//!
//! Durability ([`FsyncPolicy`]): records reach the page cache at once, so a crash of the recorder process loses
//! nothing it wrote. Against power loss the default, [`FsyncPolicy::Segment`], flushes a segment with
//! `fdatasync` when the writer leaves it: at most the current segment's frames can be lost, and any torn record
//! is found by its CRC. [`FsyncPolicy::Record`] flushes after every record (at the cost of a disk flush per
//! frame); [`FsyncPolicy::Never`] leaves it to the kernel.
use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::fs::{File, OpenOptions, TryLockError};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

pub const MAGIC: [u8; 4] = *b"PTFR";
pub const HEADER_LEN: usize = 56;
pub const VERSION: u32 = 1;
const ALIGN: u64 = 8;
pub const ENCODING_PNG: u32 = 0;
/// The file in a ring's directory its writer holds an exclusive `flock` on.
pub const LOCK_FILE: &str = "ring.lock";
/// Bytes of a segment file read at a time when a ring is opened: all the memory the scan itself takes.
pub const SCAN_CHUNK: usize = 64 << 10;
/// How many segment sizes of payload a segment's scan may check against CRCs that do not match before it takes
/// the rest of the segment as damage. Genuine records do not overlap, so all of a segment's records together,
/// damaged or not, claim at most one segment size.
pub const CHECK_BUDGET: u64 = 4;

#[derive(Debug, thiserror::Error)]
pub enum RingError {
    #[error("ring {path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("a record of {record} bytes does not fit a segment of {segment} bytes; give the ring more space or fewer segments")]
    TooLarge { record: u64, segment: u64 },
    #[error("ring of {size} bytes in {segments} segments is too small: each segment needs at least {min} bytes")]
    TooSmall { size: u64, segments: u32, min: u64 },
    #[error("record {seq} at {path}:{offset} no longer matches its index entry (overwritten or damaged)")]
    Stale { seq: u64, path: PathBuf, offset: u64 },
    #[error(
        "ring {} is in use by another recorder{}; give each recorder its own --ring",
        dir.display(),
        holder.as_ref().map(|h| format!(" ({h})")).unwrap_or_default()
    )]
    InUse { dir: PathBuf, holder: Option<Holder> },
    #[error("ring segment {} is not a regular file; remove it or give the recorder another --ring", path.display())]
    NotAFile { path: PathBuf },
}

/// Who holds a ring's lock, as it wrote itself into the lock file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    /// In the holder's PID namespace (inside a partition, not the host's pid).
    pub pid: u32,
    /// The holder's host name (inside a partition, the partition's name); `None` if it could not be read.
    pub host: Option<String>,
}

impl fmt::Display for Holder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "pid {}", self.pid)?;
        if let Some(h) = &self.host {
            write!(f, " on host {h}")?;
        }
        Ok(())
    }
}

impl Holder {
    fn me() -> Holder {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").ok().and_then(|h| clean_host(h.trim()));
        Holder { pid: std::process::id(), host }
    }

    /// The lock file's first line, `PID [HOST]`. The file may hold anything (it is in a directory others can
    /// write), so only its first bytes are read and only a plain host name is believed.
    fn read(file: &File) -> Option<Holder> {
        let mut buf = [0u8; 128];
        let n = file.read_at(&mut buf, 0).ok()?;
        let text = std::str::from_utf8(&buf[..n]).ok()?;
        let mut words = text.lines().next()?.split_whitespace();
        let pid = words.next()?.parse().ok()?;
        Some(Holder { pid, host: words.next().filter(|h| *h != "-").and_then(clean_host) })
    }
}

fn clean_host(h: &str) -> Option<String> {
    let plain = !h.is_empty() && h.len() <= 64 && h.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
    plain.then(|| h.to_string())
}

/// The writer's exclusive hold on a ring directory: an `flock` on [`LOCK_FILE`], released when the file is
/// closed, by the writer's drop or the process's death.
#[derive(Debug)]
struct RingLock {
    _file: File,
}

impl RingLock {
    fn acquire(dir: &Path) -> Result<RingLock, RingError> {
        let path = dir.join(LOCK_FILE);
        let file = OpenOptions::new().create(true).truncate(false).read(true).write(true).open(&path).map_err(io(&path))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => return Err(RingError::InUse { dir: dir.to_path_buf(), holder: Holder::read(&file) }),
            Err(TryLockError::Error(e)) => return Err(io(&path)(e)),
        }
        // New content first, then the length: a writer refused meanwhile reads a whole first line, old or new.
        let me = Holder::me();
        let line = format!("{} {}\n", me.pid, me.host.as_deref().unwrap_or("-"));
        file.write_all_at(line.as_bytes(), 0).map_err(io(&path))?;
        file.set_len(line.len() as u64).map_err(io(&path))?;
        Ok(RingLock { _file: file })
    }
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> RingError + '_ {
    move |source| RingError::Io { path: path.to_path_buf(), source }
}

/// When the writer asks the kernel to put records on the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FsyncPolicy {
    /// Never; the kernel writes back when it likes.
    Never,
    /// `fdatasync` a segment when the writer leaves it.
    #[default]
    Segment,
    /// `fdatasync` after every record.
    Record,
}

impl std::str::FromStr for FsyncPolicy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "never" => Ok(Self::Never),
            "segment" => Ok(Self::Segment),
            "record" => Ok(Self::Record),
            _ => Err(format!("fsync policy {s:?} is not one of never, segment, record")),
        }
    }
}

#[derive(Debug, Clone)]
pub struct RingConfig {
    pub dir: PathBuf,
    /// Bytes for all segments together.
    pub size: u64,
    pub segments: u32,
    pub fsync: FsyncPolicy,
}

impl RingConfig {
    pub fn new(dir: impl Into<PathBuf>, size: u64) -> Self {
        RingConfig { dir: dir.into(), size, segments: 8, fsync: FsyncPolicy::default() }
    }
    pub fn segment_size(&self) -> u64 {
        (self.size / self.segments.max(1) as u64) / ALIGN * ALIGN
    }
    fn segment_path(&self, i: u32) -> PathBuf {
        segment_path(&self.dir, i)
    }
}

pub fn segment_path(dir: &Path, i: u32) -> PathBuf {
    dir.join(format!("segment-{i:03}.ring"))
}

/// What a record says about its frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameMeta {
    pub camera: u32,
    pub frame: u64,
    pub captured_ns: i64,
    pub width: u32,
    pub height: u32,
    pub encoding: u32,
}

/// Where a record is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    pub seq: u64,
    pub meta: FrameMeta,
    pub segment: u32,
    pub offset: u64,
    pub len: u32,
}

fn record_size(payload: u64) -> u64 {
    (HEADER_LEN as u64 + payload).div_ceil(ALIGN) * ALIGN
}

fn encode_header(seq: u64, m: &FrameMeta, payload: &[u8]) -> [u8; HEADER_LEN] {
    let mut h = [0u8; HEADER_LEN];
    h[0..4].copy_from_slice(&MAGIC);
    h[4..8].copy_from_slice(&(payload.len() as u32).to_le_bytes());
    h[8..12].copy_from_slice(&m.camera.to_le_bytes());
    h[12..16].copy_from_slice(&m.width.to_le_bytes());
    h[16..20].copy_from_slice(&m.height.to_le_bytes());
    h[20..24].copy_from_slice(&m.encoding.to_le_bytes());
    h[24..32].copy_from_slice(&seq.to_le_bytes());
    h[32..40].copy_from_slice(&m.frame.to_le_bytes());
    h[40..48].copy_from_slice(&m.captured_ns.to_le_bytes());
    let mut crc = crc32fast::Hasher::new();
    crc.update(&h[0..48]);
    crc.update(payload);
    h[48..52].copy_from_slice(&crc.finalize().to_le_bytes());
    h[52..56].copy_from_slice(&VERSION.to_le_bytes());
    h
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}
fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

/// The payload length a header announces, if its magic and version are right and the length is at most
/// `max_payload`.
fn header_len(h: &[u8], max_payload: u64) -> Option<u32> {
    if h.len() < HEADER_LEN || h[0..4] != MAGIC || u32_at(h, 52) != VERSION {
        return None;
    }
    let len = u32_at(h, 4);
    (len as u64 <= max_payload).then_some(len)
}

fn header_meta(h: &[u8]) -> (u64, FrameMeta) {
    let meta = FrameMeta {
        camera: u32_at(h, 8),
        width: u32_at(h, 12),
        height: u32_at(h, 16),
        encoding: u32_at(h, 20),
        frame: u64_at(h, 32),
        captured_ns: u64_at(h, 40) as i64,
    };
    (u64_at(h, 24), meta)
}

/// Parses and checks the record starting at `buf[0]`; `buf` may run past the record. Returns its sequence
/// number, metadata and payload length when magic, version, length and CRC are all right.
fn check_record(buf: &[u8], max_payload: u64) -> Option<(u64, FrameMeta, u32)> {
    let len = header_len(buf, max_payload)?;
    if buf.len() < HEADER_LEN + len as usize {
        return None;
    }
    let mut crc = crc32fast::Hasher::new();
    crc.update(&buf[0..48]);
    crc.update(&buf[HEADER_LEN..HEADER_LEN + len as usize]);
    if crc.finalize() != u32_at(buf, 48) {
        return None;
    }
    let (seq, meta) = header_meta(buf);
    Some((seq, meta, len))
}

/// The first `limit` bytes of a segment file, seen through one buffer of [`SCAN_CHUNK`] bytes.
struct Window<'a> {
    file: &'a File,
    limit: u64,
    buf: Vec<u8>,
    /// File offset of `buf[0]`.
    start: u64,
    filled: usize,
}

impl<'a> Window<'a> {
    fn new(file: &'a File, limit: u64) -> Self {
        Window { file, limit, buf: vec![0; SCAN_CHUNK], start: 0, filled: 0 }
    }

    /// The bytes `off..off + n` (`n` at most [`SCAN_CHUNK`]), fewer where the file or the limit ends first.
    fn get(&mut self, off: u64, n: usize) -> std::io::Result<&[u8]> {
        if off >= self.limit {
            return Ok(&[]);
        }
        let end = off.saturating_add(n.min(SCAN_CHUNK) as u64).min(self.limit);
        if off < self.start || end > self.start + self.filled as u64 {
            let want = (self.limit - off).min(SCAN_CHUNK as u64) as usize;
            let mut got = 0;
            while got < want {
                match self.file.read_at(&mut self.buf[got..want], off + got as u64) {
                    Ok(0) => break,
                    Ok(k) => got += k,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            }
            self.start = off;
            self.filled = got;
        }
        let a = (off - self.start) as usize;
        let b = ((end - self.start) as usize).min(self.filled).max(a);
        Ok(&self.buf[a..b])
    }

    /// The record at `off` if it is whole and right, else the payload bytes its header made the check read.
    fn record_at(&mut self, off: u64, max_payload: u64) -> std::io::Result<Result<(u64, FrameMeta, u32), u64>> {
        let mut header = [0u8; HEADER_LEN];
        let h = self.get(off, HEADER_LEN)?;
        if h.len() < HEADER_LEN {
            return Ok(Err(0));
        }
        header.copy_from_slice(h);
        let Some(len) = header_len(&header, max_payload) else { return Ok(Err(0)) };
        let payload_at = off + HEADER_LEN as u64;
        if payload_at + len as u64 > self.limit {
            return Ok(Err(0));
        }
        let mut crc = crc32fast::Hasher::new();
        crc.update(&header[0..48]);
        let mut at = payload_at;
        let end = payload_at + len as u64;
        while at < end {
            let piece = self.get(at, (end - at).min(SCAN_CHUNK as u64) as usize)?;
            if piece.is_empty() {
                return Ok(Err(at - payload_at)); // the file shrank under the scan
            }
            crc.update(piece);
            at += piece.len() as u64;
        }
        if crc.finalize() != u32_at(&header, 48) {
            return Ok(Err(len as u64));
        }
        let (seq, meta) = header_meta(&header);
        Ok(Ok((seq, meta, len)))
    }
}

/// Scans segment `s` (open in `file`, `file_len` bytes long) for valid records, adding them to `entries` and
/// what it skipped to `report`. Returns the end of its last valid record.
fn scan_segment(
    file: &File,
    file_len: u64,
    s: u32,
    segment_size: u64,
    entries: &mut Vec<Entry>,
    report: &mut OpenReport,
) -> std::io::Result<u64> {
    let limit = file_len.min(segment_size);
    let max_payload = segment_size - HEADER_LEN as u64;
    let budget = CHECK_BUDGET.saturating_mul(segment_size);
    let mut window = Window::new(file, limit);
    let (mut off, mut end, mut in_damage, mut checked) = (0u64, 0u64, false, 0u64);
    while off < limit {
        match window.record_at(off, max_payload)? {
            Ok((seq, meta, len)) => {
                entries.push(Entry { seq, meta, segment: s, offset: off, len });
                off += record_size(len as u64);
                end = off;
                in_damage = false;
            }
            Err(read) => {
                if !in_damage {
                    report.damaged += 1;
                    in_damage = true;
                }
                checked = checked.saturating_add(read);
                // Past the budget the rest is not damage but a file made to be slow to scan.
                let step = if checked > budget { limit - off } else { ALIGN.min(limit - off) };
                report.damaged_bytes += step;
                off += step;
            }
        }
    }
    // Never written by a writer of this size: damage, not read.
    let beyond = file_len.saturating_sub(limit.max(off));
    if beyond > 0 {
        if !in_damage {
            report.damaged += 1;
        }
        report.damaged_bytes += beyond;
    }
    Ok(end)
}

/// The records in the ring, oldest first. Shared between the writer and readers behind a mutex that either
/// side holds only to add, drop or look up entries.
#[derive(Debug, Default)]
pub struct RingIndex {
    entries: VecDeque<Entry>,
}

impl RingIndex {
    pub fn len(&self) -> usize {
        self.entries.len()
    }
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
    pub fn entries(&self) -> impl Iterator<Item = &Entry> {
        self.entries.iter()
    }
    /// The newest record of `camera`.
    pub fn latest(&self, camera: u32) -> Option<Entry> {
        self.entries.iter().rev().find(|e| e.meta.camera == camera).copied()
    }
    /// The record of `camera` captured nearest `at_ns` (the earlier one on a tie). A linear scan: the wall
    /// clock may have been stepped back between records, so capture times need not grow with `seq`.
    pub fn nearest(&self, camera: u32, at_ns: i64) -> Option<Entry> {
        self.entries
            .iter()
            .filter(|e| e.meta.camera == camera)
            .min_by_key(|e| ((e.meta.captured_ns as i128 - at_ns as i128).abs(), e.meta.captured_ns))
            .copied()
    }
    fn drop_segment(&mut self, segment: u32) {
        self.entries.retain(|e| e.segment != segment);
    }
}

/// What opening a ring found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OpenReport {
    /// Valid records found.
    pub records: usize,
    /// Stretches of bytes that were not valid records (torn, damaged), skipped.
    pub damaged: usize,
    pub damaged_bytes: u64,
    /// Bytes cut from the end of segments: from the current one, a torn last record or damage after the last
    /// record; from any, what lies beyond the segment size.
    pub truncated_bytes: u64,
}

/// The single writer of a ring.
pub struct RingWriter {
    config: RingConfig,
    segment_size: u64,
    current: u32,
    file: File,
    offset: u64,
    next_seq: u64,
    next_frame: HashMap<u32, u64>,
    index: Arc<Mutex<RingIndex>>,
    buf: Vec<u8>,
    /// Held for the writer's life: no second writer appends to or truncates this ring meanwhile.
    _lock: RingLock,
}

fn lock(index: &Mutex<RingIndex>) -> std::sync::MutexGuard<'_, RingIndex> {
    index.lock().unwrap_or_else(|p| p.into_inner())
}

impl RingWriter {
    /// Opens (creating when needed) the ring in `config.dir`, scanning what is there. Fails with
    /// [`RingError::InUse`] while another writer has the ring open.
    pub fn open(config: RingConfig) -> Result<(Self, OpenReport), RingError> {
        let segment_size = config.segment_size();
        let min = record_size(4096);
        if config.segments == 0 || segment_size < min {
            return Err(RingError::TooSmall { size: config.size, segments: config.segments, min });
        }
        std::fs::create_dir_all(&config.dir).map_err(io(&config.dir))?;
        let lock = RingLock::acquire(&config.dir)?;
        let mut report = OpenReport::default();
        let mut entries = Vec::new();
        // Per segment: the end of its last valid record.
        let mut ends = vec![0u64; config.segments as usize];
        for s in 0..config.segments {
            let path = config.segment_path(s);
            // Read and write: opening a FIFO read-only would wait for a writer.
            let file = match OpenOptions::new().read(true).write(true).open(&path) {
                Ok(f) => f,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) if e.kind() == std::io::ErrorKind::IsADirectory => return Err(RingError::NotAFile { path }),
                Err(e) => return Err(io(&path)(e)),
            };
            let meta = file.metadata().map_err(io(&path))?;
            if !meta.is_file() {
                return Err(RingError::NotAFile { path });
            }
            ends[s as usize] = scan_segment(&file, meta.len(), s, segment_size, &mut entries, &mut report).map_err(io(&path))?;
            // The writer never comes back to bytes past the segment size; they only take disk space.
            if meta.len() > segment_size {
                report.truncated_bytes += meta.len() - segment_size;
                file.set_len(segment_size).map_err(io(&path))?;
                file.sync_data().map_err(io(&path))?;
            }
        }
        entries.sort_by_key(|e| e.seq);
        report.records = entries.len();
        let (current, next_seq) = match entries.last() {
            Some(e) => (e.segment, e.seq.saturating_add(1)),
            None => (0, 0),
        };
        let mut next_frame = HashMap::new();
        for e in &entries {
            let n = next_frame.entry(e.meta.camera).or_insert(0);
            *n = (*n).max(e.meta.frame.saturating_add(1));
        }
        let path = config.segment_path(current);
        let file = OpenOptions::new().create(true).truncate(false).read(true).write(true).open(&path).map_err(io(&path))?;
        let offset = ends[current as usize];
        let file_len = file.metadata().map_err(io(&path))?.len();
        if file_len > offset {
            report.truncated_bytes += file_len - offset;
            file.set_len(offset).map_err(io(&path))?;
            file.sync_data().map_err(io(&path))?;
        }
        let index = Arc::new(Mutex::new(RingIndex { entries: entries.into() }));
        Ok((
            RingWriter { config, segment_size, current, file, offset, next_seq, next_frame, index, buf: Vec::new(), _lock: lock },
            report,
        ))
    }

    pub fn index(&self) -> Arc<Mutex<RingIndex>> {
        self.index.clone()
    }

    pub fn config(&self) -> &RingConfig {
        &self.config
    }

    /// The frame number the next frame of `camera` should get (continues after a restart).
    pub fn next_frame(&self, camera: u32) -> u64 {
        self.next_frame.get(&camera).copied().unwrap_or(0)
    }

    /// Appends one record, moving to (and emptying) the next segment when the current one is full.
    pub fn append(&mut self, meta: FrameMeta, payload: &[u8]) -> Result<Entry, RingError> {
        let size = record_size(payload.len() as u64);
        if size > self.segment_size {
            return Err(RingError::TooLarge { record: size, segment: self.segment_size });
        }
        if self.offset + size > self.segment_size {
            self.next_segment()?;
        }
        let seq = self.next_seq;
        self.buf.clear();
        self.buf.extend_from_slice(&encode_header(seq, &meta, payload));
        self.buf.extend_from_slice(payload);
        self.buf.resize(size as usize, 0);
        let path = self.config.segment_path(self.current);
        self.file.write_all_at(&self.buf, self.offset).map_err(io(&path))?;
        if self.config.fsync == FsyncPolicy::Record {
            self.file.sync_data().map_err(io(&path))?;
        }
        let entry = Entry { seq, meta, segment: self.current, offset: self.offset, len: payload.len() as u32 };
        self.offset += size;
        self.next_seq = self.next_seq.saturating_add(1);
        let n = self.next_frame.entry(meta.camera).or_insert(0);
        *n = (*n).max(meta.frame.saturating_add(1));
        lock(&self.index).entries.push_back(entry);
        Ok(entry)
    }

    fn next_segment(&mut self) -> Result<(), RingError> {
        if self.config.fsync != FsyncPolicy::Never {
            let path = self.config.segment_path(self.current);
            self.file.sync_data().map_err(io(&path))?;
        }
        let next = (self.current + 1) % self.config.segments;
        // Forget the segment's records before cutting the file, so no reader is sent to bytes that are going.
        lock(&self.index).drop_segment(next);
        let path = self.config.segment_path(next);
        let file = OpenOptions::new().create(true).truncate(false).read(true).write(true).open(&path).map_err(io(&path))?;
        file.set_len(0).map_err(io(&path))?;
        self.file = file;
        self.current = next;
        self.offset = 0;
        Ok(())
    }

    /// Flushes the current segment to the disk.
    pub fn sync(&self) -> Result<(), RingError> {
        self.file.sync_data().map_err(io(&self.config.segment_path(self.current)))
    }
}

/// Reads records by their index entries; any number of readers may run beside the writer.
pub struct RingReader {
    dir: PathBuf,
    files: HashMap<u32, File>,
}

impl RingReader {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        RingReader { dir: dir.into(), files: HashMap::new() }
    }

    /// The payload of the record `entry`, checked against its CRC. A record overwritten since the entry was
    /// looked up is reported as [`RingError::Stale`].
    pub fn read(&mut self, entry: &Entry) -> Result<Vec<u8>, RingError> {
        let path = segment_path(&self.dir, entry.segment);
        let file = match self.files.entry(entry.segment) {
            std::collections::hash_map::Entry::Occupied(f) => f.into_mut(),
            std::collections::hash_map::Entry::Vacant(v) => v.insert(File::open(&path).map_err(io(&path))?),
        };
        let mut buf = vec![0u8; HEADER_LEN + entry.len as usize];
        let stale = || RingError::Stale { seq: entry.seq, path: path.clone(), offset: entry.offset };
        match file.read_exact_at(&mut buf, entry.offset) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Err(stale()),
            Err(e) => return Err(io(&path)(e)),
        }
        match check_record(&buf, entry.len as u64) {
            Some((seq, meta, _)) if seq == entry.seq && meta == entry.meta => {
                buf.drain(..HEADER_LEN);
                Ok(buf)
            }
            _ => Err(stale()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct TempDir(PathBuf);
    impl TempDir {
        fn new(name: &str) -> Self {
            let p = std::env::temp_dir().join(format!("partita-ring-{}-{name}", std::process::id()));
            let _ = std::fs::remove_dir_all(&p);
            TempDir(p)
        }
    }
    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn meta(camera: u32, frame: u64) -> FrameMeta {
        FrameMeta { camera, frame, captured_ns: 1_000_000_000 + frame as i64 * 40_000_000, width: 4, height: 2, encoding: 0 }
    }

    fn payload(frame: u64, len: usize) -> Vec<u8> {
        (0..len).map(|i| (i as u64 ^ frame.wrapping_mul(31)) as u8).collect()
    }

    /// 4 segments of the smallest size (4152 bytes): 3 records of 1000 payload bytes, or 7 of 500, fit one.
    fn config(dir: &Path) -> RingConfig {
        let seg = record_size(4096);
        RingConfig { dir: dir.to_path_buf(), size: 4 * seg, segments: 4, fsync: FsyncPolicy::Segment }
    }

    #[test]
    fn records_read_back_and_the_index_finds_them() {
        let t = TempDir::new("basic");
        let (mut w, report) = RingWriter::open(config(&t.0)).unwrap();
        assert_eq!(report, OpenReport::default());
        for f in 0..5 {
            w.append(meta(0, f), &payload(f, 1000)).unwrap();
            w.append(meta(1, f), &payload(f + 100, 900)).unwrap();
        }
        let index = w.index();
        let idx = lock(&index);
        assert_eq!(idx.len(), 10);
        let mut r = RingReader::new(&t.0);
        let e = idx.latest(1).unwrap();
        assert_eq!((e.meta.camera, e.meta.frame), (1, 4));
        assert_eq!(r.read(&e).unwrap(), payload(104, 900));
        let e = idx.latest(0).unwrap();
        assert_eq!(r.read(&e).unwrap(), payload(4, 1000));
        assert!(idx.latest(7).is_none());
    }

    #[test]
    fn nearest_time_picks_the_closest_capture() {
        let t = TempDir::new("nearest");
        let (mut w, _) = RingWriter::open(config(&t.0)).unwrap();
        for f in 0..6 {
            w.append(meta(0, f), &payload(f, 100)).unwrap();
        }
        let index = w.index();
        let idx = lock(&index);
        let at = |ns: i64| idx.nearest(0, ns).unwrap().meta.frame;
        let t2 = meta(0, 2).captured_ns;
        assert_eq!(at(t2), 2);
        assert_eq!(at(t2 + 19_999_999), 2);
        assert_eq!(at(t2 + 20_000_001), 3);
        assert_eq!(at(t2 + 20_000_000), 2, "a tie goes to the earlier frame");
        assert_eq!(at(i64::MIN), 0);
        assert_eq!(at(i64::MAX), 5);
        assert!(idx.nearest(1, t2).is_none());
    }

    #[test]
    fn wrapping_overwrites_the_oldest_segment() {
        let t = TempDir::new("wrap");
        let cfg = config(&t.0);
        let (mut w, _) = RingWriter::open(cfg.clone()).unwrap();
        let per_segment = cfg.segment_size() / record_size(1000);
        let total = per_segment * 4;
        for f in 0..total + 3 {
            w.append(meta(0, f), &payload(f, 1000)).unwrap();
        }
        let index = w.index();
        let frames: Vec<u64> = lock(&index).entries().map(|e| e.meta.frame).collect();
        // The first segment was emptied for the last 3 records: frames 0..per_segment are gone.
        let expected: Vec<u64> = (per_segment..total + 3).collect();
        assert_eq!(frames, expected);
        for s in 0..4 {
            let len = std::fs::metadata(segment_path(&t.0, s)).unwrap().len();
            assert!(len <= cfg.segment_size(), "segment {s} is {len} bytes");
        }
        drop(w);
        // Reopening finds the same records, and appends after the newest.
        let (mut w, report) = RingWriter::open(cfg).unwrap();
        assert_eq!(report.records, expected.len());
        assert_eq!((report.damaged, report.truncated_bytes), (0, 0));
        assert_eq!(w.next_frame(0), total + 3);
        // Segment 0 is full again: the writer moves on to segment 1 and drops its records.
        let e = w.append(meta(0, total + 3), &payload(0, 1000)).unwrap();
        assert_eq!((e.segment, e.seq), (1, total + 3));
        let first = lock(&w.index()).entries().next().unwrap().meta.frame;
        assert_eq!(first, 2 * per_segment);
    }

    #[test]
    fn a_torn_last_record_is_cut_and_writing_continues() {
        let t = TempDir::new("torn");
        let cfg = config(&t.0);
        let (mut w, _) = RingWriter::open(cfg.clone()).unwrap();
        for f in 0..3 {
            w.append(meta(0, f), &payload(f, 500)).unwrap();
        }
        drop(w);
        // A kill in the middle of the fourth write: its header and half its payload reached the file.
        let seg0 = segment_path(&t.0, 0);
        let good_len = std::fs::metadata(&seg0).unwrap().len();
        let torn_payload = payload(3, 500);
        let header = encode_header(3, &meta(0, 3), &torn_payload);
        let f = OpenOptions::new().write(true).open(&seg0).unwrap();
        f.write_all_at(&header, good_len).unwrap();
        f.write_all_at(&torn_payload[..250], good_len + HEADER_LEN as u64).unwrap();
        drop(f);

        let (mut w, report) = RingWriter::open(cfg.clone()).unwrap();
        assert_eq!(report.records, 3);
        assert_eq!(report.damaged, 1);
        assert_eq!(report.truncated_bytes, HEADER_LEN as u64 + 250);
        assert_eq!(std::fs::metadata(&seg0).unwrap().len(), good_len, "the torn tail is cut");
        assert_eq!(w.next_frame(0), 3);
        let e = w.append(meta(0, 3), &payload(3, 500)).unwrap();
        assert_eq!((e.seq, e.offset), (3, good_len));
        drop(w);
        let (w, report) = RingWriter::open(cfg).unwrap();
        assert_eq!((report.records, report.damaged), (4, 0));
        let mut r = RingReader::new(&t.0);
        let last = lock(&w.index()).latest(0).unwrap();
        assert_eq!(r.read(&last).unwrap(), payload(3, 500));
    }

    #[test]
    fn a_corrupted_record_is_skipped_and_the_rest_kept() {
        let t = TempDir::new("crc");
        let cfg = config(&t.0);
        let (mut w, _) = RingWriter::open(cfg.clone()).unwrap();
        let mut entries = Vec::new();
        for f in 0..4 {
            entries.push(w.append(meta(0, f), &payload(f, 500)).unwrap());
        }
        drop(w);
        // One flipped bit in the payload of frame 1.
        let seg0 = segment_path(&t.0, 0);
        let f = OpenOptions::new().read(true).write(true).open(&seg0).unwrap();
        let at = entries[1].offset + HEADER_LEN as u64 + 10;
        let mut b = [0u8; 1];
        f.read_exact_at(&mut b, at).unwrap();
        f.write_all_at(&[b[0] ^ 0x10], at).unwrap();
        drop(f);

        let (w, report) = RingWriter::open(cfg).unwrap();
        assert_eq!(report.records, 3);
        assert_eq!(report.damaged, 1);
        assert_eq!(report.damaged_bytes, record_size(500));
        assert_eq!(report.truncated_bytes, 0, "damage before the last good record is stepped over, not cut");
        let frames: Vec<u64> = lock(&w.index()).entries().map(|e| e.meta.frame).collect();
        assert_eq!(frames, vec![0, 2, 3]);
        // The reader refuses the damaged record if asked for it by an old entry.
        let mut r = RingReader::new(&t.0);
        assert!(matches!(r.read(&entries[1]), Err(RingError::Stale { .. })));
        assert_eq!(r.read(&entries[2]).unwrap(), payload(2, 500));
    }

    #[test]
    fn too_small_rings_and_records_are_refused() {
        let t = TempDir::new("small");
        let mut cfg = config(&t.0);
        cfg.size = 1000;
        assert!(matches!(RingWriter::open(cfg), Err(RingError::TooSmall { .. })));
        let (mut w, _) = RingWriter::open(config(&t.0)).unwrap();
        let big = vec![0u8; config(&t.0).segment_size() as usize];
        assert!(matches!(w.append(meta(0, 0), &big), Err(RingError::TooLarge { .. })));
    }

    #[test]
    fn a_second_writer_is_refused_while_the_first_keeps_writing_intact_records() {
        let t = TempDir::new("two-writers");
        let (mut first, _) = RingWriter::open(config(&t.0)).unwrap();
        for f in 0..3 {
            first.append(meta(0, f), &payload(f, 500)).unwrap();
        }
        // Another writer on the same directory, in this process (another open file, so another flock).
        let err = RingWriter::open(config(&t.0)).err().expect("a second writer must be refused");
        match &err {
            RingError::InUse { dir, holder } => {
                assert_eq!(dir, &t.0);
                assert_eq!(holder.as_ref().map(|h| h.pid), Some(std::process::id()));
            }
            other => panic!("expected InUse, got {other:?}"),
        }
        let text = err.to_string();
        let expected = format!("ring {} is in use by another recorder (pid {}", t.0.display(), std::process::id());
        assert!(text.starts_with(&expected), "{text}");
        assert!(text.ends_with("; give each recorder its own --ring"), "{text}");
        // The refused open touched nothing: the first writer goes on, through a segment change.
        for f in 3..12 {
            first.append(meta(0, f), &payload(f, 500)).unwrap();
        }
        drop(first);
        let (w, report) = RingWriter::open(config(&t.0)).unwrap();
        assert_eq!((report.records, report.damaged, report.truncated_bytes), (12, 0, 0));
        let mut r = RingReader::new(&t.0);
        let entries: Vec<Entry> = lock(&w.index()).entries().copied().collect();
        for (f, e) in entries.iter().enumerate() {
            assert_eq!((e.seq, e.meta.frame), (f as u64, f as u64));
            assert_eq!(r.read(e).unwrap(), payload(f as u64, 500), "record {f}");
        }
    }

    #[test]
    fn the_lock_goes_with_the_writer() {
        let t = TempDir::new("lock-release");
        let (w, _) = RingWriter::open(config(&t.0)).unwrap();
        let holder = std::fs::read_to_string(t.0.join(LOCK_FILE)).unwrap();
        assert!(holder.starts_with(&format!("{} ", std::process::id())), "{holder:?}");
        drop(w);
        assert!(RingWriter::open(config(&t.0)).is_ok(), "a dropped writer must release the ring");
    }

    #[test]
    fn a_lock_file_with_garbage_in_it_names_no_holder() {
        let t = TempDir::new("lock-garbage");
        let (_w, _) = RingWriter::open(config(&t.0)).unwrap();
        for text in ["", "not a pid\n", "12 host with spaces\n", "99999999999 x\n", "\u{0}\u{1}"] {
            std::fs::write(t.0.join(LOCK_FILE), text).unwrap();
            match RingWriter::open(config(&t.0)) {
                Err(RingError::InUse { holder, .. }) => {
                    let expected = if text.starts_with("12 ") { Some(Holder { pid: 12, host: Some("host".into()) }) } else { None };
                    assert_eq!(holder, expected, "{text:?}");
                }
                other => panic!("{text:?}: expected InUse, got {:?}", other.map(|_| ())),
            }
        }
        std::fs::write(t.0.join(LOCK_FILE), format!("7 {}\n", "h".repeat(300))).unwrap();
        match RingWriter::open(config(&t.0)) {
            Err(e @ RingError::InUse { .. }) => assert!(e.to_string().contains("(pid 7)"), "{e}"),
            other => panic!("expected InUse, got {:?}", other.map(|_| ())),
        }
    }

    /// Resident memory of this process in KiB: (now, peak since the last reset).
    fn rss_kib() -> (u64, u64) {
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let field = |name: &str| {
            let line = status.lines().find(|l| l.starts_with(name)).unwrap_or_else(|| panic!("no {name} in /proc/self/status"));
            line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap()
        };
        (field("VmRSS:"), field("VmHWM:"))
    }

    /// Resets the peak to the current resident size (`clear_refs` 5); false where the kernel does not allow it.
    fn reset_peak() -> bool {
        std::fs::write("/proc/self/clear_refs", "5").is_ok()
    }

    /// How far the peak resident size rose above the resident size at the start while `f` ran, in KiB.
    fn peak_rise(f: impl FnOnce()) -> u64 {
        let reset = reset_peak();
        let (before, peak_before) = rss_kib();
        f();
        let (_, peak) = rss_kib();
        // Without a reset the peak may already sit above the current size; then only a rise above it shows.
        if reset { peak.saturating_sub(before) } else { peak.saturating_sub(peak_before) }
    }

    #[test]
    fn a_512_mib_segment_file_is_opened_in_bounded_memory_and_reported_as_damage() {
        const HUGE: u64 = 512 << 20;
        let t = TempDir::new("huge");
        let cfg = config(&t.0);
        let (mut w, _) = RingWriter::open(cfg.clone()).unwrap();
        for f in 0..5 {
            w.append(meta(0, f), &payload(f, 1000)).unwrap(); // segments 0 and 1
        }
        drop(w);
        // A stray segment file, sparse (no disk), and one that grew past its size with zeros after its records.
        let stray = segment_path(&t.0, 3);
        File::create(&stray).unwrap().set_len(HUGE).unwrap();
        let seg0 = segment_path(&t.0, 0);
        let seg0_len = std::fs::metadata(&seg0).unwrap().len();
        OpenOptions::new().write(true).open(&seg0).unwrap().set_len(HUGE).unwrap();

        // The measure itself sees a buffer of the file's size.
        let rise = peak_rise(|| {
            let v = vec![1u8; HUGE as usize / 4];
            std::hint::black_box(&v);
        });
        assert!(rise >= HUGE / 4 / 1024 * 9 / 10, "a 128 MiB buffer raised the peak by only {rise} KiB");

        let mut opened = None;
        let rise = peak_rise(|| opened = Some(RingWriter::open(cfg.clone()).unwrap()));
        let (w, report) = opened.unwrap();
        eprintln!("opening a ring with two 512 MiB segment files raised the peak resident size by {rise} KiB");
        assert!(rise < 16 << 10, "opening the ring raised the peak resident size by {rise} KiB");
        assert_eq!(report.records, 5);
        let segment = cfg.segment_size();
        // Segment 3: one stretch of zeros. Segment 0: zeros after its three records, and the size beyond.
        assert_eq!(report.damaged, 2);
        assert_eq!(report.damaged_bytes, (HUGE - seg0_len) + HUGE);
        assert_eq!(report.truncated_bytes, 2 * (HUGE - segment));
        for s in [0, 3] {
            assert_eq!(std::fs::metadata(segment_path(&t.0, s)).unwrap().len(), segment, "segment {s} is cut to the segment size");
        }
        let mut r = RingReader::new(&t.0);
        for e in lock(&w.index()).entries() {
            assert_eq!(r.read(e).unwrap(), payload(e.meta.frame, 1000));
        }
    }

    /// 4 segments of 1 MiB: records of several scan chunks each.
    fn big_config(dir: &Path) -> RingConfig {
        RingConfig { dir: dir.to_path_buf(), size: 4 << 20, segments: 4, fsync: FsyncPolicy::Never }
    }

    #[test]
    fn records_longer_than_the_scan_chunk_are_checked_across_chunks() {
        let t = TempDir::new("big-records");
        let (mut w, _) = RingWriter::open(big_config(&t.0)).unwrap();
        let len = 3 * SCAN_CHUNK + 1234;
        let entries: Vec<Entry> = (0..9).map(|f| w.append(meta(0, f), &payload(f, len)).unwrap()).collect();
        drop(w);
        // One flipped bit deep in the third chunk of record 4's payload.
        let f = OpenOptions::new().read(true).write(true).open(segment_path(&t.0, entries[4].segment)).unwrap();
        let at = entries[4].offset + HEADER_LEN as u64 + 2 * SCAN_CHUNK as u64 + 77;
        let mut b = [0u8; 1];
        f.read_exact_at(&mut b, at).unwrap();
        f.write_all_at(&[b[0] ^ 1], at).unwrap();
        drop(f);
        let (w, report) = RingWriter::open(big_config(&t.0)).unwrap();
        assert_eq!((report.records, report.damaged, report.damaged_bytes), (8, 1, record_size(len as u64)));
        let frames: Vec<u64> = lock(&w.index()).entries().map(|e| e.meta.frame).collect();
        assert_eq!(frames, vec![0, 1, 2, 3, 5, 6, 7, 8]);
        let mut r = RingReader::new(&t.0);
        assert_eq!(r.read(&entries[8]).unwrap(), payload(8, len));
    }

    #[test]
    fn a_ring_reopened_smaller_counts_records_that_no_longer_fit_as_damage() {
        let t = TempDir::new("shrunk");
        let (mut w, _) = RingWriter::open(big_config(&t.0)).unwrap();
        // Segment 0: a record of 100 bytes, then one of 10,000, larger than the small segments.
        w.append(meta(0, 0), &payload(0, 100)).unwrap();
        w.append(meta(0, 1), &payload(1, 10_000)).unwrap();
        drop(w);
        let small = config(&t.0);
        let (w, report) = RingWriter::open(small.clone()).unwrap();
        let frames: Vec<u64> = lock(&w.index()).entries().map(|e| e.meta.frame).collect();
        assert_eq!(frames, vec![0]);
        assert_eq!(report.damaged, 1);
        assert_eq!(report.damaged_bytes, record_size(10_000));
        assert_eq!(report.truncated_bytes, record_size(10_000), "segment 0 is current: cut after record 0");
        assert_eq!(std::fs::metadata(segment_path(&t.0, 0)).unwrap().len(), record_size(100));
    }

    #[test]
    fn a_segment_full_of_plausible_headers_does_not_hold_the_open() {
        let t = TempDir::new("headers");
        // Segments of 8 MiB (a 64 MiB ring in 8).
        let cfg = RingConfig { dir: t.0.clone(), size: 64 << 20, segments: 8, fsync: FsyncPolicy::Never };
        let (mut w, _) = RingWriter::open(cfg.clone()).unwrap();
        w.append(meta(0, 0), &payload(0, 1000)).unwrap();
        drop(w);
        // Segment 1: a header with the right magic and version every 64 bytes, each claiming a payload up to the
        // end of the segment and none with the right CRC. Checking every one would read 512 GiB (a minute here).
        let segment = cfg.segment_size();
        let fake = encode_header(9, &meta(0, 9), &[]);
        let mut data = vec![0u8; segment as usize];
        for (i, piece) in data.chunks_exact_mut(64).enumerate() {
            piece[..HEADER_LEN].copy_from_slice(&fake);
            let to_the_end = segment - i as u64 * 64 - HEADER_LEN as u64;
            piece[4..8].copy_from_slice(&(to_the_end as u32).to_le_bytes());
        }
        std::fs::write(segment_path(&t.0, 1), &data).unwrap();
        let started = std::time::Instant::now();
        let (w, report) = RingWriter::open(cfg).unwrap();
        let took = started.elapsed();
        assert!(took < std::time::Duration::from_secs(10), "the open took {took:?}");
        assert_eq!(report.records, 1);
        assert_eq!((report.damaged, report.damaged_bytes), (1, segment));
        assert_eq!(lock(&w.index()).latest(0).unwrap().meta.frame, 0);
    }

    #[test]
    fn a_segment_that_is_not_a_file_is_refused_without_waiting() {
        let t = TempDir::new("fifo");
        std::fs::create_dir_all(&t.0).unwrap();
        std::fs::create_dir_all(segment_path(&t.0, 1)).unwrap();
        assert!(matches!(RingWriter::open(config(&t.0)), Err(RingError::NotAFile { path }) if path == segment_path(&t.0, 1)));
        std::fs::remove_dir(segment_path(&t.0, 1)).unwrap();
        let fifo = segment_path(&t.0, 2);
        let made = std::process::Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
        assert!(made.success());
        let (tx, rx) = std::sync::mpsc::channel();
        let dir = t.0.clone();
        std::thread::spawn(move || tx.send(RingWriter::open(config(&dir)).map(|_| ())).unwrap());
        match rx.recv_timeout(std::time::Duration::from_secs(10)) {
            Ok(Err(RingError::NotAFile { path })) => assert_eq!(path, fifo),
            Ok(other) => panic!("expected NotAFile, got {other:?}"),
            Err(_) => panic!("opening a ring with a FIFO for a segment hangs"),
        }
    }

    #[test]
    fn huge_sequence_and_frame_numbers_do_not_overflow() {
        let t = TempDir::new("max-seq");
        let cfg = config(&t.0);
        std::fs::create_dir_all(&t.0).unwrap();
        let m = meta(0, u64::MAX);
        let header = encode_header(u64::MAX, &m, &[1, 2, 3]);
        let mut rec = header.to_vec();
        rec.extend_from_slice(&[1, 2, 3]);
        rec.resize(record_size(3) as usize, 0);
        std::fs::write(segment_path(&t.0, 0), &rec).unwrap();
        let (mut w, report) = RingWriter::open(cfg).unwrap();
        assert_eq!(report.records, 1);
        assert_eq!(w.next_frame(0), u64::MAX);
        let e = w.append(meta(0, 5), &[4]).unwrap();
        assert_eq!(e.seq, u64::MAX);
        w.append(meta(0, 6), &[5]).unwrap();
    }
}
