//! `partita app fault KIND`: programs that make the kernel work on a partition's behalf, the fault suite of
//! issue 31 ("time partitioning that holds against a partition's own kernel work"). `partita bench isolation`
//! (crates/studies/src/isolation.rs) runs each one in a partition beside a busy victim and measures what the
//! victim keeps of its planned time.
//!
//! Each kind prepares its work, says so (the bench waits for that line, [`ready_line`]), then repeats one
//! round until its time is up or a stop signal arrives. It uses only what a confined partition may: its own
//! memory (within the limit the system file sets), its state directory and `/tmp` (one bounded file each,
//! removed at the end), its V-NIC, and system calls the default seccomp profile lets through.
//!
//! | kind | one round | the kernel work it makes |
//! |---|---|---|
//! | `sleep` | sleeps 100 ms | none: the quiet neighbour of the bench's reference rows |
//! | `spin` | a burst of arithmetic | none (one busy thread: the baseline attack, and the bench's victim) |
//! | `threads` | the same in 240 threads | scheduling of many runnable threads; freezing and thawing each of them |
//! | `fork-storm` | fork + reap a child that exits at once, from 8 threads | page-table copies, process set-up and teardown, cgroup accounting |
//! | `page-faults` | touch 64 MiB page by page, then MADV_DONTNEED it | a page fault and a zeroed page per 4 KiB, then freeing them |
//! | `vma-walk` | msync, mprotect read-only, mprotect read-write, MADV_DONTNEED, each one call over ~60,000 memory areas | walking and splitting/merging checks of every area under the mmap lock |
//! | `smaps` | read `/proc/self/smaps` with those ~60,000 areas | formatting statistics of every area, page-table walks |
//! | `big-write` | truncate a file in the state directory, write 24 MiB in one call | page-cache allocation, block allocation, later writeback |
//! | `fsync` | write 4 MiB, fsync | writeback and the journal, waited for |
//! | `o-direct` | write 1 MiB with O_DIRECT (aligned buffer) into a 16 MiB file | block I/O from user memory, its completion interrupts |
//! | `sync` | write 4 MiB, sync() | writeback of every file system of the machine |
//! | `aio` | 64 Linux-AIO writes of 64 KiB (O_DIRECT where the file system allows), then their completions | the kernel's AIO queues and completions |
//! | `tmpfs-write` | truncate a file in `/tmp` (the partition's tmpfs), write 16 MiB | shmem page allocation and freeing |
//! | `thp` | touch a 64 MiB MADV_HUGEPAGE region, then MADV_DONTNEED it | huge-page allocation, zeroing 2 MiB at a time, compaction |
//! | `mlock` | mlock 7 MiB, munlock, MADV_DONTNEED | faulting in and pinning pages, LRU moves |
//! | `timers` | wait on 200 timerfds firing every 50 µs, read them | about 4 million timer expirations a second: hrtimer interrupts and wake-ups |
//! | `udp-flood` | 64 UDP datagrams of 512 bytes to `--target` | the network stack on the sending CPU: the veth, the bridge, the victim's namespace, ICMP replies |
//!
//! `--target` must be on partita's networks (198.18.0.0/15) or loopback: a flood never leaves the machine.
use partita_os::fault_calls::{self as calls, Advice, AioContext, Epoll, Region, TimerFd, VmaField};
use serde::Serialize;
use std::fs::File;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::fd::AsFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    Sleep, Spin, Threads, ForkStorm, PageFaults, VmaWalk, Smaps, BigWrite, Fsync, ODirect, Sync, Aio, TmpfsWrite, Thp,
    Mlock, Timers, UdpFlood,
}

impl Kind {
    /// Every kind, the quiet `sleep` first.
    pub const ALL: [Kind; 17] = [
        Kind::Sleep, Kind::Spin, Kind::Threads, Kind::ForkStorm, Kind::PageFaults, Kind::VmaWalk, Kind::Smaps,
        Kind::BigWrite, Kind::Fsync, Kind::ODirect, Kind::Sync, Kind::Aio, Kind::TmpfsWrite, Kind::Thp, Kind::Mlock,
        Kind::Timers, Kind::UdpFlood,
    ];

    pub fn key(self) -> &'static str {
        match self {
            Kind::Sleep => "sleep",
            Kind::Spin => "spin",
            Kind::Threads => "threads",
            Kind::ForkStorm => "fork-storm",
            Kind::PageFaults => "page-faults",
            Kind::VmaWalk => "vma-walk",
            Kind::Smaps => "smaps",
            Kind::BigWrite => "big-write",
            Kind::Fsync => "fsync",
            Kind::ODirect => "o-direct",
            Kind::Sync => "sync",
            Kind::Aio => "aio",
            Kind::TmpfsWrite => "tmpfs-write",
            Kind::Thp => "thp",
            Kind::Mlock => "mlock",
            Kind::Timers => "timers",
            Kind::UdpFlood => "udp-flood",
        }
    }

    pub fn from_key(k: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|x| x.key() == k)
    }

    /// The faults (every kind but the quiet `sleep`), comma-separated.
    pub fn fault_keys() -> String {
        Kind::ALL[1..].iter().map(|k| k.key()).collect::<Vec<_>>().join(", ")
    }

    /// Whether the kind means something in a VM partition's guest. Left out: the guest has no disk (its root
    /// and state directory are in its memory, so `fsync`, `o-direct`, `sync` and `aio` reach no device and
    /// `tmpfs-write` is `big-write` again), `smaps` is `vma-walk` again inside the guest's kernel, and `mlock`
    /// is `page-faults` again.
    pub fn in_guest(self) -> bool {
        !matches!(self, Kind::Fsync | Kind::ODirect | Kind::Sync | Kind::Aio | Kind::TmpfsWrite | Kind::Smaps | Kind::Mlock)
    }
}

/// The line a fault program prints once its work is prepared and its rounds begin.
pub fn ready_line(kind: Kind) -> String {
    format!("partita app fault {}: running", kind.key())
}

/// What a fault program does and where.
#[derive(Debug, Clone)]
pub struct FaultConfig {
    pub kind: Kind,
    /// How long to repeat its rounds (`None`: until a stop signal).
    pub duration: Option<Duration>,
    /// `udp-flood`: where to.
    pub target: Option<SocketAddr>,
    /// Where its file goes (the partition's state directory).
    pub state_dir: PathBuf,
    /// Where `tmpfs-write`'s file goes (the partition's own tmpfs).
    pub tmp_dir: PathBuf,
    /// Memory areas of `vma-walk` and `smaps` (kept under the kernel's `vm.max_map_count`).
    pub areas: usize,
    /// Busy threads of `threads`.
    pub threads: usize,
}

/// Memory areas `vma-walk` and `smaps` make, as issue 31's attack did.
pub const AREAS: usize = 60_000;
/// Busy threads of `threads` (within a partition's default `pids` limit of 256).
pub const THREADS: usize = 240;
const MIB: usize = 1 << 20;

impl FaultConfig {
    pub fn new(kind: Kind, state_dir: PathBuf) -> FaultConfig {
        FaultConfig { kind, duration: None, target: None, state_dir, tmp_dir: PathBuf::from("/tmp"), areas: AREAS, threads: THREADS }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum FaultError {
    #[error("{what}: {source}")]
    Call { what: String, source: std::io::Error },
    #[error("{0}")]
    Usage(String),
}

fn call(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> FaultError {
    let what = what.into();
    move |source| FaultError::Call { what, source }
}

/// What a fault program did.
#[derive(Debug, Clone, Serialize)]
pub struct FaultReport {
    pub kind: Kind,
    pub rounds: u64,
    pub seconds: f64,
}

/// When the rounds end: a deadline, or a stop flag (a stop signal).
struct Until<'a> {
    end: Option<Instant>,
    stop: &'a AtomicBool,
}

impl Until<'_> {
    fn over(&self) -> bool {
        self.stop.load(Ordering::Relaxed) || self.end.is_some_and(|e| Instant::now() >= e)
    }
}

/// Runs `cfg.kind` until its duration passes or `stop` is set; `ready` is called once its work is prepared.
pub fn run(cfg: &FaultConfig, stop: &AtomicBool, ready: &mut dyn FnMut()) -> Result<FaultReport, FaultError> {
    let t0 = Instant::now();
    let until = Until { end: cfg.duration.map(|d| t0 + d), stop };
    let rounds = match cfg.kind {
        Kind::Sleep => repeat(&until, ready, || {
            std::thread::sleep(Duration::from_millis(100));
            Ok(())
        }),
        Kind::Spin => repeat(&until, ready, || {
            burst();
            Ok(())
        }),
        Kind::Threads => threads(cfg.threads, &until, ready),
        Kind::ForkStorm => fork_storm(&until, ready),
        Kind::PageFaults => page_faults(&until, ready),
        Kind::VmaWalk => vma_walk(cfg.areas, &until, ready),
        Kind::Smaps => smaps(cfg.areas, &until, ready),
        Kind::BigWrite => rewrite(&cfg.state_dir, "big-write", 24 * MIB, &until, ready),
        Kind::Fsync => write_then(&cfg.state_dir, "fsync", &until, ready, |f| f.sync_all().map_err(call("fsync"))),
        Kind::ODirect => o_direct(&cfg.state_dir, &until, ready),
        Kind::Sync => write_then(&cfg.state_dir, "sync", &until, ready, |_| {
            calls::sync_filesystems();
            Ok(())
        }),
        Kind::Aio => aio(&cfg.state_dir, &until, ready),
        Kind::TmpfsWrite => rewrite(&cfg.tmp_dir, "tmpfs-write", 16 * MIB, &until, ready),
        Kind::Thp => thp(&until, ready),
        Kind::Mlock => mlock(&until, ready),
        Kind::Timers => timers(&until, ready),
        Kind::UdpFlood => udp_flood(cfg.target, &until, ready),
    }?;
    Ok(FaultReport { kind: cfg.kind, rounds, seconds: t0.elapsed().as_secs_f64() })
}

/// Calls `ready`, then `round` until `until` is over; the number of rounds.
fn repeat(until: &Until, ready: &mut dyn FnMut(), mut round: impl FnMut() -> Result<(), FaultError>) -> Result<u64, FaultError> {
    ready();
    let mut n = 0;
    while !until.over() {
        round()?;
        n += 1;
    }
    Ok(n)
}

/// About a millisecond of arithmetic the compiler cannot drop.
fn burst() {
    let mut x = 0u64;
    for i in 0..500_000u64 {
        x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(i));
    }
    std::hint::black_box(x);
}

/// `threads`: `n` busy threads (this one included). They start spinning together once all exist: spinning at
/// once, each new one would leave the thread that starts the rest a smaller share of a short window, and
/// starting 240 took over a minute of 1 ms windows.
fn threads(n: usize, until: &Until, ready: &mut dyn FnMut()) -> Result<u64, FaultError> {
    let (go, quit) = (AtomicBool::new(false), AtomicBool::new(false));
    let spin = || {
        while !go.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(10));
        }
        while !quit.load(Ordering::Relaxed) && !until.over() {
            burst();
        }
    };
    std::thread::scope(|s| {
        let started = (1..n).try_for_each(|_| std::thread::Builder::new().spawn_scoped(s, spin).map(|_| ()));
        // Ready before they spin: afterwards this thread is one of 240 waiting for a turn in short windows.
        if started.is_ok() {
            ready();
        }
        go.store(true, Ordering::Relaxed);
        let rounds = started.map_err(call("starting a thread")).and_then(|_| {
            repeat(until, &mut || {}, || {
                burst();
                Ok(())
            })
        });
        // Also when a thread could not start: the others end with this one.
        quit.store(true, Ordering::Relaxed);
        rounds
    })
}

/// Forking threads of `fork-storm`.
const FORKERS: usize = 8;

/// `fork-storm`: [`FORKERS`] threads each forking a child that exits at once and reaping it. A fork refused
/// at the partition's `pids` limit (EAGAIN) is tried again: that limit is part of what is measured.
fn fork_storm(until: &Until, ready: &mut dyn FnMut()) -> Result<u64, FaultError> {
    let fork_and_reap = || -> Result<(), FaultError> {
        match calls::fork_exiting_child() {
            Ok(pid) => partita_os::process::wait_blocking(pid).map(|_| ()).map_err(call("waitpid")),
            Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => Ok(()),
            Err(e) => Err(call("fork")(e)),
        }
    };
    std::thread::scope(|s| {
        let helpers: Vec<_> = (1..FORKERS)
            .map(|_| {
                s.spawn(|| -> Result<(), FaultError> {
                    while !until.over() {
                        fork_and_reap()?;
                    }
                    Ok(())
                })
            })
            .collect();
        let n = repeat(until, ready, fork_and_reap)?;
        for h in helpers {
            h.join().map_err(|_| FaultError::Usage("a forking thread panicked".into()))??;
        }
        Ok(n)
    })
}

/// `page-faults`: 64 MiB touched page by page (4 KiB pages: no huge pages), then dropped.
fn page_faults(until: &Until, ready: &mut dyn FnMut()) -> Result<u64, FaultError> {
    let mut r = Region::new(64 * MIB).map_err(call("mmap 64 MiB"))?;
    r.advise(Advice::NoHugePage).map_err(call("madvise(MADV_NOHUGEPAGE)"))?;
    repeat(until, ready, || {
        r.touch();
        r.advise(Advice::DontNeed).map_err(call("madvise(MADV_DONTNEED)"))
    })
}

/// The areas a field may have here: `want`, kept 2,000 below the kernel's `vm.max_map_count` so that the
/// program's own mappings (libraries, thread stacks, the heap) still fit.
fn field_areas(want: usize) -> usize {
    let limit = std::fs::read_to_string("/proc/sys/vm/max_map_count").ok().and_then(|t| t.trim().parse::<usize>().ok()).unwrap_or(65_530);
    want.min(limit.saturating_sub(2_000)).max(1)
}

/// `vma-walk`: a field of ~60,000 areas, each round four calls over all of it.
fn vma_walk(areas: usize, until: &Until, ready: &mut dyn FnMut()) -> Result<u64, FaultError> {
    let field = VmaField::new(field_areas(areas)).map_err(call(format!("mapping {areas} memory areas")))?;
    repeat(until, ready, || {
        field.sync().map_err(call("msync"))?;
        field.protect(false).map_err(call("mprotect(PROT_READ)"))?;
        field.protect(true).map_err(call("mprotect(PROT_READ|PROT_WRITE)"))?;
        field.discard().map_err(call("madvise(MADV_DONTNEED)"))
    })
}

/// `smaps`: `/proc/self/smaps` read whole, with a field of ~60,000 areas in it.
fn smaps(areas: usize, until: &Until, ready: &mut dyn FnMut()) -> Result<u64, FaultError> {
    let _field = VmaField::new(field_areas(areas)).map_err(call(format!("mapping {areas} memory areas")))?;
    let mut buf = vec![0u8; MIB];
    repeat(until, ready, || {
        let mut f = File::open("/proc/self/smaps").map_err(call("/proc/self/smaps"))?;
        while std::io::Read::read(&mut f, &mut buf).map_err(call("reading /proc/self/smaps"))? > 0 {}
        Ok(())
    })
}

/// A fault's file, removed when the program ends (a killed program's file goes with its partition's state
/// directory: the bench removes it).
struct OwnFile {
    path: PathBuf,
    file: File,
}

impl OwnFile {
    fn create(dir: &Path, kind: &str) -> Result<OwnFile, FaultError> {
        let path = dir.join(format!("partita-fault-{kind}"));
        let file = File::options().read(true).write(true).create(true).truncate(true).open(&path).map_err(call(path.display().to_string()))?;
        Ok(OwnFile { path, file })
    }

    fn direct(dir: &Path, kind: &str) -> Result<OwnFile, FaultError> {
        let path = dir.join(format!("partita-fault-{kind}"));
        let file = calls::open_direct(&path).map_err(|e| {
            let hint = if e.raw_os_error() == Some(libc::EINVAL) { " (the file system refuses O_DIRECT: tmpfs before Linux 6.6, ramfs)" } else { "" };
            FaultError::Usage(format!("{} with O_DIRECT: {e}{hint}", path.display()))
        })?;
        Ok(OwnFile { path, file })
    }

    fn write_all_at(&self, buf: &[u8], offset: u64) -> Result<(), FaultError> {
        self.file.write_all_at(buf, offset).map_err(call(format!("writing {}", self.path.display())))
    }
}

impl Drop for OwnFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// `big-write`, `tmpfs-write`: a file in `dir` truncated, then `len` bytes written in one call, every round.
fn rewrite(dir: &Path, kind: &str, len: usize, until: &Until, ready: &mut dyn FnMut()) -> Result<u64, FaultError> {
    let f = OwnFile::create(dir, kind)?;
    let buf = vec![0x5a; len];
    repeat(until, ready, || {
        f.file.set_len(0).map_err(call(format!("truncating {}", f.path.display())))?;
        f.write_all_at(&buf, 0)
    })
}

/// `fsync`, `sync`: 4 MiB written over the same file in `dir`, then `after` (the flush).
fn write_then(dir: &Path, kind: &str, until: &Until, ready: &mut dyn FnMut(), after: impl Fn(&File) -> Result<(), FaultError>) -> Result<u64, FaultError> {
    let f = OwnFile::create(dir, kind)?;
    let buf = vec![0xa5; 4 * MIB];
    repeat(until, ready, || {
        f.write_all_at(&buf, 0)?;
        after(&f.file)
    })
}

/// `o-direct`: 1 MiB from a page-aligned buffer at each MiB of a 16 MiB file in turn, past the page cache.
fn o_direct(dir: &Path, until: &Until, ready: &mut dyn FnMut()) -> Result<u64, FaultError> {
    let f = OwnFile::direct(dir, "o-direct")?;
    let mut buf = Region::new(MIB).map_err(call("mmap 1 MiB"))?;
    buf.as_mut_slice().fill(0x3c);
    let mut k = 0u64;
    repeat(until, ready, || {
        k = (k + 1) % 16;
        f.write_all_at(buf.as_slice(), k * MIB as u64)
    })
}

/// Requests of one `aio` round.
const AIO_DEPTH: usize = 64;

/// `aio`: [`AIO_DEPTH`] writes of 64 KiB submitted at once through Linux AIO (O_DIRECT where the file system
/// allows it, else through the page cache), then waited for.
fn aio(dir: &Path, until: &Until, ready: &mut dyn FnMut()) -> Result<u64, FaultError> {
    let ctx = AioContext::new(AIO_DEPTH).map_err(|e| match e.raw_os_error() {
        Some(libc::EPERM) | Some(libc::ENOSYS) => FaultError::Usage(format!("io_setup: {e}: this partition's seccomp profile or kernel refuses Linux AIO")),
        _ => call("io_setup")(e),
    })?;
    let f = OwnFile::direct(dir, "aio").or_else(|_| OwnFile::create(dir, "aio"))?;
    let mut buf = Region::new(64 * 1024).map_err(call("mmap 64 KiB"))?;
    buf.as_mut_slice().fill(0x77);
    let offsets: Vec<u64> = (0..AIO_DEPTH as u64).map(|i| i * 64 * 1024).collect();
    repeat(until, ready, || ctx.write_at(&f.file, buf.as_slice(), &offsets).map(|_| ()).map_err(call(format!("AIO writes to {}", f.path.display()))))
}

/// `thp`: a 64 MiB region advised to huge pages, touched, dropped.
fn thp(until: &Until, ready: &mut dyn FnMut()) -> Result<u64, FaultError> {
    let mut r = Region::new(64 * MIB).map_err(call("mmap 64 MiB"))?;
    r.advise(Advice::HugePage).map_err(call("madvise(MADV_HUGEPAGE)"))?;
    repeat(until, ready, || {
        r.touch();
        r.advise(Advice::DontNeed).map_err(call("madvise(MADV_DONTNEED)"))
    })
}

/// `mlock`: 7 MiB locked (within the 8 MiB RLIMIT_MEMLOCK partitions get), unlocked, dropped.
fn mlock(until: &Until, ready: &mut dyn FnMut()) -> Result<u64, FaultError> {
    let mut r = Region::new(7 * MIB).map_err(call("mmap 7 MiB"))?;
    repeat(until, ready, || {
        r.lock().map_err(call("mlock 7 MiB"))?;
        r.unlock().map_err(call("munlock"))?;
        r.advise(Advice::DontNeed).map_err(call("madvise(MADV_DONTNEED)"))
    })
}

const TIMERS: usize = 200;
const TIMER_PERIOD: Duration = Duration::from_micros(50);

/// `timers`: [`TIMERS`] timerfds firing every 50 µs, waited for with epoll and read.
fn timers(until: &Until, ready: &mut dyn FnMut()) -> Result<u64, FaultError> {
    let ep = Epoll::new().map_err(call("epoll_create1"))?;
    let mut fds = Vec::with_capacity(TIMERS);
    for i in 0..TIMERS {
        let t = TimerFd::periodic(TIMER_PERIOD).map_err(call("timerfd"))?;
        ep.add(t.as_fd(), i as u64).map_err(call("epoll_ctl"))?;
        fds.push(t);
    }
    let mut tokens = Vec::new();
    repeat(until, ready, || {
        ep.wait(&mut tokens, Duration::from_millis(100)).map_err(call("epoll_wait"))?;
        for &t in &tokens {
            fds[t as usize].expirations().map_err(call("reading a timerfd"))?;
        }
        Ok(())
    })
}

/// Whether a flood may go to `ip`: partita's networks (198.18.0.0/15) or loopback, never out of the machine.
pub fn flood_target_allowed(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback() || (v4.octets()[0] == 198 && (v4.octets()[1] & 0xfe) == 18),
        IpAddr::V6(v6) => v6.is_loopback(),
    }
}

const DATAGRAM: usize = 512;

/// `udp-flood`: datagrams of 512 bytes to `target` as fast as the socket takes them. Refusals the victim's
/// ICMP replies cause (ECONNREFUSED) and a full queue (ENOBUFS, EAGAIN) are part of a flood, not errors.
fn udp_flood(target: Option<SocketAddr>, until: &Until, ready: &mut dyn FnMut()) -> Result<u64, FaultError> {
    let target = target.ok_or_else(|| FaultError::Usage("udp-flood needs --target ADDR:PORT (the victim's V-NIC address)".into()))?;
    if !flood_target_allowed(target.ip()) {
        return Err(FaultError::Usage(format!("--target {target}: a flood goes only to partita's networks (198.18.0.0/15) or loopback")));
    }
    let bind: SocketAddr = if target.is_ipv4() { "0.0.0.0:0".parse().expect("an address") } else { "[::]:0".parse().expect("an address") };
    let sock = UdpSocket::bind(bind).map_err(call("binding a UDP socket"))?;
    let payload = [0x42u8; DATAGRAM];
    repeat(until, ready, || {
        for _ in 0..64 {
            match sock.send_to(&payload, target) {
                Ok(_) => {}
                Err(e) if matches!(e.kind(), std::io::ErrorKind::ConnectionRefused | std::io::ErrorKind::WouldBlock) || e.raw_os_error() == Some(libc::ENOBUFS) => {}
                Err(e) => return Err(call(format!("sending to {target}"))(e)),
            }
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `kind` for 0.3 s outside any partition, in a directory of its own (smaller areas and fewer threads
    /// than in a partition: the tests share one process and its `vm.max_map_count`).
    fn runs(kind: Kind, target: Option<SocketAddr>) -> FaultReport {
        let dir = std::env::temp_dir().join(format!("partita-fault-test-{}-{}", kind.key(), std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut cfg = FaultConfig::new(kind, dir.clone());
        cfg.tmp_dir = dir.clone();
        cfg.duration = Some(Duration::from_millis(300));
        cfg.target = target;
        cfg.areas = 3_000;
        cfg.threads = 8;
        let stop = AtomicBool::new(false);
        let mut said_ready = false;
        let report = run(&cfg, &stop, &mut || said_ready = true).unwrap_or_else(|e| panic!("{}: {e}", kind.key()));
        assert!(said_ready, "{}", kind.key());
        assert!(report.rounds >= 1, "{}: {report:?}", kind.key());
        assert!(report.seconds >= 0.3 && report.seconds < 10.0, "{}: {report:?}", kind.key());
        // Its file is gone with it.
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0, "{}", kind.key());
        std::fs::remove_dir(&dir).unwrap();
        report
    }

    /// One test per kind that needs no partition (`o-direct` needs a file system that takes O_DIRECT: the
    /// temporary directory here is on a disk).
    macro_rules! runs_outside_a_partition {
        ($($test:ident: $kind:expr),* $(,)?) => {$(
            #[test]
            fn $test() {
                runs($kind, None);
            }
        )*};
    }

    runs_outside_a_partition! {
        sleep_runs: Kind::Sleep, spin_runs: Kind::Spin, threads_run: Kind::Threads, fork_storm_runs: Kind::ForkStorm,
        page_faults_run: Kind::PageFaults, vma_walk_runs: Kind::VmaWalk, smaps_runs: Kind::Smaps,
        big_write_runs: Kind::BigWrite, fsync_runs: Kind::Fsync, o_direct_runs: Kind::ODirect, sync_runs: Kind::Sync,
        aio_runs: Kind::Aio, tmpfs_write_runs: Kind::TmpfsWrite, thp_runs: Kind::Thp, mlock_runs: Kind::Mlock,
        timers_run: Kind::Timers,
    }

    #[test]
    fn the_flood_goes_to_loopback_and_never_off_partitas_networks() {
        let sink = UdpSocket::bind("127.0.0.1:0").unwrap();
        runs(Kind::UdpFlood, Some(sink.local_addr().unwrap()));
        let stop = AtomicBool::new(false);
        for bad in ["8.8.8.8:53", "198.20.0.1:9", "10.0.0.1:9"] {
            let mut cfg = FaultConfig::new(Kind::UdpFlood, std::env::temp_dir());
            cfg.target = Some(bad.parse().unwrap());
            assert!(matches!(run(&cfg, &stop, &mut || {}), Err(FaultError::Usage(_))), "{bad}");
        }
        assert!(flood_target_allowed("198.19.255.1".parse().unwrap()) && flood_target_allowed("198.18.0.2".parse().unwrap()));
        assert!(matches!(run(&FaultConfig::new(Kind::UdpFlood, std::env::temp_dir()), &stop, &mut || {}), Err(FaultError::Usage(_))));
    }

    #[test]
    fn keys_are_kebab_case_and_read_back() {
        for k in Kind::ALL {
            assert_eq!(Kind::from_key(k.key()), Some(k));
            assert_eq!(serde_json::to_value(k).unwrap(), k.key());
        }
        assert!(!Kind::fault_keys().contains("sleep"));
        assert!(Kind::VmaWalk.in_guest() && !Kind::ODirect.in_guest());
    }

    #[test]
    fn a_stop_ends_the_rounds() {
        let stop = AtomicBool::new(true);
        let cfg = FaultConfig::new(Kind::Threads, std::env::temp_dir());
        let r = run(&cfg, &stop, &mut || {}).unwrap();
        assert_eq!(r.rounds, 0);
    }
}
