//! The supervisor's side of a partition's seccomp notifications: the partition's launcher installs a filter
//! whose forbidden system calls are handed to a listener instead of being answered by the kernel, and passes
//! the listener's descriptor to the supervisor over a socket. The supervisor receives each attempt (which
//! process, which system call), logs it and answers it.
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// A unix stream socket pair, both ends close-on-exec: the launcher's child sends on one, the supervisor
/// receives on the other.
pub fn socket_pair() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: `fds` is a valid array of two ints for socketpair to fill.
    if unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0, fds.as_mut_ptr()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just created and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Sends descriptor `fd` with SCM_RIGHTS on `socket`. Async-signal-safe (locals only, one system call): the
/// launcher's child calls it between `clone` and `execve`.
pub fn send_fd(socket: RawFd, fd: RawFd) -> bool {
    let mut byte = 0u8;
    let mut iov = libc::iovec { iov_base: (&mut byte as *mut u8).cast(), iov_len: 1 };
    let mut control = [0u64; 8];
    // SAFETY: a zeroed msghdr is valid; the pointers set below refer to locals that outlive the call; the
    // control buffer has room for one cmsghdr with one int (CMSG_SPACE(4) <= 64 bytes), which CMSG_FIRSTHDR
    // and CMSG_DATA address within it.
    unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = libc::CMSG_SPACE(std::mem::size_of::<RawFd>() as u32) as usize;
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<RawFd>() as u32) as usize;
        std::ptr::write_unaligned(libc::CMSG_DATA(cmsg) as *mut RawFd, fd);
        libc::sendmsg(socket, &msg, 0) == 1
    }
}

/// Receives one descriptor sent with SCM_RIGHTS on `socket`, without waiting: `None` when none is there yet.
pub fn receive_fd(socket: &OwnedFd) -> io::Result<Option<OwnedFd>> {
    let mut byte = 0u8;
    let mut iov = libc::iovec { iov_base: (&mut byte as *mut u8).cast(), iov_len: 1 };
    // Room for one descriptor, aligned for a cmsghdr.
    let mut control = [0u64; 8];
    // SAFETY: a zeroed msghdr is valid; every pointer set below refers to a local that outlives the call.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control);
    // SAFETY: recvmsg fills the buffers `msg` points to, within the lengths it gives.
    let n = unsafe { libc::recvmsg(socket.as_raw_fd(), &mut msg, libc::MSG_DONTWAIT | libc::MSG_CMSG_CLOEXEC) };
    if n < 0 {
        let e = io::Error::last_os_error();
        return if e.kind() == io::ErrorKind::WouldBlock { Ok(None) } else { Err(e) };
    }
    // SAFETY: CMSG_FIRSTHDR reads `msg`'s control fields, which recvmsg set within the buffer.
    let cmsg = unsafe { libc::CMSG_FIRSTHDR(&msg) };
    if n == 0 || cmsg.is_null() {
        return Ok(None);
    }
    // SAFETY: `cmsg` points into `control`; a SCM_RIGHTS message's data is an array of ints, of which the
    // sender put one.
    unsafe {
        if (*cmsg).cmsg_level != libc::SOL_SOCKET || (*cmsg).cmsg_type != libc::SCM_RIGHTS {
            return Ok(None);
        }
        let fd = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg) as *const RawFd);
        Ok(Some(OwnedFd::from_raw_fd(fd)))
    }
}

/// One forbidden system call a partition's process made, held until answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Notification {
    pub id: u64,
    /// The thread, as a pid of the supervisor's PID namespace.
    pub pid: u32,
    pub syscall: i32,
}

/// A seccomp listener: the descriptor a filter installed with SECCOMP_FILTER_FLAG_NEW_LISTENER returned.
pub struct Listener(OwnedFd);

impl Listener {
    pub fn new(fd: OwnedFd) -> Listener {
        Listener(fd)
    }

    /// The next pending notification, without waiting.
    pub fn next(&self) -> io::Result<Option<Notification>> {
        let mut pfd = libc::pollfd { fd: self.0.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd, no wait.
        let r = unsafe { libc::poll(&mut pfd, 1, 0) };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        if r == 0 || pfd.revents & libc::POLLIN == 0 {
            return Ok(None);
        }
        // The kernel wants a zeroed buffer.
        // SAFETY: seccomp_notif is plain data, valid when zeroed.
        let mut n: libc::seccomp_notif = unsafe { std::mem::zeroed() };
        // SAFETY: the ioctl fills `n`, whose size the request number encodes.
        if unsafe { libc::ioctl(self.0.as_raw_fd(), libc::SECCOMP_IOCTL_NOTIF_RECV, &mut n) } != 0 {
            let e = io::Error::last_os_error();
            // ENOENT: the process was killed before we read it.
            return if e.raw_os_error() == Some(libc::ENOENT) { Ok(None) } else { Err(e) };
        }
        Ok(Some(Notification { id: n.id, pid: n.pid, syscall: n.data.nr }))
    }

    /// Answers a notification: the system call fails with `errno`.
    pub fn deny(&self, id: u64, errno: i32) -> io::Result<()> {
        let mut resp = libc::seccomp_notif_resp { id, val: 0, error: -errno, flags: 0 };
        // SAFETY: the ioctl reads `resp`, whose size the request number encodes.
        if unsafe { libc::ioctl(self.0.as_raw_fd(), libc::SECCOMP_IOCTL_NOTIF_SEND, &mut resp) } != 0 {
            let e = io::Error::last_os_error();
            // ENOENT: the process is gone (killed) and the notification with it.
            return if e.raw_os_error() == Some(libc::ENOENT) { Ok(()) } else { Err(e) };
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_to_receive_is_none_and_a_closed_peer_too() {
        let (a, b) = socket_pair().unwrap();
        assert!(receive_fd(&b).unwrap().is_none());
        drop(a);
        assert!(receive_fd(&b).unwrap().is_none());
    }

    #[test]
    fn a_descriptor_crosses_the_socket() {
        let (a, b) = socket_pair().unwrap();
        let (r, w) = crate::process::cloexec_pipe().unwrap();
        assert!(send_fd(a.as_raw_fd(), w.as_raw_fd()));
        drop(w);
        let got = receive_fd(&b).unwrap().expect("a descriptor");
        // The received descriptor is the pipe's write end: writing through it reaches the read end.
        let mut f = std::fs::File::from(got);
        std::io::Write::write_all(&mut f, b"x").unwrap();
        drop(f);
        let mut out = String::new();
        std::io::Read::read_to_string(&mut std::fs::File::from(r), &mut out).unwrap();
        assert_eq!(out, "x");
    }
}
