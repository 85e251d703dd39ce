//! The system calls of the fault programs (`partita app fault`, crates/apps/src/fault.rs): kernel work a
//! partition may ask for, made on purpose to measure what it costs its neighbours (issue 31's fault suite).
//! Each call is wrapped once here so that the programs themselves stay free of `unsafe`.
//!
//! Nothing here hands out memory a later call could change under a reference: [`Region`] lends its bytes only
//! through `&mut self`, and every call that discards or moves its pages takes `&mut self` too; [`VmaField`]
//! never lends its pages at all.
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::time::Duration;

/// The size of a page, bytes.
pub fn page_size() -> usize {
    // SAFETY: sysconf only reads a system constant.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if n > 0 { n as usize } else { 4096 }
}

fn check(r: libc::c_int) -> io::Result<()> {
    (r == 0).then_some(()).ok_or_else(io::Error::last_os_error)
}

/// A private anonymous mapping of `len` bytes, zero-filled, read-write, never touched until asked; unmapped
/// when dropped.
#[derive(Debug)]
pub struct Region {
    ptr: *mut u8,
    len: usize,
}

/// Advice for a [`Region`]'s pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Advice {
    /// Drop the pages: the next touch faults each one in again, zero-filled (MADV_DONTNEED).
    DontNeed,
    /// Back the region with transparent huge pages where the kernel can (MADV_HUGEPAGE).
    HugePage,
    /// Never back it with huge pages: every fault is a 4 KiB page (MADV_NOHUGEPAGE).
    NoHugePage,
}

fn map_anonymous(len: usize) -> io::Result<*mut u8> {
    // SAFETY: a new private anonymous mapping at an address the kernel picks; no existing memory is touched.
    let p = unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0) };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    Ok(p.cast())
}

impl Region {
    pub fn new(len: usize) -> io::Result<Region> {
        if len == 0 {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "an empty region"));
        }
        Ok(Region { ptr: map_anonymous(len)?, len })
    }

    /// The region's bytes (page-aligned: a buffer for O_DIRECT).
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: the mapping is ours, read-write and `len` bytes long for as long as `self` lives; the `&mut`
        // borrow of `self` keeps every other access (and every call that changes the pages) out meanwhile.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }

    /// The region's bytes, read-only.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: as in `as_mut_slice`; calls that change the pages take `&mut self`, so none runs while this
        // shared borrow lives.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    /// Writes one byte in every page: each page not present faults in.
    pub fn touch(&mut self) {
        let page = page_size();
        let bytes = self.as_mut_slice();
        for off in (0..bytes.len()).step_by(page) {
            // Volatile, so that writes nothing reads are made all the same.
            // SAFETY: `off` is inside the slice, which is valid for writes.
            unsafe { std::ptr::write_volatile(bytes.as_mut_ptr().add(off), 1) };
        }
    }

    /// madvise(2) over the whole region.
    pub fn advise(&mut self, advice: Advice) -> io::Result<()> {
        // SAFETY: the range is exactly our mapping; `&mut self` means no reference into it is alive while
        // MADV_DONTNEED zeroes its pages.
        let flag = match advice {
            Advice::DontNeed => libc::MADV_DONTNEED,
            Advice::HugePage => libc::MADV_HUGEPAGE,
            Advice::NoHugePage => libc::MADV_NOHUGEPAGE,
        };
        check(unsafe { libc::madvise(self.ptr.cast(), self.len, flag) })
    }

    /// mlock(2): faults every page in and keeps it in memory (bounded by RLIMIT_MEMLOCK).
    pub fn lock(&self) -> io::Result<()> {
        // SAFETY: the range is exactly our mapping; locking does not change its contents.
        check(unsafe { libc::mlock(self.ptr.cast(), self.len) })
    }

    pub fn unlock(&self) -> io::Result<()> {
        // SAFETY: as in `lock`.
        check(unsafe { libc::munlock(self.ptr.cast(), self.len) })
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: the mapping is ours and nothing borrows it any more.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// `count` one-page memory areas side by side that the kernel cannot merge, whatever protection a call over
/// the whole range gives them: every other page is also marked MADV_DONTDUMP, so neighbours always differ in
/// their flags. One call over the range then walks `count` areas. The pages are never lent out nor touched,
/// so the field costs address space and area records, not memory.
#[derive(Debug)]
pub struct VmaField {
    ptr: *mut u8,
    pages: usize,
}

impl VmaField {
    /// Maps `count` pages and splits them into `count` areas with alternating protections (read-only,
    /// read-write) and alternating MADV_DONTDUMP: `count` system calls.
    pub fn new(count: usize) -> io::Result<VmaField> {
        if count == 0 {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "no areas"));
        }
        let page = page_size();
        let field = VmaField { ptr: map_anonymous(count * page)?, pages: count };
        for i in (0..count).step_by(2) {
            // SAFETY: each call is on one page of our own mapping, which nothing references.
            let p = unsafe { field.ptr.add(i * page) };
            check(unsafe { libc::madvise(p.cast(), page, libc::MADV_DONTDUMP) })?;
            check(unsafe { libc::mprotect(p.cast(), page, libc::PROT_READ) })?;
        }
        Ok(field)
    }

    /// The number of areas.
    pub fn areas(&self) -> usize {
        self.pages
    }

    fn bytes(&self) -> usize {
        self.pages * page_size()
    }

    /// One msync(2) over the whole range.
    pub fn sync(&self) -> io::Result<()> {
        // SAFETY: the range is exactly our mapping; msync changes nothing in it.
        check(unsafe { libc::msync(self.ptr.cast(), self.bytes(), libc::MS_SYNC) })
    }

    /// One mprotect(2) over the whole range: read-only, or read-write.
    pub fn protect(&self, writable: bool) -> io::Result<()> {
        let prot = if writable { libc::PROT_READ | libc::PROT_WRITE } else { libc::PROT_READ };
        // SAFETY: the range is exactly our mapping, which nothing ever reads or writes.
        check(unsafe { libc::mprotect(self.ptr.cast(), self.bytes(), prot) })
    }

    /// One madvise(MADV_DONTNEED) over the whole range.
    pub fn discard(&self) -> io::Result<()> {
        // SAFETY: as in `protect`: no reference into the range exists.
        check(unsafe { libc::madvise(self.ptr.cast(), self.bytes(), libc::MADV_DONTNEED) })
    }
}

impl Drop for VmaField {
    fn drop(&mut self) {
        // SAFETY: the mapping is ours and never lent out.
        unsafe { libc::munmap(self.ptr.cast(), self.bytes()) };
    }
}

/// Opens (creating it, mode 0600) `path` for writes that bypass the page cache (O_DIRECT): buffers, offsets
/// and lengths must then be aligned to the file system's block size (a [`Region`] is page-aligned).
pub fn open_direct(path: &Path) -> io::Result<File> {
    std::fs::OpenOptions::new().write(true).create(true).truncate(false).mode(0o600).custom_flags(libc::O_DIRECT).open(path)
}

/// sync(2): every dirty page of every file system of the machine to its disk.
pub fn sync_filesystems() {
    // SAFETY: sync takes no arguments and cannot fail.
    unsafe { libc::sync() }
}

/// Forks a child that exits at once with status 0; returns its pid, for the caller to reap
/// ([`crate::process::wait_blocking`]).
pub fn fork_exiting_child() -> io::Result<i32> {
    // SAFETY: the child only calls _exit, which is async-signal-safe: forking a multi-threaded process is
    // sound when the child does nothing else.
    match unsafe { libc::fork() } {
        -1 => Err(io::Error::last_os_error()),
        0 => unsafe { libc::_exit(0) },
        pid => Ok(pid),
    }
}

/// A periodic timer on CLOCK_MONOTONIC read as a file (timerfd), non-blocking.
#[derive(Debug)]
pub struct TimerFd(File);

impl TimerFd {
    /// A timer that expires every `interval`, first `interval` from now.
    pub fn periodic(interval: Duration) -> io::Result<TimerFd> {
        // SAFETY: creates a new descriptor; no memory is passed.
        let fd = unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_NONBLOCK | libc::TFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a new descriptor that nothing else owns.
        let timer = TimerFd(unsafe { File::from_raw_fd(fd) });
        let ts = libc::timespec { tv_sec: interval.as_secs() as libc::time_t, tv_nsec: interval.subsec_nanos() as libc::c_long };
        let spec = libc::itimerspec { it_interval: ts, it_value: ts };
        // SAFETY: `spec` is a valid itimerspec for the call to read; the old value is not asked for (null).
        check(unsafe { libc::timerfd_settime(timer.0.as_raw_fd(), 0, &spec, std::ptr::null_mut()) })?;
        Ok(timer)
    }

    /// Expirations since the last read (0 when none).
    pub fn expirations(&mut self) -> io::Result<u64> {
        let mut b = [0u8; 8];
        match self.0.read(&mut b) {
            Ok(8) => Ok(u64::from_ne_bytes(b)),
            Ok(_) => Ok(0),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(0),
            Err(e) => Err(e),
        }
    }
}

impl AsFd for TimerFd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.0.as_fd()
    }
}

/// An epoll instance: which of many descriptors are readable, by the token each was added with.
#[derive(Debug)]
pub struct Epoll(OwnedFd);

impl Epoll {
    pub fn new() -> io::Result<Epoll> {
        // SAFETY: creates a new descriptor; no memory is passed.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a new descriptor that nothing else owns.
        Ok(Epoll(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// Watches `fd` for input, reported as `token`.
    pub fn add(&self, fd: BorrowedFd<'_>, token: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event { events: libc::EPOLLIN as u32, u64: token };
        // SAFETY: `ev` is a valid event the kernel copies; both descriptors are open.
        check(unsafe { libc::epoll_ctl(self.0.as_raw_fd(), libc::EPOLL_CTL_ADD, fd.as_raw_fd(), &mut ev) })
    }

    /// Waits up to `timeout` for readable descriptors; `ready` gets their tokens (at most 256).
    pub fn wait(&self, ready: &mut Vec<u64>, timeout: Duration) -> io::Result<()> {
        let mut events = [libc::epoll_event { events: 0, u64: 0 }; 256];
        // SAFETY: `events` is a writable array of the length passed.
        let n = unsafe { libc::epoll_wait(self.0.as_raw_fd(), events.as_mut_ptr(), events.len() as libc::c_int, timeout.as_millis().min(i32::MAX as u128) as libc::c_int) };
        ready.clear();
        if n < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::Interrupted { Ok(()) } else { Err(e) };
        }
        ready.extend(events[..n as usize].iter().map(|e| e.u64));
        Ok(())
    }
}

/// Linux's native asynchronous I/O (io_setup, io_submit, io_getevents): write requests queued in the kernel.
#[derive(Debug)]
pub struct AioContext {
    id: libc::c_ulong,
    depth: usize,
}

/// `struct iocb` of <linux/aio_abi.h> (x86-64, little-endian: key before rw_flags).
#[repr(C)]
#[derive(Default)]
struct Iocb {
    data: u64,
    key: u32,
    rw_flags: i32,
    opcode: u16,
    reqprio: i16,
    fildes: u32,
    buf: u64,
    nbytes: u64,
    offset: i64,
    reserved2: u64,
    flags: u32,
    resfd: u32,
}

/// `struct io_event`.
#[repr(C)]
#[derive(Default, Clone, Copy)]
struct IoEvent {
    data: u64,
    obj: u64,
    res: i64,
    res2: i64,
}

const IOCB_CMD_PWRITE: u16 = 1;

impl AioContext {
    /// A context for up to `depth` requests in flight.
    pub fn new(depth: usize) -> io::Result<AioContext> {
        let mut id: libc::c_ulong = 0;
        // SAFETY: io_setup writes the new context's id into `id`, a valid local.
        if unsafe { libc::syscall(libc::SYS_io_setup, depth as libc::c_long, &mut id as *mut libc::c_ulong) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(AioContext { id, depth })
    }

    /// Writes `buf` at each of `offsets` (at most the context's depth) of `file` in one submission, then waits
    /// for every request; the bytes written.
    pub fn write_at(&self, file: &File, buf: &[u8], offsets: &[u64]) -> io::Result<u64> {
        if offsets.len() > self.depth {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("{} requests for a context of {}", offsets.len(), self.depth)));
        }
        let mut iocbs: Vec<Iocb> = offsets
            .iter()
            .map(|&o| Iocb { opcode: IOCB_CMD_PWRITE, fildes: file.as_raw_fd() as u32, buf: buf.as_ptr() as u64, nbytes: buf.len() as u64, offset: o as i64, ..Iocb::default() })
            .collect();
        let mut ptrs: Vec<*mut Iocb> = iocbs.iter_mut().map(|c| c as *mut Iocb).collect();
        // SAFETY: `ptrs` holds valid iocbs that live until this function returns; each asks the kernel to read
        // `buf` (never to write into our memory), so even a request still in flight after an error return
        // cannot change this process's memory.
        let submitted = unsafe { libc::syscall(libc::SYS_io_submit, self.id, ptrs.len() as libc::c_long, ptrs.as_mut_ptr()) };
        if submitted < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut events = vec![IoEvent::default(); submitted as usize];
        let (mut done, mut bytes) = (0usize, 0u64);
        while done < submitted as usize {
            let rest = &mut events[done..];
            // SAFETY: `rest` is a writable array of io_events of the length passed; no timeout (null).
            let n = unsafe { libc::syscall(libc::SYS_io_getevents, self.id, 1 as libc::c_long, rest.len() as libc::c_long, rest.as_mut_ptr(), std::ptr::null_mut::<libc::timespec>()) };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            for ev in &rest[..n as usize] {
                if ev.res < 0 {
                    return Err(io::Error::from_raw_os_error((-ev.res) as i32));
                }
                bytes += ev.res as u64;
            }
            done += n as usize;
        }
        Ok(bytes)
    }
}

impl Drop for AioContext {
    fn drop(&mut self) {
        // SAFETY: destroys our own context (waiting for requests still in flight); no memory is passed.
        unsafe { libc::syscall(libc::SYS_io_destroy, self.id) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_field_keeps_its_areas_apart_and_a_region_is_dropped_and_zero_again() {
        let areas = || std::fs::read_to_string("/proc/self/maps").unwrap().lines().count();
        let before = areas();
        let field = VmaField::new(500).unwrap();
        // The first page may join an anonymous area next to it; other tests map and unmap meanwhile.
        assert!(areas() >= before + 490, "the field was not split");
        field.protect(true).and_then(|_| field.sync()).and_then(|_| field.discard()).and_then(|_| field.protect(false)).unwrap();
        assert!(areas() >= before + 450, "the areas merged");
        let mut r = Region::new(64 * 1024).unwrap();
        r.touch();
        assert_eq!(r.as_slice()[0], 1);
        r.advise(Advice::DontNeed).unwrap();
        assert_eq!(r.as_slice()[0], 0);
    }

    #[test]
    fn timers_come_through_epoll_children_are_reaped_and_aio_writes_every_request() {
        let ep = Epoll::new().unwrap();
        let mut t = TimerFd::periodic(Duration::from_millis(1)).unwrap();
        ep.add(t.as_fd(), 7).unwrap();
        let mut ready = Vec::new();
        ep.wait(&mut ready, Duration::from_secs(1)).unwrap();
        assert_eq!((ready, t.expirations().unwrap() >= 1), (vec![7], true));
        let status = crate::process::wait_blocking(fork_exiting_child().unwrap()).unwrap();
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
        let path = std::env::temp_dir().join(format!("partita-aio-{}", std::process::id()));
        let file = File::create(&path).unwrap();
        let ctx = AioContext::new(4).unwrap();
        assert_eq!(ctx.write_at(&file, &[7u8; 4096], &[0, 4096, 8192]).unwrap(), 3 * 4096);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 3 * 4096);
        assert!(ctx.write_at(&file, &[0u8; 16], &[0; 5]).is_err(), "more requests than the context's depth");
        std::fs::remove_file(&path).unwrap();
    }
}
