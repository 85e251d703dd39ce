//! Socket options std does not offer: the kernel buffer sizes of a socket, and the uid of a Unix socket's peer.
//!
//! A UDP answer of 1 MiB is 17 datagrams in flight at once; the default buffers (about 200 KiB) drop most of
//! them. `SO_RCVBUFFORCE`/`SO_SNDBUFFORCE` set any size but need CAP_NET_ADMIN; without it the plain options
//! are capped by `net.core.rmem_max`/`wmem_max`.
use std::io;
use std::os::fd::{AsFd, AsRawFd};

/// One of a socket's two kernel buffers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Buffer {
    Receive,
    Send,
}

impl Buffer {
    fn options(self) -> (libc::c_int, libc::c_int) {
        match self {
            Buffer::Receive => (libc::SO_RCVBUFFORCE, libc::SO_RCVBUF),
            Buffer::Send => (libc::SO_SNDBUFFORCE, libc::SO_SNDBUF),
        }
    }
}

/// How a buffer size was set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BufferSizing {
    /// Exactly as asked (`SO_*BUFFORCE`, with CAP_NET_ADMIN).
    Forced,
    /// With the plain option: the kernel caps it at `net.core.rmem_max` or `wmem_max`.
    CappedBySysctl,
}

fn set_int(sock: &impl AsFd, option: libc::c_int, value: libc::c_int) -> io::Result<()> {
    // SAFETY: the descriptor is open for the borrow's duration; the kernel reads one c_int from `value`,
    // whose size is passed with it.
    let r = unsafe {
        libc::setsockopt(
            sock.as_fd().as_raw_fd(),
            libc::SOL_SOCKET,
            option,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Asks for a `bytes`-byte buffer: forced if the process may, else as much as the system allows.
pub fn set_buffer_size(sock: &impl AsFd, buffer: Buffer, bytes: usize) -> io::Result<BufferSizing> {
    let value = libc::c_int::try_from(bytes)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, format!("socket buffer of {bytes} bytes: at most {} allowed", libc::c_int::MAX)))?;
    let (force, plain) = buffer.options();
    if set_int(sock, force, value).is_ok() {
        return Ok(BufferSizing::Forced);
    }
    set_int(sock, plain, value)?;
    Ok(BufferSizing::CappedBySysctl)
}

/// The buffer's size as the kernel reports it: twice the size set, the kernel's bookkeeping included.
pub fn buffer_size(sock: &impl AsFd, buffer: Buffer) -> io::Result<usize> {
    let mut value: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: the descriptor is open for the borrow's duration; the kernel writes at most `len` bytes into
    // `value`, a c_int of that size, and the actual length into `len`.
    let r = unsafe {
        libc::getsockopt(sock.as_fd().as_raw_fd(), libc::SOL_SOCKET, buffer.options().1, (&mut value as *mut libc::c_int).cast(), &mut len)
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(value as usize)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;

    fn sysctl(name: &str) -> usize {
        std::fs::read_to_string(format!("/proc/sys/net/core/{name}")).unwrap().trim().parse().unwrap()
    }

    #[test]
    fn buffer_sizes_take_effect_on_a_loopback_udp_socket() {
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        for (buffer, cap) in [(Buffer::Receive, "rmem_max"), (Buffer::Send, "wmem_max")] {
            // Above the default size, so a forced setting shows as a change.
            let default = buffer_size(&sock, buffer).unwrap();
            let want = (default / 2 + 3 * 65_536).max(1 << 20);
            let sizing = set_buffer_size(&sock, buffer, want).unwrap();
            let expected = match sizing {
                BufferSizing::Forced => want,
                BufferSizing::CappedBySysctl => want.min(sysctl(cap)),
            };
            assert_eq!(buffer_size(&sock, buffer).unwrap(), 2 * expected, "{buffer:?} set {sizing:?}");
        }
    }

    #[test]
    fn a_buffer_larger_than_an_int_is_refused() {
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        let e = set_buffer_size(&sock, Buffer::Receive, usize::MAX).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    }
}

/// The uid of the process at the other end of a connected Unix socket (`SO_PEERCRED`), as the kernel recorded
/// it when the connection was made: who is asking, whatever the peer says.
pub fn peer_uid(socket: std::os::fd::BorrowedFd<'_>) -> std::io::Result<u32> {
    let mut cred = libc::ucred { pid: 0, uid: u32::MAX, gid: u32::MAX };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `cred` and `len` are valid for writes of the sizes given; the kernel writes at most `len` bytes.
    let r = unsafe { libc::getsockopt(socket.as_raw_fd(), libc::SOL_SOCKET, libc::SO_PEERCRED, (&mut cred as *mut libc::ucred).cast(), &mut len) };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(cred.uid)
}
