//! Descriptors handed to child processes: whether one survives `execve` (close-on-exec), and anonymous
//! in-memory files a child can open by `/proc/self/fd/N` (the VM runner gives QEMU one initramfs made of two
//! archives this way, without a temporary file that a crash would leave behind).
use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// Whether descriptor number `fd` is open in this process.
pub fn is_open(fd: RawFd) -> bool {
    // SAFETY: F_GETFD reads the descriptor's flags only; any number is safe to ask about.
    fd >= 0 && unsafe { libc::fcntl(fd, libc::F_GETFD) } >= 0
}

/// Whether `fd` is passed on to programs this process executes (close-on-exec off).
/// (Descriptors are taken by number, as for any inherited one: asking about or flagging a number this process
/// does not hold fails with EBADF and touches no memory.)
pub fn is_inheritable(fd: impl AsRawFd) -> io::Result<bool> {
    // SAFETY: F_GETFD reads the flags of a descriptor; any number is safe to ask about.
    let flags = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFD) };
    if flags < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(flags & libc::FD_CLOEXEC == 0)
}

/// Turns close-on-exec off (`inheritable`) or on for `fd`.
pub fn set_inheritable(fd: impl AsRawFd, inheritable: bool) -> io::Result<()> {
    // SAFETY: F_GETFD/F_SETFD read and change only a descriptor's close-on-exec flag; no memory is passed.
    unsafe {
        let flags = libc::fcntl(fd.as_raw_fd(), libc::F_GETFD);
        if flags < 0 {
            return Err(io::Error::last_os_error());
        }
        let new = if inheritable { flags & !libc::FD_CLOEXEC } else { flags | libc::FD_CLOEXEC };
        if libc::fcntl(fd.as_raw_fd(), libc::F_SETFD, new) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Takes ownership of descriptor number `fd`, inherited from the parent and named on the command line, and
/// makes it close-on-exec so that programs this process starts do not hold it. Standard input, output and
/// error (0..=2) and numbers that are not open are refused.
pub fn take_inherited(fd: RawFd) -> io::Result<OwnedFd> {
    if fd <= 2 {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "0, 1 and 2 are standard input, output and error; give an inherited descriptor of 3 or more"));
    }
    set_inheritable(fd, false)?;
    // SAFETY: `fd` is open (F_SETFD above succeeded), was inherited by number, and this process's code takes
    // it only here, once, from its command line.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Makes reads and writes of `fd` return `WouldBlock` instead of waiting.
pub fn set_nonblocking(fd: impl AsRawFd) -> io::Result<()> {
    // SAFETY: F_GETFL/F_SETFL read and change only a descriptor's status flags; no memory is passed.
    unsafe {
        let flags = libc::fcntl(fd.as_raw_fd(), libc::F_GETFL);
        if flags < 0 || libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// A close-on-exec duplicate of `fd` numbered at least `min` (out of the way of a child's low numbers).
pub fn dup_above(fd: impl AsRawFd, min: RawFd) -> io::Result<OwnedFd> {
    // SAFETY: F_DUPFD_CLOEXEC duplicates a descriptor; the result is checked, then owned by nobody else.
    let new = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, min) };
    if new < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `new` was just created and is owned by nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(new) })
}

/// Allocates `len` bytes of `file` on its disk (fallocate, mode 0): the blocks are taken now, so writing them
/// later takes no more of the disk.
pub fn allocate(file: &std::fs::File, len: u64) -> io::Result<()> {
    let len = libc::off_t::try_from(len).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a length beyond off_t"))?;
    // SAFETY: fallocate works on a descriptor the File owns; nothing is read from or written to memory.
    if unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, len) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// An anonymous file in memory (memfd_create), close-on-exec; `name` shows in `/proc/PID/fd` only.
pub fn memfd(name: &str) -> io::Result<std::fs::File> {
    let c = CString::new(name).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a memfd name has no NUL byte"))?;
    // SAFETY: memfd_create reads the NUL-terminated name; the descriptor is checked, then owned by the File.
    let fd = unsafe { libc::memfd_create(c.as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just created and is owned by nothing else.
    Ok(std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Seek, Write};
    
    #[test]
    fn close_on_exec_is_read_and_changed() {
        let mut f = memfd("partita-os-test").unwrap();
        assert!(!is_inheritable(f.as_raw_fd()).unwrap(), "made close-on-exec");
        set_inheritable(f.as_raw_fd(), true).unwrap();
        assert!(is_inheritable(f.as_raw_fd()).unwrap());
        assert!(is_open(f.as_raw_fd()));
        f.write_all(b"archive").unwrap();
        // A child opening /proc/self/fd/N of an inherited memfd reads the same bytes.
        let out = std::process::Command::new("cat").arg(format!("/proc/self/fd/{}", f.as_raw_fd())).output().unwrap();
        assert_eq!(out.stdout, b"archive");
        set_inheritable(f.as_raw_fd(), false).unwrap();
        let out = std::process::Command::new("cat").arg(format!("/proc/self/fd/{}", f.as_raw_fd())).output().unwrap();
        assert!(!out.status.success(), "not inherited once close-on-exec again");
        f.rewind().unwrap();
        let mut back = String::new();
        f.read_to_string(&mut back).unwrap();
        assert_eq!(back, "archive");
        let n = f.as_raw_fd();
        drop(f);
        assert!(!is_open(n) && !is_open(-1));
    }

    #[test]
    fn an_inherited_descriptor_is_taken_once_made_close_on_exec() {
        let f = memfd("partita-os-take").unwrap();
        set_inheritable(f.as_raw_fd(), true).unwrap();
        let n = std::os::fd::IntoRawFd::into_raw_fd(f);
        let owned = take_inherited(n).unwrap();
        assert!(!is_inheritable(owned.as_raw_fd()).unwrap(), "programs started from here do not hold it");
        drop(owned);
        assert!(!is_open(n), "closed with its owner");
        assert!(take_inherited(n).is_err(), "a number that is not open");
        for stdio in 0..=2 {
            assert_eq!(take_inherited(stdio).unwrap_err().kind(), io::ErrorKind::InvalidInput);
        }
    }
}
