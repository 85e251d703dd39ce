//! What a partition may do on the host, as the system file grants it: the host user its root is, the
//! capabilities it keeps inside its own user namespace, and the system calls its seccomp filter lets through.
//! The supervisor's launcher enforces it (`crates/supervisor/src/launch`); `docs/security.md` is the threat
//! model and the comparison with container runtimes' defaults.
use std::path::PathBuf;

/// Where each partition's private writable directory lives on the host (`<root>/<system>/<partition>`), kept
/// across runs (the recorder's ring). Inside the partition it has the same path.
pub const STATE_ROOT: &str = "/var/lib/partita";

/// A partition's root (uid 0 inside its user namespace) is host uid `base + 65536 * k` by default, `k` the
/// partition's index in the system, with 65536 ids mapped: far above the ids of a machine's users and of the
/// subordinate id ranges (`/etc/subuid`) handed to them.
pub const DEFAULT_UID_BASE: u32 = 1_000_000_000;
/// Ids mapped into each partition's user namespace (0..65536 inside).
pub const UID_RANGE: u32 = 65_536;

/// How one partition is confined.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Confinement {
    /// The host uid (and gid) that root inside the partition is; `UID_RANGE` ids are mapped from it.
    pub uid: u32,
    /// Capabilities kept, by their number (`CAP_NET_BIND_SERVICE` = 10): they act only inside the partition's
    /// own user namespace, never on the host, the network or the mounts (those namespaces belong to the host).
    pub capabilities: Vec<u8>,
    /// System calls of the default profile let through for this partition (names from [`SECCOMP_KILL`] and
    /// [`SECCOMP_ERRNO`]).
    pub seccomp_allow: Vec<String>,
    /// The partition's private writable directory on the host, and inside it.
    pub state_dir: PathBuf,
    /// It may lock its memory (`mlockall`), up to its memory limit (RLIMIT_MEMLOCK): what a real-time program
    /// does so that page faults do not delay it. Locked memory is charged to its own cgroup.
    pub lock_memory: bool,
    /// Its limits on the kernel's per-user counts that are not cgroup-controlled (`limits`).
    pub limits: KernelLimits,
    /// The size of its state directory (`state`): a file system of its own, so writing past it fails inside.
    pub state_quota: StateQuota,
    /// What of the host it sees beyond its program and the libraries it links (`binds`): absolute paths of
    /// files and directories, or programs found in `PATH`, each seen read-only at its own path.
    pub binds: Vec<String>,
}

/// A partition's limits on the kernel's per-user counts (`limits = { ... }`). The partition's user namespace
/// belongs to its own host uid, so every per-user count of what runs inside is charged to that uid, never to
/// host root's or another partition's: inotify instances and watches within the host's per-user limits
/// (`fs.inotify.max_user_instances`, `max_user_watches`), and these, set as its resource limits when its
/// namespace is made (which caps the namespace as a whole).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelLimits {
    /// Bytes of POSIX message queues (RLIMIT_MSGQUEUE).
    pub message_queue_bytes: u64,
    /// Signals queued to its processes and not yet taken (RLIMIT_SIGPENDING).
    pub queued_signals: u64,
}

/// What a partition gets without `limits`: Linux's default message-queue bytes, and room for a thousand
/// queued signals (a program with many POSIX timers needs one each).
pub const DEFAULT_KERNEL_LIMITS: KernelLimits = KernelLimits { message_queue_bytes: 819_200, queued_signals: 1024 };

/// The size of a partition's state directory (`state = { size, inodes }`): an ext4 image of that size, made
/// once (allocated in full, so writing inside never takes more of the host's disk) and mounted at the
/// directory while the system is up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StateQuota {
    pub bytes: u64,
    pub inodes: u64,
}

/// What a partition's state directory holds without `state`: room for the paper's recorder ring (16 MiB)
/// and a program's files.
pub const DEFAULT_STATE_QUOTA: StateQuota = StateQuota { bytes: 64 << 20, inodes: 4096 };
/// The smallest state directory accepted (ext4 with a journal needs some room of its own).
pub const STATE_QUOTA_FLOOR: u64 = 4 << 20;

/// System calls (or, for the names with a `/`, a system call with certain arguments) that a partition has no
/// business making: the default profile hands each attempt to the supervisor, which denies it (EPERM) and
/// whose health monitor logs it. Each one is refused by the kernel anyway to a partition without capabilities
/// on the host; the filter makes the attempt visible and removes the kernel code behind it from a partition's
/// reach. `process_madvise` is here with the other calls that act on another process's memory
/// (`process_vm_readv`, `pidfd_getfd`): its advice (MADV_COLD, MADV_PAGEOUT) would push a neighbour's working
/// set out, which the kernel refuses without CAP_SYS_NICE on the host; on its own memory a program has
/// `madvise`, so an attempt is worth a log line.
pub const SECCOMP_KILL: &[&str] = &[
    "acct",
    "clone/namespaces",
    "delete_module",
    "finit_module",
    "fsconfig",
    "fsmount",
    "fsopen",
    "fspick",
    "init_module",
    "ioperm",
    "iopl",
    "kcmp",
    "kexec_file_load",
    "kexec_load",
    "lookup_dcookie",
    "mknod/device",
    "mknodat/device",
    "mount",
    "mount_setattr",
    "move_mount",
    "name_to_handle_at",
    "nfsservctl",
    "open_by_handle_at",
    "open_tree",
    "pidfd_getfd",
    "pivot_root",
    "process_madvise",
    "process_vm_readv",
    "process_vm_writev",
    "ptrace",
    "quotactl",
    "quotactl_fd",
    "reboot",
    "setdomainname",
    "sethostname",
    "setns",
    "settimeofday",
    "clock_settime",
    "swapoff",
    "swapon",
    "syslog",
    "umount2",
    "unshare",
    "uselib",
    "userfaultfd",
    "vhangup",
    "_sysctl",
];

/// System calls the default profile makes fail with EPERM (`clone3` with ENOSYS, so that the C library falls
/// back to `clone`, whose flags the filter can see): ordinary programs probe for some of these and carry on
/// without them.
/// The NUMA calls (`get_mempolicy`, `mbind`, `migrate_pages`, `move_pages`, `set_mempolicy`,
/// `set_mempolicy_home_node`) place memory on nodes the partition was not given; container runtimes grant
/// them only with CAP_SYS_NICE. `personality/other` is any personality but the plain Linux ones a C library
/// queries (0, 8, 0x20000, 0x20008, 0xffffffff): turning address randomization off, for one. `socket/vsock`
/// is a socket of the AF_VSOCK family: a channel to the hypervisor or to other virtual machines of the host
/// that no network namespace confines. `sync` and `syncfs` write back every dirty page of the machine (or of
/// the host file system a partition's state directory lives on), the other partitions' included: one call
/// is kernel work on the partition's CPU that no freeze stops (10 ms of executor lateness at p99 in
/// `partita bench isolation`); a partition makes its own data durable with `fsync` or `fdatasync`, whose
/// writes its disk limit throttles. The C library's `sync()` returns nothing, so a program that calls it
/// carries on.
/// `memfd_secret` makes memory that the kernel takes out of its own direct map: a page of it splits the large
/// pages of the direct map, which every partition's kernel work goes through (more TLB misses for all), and
/// it stays locked in memory. Docker's profile allows it; here it fails with EPERM rather than being logged,
/// because a program that probes for it falls back to ordinary locked memory. `socket/alg` is a socket of
/// the AF_ALG family, the kernel's crypto API: kernel code no partition needs (OpenSSL computes in the
/// process). `chroot` needs CAP_SYS_CHROOT; the LSM attribute calls (`lsm_get_self_attr`,
/// `lsm_set_self_attr`, `lsm_list_modules`) are probed by security libraries, which carry on without them;
/// `afs_syscall`, `create_module`, `get_kernel_syms`, `getpmsg`, `putpmsg`, `query_module`, `security`,
/// `tuxcall` and `vserver` are numbers the kernel no longer implements. With these, the two lists hold every
/// call Docker's default profile refuses to a container without capabilities ([`DOCKER_REFUSED`]).
pub const SECCOMP_ERRNO: &[&str] = &[
    "add_key",
    "adjtimex",
    "afs_syscall",
    "bpf",
    "chroot",
    "clock_adjtime",
    "clone3",
    "create_module",
    "fanotify_init",
    "get_kernel_syms",
    "get_mempolicy",
    "getpmsg",
    "io_uring_enter",
    "io_uring_register",
    "io_uring_setup",
    "ioctl/TIOCSTI",
    "ioctl/tun-admin",
    "keyctl",
    "lsm_get_self_attr",
    "lsm_list_modules",
    "lsm_set_self_attr",
    "mbind",
    "memfd_secret",
    "migrate_pages",
    "move_pages",
    "perf_event_open",
    "personality/other",
    "putpmsg",
    "query_module",
    "request_key",
    "security",
    "set_mempolicy",
    "set_mempolicy_home_node",
    "socket/alg",
    "socket/vsock",
    "sync",
    "syncfs",
    "sysfs",
    "tuxcall",
    "ustat",
    "vserver",
];

/// The system calls Docker's default seccomp profile refuses to a container without capabilities on x86_64, and
/// `memfd_secret`: one name a line, `#` starting a comment; the file's header names its source (a commit of
/// moby/profiles) and how the list was computed. The supervisor's seccomp tests run the compiled profile on
/// each of them.
pub const DOCKER_REFUSED: &str = include_str!("docker-refused.txt");

/// The names of [`DOCKER_REFUSED`], in the file's order.
pub fn docker_refused() -> Vec<&'static str> {
    DOCKER_REFUSED.lines().map(|l| l.split('#').next().unwrap_or("").trim()).filter(|n| !n.is_empty()).collect()
}

/// The profile's name for every system call newer than the profile (numbered above [`SECCOMP_NEWEST`]): they
/// fail with ENOSYS, as a kernel without them answers, so a program falls back to what it used before and a
/// new kernel interface reaches a partition only once the profile has looked at it.
pub const SECCOMP_NEWER: &str = "newer";

/// The newest system call the profile knows (x86_64: 462, `mseal`, Linux 6.10).
pub const SECCOMP_NEWEST: u32 = 462;

/// Whether `name` names a system call of the default profile (an entry a system file may let through).
pub fn is_seccomp_name(name: &str) -> bool {
    SECCOMP_KILL.contains(&name) || SECCOMP_ERRNO.contains(&name) || name == SECCOMP_NEWER
}

/// The number of a capability named as in capabilities(7) (`CAP_NET_RAW`, case-insensitive, `CAP_` optional).
pub fn capability_number(name: &str) -> Option<u8> {
    let upper = name.to_ascii_uppercase();
    let full = if upper.starts_with("CAP_") { upper } else { format!("CAP_{upper}") };
    full.parse::<caps::Capability>().ok().map(|c| c.index())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lists_are_disjoint_sorted_enough_and_named_once() {
        let mut all: Vec<&str> = SECCOMP_KILL.iter().chain(SECCOMP_ERRNO).copied().collect();
        let n = all.len();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), n, "a system call is listed twice");
        assert!(is_seccomp_name("ptrace") && is_seccomp_name("clone3") && is_seccomp_name("newer") && !is_seccomp_name("read"));
    }

    #[test]
    fn the_list_of_calls_docker_refuses_is_sorted_once_each_and_holds_the_two_it_was_kept_for() {
        let names = docker_refused();
        assert!(names.len() >= 70, "{} names: the file was not read whole", names.len());
        for pair in names.windows(2) {
            assert!(pair[0] < pair[1], "docker-refused.txt: {:?} before {:?} (sorted, each once)", pair[0], pair[1]);
        }
        for name in &names {
            assert!(name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'), "docker-refused.txt: {name:?} is not a system call name");
        }
        for name in ["memfd_secret", "process_madvise", "mount", "clone3"] {
            assert!(names.contains(&name), "docker-refused.txt lacks {name}");
        }
        let header: Vec<&str> = DOCKER_REFUSED.lines().take_while(|l| l.starts_with('#')).collect();
        assert!(header.iter().any(|l| l.contains("https://github.com/moby/profiles/blob/")), "the header names the source");
    }

    #[test]
    fn capabilities_are_named_as_in_the_manual() {
        assert_eq!(capability_number("CAP_NET_BIND_SERVICE"), Some(10));
        assert_eq!(capability_number("net_raw"), Some(13));
        assert_eq!(capability_number("CAP_SYS_ADMIN"), Some(21));
        assert_eq!(capability_number("CAP_FLY"), None);
    }
}
