//! A confined partition's view of the file system, as a list of steps its launcher carries out before it
//! enters its own user namespace (while it is still root on the host, in its own mount namespace):
//!
//! - a fresh, read-only tmpfs becomes the partition's root (`pivot_root`); in it, each at its own path and
//!   read-only, nosuid and nodev, only what [`super::view`] found it needs of the host (its program and the
//!   libraries it links, what its file binds, a few files of `/etc`), with the symbolic links on the way;
//! - over it: a fresh `/proc` of its PID namespace (with the paths runc masks masked, and the ones it makes
//!   read-only read-only), a fresh read-only `/sys` of its network namespace (no cgroup file system in it), a
//!   `/dev` with only `null`, `zero`, `full`, `random`, `urandom` and `tty`, and private writable `/tmp`,
//!   `/dev/shm` and `/run` owned by the partition's root;
//! - `/run/partita`, a tmpfs of the host root's that the partition can read and not change, holds only the
//!   partition's DDS configurations (`/run/partita/dds.xml`, `fastdds.xml`) and, in an I/O partition, its router
//!   file (`router.toml`, which `partita router reload` rewrites in place): the host's `/run/netns` and the supervisor's
//!   `/run/partita` are out of view; `/var/lib/partita` holds only the partition's own state directory, writable.
//!
//! Every path and option is prepared here as a C string, because the launcher's child may not allocate.
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// One step of building the view.
#[derive(Debug)]
pub enum Step {
    /// Creates (or empties) a file and writes `content` into it, mode 0444.
    Write { path: CString, content: Vec<u8> },
    /// mount(2); `optional`: a missing target (ENOENT) is not an error (a masked path this kernel lacks).
    Mount { source: Option<CString>, target: CString, fstype: Option<CString>, flags: libc::c_ulong, data: Option<CString>, optional: bool },
    /// mount_setattr(2) on a whole tree (AT_RECURSIVE): `set` attributes (MOUNT_ATTR_*).
    SetAttr { target: CString, set: u64 },
    Mkdir { path: CString, mode: libc::mode_t },
    /// Creates an empty file (a mount point for a bound file).
    Touch { path: CString },
    Symlink { target: CString, link: CString },
    /// Makes `new_root` the root and detaches the old one.
    PivotRoot { new_root: CString },
}

/// The device nodes a partition gets (runc's default set less the ones it needs a terminal for).
pub const DEVICES: [&str; 6] = ["null", "zero", "full", "random", "urandom", "tty"];

/// Files and directories of the host's kernel interfaces that runc masks in a container: bound over with
/// `/dev/null` (files) or an empty read-only tmpfs (directories).
pub const MASKED: [&str; 11] = [
    "/proc/acpi",
    "/proc/asound",
    "/proc/kcore",
    "/proc/keys",
    "/proc/latency_stats",
    "/proc/timer_list",
    "/proc/timer_stats",
    "/proc/sched_debug",
    "/proc/scsi",
    "/sys/firmware",
    "/sys/devices/virtual/powercap",
];

/// Paths runc makes read-only in a container's `/proc`.
pub const READ_ONLY: [&str; 5] = ["/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"];

/// Places of the host a confined partition does not see: its own are mounted over them.
pub const PRIVATE: [&str; 4] = ["/tmp", "/run", "/dev", "/var/lib/partita"];

/// The private place `path` (absolute) lies under, if any: a program there is bound at [`PROGRAM`].
pub fn hidden_place(path: &Path) -> Option<&'static str> {
    PRIVATE.iter().copied().find(|p| path.starts_with(p))
}

/// Where the partition finds its DDS configuration.
pub const DDS_CONFIG: &str = "/run/partita/dds.xml";
/// Where the partition finds its Fast DDS profile.
pub const FASTDDS_PROFILE: &str = "/run/partita/fastdds.xml";
/// Where an I/O partition's routing service finds its configuration.
pub const ROUTER_FILE: &str = "/run/partita/router.toml";
/// The options of the partition's `/run/partita`: its configurations are a few KiB, a large route table a few
/// hundred; a rewrite of the router file holds the old and the new one for a moment. Only the host root writes
/// there, and a tmpfs takes memory only for what is written.
pub const RUN_PARTITA_TMPFS: &str = "mode=755,size=16m";
/// Where a partition's program is bound when it lies in a place the partition does not see ([`PRIVATE`]): the
/// partita binary of a clone under /tmp, for one.
pub const PROGRAM: &str = "/run/partita/program";
/// Where a VM partition's runner finds its guest's per-launch archive.
pub const GUEST_ARCHIVE: &str = "/run/partita/guest.cpio";
/// Where a VM partition's runner finds the guest kernel its system file names (`vm.kernel`).
pub const GUEST_KERNEL: &str = "/run/partita/guest.kernel";
/// Where a VM partition's runner finds the archive its system file adds to the guest (`vm.initramfs`).
pub const GUEST_INITRAMFS: &str = "/run/partita/guest.initramfs";

/// What the view is built from.
#[derive(Debug, Clone)]
pub struct View<'a> {
    /// An empty directory on the host the view is assembled in before it becomes the root.
    pub root: &'a Path,
    /// The partition's host uid (and gid): the owner of its writable directories.
    pub uid: u32,
    /// Its state directory (the same path on the host and inside).
    pub state_dir: &'a Path,
    /// A device node for KVM owned by the partition's uid, bound at `/dev/kvm` (a VM partition under hardware
    /// virtualization; the host's own node is root's alone).
    pub kvm: Option<&'a Path>,
    /// A VM partition's files on the host, each bound read-only (not executable) where its runner finds it:
    /// the per-launch archive at [`GUEST_ARCHIVE`], the system file's kernel and archive at [`GUEST_KERNEL`] and
    /// [`GUEST_INITRAMFS`] (wherever they lie on the host, a place the partition does not see included).
    pub guest_files: &'a [(PathBuf, &'static str)],
    /// The program on the host when it lies in a [`PRIVATE`] place, bound read-only (and executable) at [`PROGRAM`].
    pub program: Option<&'a Path>,
    /// What of the host it sees, each at its own path ([`super::view::seen`]).
    pub seen: &'a super::view::Seen,
    /// Files written into its `/run/partita` (its DDS configurations): `(path inside, content)`.
    pub writes: &'a [(&'static str, Vec<u8>)],
}

fn c(p: impl AsRef<Path>) -> CString {
    CString::new(p.as_ref().as_os_str().as_bytes()).expect("partita's paths hold no NUL byte")
}

fn s(text: &str) -> CString {
    CString::new(text).expect("no NUL byte")
}

/// `path` (absolute) below the view's root.
fn under(root: &Path, path: impl AsRef<Path>) -> PathBuf {
    root.join(path.as_ref().strip_prefix("/").unwrap_or(path.as_ref()))
}

/// The steps, in order, ending with the pivot into the view.
pub fn steps(v: &View) -> Vec<Step> {
    let r = v.root;
    let at = |p: &str| c(under(r, p));
    let owned = |mode: &str| Some(s(&format!("mode={mode},uid={0},gid={0}", v.uid)));
    let nosuid_nodev = libc::MS_NOSUID | libc::MS_NODEV;
    let mount = |source: Option<CString>, target: CString, fstype: Option<&str>, flags: libc::c_ulong, data: Option<CString>| Step::Mount {
        source,
        target,
        fstype: fstype.map(s),
        flags,
        data,
        optional: false,
    };
    const ROOT_TMPFS: &str = "mode=755,size=256k";
    let mut out = vec![
        // Nothing mounted from here on reaches the host's mount namespace.
        mount(None, s("/"), None, libc::MS_REC | libc::MS_PRIVATE, None),
        mount(Some(s("tmpfs")), c(r), Some("tmpfs"), nosuid_nodev, Some(s(ROOT_TMPFS))),
    ];
    // The directories on the way to each path it sees, once each.
    let mut made: std::collections::BTreeSet<PathBuf> = std::collections::BTreeSet::new();
    let mut mkdirs = |out: &mut Vec<Step>, path: &Path| {
        let mut dir = PathBuf::from("/");
        for part in path.components().skip(1) {
            dir.push(part);
            if made.insert(dir.clone()) {
                out.push(Step::Mkdir { path: c(under(r, &dir)), mode: 0o755 });
            }
        }
    };
    for (link, target) in &v.seen.links {
        if let Some(parent) = link.parent() {
            mkdirs(&mut out, parent);
        }
        out.push(Step::Symlink { target: c(target), link: c(under(r, link)) });
    }
    for host in &v.seen.binds {
        if let Some(parent) = host.parent() {
            mkdirs(&mut out, parent);
        }
        if host.is_dir() {
            mkdirs(&mut out, host);
            out.push(mount(Some(c(host)), c(under(r, host)), None, libc::MS_BIND | libc::MS_REC, None));
            out.push(Step::SetAttr { target: c(under(r, host)), set: libc::MOUNT_ATTR_RDONLY | libc::MOUNT_ATTR_NOSUID | libc::MOUNT_ATTR_NODEV });
        } else {
            out.push(Step::Touch { path: c(under(r, host)) });
            out.push(mount(Some(c(host)), c(under(r, host)), None, libc::MS_BIND, None));
            out.push(mount(None, c(under(r, host)), None, libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY | nosuid_nodev, None));
        }
    }
    let state_root = Path::new(partita_system::confinement::STATE_ROOT);
    for place in [Path::new("/proc"), Path::new("/sys"), Path::new("/dev"), Path::new("/tmp"), Path::new("/run"), state_root] {
        mkdirs(&mut out, place);
    }
    out.extend([
        mount(Some(s("proc")), at("/proc"), Some("proc"), nosuid_nodev | libc::MS_NOEXEC, None),
        mount(Some(s("sysfs")), at("/sys"), Some("sysfs"), nosuid_nodev | libc::MS_NOEXEC | libc::MS_RDONLY, None),
        mount(Some(s("tmpfs")), at("/dev"), Some("tmpfs"), libc::MS_NOSUID | libc::MS_NOEXEC, Some(s("mode=755,size=64k"))),
    ]);
    for d in DEVICES {
        let node = format!("/dev/{d}");
        out.push(Step::Touch { path: at(&node) });
        out.push(mount(Some(s(&node)), at(&node), None, libc::MS_BIND, None));
    }
    if let Some(kvm) = v.kvm {
        out.push(Step::Touch { path: at("/dev/kvm") });
        out.push(mount(Some(c(kvm)), at("/dev/kvm"), None, libc::MS_BIND, None));
    }
    for (link, target) in [("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"), ("stderr", "/proc/self/fd/2")] {
        out.push(Step::Symlink { target: s(target), link: at(&format!("/dev/{link}")) });
    }
    out.push(Step::Mkdir { path: at("/dev/shm"), mode: 0o755 });
    out.push(mount(Some(s("tmpfs")), at("/dev/shm"), Some("tmpfs"), nosuid_nodev, owned("1777")));
    out.push(mount(None, at("/dev"), None, libc::MS_REMOUNT | libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NOEXEC, Some(s("mode=755,size=64k"))));
    out.push(mount(Some(s("tmpfs")), at("/tmp"), Some("tmpfs"), nosuid_nodev, owned("1777")));
    out.push(mount(Some(s("tmpfs")), at("/run"), Some("tmpfs"), nosuid_nodev | libc::MS_NOEXEC, owned("755")));
    // /run/partita: a tmpfs of its own, the host root's (mode 755: the partition, whose root is not the host's,
    // reads it and cannot add, remove or rename a name in it), mounted on the partition's /run so that the
    // partition, which owns /run, cannot rename it away either (a mount point is busy). The supervisor rewrites
    // the router file in it while the partition runs (`partita router reload`, crate::router_reload).
    let guest = v.guest_files.iter().map(|(h, i)| (Some(h.as_path()), *i, libc::MS_NOEXEC));
    let files: Vec<_> = [(v.program, PROGRAM, 0)].into_iter().chain(guest).filter_map(|(h, i, x)| Some((h?, i, x))).collect();
    if !v.writes.is_empty() || !files.is_empty() {
        out.push(Step::Mkdir { path: at("/run/partita"), mode: 0o755 });
        out.push(mount(Some(s("tmpfs")), at("/run/partita"), Some("tmpfs"), nosuid_nodev | libc::MS_NOEXEC, Some(s(RUN_PARTITA_TMPFS))));
    }
    // Its DDS configurations, written in (root's, read-only for it): no host path shows in its mount table.
    for (inside, content) in v.writes {
        out.push(Step::Write { path: at(inside), content: content.clone() });
    }
    // Files of the host bound read-only under /run/partita (the program one executable, the others not).
    for (host, inside, noexec) in files {
        out.push(Step::Touch { path: at(inside) });
        out.push(mount(Some(c(host)), at(inside), None, libc::MS_BIND, None));
        out.push(mount(None, at(inside), None, libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY | nosuid_nodev | noexec, None));
    }
    // /var/lib/partita: only this partition's state directory, writable.
    out.push(mount(Some(s("tmpfs")), c(under(r, state_root)), Some("tmpfs"), nosuid_nodev | libc::MS_NOEXEC, Some(s("mode=755,size=64k"))));
    let mut dir = state_root.to_path_buf();
    for part in v.state_dir.strip_prefix(state_root).unwrap_or(v.state_dir).components() {
        dir.push(part);
        out.push(Step::Mkdir { path: c(under(r, &dir)), mode: 0o755 });
    }
    out.push(mount(Some(c(v.state_dir)), c(under(r, v.state_dir)), None, libc::MS_BIND, None));
    out.push(mount(None, c(under(r, v.state_dir)), None, libc::MS_REMOUNT | libc::MS_BIND | nosuid_nodev, None));
    out.push(mount(None, c(under(r, state_root)), None, libc::MS_REMOUNT | libc::MS_RDONLY | nosuid_nodev | libc::MS_NOEXEC, Some(s("mode=755,size=64k"))));
    for path in MASKED {
        let optional = true;
        if Path::new(path).is_dir() {
            out.push(Step::Mount { source: Some(s("tmpfs")), target: at(path), fstype: Some(s("tmpfs")), flags: libc::MS_RDONLY | nosuid_nodev | libc::MS_NOEXEC, data: Some(s("size=0")), optional });
        } else {
            out.push(Step::Mount { source: Some(s("/dev/null")), target: at(path), fstype: None, flags: libc::MS_BIND, data: None, optional });
        }
    }
    for path in READ_ONLY {
        out.push(Step::Mount { source: Some(at(path)), target: at(path), fstype: None, flags: libc::MS_BIND | libc::MS_REC, data: None, optional: true });
        out.push(Step::Mount { source: None, target: at(path), fstype: None, flags: libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY | nosuid_nodev | libc::MS_NOEXEC, data: None, optional: true });
    }
    // The root itself read-only from here on (what is mounted on it keeps its own options).
    out.push(mount(None, c(r), None, libc::MS_REMOUNT | libc::MS_RDONLY | nosuid_nodev, Some(s(ROOT_TMPFS))));
    out.push(Step::PivotRoot { new_root: c(r) });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn targets(steps: &[Step]) -> Vec<String> {
        steps
            .iter()
            .filter_map(|s| match s {
                Step::Mount { target, .. } => Some(target.to_string_lossy().into_owned()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn programs_in_private_places_are_found_out() {
        assert_eq!(hidden_place(Path::new("/tmp/partita")), Some("/tmp"));
        assert_eq!(hidden_place(Path::new("/var/lib/partita/s/p/x")), Some("/var/lib/partita"));
        assert_eq!(hidden_place(Path::new("/usr/bin/partita")), None);
        assert_eq!(hidden_place(Path::new("/tmpfoo/partita")), None, "a component, not a prefix of the text");
    }

    #[test]
    fn the_view_is_a_fresh_root_with_what_it_sees_read_only_then_private_writable_places_then_the_pivot() {
        let seen = crate::launch::view::Seen { binds: vec![PathBuf::from("/usr/bin/dash"), PathBuf::from("/usr/lib")], links: vec![(PathBuf::from("/bin"), PathBuf::from("usr/bin"))] };
        let writes = [(DDS_CONFIG, b"<CycloneDDS/>".to_vec())];
        let v = View { root: Path::new("/run/x/p.root"), uid: 7, state_dir: Path::new("/var/lib/partita/s/p"), kvm: None, guest_files: &[], program: None, seen: &seen, writes: &writes };
        let steps = steps(&v);
        assert!(matches!(steps.last(), Some(Step::PivotRoot { new_root }) if new_root.to_str() == Ok("/run/x/p.root")));
        let t = targets(&steps);
        assert_eq!(t[1], "/run/x/p.root", "a fresh root: {t:?}");
        let root_bound = steps.iter().any(|s| matches!(s, Step::Mount { source: Some(src), flags, .. } if src.to_str() == Ok("/") && flags & libc::MS_BIND != 0));
        assert!(!root_bound, "the host's root is not bound");
        assert!(steps.iter().any(|s| matches!(s, Step::SetAttr { target, set } if target.to_str() == Ok("/run/x/p.root/usr/lib") && set & libc::MOUNT_ATTR_RDONLY != 0)), "a bound directory is read-only");
        assert!(steps.iter().any(|s| matches!(s, Step::Symlink { link, target } if link.to_str() == Ok("/run/x/p.root/bin") && target.to_str() == Ok("usr/bin"))), "the links on the way are made");
        let write = steps.iter().position(|s| matches!(s, Step::Write { path, .. } if path.to_str() == Ok("/run/x/p.root/run/partita/dds.xml"))).expect("the DDS configuration is written in");
        // into a tmpfs of the host root's on /run/partita (a mount point the partition cannot rename away), mounted
        // after /run and before the write
        let own = |s: &Step, at: &str| matches!(s, Step::Mount { target, fstype: Some(f), .. } if target.to_str() == Ok(at) && f.to_str() == Ok("tmpfs"));
        let run_partita = steps.iter().position(|s| own(s, "/run/x/p.root/run/partita")).expect("/run/partita is a tmpfs of its own");
        assert!(steps.iter().position(|s| own(s, "/run/x/p.root/run")).unwrap() < run_partita && run_partita < write);
        assert!(matches!(&steps[run_partita], Step::Mount { data: Some(d), .. } if !d.to_string_lossy().contains("uid=")), "the host root's, not the partition's");
        let root_ro = steps.iter().rposition(|s| matches!(s, Step::Mount { target, flags, .. } if target.to_str() == Ok("/run/x/p.root") && flags & libc::MS_RDONLY != 0)).expect("the root is made read-only");
        assert_eq!(root_ro + 2, steps.len(), "last before the pivot");
        for needed in ["/run/x/p.root/proc", "/run/x/p.root/sys", "/run/x/p.root/run", "/run/x/p.root/var/lib/partita/s/p", "/run/x/p.root/usr/bin/dash", "/run/x/p.root/usr/lib", "/run/x/p.root/proc/sys"] {
            assert!(t.iter().any(|x| x == needed), "no mount at {needed}: {t:?}");
        }
        // the writable places belong to the partition's root
        let data: Vec<String> = steps
            .iter()
            .filter_map(|s| match s {
                Step::Mount { data: Some(d), .. } => Some(d.to_string_lossy().into_owned()),
                _ => None,
            })
            .collect();
        assert!(data.iter().any(|d| d == "mode=1777,uid=7,gid=7"), "{data:?}");
    }
}
