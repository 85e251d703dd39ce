//! A private network for a process: a fresh network namespace holding only an "up" loopback interface.
//!
//! Cyclone DDS binds its receive sockets to the wildcard address, so on the host they would also accept
//! traffic arriving on the machine's default interface. Benchmarks and tools that need only loopback call
//! [`enter_private_network`] first thing, before any thread or socket exists: from then on the process and
//! every child it starts see no interface but their own `lo`.
use std::io;

/// Why the private network could not be entered.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("unshare(CLONE_NEWNET) failed: {0} (creating a network namespace needs root, CAP_SYS_ADMIN or unprivileged user namespaces; run as root)")]
    Unshare(io::Error),
    #[error("bringing up loopback in the new network namespace failed at {step}: {err}")]
    Loopback { step: &'static str, err: io::Error },
    #[error("enter_private_network must run before the process starts threads ({0} threads running)")]
    Threads(usize),
}

fn thread_count() -> usize {
    std::fs::read_dir("/proc/self/task").map(|d| d.count()).unwrap_or(1)
}

/// Moves this (single-threaded) process into a new network namespace and brings its loopback up.
pub fn enter_private_network() -> Result<(), SandboxError> {
    // Namespaces belong to threads: other threads would stay behind on the host network.
    let n = thread_count();
    if n != 1 {
        return Err(SandboxError::Threads(n));
    }
    if !crate::prexec::unshare(libc::CLONE_NEWNET) {
        let first = io::Error::last_os_error();
        // Without root, a new user namespace grants the capabilities a new network namespace needs.
        if !crate::prexec::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNET) {
            return Err(SandboxError::Unshare(first));
        }
    }
    loopback_up()
}

/// True when this process's network namespace has no interface but `lo`.
pub fn only_loopback() -> io::Result<bool> {
    let ifaces: Vec<String> = std::fs::read_dir("/sys/class/net")?
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .collect();
    Ok(ifaces.iter().all(|i| i == "lo"))
}

fn loopback_up() -> Result<(), SandboxError> {
    let err = |step| move |e| SandboxError::Loopback { step, err: e };
    // SAFETY: a plain datagram socket used only for the interface ioctls below, closed at the end.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(err("socket")(io::Error::last_os_error()));
    }
    // SAFETY: ifreq is plain data; the name is NUL-terminated inside its 16 bytes; both ioctls read and write
    // only that struct.
    let r = unsafe {
        let mut ifr: libc::ifreq = std::mem::zeroed();
        for (d, s) in ifr.ifr_name.iter_mut().zip(b"lo\0") {
            *d = *s as libc::c_char;
        }
        let mut r = libc::ioctl(fd, libc::SIOCGIFFLAGS, &mut ifr);
        if r == 0 {
            ifr.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
            r = libc::ioctl(fd, libc::SIOCSIFFLAGS, &ifr);
        }
        let e = io::Error::last_os_error();
        libc::close(fd);
        if r != 0 {
            Err(e)
        } else {
            Ok(())
        }
    };
    r.map_err(err("SIOCSIFFLAGS lo up"))
}
