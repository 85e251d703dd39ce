//! Tap devices for VM partitions: the guest's virtio-net NIC is the tap's other side, and QEMU gets the tap as
//! an inherited descriptor (`-netdev tap,fd=N`), so it needs no access to network namespaces or to
//! `/dev/net/tun` of its own.
//!
//! A tap made here is not persistent: the kernel removes the interface when the last descriptor on it closes
//! (the supervisor's, then QEMU's), so a crashed supervisor or VM leaves no interface behind. The caller
//! attaches it to a bridge with iproute2 (`ip link set NAME master BRIDGE up`) while it holds the descriptor.
use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

const TUN_DEVICE: &CStr = c"/dev/net/tun";
// From <linux/if_tun.h>: _IOW('T', 202, int) and _IOR('T', 210, unsigned int); libc does not export them.
const TUNSETIFF: libc::c_ulong = 0x4004_54ca;
const TUNGETIFF: libc::c_ulong = 0x8004_54d2;
const IFF_TAP: libc::c_short = 0x0002;
const IFF_NO_PI: libc::c_short = 0x1000;

/// Whether `name` can name a Linux interface: 1 to 15 bytes of `[A-Za-z0-9_.-]` (no `%d` template: the
/// caller always knows the name it wants).
pub fn is_interface_name(name: &str) -> bool {
    !name.is_empty() && name.len() < libc::IFNAMSIZ && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b))
}

/// Creates the tap device `name` (Ethernet frames, no packet-information header) in the calling thread's
/// network namespace and returns its descriptor, close-on-exec. The interface exists while a descriptor on it
/// is open. EBUSY: an interface of that name exists already.
pub fn create(name: &str) -> io::Result<OwnedFd> {
    if !is_interface_name(name) {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("{name:?} is not an interface name (1 to 15 of [A-Za-z0-9_.-])")));
    }
    // SAFETY: open(2) of a NUL-terminated constant path; the result is checked before use.
    let fd = unsafe { libc::open(TUN_DEVICE.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just opened and is owned by nothing else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: `ifreq` is plain old data, valid when zeroed; the name fits (checked above, < IFNAMSIZ, so the
    // zeroed last byte stays its terminator).
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(name.bytes()) {
        *dst = src as libc::c_char;
    }
    req.ifr_ifru.ifru_flags = IFF_TAP | IFF_NO_PI;
    // SAFETY: TUNSETIFF reads and writes one `ifreq`, which lives for the call.
    if unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETIFF, &mut req) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(fd)
}

/// The interface name of the tap (or tun) device behind `fd`; EBADFD or EINVAL for any other descriptor.
pub fn name_of(fd: impl AsRawFd) -> io::Result<String> {
    // SAFETY: `ifreq` is plain old data, valid when zeroed.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    // SAFETY: TUNGETIFF writes one `ifreq`, which lives for the call (another descriptor fails, EBADFD or EINVAL).
    if unsafe { libc::ioctl(fd.as_raw_fd(), TUNGETIFF, &mut req) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let bytes: Vec<u8> = req.ifr_name.iter().take_while(|c| **c != 0).map(|c| *c as u8).collect();
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interface_names_are_checked() {
        assert!(is_interface_name("pt9f00v1") && is_interface_name("a.b-c_d"));
        assert!(!is_interface_name("") && !is_interface_name("sixteen-chars-xx") && !is_interface_name("tap%d") && !is_interface_name("a b"));
        assert_eq!(create("bad name").unwrap_err().kind(), io::ErrorKind::InvalidInput);
    }

    /// The interface index of `name` in this thread's network namespace, 0 when there is none.
    fn index_of(name: &str) -> u32 {
        let c = std::ffi::CString::new(name).unwrap();
        // SAFETY: if_nametoindex reads the NUL-terminated name only.
        unsafe { libc::if_nametoindex(c.as_ptr()) }
    }

    /// In a network namespace of its own (unshare on a thread of this test), so the tap is never on the host's.
    #[test]
    fn a_tap_exists_while_its_descriptor_is_open() {
        let r = std::thread::spawn(|| {
            // SAFETY: unshare(CLONE_NEWNET) affects this thread only, which ends here.
            if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
                return Err(io::Error::last_os_error());
            }
            let fd = create("pt9f00v7")?;
            let while_open = index_of("pt9f00v7");
            let name = name_of(fd.as_raw_fd())?;
            let busy = create("pt9f00v7").map(drop).unwrap_err().raw_os_error();
            drop(fd);
            Ok((while_open, name, busy, index_of("pt9f00v7")))
        })
        .join()
        .unwrap();
        match r {
            Ok((while_open, name, busy, after)) => {
                assert!(while_open > 0, "the tap exists while its descriptor is open");
                assert_eq!(name, "pt9f00v7");
                assert_eq!(busy, Some(libc::EBUSY), "a second tap of the same name is refused");
                assert_eq!(after, 0, "the tap is gone with its last descriptor");
            }
            Err(e) => assert_eq!(e.raw_os_error(), Some(libc::EPERM), "only a missing privilege may stop this test: {e}"),
        }
        let plain = std::fs::File::open("/dev/null").unwrap();
        assert!(name_of(plain.as_raw_fd()).is_err());
    }
}
