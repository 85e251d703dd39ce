//! Shared memory between partitions: anonymous memory files (memfd) the supervisor creates, hands to the
//! partitions at a channel's ends as inherited descriptors, and each end maps; plus the futex calls a port
//! waits and wakes on.
//!
//! Why a memfd and not a file: it has no path, so nothing in a partition's view of the file system leads to it,
//! and it goes away with its last descriptor (a crashed supervisor leaves nothing behind). It is made
//! mode 0600 and owned by the supervisor's uid, so that a partition holding a read-only descriptor cannot
//! reopen it for writing through `/proc/self/fd` (its own user namespace does not map that uid), and sealed
//! against shrinking and growing, so that a hostile writer cannot truncate it under a reader's mapping (a read
//! past the end would kill the reader with SIGBUS).
//!
//! A [`Mapping`] is bounds-checked on every access: a caller gives offsets, never pointers. Memory another
//! process writes can change under a read at any time, so [`Mapping::read`] copies bytes that may be torn;
//! the ports above validate what they copied with a sequence word read before and after.
use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// Creates a memory file of `len` bytes (zeros), mode 0600, close-on-exec, sealed against changes of its size.
pub fn create(name: &str, len: usize) -> io::Result<OwnedFd> {
    let c = std::ffi::CString::new(name).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a memory file's name contains a NUL byte"))?;
    // SAFETY: memfd_create reads the NUL-terminated name only; the result is checked.
    let fd = unsafe { libc::memfd_create(c.as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just created and is owned by nothing else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let len_off = libc::off_t::try_from(len).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a memory file larger than off_t"))?;
    // SAFETY: ftruncate, fchmod and fcntl act on the descriptor only; no memory is passed.
    unsafe {
        if libc::ftruncate(fd.as_raw_fd(), len_off) != 0 || libc::fchmod(fd.as_raw_fd(), 0o600) != 0 {
            return Err(io::Error::last_os_error());
        }
        if libc::fcntl(fd.as_raw_fd(), libc::F_ADD_SEALS, libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(fd)
}

/// A read-only descriptor of the same memory file (through `/proc/self/fd`): what a channel's reading end
/// gets. Mapping it writable fails, and so does reopening it for writing from a partition.
pub fn read_only(fd: impl AsFd) -> io::Result<OwnedFd> {
    let path = format!("/proc/self/fd/{}", fd.as_fd().as_raw_fd());
    let f = std::fs::OpenOptions::new().read(true).custom_flags_cloexec().open(path)?;
    Ok(OwnedFd::from(f))
}

trait CloexecOpen {
    fn custom_flags_cloexec(&mut self) -> &mut Self;
}

impl CloexecOpen for std::fs::OpenOptions {
    fn custom_flags_cloexec(&mut self) -> &mut Self {
        use std::os::unix::fs::OpenOptionsExt;
        self.custom_flags(libc::O_CLOEXEC)
    }
}

/// Seals of a memory file (`F_GET_SEALS`), to check that a descriptor handed over is one [`create`] made.
pub fn seals(fd: impl AsFd) -> io::Result<i32> {
    // SAFETY: F_GET_SEALS reads the file's seals; no memory is passed.
    let s = unsafe { libc::fcntl(fd.as_fd().as_raw_fd(), libc::F_GET_SEALS) };
    if s < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(s)
}

/// Whether the seals [`create`] sets are all on `fd` (its size cannot change under a mapping).
pub fn is_size_sealed(fd: impl AsFd) -> bool {
    seals(fd).is_ok_and(|s| s & (libc::F_SEAL_SHRINK | libc::F_SEAL_GROW) == (libc::F_SEAL_SHRINK | libc::F_SEAL_GROW))
}

/// A shared mapping of a whole memory file, read-only or writable.
#[derive(Debug)]
pub struct Mapping {
    base: NonNull<u8>,
    len: usize,
    writable: bool,
}

// SAFETY: the mapping is plain shared memory; every access goes through atomics or copies that tolerate
// concurrent writers (other processes write it anyway), so sharing it between threads adds nothing unsound.
unsafe impl Send for Mapping {}
// SAFETY: as above.
unsafe impl Sync for Mapping {}

/// What a futex wait ended with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wake {
    /// Woken, or the word no longer held the expected value: look again.
    LookAgain,
    /// The deadline passed.
    TimedOut,
}

impl Mapping {
    /// Maps the whole of `fd` shared; writable needs a descriptor opened for writing.
    pub fn map(fd: impl AsFd, writable: bool) -> io::Result<Mapping> {
        let fd = fd.as_fd().as_raw_fd();
        // SAFETY: fstat writes into the zeroed struct we own.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        if unsafe { libc::fstat(fd, &mut st) } != 0 {
            return Err(io::Error::last_os_error());
        }
        let len = usize::try_from(st.st_size).map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "a memory file of negative size"))?;
        if len == 0 {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "an empty memory file"));
        }
        let prot = if writable { libc::PROT_READ | libc::PROT_WRITE } else { libc::PROT_READ };
        // SAFETY: a new shared mapping chosen by the kernel; the result is checked; nothing aliases it in this
        // process but what this value hands out.
        let p = unsafe { libc::mmap(std::ptr::null_mut(), len, prot, libc::MAP_SHARED, fd, 0) };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mapping { base: NonNull::new(p.cast()).expect("mmap does not return null on success"), len, writable })
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn is_writable(&self) -> bool {
        self.writable
    }

    fn check(&self, offset: usize, n: usize, align: usize) -> bool {
        offset % align == 0 && offset.checked_add(n).is_some_and(|end| end <= self.len)
    }

    /// The 32-bit word at `offset` (aligned, inside), shared with the other processes mapping the file.
    fn word32(&self, offset: usize) -> &AtomicU32 {
        assert!(self.check(offset, 4, 4), "word at {offset} outside a mapping of {} bytes", self.len);
        // SAFETY: inside the mapping and aligned (checked above); AtomicU32 has the layout of u32, and the
        // mapping lives as long as the reference.
        unsafe { &*self.base.as_ptr().add(offset).cast::<AtomicU32>() }
    }

    fn word64(&self, offset: usize) -> &AtomicU64 {
        assert!(self.check(offset, 8, 8), "word at {offset} outside a mapping of {} bytes", self.len);
        // SAFETY: as in word32.
        unsafe { &*self.base.as_ptr().add(offset).cast::<AtomicU64>() }
    }

    pub fn load32(&self, offset: usize, order: Ordering) -> u32 {
        self.word32(offset).load(order)
    }

    pub fn load64(&self, offset: usize, order: Ordering) -> u64 {
        self.word64(offset).load(order)
    }

    /// Stores into a writable mapping. Panics on a read-only one: storing there is a bug of the caller, which
    /// knows which end it is.
    pub fn store32(&self, offset: usize, value: u32, order: Ordering) {
        assert!(self.writable, "store into a read-only mapping");
        self.word32(offset).store(value, order)
    }

    pub fn store64(&self, offset: usize, value: u64, order: Ordering) {
        assert!(self.writable, "store into a read-only mapping");
        self.word64(offset).store(value, order)
    }

    /// Copies `buf.len()` bytes from `offset`. Another process may be writing them: the copy may be torn.
    pub fn read(&self, offset: usize, buf: &mut [u8]) {
        assert!(self.check(offset, buf.len(), 1), "read of {} bytes at {offset} outside a mapping of {} bytes", buf.len(), self.len);
        // SAFETY: the source range is inside the mapping (checked) and `buf` is ours; the ranges cannot
        // overlap (the mapping is not Rust memory). Concurrent writes by another process only tear the copy.
        unsafe { std::ptr::copy_nonoverlapping(self.base.as_ptr().add(offset), buf.as_mut_ptr(), buf.len()) }
    }

    /// Copies `data` to `offset` of a writable mapping.
    pub fn write(&self, offset: usize, data: &[u8]) {
        assert!(self.writable, "write into a read-only mapping");
        assert!(self.check(offset, data.len(), 1), "write of {} bytes at {offset} outside a mapping of {} bytes", data.len(), self.len);
        // SAFETY: the target range is inside a writable mapping (checked); `data` is ours and cannot overlap it.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.base.as_ptr().add(offset), data.len()) }
    }

    /// Hands `n` bytes at `offset` of a writable mapping to `fill`, which writes the message in place (no copy
    /// through a buffer of its own).
    pub fn fill_with<R>(&self, offset: usize, n: usize, fill: impl FnOnce(&mut [u8]) -> R) -> R {
        assert!(self.writable, "write into a read-only mapping");
        assert!(self.check(offset, n, 1), "write of {n} bytes at {offset} outside a mapping of {} bytes", self.len);
        // SAFETY: inside a writable mapping (checked). Only this process writes these bytes (it is the channel's
        // one writing end); readers in other processes validate what they copy by a sequence word.
        fill(unsafe { std::slice::from_raw_parts_mut(self.base.as_ptr().add(offset), n) })
    }

    /// Waits while the word at `offset` holds `expected`, until woken or until `deadline` (CLOCK_MONOTONIC
    /// nanoseconds, absolute: time spent frozen counts); `None` waits without a deadline.
    pub fn wait(&self, offset: usize, expected: u32, deadline_ns: Option<u64>) -> io::Result<Wake> {
        let word = self.word32(offset);
        let ts = deadline_ns.map(|ns| libc::timespec { tv_sec: (ns / 1_000_000_000) as libc::time_t, tv_nsec: (ns % 1_000_000_000) as libc::c_long });
        let ts_ptr = ts.as_ref().map_or(std::ptr::null(), |t| t as *const libc::timespec);
        // SAFETY: FUTEX_WAIT_BITSET reads the aligned word inside our mapping and the timespec we own; a shared
        // (not private) futex, since the other end is another process.
        let r = unsafe { libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAIT_BITSET, expected, ts_ptr, std::ptr::null::<u32>(), libc::FUTEX_BITSET_MATCH_ANY) };
        if r == 0 {
            return Ok(Wake::LookAgain);
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::ETIMEDOUT) => Ok(Wake::TimedOut),
            Some(libc::EAGAIN) | Some(libc::EINTR) => Ok(Wake::LookAgain),
            _ => Err(e),
        }
    }

    /// Wakes every process waiting on the word at `offset`; returns how many were woken.
    pub fn wake(&self, offset: usize) -> io::Result<usize> {
        let word = self.word32(offset);
        // SAFETY: FUTEX_WAKE reads nothing of ours but the word's address, inside our mapping.
        let r = unsafe { libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE, i32::MAX, std::ptr::null::<libc::timespec>(), std::ptr::null::<u32>(), 0) };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(r as usize)
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly what map() mapped; no reference into it outlives `self`.
        unsafe { libc::munmap(self.base.as_ptr().cast(), self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_only_descriptor_maps_for_reading_and_refuses_a_writable_mapping() {
        let fd = create("t", 4096).unwrap();
        let w = Mapping::map(&fd, true).unwrap();
        w.store64(8, 42, Ordering::Release);
        let ro = read_only(&fd).unwrap();
        let r = Mapping::map(&ro, false).unwrap();
        assert_eq!(r.load64(8, Ordering::Acquire), 42);
        assert!(Mapping::map(&ro, true).is_err());
        assert!(is_size_sealed(&ro));
    }

    #[test]
    fn a_sealed_memory_file_cannot_be_shrunk_or_grown() {
        let fd = create("t", 4096).unwrap();
        let f = std::fs::File::from(fd);
        assert!(f.set_len(0).is_err());
        assert!(f.set_len(8192).is_err());
    }

    #[test]
    fn accesses_outside_the_mapping_are_refused() {
        let fd = create("t", 4096).unwrap();
        let w = Mapping::map(&fd, true).unwrap();
        assert!(std::panic::catch_unwind(|| w.load64(4096, Ordering::Relaxed)).is_err());
        assert!(std::panic::catch_unwind(move || w.read(4090, &mut [0u8; 8])).is_err());
    }

    #[test]
    fn a_wait_with_a_passed_deadline_times_out_and_a_changed_word_returns_at_once() {
        let fd = create("t", 4096).unwrap();
        let w = Mapping::map(&fd, true).unwrap();
        assert_eq!(w.wait(0, 0, Some(1)).unwrap(), Wake::TimedOut);
        assert_eq!(w.wait(0, 7, None).unwrap(), Wake::LookAgain);
        assert_eq!(w.wake(0).unwrap(), 0);
    }
}
