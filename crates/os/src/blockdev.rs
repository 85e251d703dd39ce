//! Which disk holds a path: the block device numbers the cgroup I/O limits name.
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// `(major, minor)` of the whole disk that holds `path` (the disk, not its partition: the I/O controllers
/// throttle whole disks), or `None` where the file system is on no block device (tmpfs, overlay, a network).
/// `path` need not exist: its nearest existing ancestor is asked.
pub fn whole_disk_of(path: &Path) -> io::Result<Option<(u32, u32)>> {
    let mut p = path;
    let meta = loop {
        match std::fs::metadata(p) {
            Ok(m) => break m,
            Err(e) if e.kind() == io::ErrorKind::NotFound => match p.parent() {
                Some(parent) => p = parent,
                None => return Err(e),
            },
            Err(e) => return Err(e),
        }
    };
    let dev = meta.dev();
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    let sys = std::path::PathBuf::from(format!("/sys/dev/block/{major}:{minor}"));
    if !sys.exists() {
        return Ok(None);
    }
    if !sys.join("partition").exists() {
        return Ok(Some((major, minor)));
    }
    // A partition: its directory sits inside its disk's.
    let disk = std::fs::canonicalize(&sys)?.parent().map(|d| d.join("dev")).ok_or_else(|| io::Error::other("partition without a disk"))?;
    let text = std::fs::read_to_string(&disk)?;
    let parsed = text.trim().split_once(':').and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?)));
    parsed.map(Some).ok_or_else(|| io::Error::other(format!("{}: not MAJOR:MINOR", disk.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_root_file_system_is_on_a_disk_or_on_none() {
        // Whatever this machine has: a disk with a /sys entry of its own, or none (a container's overlay).
        if let Some((major, minor)) = whole_disk_of(Path::new("/var/lib/partita/some/partition")).unwrap() {
            assert!(Path::new(&format!("/sys/dev/block/{major}:{minor}")).exists());
            assert!(!Path::new(&format!("/sys/dev/block/{major}:{minor}/partition")).exists(), "a partition, not its disk");
        }
    }

    #[test]
    fn a_tmpfs_is_on_no_disk() {
        assert_eq!(whole_disk_of(Path::new("/dev/shm")).unwrap(), None);
    }
}
