//! What the supervisor's cgroups and the idle pollers' cgroup both need from the cgroup file systems: where
//! each hierarchy is mounted (from `/proc/self/mountinfo`), and removing a cgroup directory whose last
//! processes are still leaving it.
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// One mounted cgroup hierarchy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupMount {
    pub mount_point: PathBuf,
    /// The v2 (unified) tree; else a v1 hierarchy.
    pub unified: bool,
    /// A v1 hierarchy's super options: its controllers (`cpu`, `cpuacct`, `memory`, …) among `rw` and the like.
    pub options: Vec<String>,
}

impl CgroupMount {
    /// Whether this v1 hierarchy carries `controller`.
    pub fn has_controller(&self, controller: &str) -> bool {
        !self.unified && self.options.iter().any(|o| o == controller)
    }
}

/// The cgroup hierarchies in `info` (the text of `/proc/self/mountinfo`), in its order.
pub fn cgroup_mounts(info: &str) -> Vec<CgroupMount> {
    let mut mounts = Vec::new();
    for line in info.lines() {
        // "... mount_point options - fstype source super_options"
        let Some((left, right)) = line.split_once(" - ") else { continue };
        let Some(mount_point) = left.split(' ').nth(4) else { continue };
        let mut r = right.split(' ');
        let (fstype, _source, super_options) = (r.next().unwrap_or(""), r.next(), r.next().unwrap_or(""));
        let unified = match fstype {
            "cgroup2" => true,
            "cgroup" => false,
            _ => continue,
        };
        let options = if unified { Vec::new() } else { super_options.split(',').map(str::to_string).collect() };
        mounts.push(CgroupMount { mount_point: PathBuf::from(mount_point), unified, options });
    }
    mounts
}

/// This process's `/proc/self/mountinfo`.
pub fn read_mountinfo() -> io::Result<String> {
    std::fs::read_to_string("/proc/self/mountinfo")
}

/// Removes the cgroup directory `dir`, retrying while it is busy (its last processes still leaving) for up to
/// `within`. A directory already gone counts as removed; any other error is returned at once.
pub fn rmdir_retrying(dir: &Path, within: Duration) -> io::Result<()> {
    let deadline = Instant::now() + within;
    loop {
        match std::fs::remove_dir(dir) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) && Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HYBRID: &str = "35 25 0:30 / /sys/fs/cgroup/memory rw,relatime shared:14 - cgroup cgroup rw,memory
36 25 0:31 / /sys/fs/cgroup/unified rw,relatime shared:15 - cgroup2 cgroup2 rw
37 25 0:32 / /sys/fs/cgroup/cpu,cpuacct rw,relatime shared:16 - cgroup cgroup rw,cpu,cpuacct
38 25 0:33 / /proc rw,relatime shared:17 - proc proc rw
";

    #[test]
    fn hierarchies_with_their_controllers_and_nothing_else() {
        let m = cgroup_mounts(HYBRID);
        assert_eq!(m.len(), 3, "{m:?}");
        assert!(m[0].has_controller("memory") && !m[0].has_controller("cpu"));
        assert!(m[1].unified && m[1].mount_point == Path::new("/sys/fs/cgroup/unified") && !m[1].has_controller("rw"));
        assert!(m[2].has_controller("cpu") && m[2].has_controller("cpuacct") && m[2].mount_point == Path::new("/sys/fs/cgroup/cpu,cpuacct"));
    }

    #[test]
    fn rmdir_retrying_removes_and_accepts_gone_but_not_other_errors() {
        let base = std::env::temp_dir().join(format!("partita-rmdir-{}", std::process::id()));
        std::fs::create_dir_all(base.join("d")).unwrap();
        rmdir_retrying(&base.join("d"), Duration::from_millis(50)).unwrap();
        assert!(!base.join("d").exists());
        rmdir_retrying(&base.join("d"), Duration::from_millis(50)).unwrap();
        // Not empty (ENOTEMPTY on a plain file system): no retry, the error at once.
        std::fs::create_dir_all(base.join("full/x")).unwrap();
        let t = Instant::now();
        assert!(rmdir_retrying(&base.join("full"), Duration::from_secs(5)).is_err());
        assert!(t.elapsed() < Duration::from_secs(1));
        std::fs::remove_dir_all(&base).unwrap();
    }
}
