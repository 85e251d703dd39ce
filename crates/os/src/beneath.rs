//! Files written into a place another party controls part of (a partition's file system, reached from the host
//! through `/proc/PID/root`): the path is resolved beneath a directory the caller opened, following no symbolic
//! link, so that a link the other party planted cannot send a write of the host's root somewhere else; and a
//! file is replaced at once (a new file renamed over the old), so that its reader sees the old content or the
//! new, never half of it.
use std::ffi::CString;
use std::io::{self, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

fn c_path(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes()).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a path with a NUL byte"))
}

/// Opens `path` itself (a directory, or the magic link `/proc/PID/root`, which is followed once: that is the
/// point of it) as a directory to resolve beneath.
pub fn open_dir(path: &Path) -> io::Result<OwnedFd> {
    let c = c_path(path)?;
    // SAFETY: `c` is a NUL-terminated path that outlives the call; the result is checked before it is owned.
    let fd = unsafe { libc::open(c.as_ptr(), libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just opened by this call and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Opens directory `relative` beneath `root` (openat2 with RESOLVE_BENEATH, RESOLVE_NO_SYMLINKS and
/// RESOLVE_NO_MAGICLINKS): no `..` above `root`, no symbolic link anywhere on the way (ELOOP then).
pub fn open_dir_beneath(root: &OwnedFd, relative: &Path) -> io::Result<OwnedFd> {
    let c = c_path(relative)?;
    // SAFETY: open_how is plain integers, for which zero is a value (and the kernel's "not set").
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = (libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC | libc::O_NOFOLLOW) as u64;
    how.resolve = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS;
    // SAFETY: openat2 reads `c` and `how` (sized by the size given), both alive across the call.
    let fd = unsafe { libc::syscall(libc::SYS_openat2, root.as_raw_fd(), c.as_ptr(), &how as *const libc::open_how, std::mem::size_of::<libc::open_how>()) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel returned a new descriptor, owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// The owner (uid) and mode bits of an open file or directory.
pub fn owner_and_mode(fd: &OwnedFd) -> io::Result<(u32, u32)> {
    let file = std::fs::File::from(fd.try_clone()?);
    let m = file.metadata()?;
    use std::os::unix::fs::MetadataExt;
    Ok((m.uid(), m.mode() & 0o7777))
}

/// Whether an open directory is the root of a mount (statx's STATX_ATTR_MOUNT_ROOT), and of a tmpfs.
pub fn is_tmpfs_mount_root(fd: &OwnedFd) -> io::Result<bool> {
    // SAFETY: statx and fstatfs write into the zeroed structures passed, which outlive the calls; the empty path
    // with AT_EMPTY_PATH names `fd` itself.
    unsafe {
        let mut stx: libc::statx = std::mem::zeroed();
        if libc::statx(fd.as_raw_fd(), c"".as_ptr(), libc::AT_EMPTY_PATH, 0, &mut stx) != 0 {
            return Err(io::Error::last_os_error());
        }
        let mut fs: libc::statfs = std::mem::zeroed();
        if libc::fstatfs(fd.as_raw_fd(), &mut fs) != 0 {
            return Err(io::Error::last_os_error());
        }
        let mount_root = stx.stx_attributes_mask & libc::STATX_ATTR_MOUNT_ROOT as u64 != 0 && stx.stx_attributes & libc::STATX_ATTR_MOUNT_ROOT as u64 != 0;
        Ok(mount_root && fs.f_type == libc::TMPFS_MAGIC)
    }
}

/// Replaces file `name` in directory `dir` with `content`, mode `mode`: written to a new file `.NAME.new`
/// (created, never opened if it exists, not through a link) and renamed over `name`. A failure removes the new
/// file and leaves `name` as it was.
pub fn replace_file(dir: &OwnedFd, name: &str, content: &[u8], mode: u32) -> io::Result<()> {
    if name.contains('/') || name.is_empty() || name.starts_with('.') {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "a file name of the directory itself"));
    }
    let (temp, target) = (CString::new(format!(".{name}.new"))?, CString::new(name)?);
    // A leftover of an interrupted replace goes first (unlinking a link removes the link, not what it names).
    // SAFETY: `temp` is NUL-terminated and alive; unlinkat touches only that name in `dir`.
    unsafe { libc::unlinkat(dir.as_raw_fd(), temp.as_ptr(), 0) };
    // SAFETY: as above; O_EXCL with O_CREAT never opens an existing file or follows a link.
    let fd = unsafe { libc::openat(dir.as_raw_fd(), temp.as_ptr(), libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC, mode as libc::c_uint) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new descriptor of this call, owned by nobody else.
    let mut file = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
    let written = (|| {
        use std::os::unix::fs::PermissionsExt;
        // The umask may have taken bits of `mode`.
        file.set_permissions(std::fs::Permissions::from_mode(mode))?;
        file.write_all(content)?;
        // SAFETY: both names are NUL-terminated and alive; renameat acts within `dir` only.
        if unsafe { libc::renameat(dir.as_raw_fd(), temp.as_ptr(), dir.as_raw_fd(), target.as_ptr()) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    })();
    if written.is_err() {
        // SAFETY: as above.
        unsafe { libc::unlinkat(dir.as_raw_fd(), temp.as_ptr(), 0) };
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(tag: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("partita-beneath-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join("run/partita")).unwrap();
        d
    }

    #[test]
    fn a_file_is_replaced_whole_with_its_mode() {
        let d = scratch("replace");
        std::fs::write(d.join("run/partita/router.toml"), "old").unwrap();
        let root = open_dir(&d).unwrap();
        let dir = open_dir_beneath(&root, Path::new("run/partita")).unwrap();
        assert!(!is_tmpfs_mount_root(&dir).unwrap(), "a plain directory is not a mount's root");
        assert!(is_tmpfs_mount_root(&open_dir(Path::new("/dev/shm")).unwrap()).unwrap(), "/dev/shm is");
        replace_file(&dir, "router.toml", b"new table", 0o444).unwrap();
        assert_eq!(std::fs::read_to_string(d.join("run/partita/router.toml")).unwrap(), "new table");
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(d.join("run/partita/router.toml")).unwrap().permissions().mode() & 0o777, 0o444);
        assert!(!d.join("run/partita/.router.toml.new").exists(), "no temporary file is left");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn no_symbolic_link_is_followed_on_the_way_or_at_the_end() {
        let d = scratch("links");
        let elsewhere = d.join("elsewhere");
        std::fs::create_dir_all(&elsewhere).unwrap();
        std::fs::remove_dir(d.join("run/partita")).unwrap();
        std::os::unix::fs::symlink(&elsewhere, d.join("run/partita")).unwrap();
        let root = open_dir(&d).unwrap();
        let e = open_dir_beneath(&root, Path::new("run/partita")).unwrap_err();
        assert!(matches!(e.raw_os_error(), Some(libc::ELOOP | libc::ENOTDIR)), "a link at the end: {e}");
        std::fs::create_dir_all(elsewhere.join("inner")).unwrap();
        let e = open_dir_beneath(&root, Path::new("run/partita/inner")).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ELOOP), "a link on the way: {e}");
        assert!(open_dir_beneath(&root, Path::new("../")).is_err(), "nothing above the root");
        // A temporary name left as a link: removed first (O_EXCL would refuse one planted after that), and the
        // file written is a new one.
        std::fs::create_dir_all(d.join("real")).unwrap();
        std::os::unix::fs::symlink(elsewhere.join("victim"), d.join("real/.f.new")).unwrap();
        let dir = open_dir_beneath(&root, Path::new("real")).unwrap();
        replace_file(&dir, "f", b"x", 0o444).unwrap();
        assert!(!elsewhere.join("victim").exists(), "the link's target was not written");
        assert_eq!(std::fs::read_to_string(d.join("real/f")).unwrap(), "x");
        assert!(replace_file(&dir, "../f", b"x", 0o444).is_err() && replace_file(&dir, ".f", b"x", 0o444).is_err());
        std::fs::remove_dir_all(&d).unwrap();
    }
}
