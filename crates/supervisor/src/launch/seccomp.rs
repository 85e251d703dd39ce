//! A partition's seccomp filters, compiled here (with the `seccompiler` crate) and installed by the launcher's
//! child just before `execve`. The profile is partita's default (`partita_system::confinement`): a list of
//! system calls a partition has no business making, one that fails with EPERM (`clone3` with ENOSYS), and
//! every system call newer than the profile, which fails with ENOSYS; everything else is allowed. The kernel applies every installed filter and takes the strictest answer, so
//! the lists are separate filters.
//!
//! The first list is not answered by the kernel: its filter hands each attempt to a listener (a seccomp user
//! notification), which the supervisor's health monitor holds. It answers EPERM and logs the attempt as a
//! `seccomp` event (the process and the system call; at most 20 a second per partition, the rest counted).
use partita_system::confinement::{SECCOMP_ERRNO, SECCOMP_KILL, SECCOMP_NEWER, SECCOMP_NEWEST};
use seccompiler::{BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule};
use std::collections::BTreeMap;

/// Namespace flags a partition may not pass to `clone`.
const NAMESPACE_FLAGS: [libc::c_int; 8] = [
    libc::CLONE_NEWNS,
    libc::CLONE_NEWUTS,
    libc::CLONE_NEWIPC,
    libc::CLONE_NEWUSER,
    libc::CLONE_NEWPID,
    libc::CLONE_NEWNET,
    libc::CLONE_NEWCGROUP,
    0x80, // CLONE_NEWTIME
];

/// The requests on a tap descriptor that change the interface rather than use it: a VM partition's QEMU
/// holds its taps (to read and write frames, and set their offloads), and the kernel checks no capability for
/// these: without the filter it could make its tap outlive the system (persist), hand it to another owner,
/// change its link type, index or MAC address (a tap descriptor answers `SIOCSIFHWADDR` too), or attach
/// programs to it. QEMU, given its taps as descriptors, makes none of these requests.
const TUN_ADMIN: [u64; 11] = [
    0x4004_54ca, // TUNSETIFF
    0x4004_54cb, // TUNSETPERSIST
    0x4004_54cc, // TUNSETOWNER
    0x4004_54cd, // TUNSETLINK
    0x4004_54ce, // TUNSETGROUP
    0x4010_54d5, // TUNATTACHFILTER
    0x4004_54d9, // TUNSETQUEUE
    0x4004_54da, // TUNSETIFINDEX
    0x8004_54e0, // TUNSETSTEERINGEBPF
    0x8004_54e1, // TUNSETFILTEREBPF
    0x8924,      // SIOCSIFHWADDR
];

/// The personalities a C library sets or queries: PER_LINUX, PER_LINUX32, UNAME26 alone and with PER_LINUX32,
/// and 0xffffffff (which only reads the current one). Every other flag changes how the kernel treats the
/// process (ADDR_NO_RANDOMIZE, READ_IMPLIES_EXEC, …).
const PLAIN_PERSONALITIES: [u64; 5] = [0, 0x8, 0x2_0000, 0x2_0008, 0xffff_ffff];

/// What a profile entry matches: a system call, possibly only with some arguments.
fn matcher(name: &str) -> Option<(i64, Vec<SeccompRule>)> {
    let any = Vec::new;
    let arg_masked = |arg: u8, mask: u64, value: u64| SeccompCondition::new(arg, SeccompCmpArgLen::Qword, SeccompCmpOp::MaskedEq(mask), value).expect("argument 0..5");
    let rule = |conds: Vec<SeccompCondition>| SeccompRule::new(conds).expect("a rule with conditions");
    let device = |arg: u8| {
        let fmt = libc::S_IFMT as u64;
        vec![rule(vec![arg_masked(arg, fmt, libc::S_IFCHR as u64)]), rule(vec![arg_masked(arg, fmt, libc::S_IFBLK as u64)])]
    };
    Some(match name {
        "clone/namespaces" => (libc::SYS_clone, NAMESPACE_FLAGS.iter().map(|f| rule(vec![arg_masked(0, *f as u64, *f as u64)])).collect()),
        "mknod/device" => (libc::SYS_mknod, device(1)),
        "mknodat/device" => (libc::SYS_mknodat, device(2)),
        "socket/vsock" => (libc::SYS_socket, vec![rule(vec![SeccompCondition::new(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, libc::AF_VSOCK as u64).expect("argument 0")])]),
        "ioctl/TIOCSTI" => (libc::SYS_ioctl, vec![rule(vec![arg_masked(1, 0xffff_ffff, libc::TIOCSTI)])]),
        "ioctl/tun-admin" => (libc::SYS_ioctl, TUN_ADMIN.iter().map(|r| rule(vec![arg_masked(1, 0xffff_ffff, *r)])).collect()),
        "personality/other" => {
            let ne = |v: u64| SeccompCondition::new(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Ne, v).expect("argument 0");
            (libc::SYS_personality, vec![rule(PLAIN_PERSONALITIES.iter().map(|p| ne(*p)).collect())])
        }
        _ => (number(name)?, any()),
    })
}

/// The number of a system call of the profile (x86_64).
pub fn number(name: &str) -> Option<i64> {
    Some(match name {
        "acct" => libc::SYS_acct,
        "add_key" => libc::SYS_add_key,
        "adjtimex" => libc::SYS_adjtimex,
        "bpf" => libc::SYS_bpf,
        "clock_adjtime" => libc::SYS_clock_adjtime,
        "clock_settime" => libc::SYS_clock_settime,
        "clone3" => libc::SYS_clone3,
        "delete_module" => libc::SYS_delete_module,
        "fanotify_init" => libc::SYS_fanotify_init,
        "finit_module" => libc::SYS_finit_module,
        "fsconfig" => libc::SYS_fsconfig,
        "get_mempolicy" => libc::SYS_get_mempolicy,
        "fsmount" => libc::SYS_fsmount,
        "fsopen" => libc::SYS_fsopen,
        "fspick" => libc::SYS_fspick,
        "init_module" => libc::SYS_init_module,
        "io_uring_enter" => libc::SYS_io_uring_enter,
        "io_uring_register" => libc::SYS_io_uring_register,
        "io_uring_setup" => libc::SYS_io_uring_setup,
        "ioperm" => libc::SYS_ioperm,
        "iopl" => libc::SYS_iopl,
        "kcmp" => libc::SYS_kcmp,
        "kexec_file_load" => libc::SYS_kexec_file_load,
        "kexec_load" => libc::SYS_kexec_load,
        "keyctl" => libc::SYS_keyctl,
        "lookup_dcookie" => libc::SYS_lookup_dcookie,
        "mbind" => libc::SYS_mbind,
        "migrate_pages" => libc::SYS_migrate_pages,
        "move_pages" => libc::SYS_move_pages,
        "mount" => libc::SYS_mount,
        "mount_setattr" => libc::SYS_mount_setattr,
        "move_mount" => libc::SYS_move_mount,
        "name_to_handle_at" => libc::SYS_name_to_handle_at,
        "nfsservctl" => libc::SYS_nfsservctl,
        "open_by_handle_at" => libc::SYS_open_by_handle_at,
        "open_tree" => libc::SYS_open_tree,
        "perf_event_open" => libc::SYS_perf_event_open,
        "pidfd_getfd" => libc::SYS_pidfd_getfd,
        "pivot_root" => libc::SYS_pivot_root,
        "process_vm_readv" => libc::SYS_process_vm_readv,
        "process_vm_writev" => libc::SYS_process_vm_writev,
        "ptrace" => libc::SYS_ptrace,
        "quotactl" => libc::SYS_quotactl,
        "quotactl_fd" => libc::SYS_quotactl_fd,
        "reboot" => libc::SYS_reboot,
        "request_key" => libc::SYS_request_key,
        "set_mempolicy" => libc::SYS_set_mempolicy,
        "set_mempolicy_home_node" => libc::SYS_set_mempolicy_home_node,
        "setdomainname" => libc::SYS_setdomainname,
        "sethostname" => libc::SYS_sethostname,
        "setns" => libc::SYS_setns,
        "settimeofday" => libc::SYS_settimeofday,
        "swapoff" => libc::SYS_swapoff,
        "swapon" => libc::SYS_swapon,
        "sync" => libc::SYS_sync,
        "syncfs" => libc::SYS_syncfs,
        "sysfs" => libc::SYS_sysfs,
        "syslog" => libc::SYS_syslog,
        "umount2" => libc::SYS_umount2,
        "unshare" => libc::SYS_unshare,
        "uselib" => libc::SYS_uselib,
        "userfaultfd" => libc::SYS_userfaultfd,
        "ustat" => libc::SYS_ustat,
        "vhangup" => libc::SYS_vhangup,
        "_sysctl" => libc::SYS__sysctl,
        _ => return None,
    })
}

/// One filter: every entry of `names` not in `allow` gets `action`.
fn filter(names: &[&str], allow: &[String], action: SeccompAction) -> Result<Option<BpfProgram>, String> {
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for name in names.iter().filter(|n| !allow.iter().any(|a| a == *n)) {
        let (nr, mut r) = matcher(name).ok_or_else(|| format!("no system call number for {name:?} on this architecture"))?;
        rules.entry(nr).or_default().append(&mut r);
    }
    if rules.is_empty() {
        return Ok(None);
    }
    let arch = std::env::consts::ARCH.try_into().map_err(|e| format!("seccomp on {}: {e:?}", std::env::consts::ARCH))?;
    let f = SeccompFilter::new(rules, SeccompAction::Allow, action, arch).map_err(|e| e.to_string())?;
    BpfProgram::try_from(f).map(Some).map_err(|e| e.to_string())
}

/// The filter that answers ENOSYS to every system call numbered above `newest` (x86_64's own numbering; the
/// x32 ABI's calls, numbered from 0x40000000, are above it too). Written by hand: seccompiler matches numbers
/// one by one, not a range.
fn newer_than(newest: u32) -> Result<BpfProgram, String> {
    use seccompiler::sock_filter;
    if std::env::consts::ARCH != "x86_64" {
        return Err(format!("the profile's newest system call is numbered for x86_64, not {}", std::env::consts::ARCH));
    }
    let st = |code: u32, k: u32| sock_filter { code: code as u16, jt: 0, jf: 0, k };
    let jump = |code: u32, k: u32, jt: u8, jf: u8| sock_filter { code: code as u16, jt, jf, k };
    // seccomp_data: nr at offset 0, arch at offset 4.
    Ok(vec![
        st(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, 4),
        jump(libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K, AUDIT_ARCH_X86_64, 0, 3),
        st(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, 0),
        jump(libc::BPF_JMP | libc::BPF_JGT | libc::BPF_K, newest, 0, 1),
        st(libc::BPF_RET | libc::BPF_K, libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32),
        st(libc::BPF_RET | libc::BPF_K, libc::SECCOMP_RET_ALLOW),
    ])
}

/// AUDIT_ARCH_X86_64 (EM_X86_64 | __AUDIT_ARCH_64BIT | __AUDIT_ARCH_LE).
const AUDIT_ARCH_X86_64: u32 = 62 | 0x8000_0000 | 0x4000_0000;

/// A partition's filters.
#[derive(Debug, Default)]
pub struct Filters {
    /// The forbidden list, whose attempts go to the supervisor (installed with a new listener).
    pub notify: Option<BpfProgram>,
    /// The EPERM and ENOSYS lists, and the one for system calls newer than the profile.
    pub others: Vec<BpfProgram>,
}

/// The filters of a partition that lets `allow` through.
pub fn filters(allow: &[String]) -> Result<Filters, String> {
    let errno: Vec<&str> = SECCOMP_ERRNO.iter().copied().filter(|n| *n != "clone3").collect();
    // seccompiler has no user-notification action: the filter is compiled with TRACE and its return
    // statements of TRACE rewritten to USER_NOTIF (no other statement returns that value).
    let notify = filter(SECCOMP_KILL, allow, SeccompAction::Trace(0))?.map(|mut p| {
        for s in p.iter_mut().filter(|s| s.code == (libc::BPF_RET | libc::BPF_K) as u16 && s.k == libc::SECCOMP_RET_TRACE) {
            s.k = libc::SECCOMP_RET_USER_NOTIF;
        }
        p
    });
    let newer = if allow.iter().any(|a| a == SECCOMP_NEWER) { None } else { Some(newer_than(SECCOMP_NEWEST)?) };
    let others = [filter(&errno, allow, SeccompAction::Errno(libc::EPERM as u32))?, filter(&["clone3"], allow, SeccompAction::Errno(libc::ENOSYS as u32))?, newer];
    Ok(Filters { notify, others: others.into_iter().flatten().collect() })
}

/// The profile's name of system call `nr` (for the health monitor's events).
pub fn name_of(nr: i64) -> Option<&'static str> {
    SECCOMP_KILL.iter().chain(SECCOMP_ERRNO).copied().find(|n| matcher(n).is_some_and(|(x, _)| x == nr))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_of_the_profile_has_a_number_here() {
        for name in SECCOMP_KILL.iter().chain(SECCOMP_ERRNO) {
            assert!(matcher(name).is_some(), "{name} has no system call number");
        }
    }

    #[test]
    fn the_default_profile_compiles_to_four_filters_and_allowing_everything_leaves_none() {
        let f = filters(&[]).unwrap();
        assert_eq!(f.others.len(), 3);
        let notify = f.notify.expect("the forbidden list");
        let ret = (libc::BPF_RET | libc::BPF_K) as u16;
        assert!(notify.iter().any(|s| s.code == ret && s.k == libc::SECCOMP_RET_USER_NOTIF), "its attempts go to the supervisor");
        assert!(!notify.iter().any(|s| s.code == ret && s.k == libc::SECCOMP_RET_TRACE));
        let all: Vec<String> = SECCOMP_KILL.iter().chain(SECCOMP_ERRNO).chain([&SECCOMP_NEWER]).map(|s| s.to_string()).collect();
        let none = filters(&all).unwrap();
        assert!(none.notify.is_none() && none.others.is_empty());
        let fewer = filters(&["ptrace".to_string()]).unwrap();
        assert!(fewer.notify.unwrap().len() < notify.len(), "letting ptrace through shortens the filter");
        assert_eq!(name_of(libc::SYS_mount), Some("mount"));
    }
}
