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
        "socket/alg" => (libc::SYS_socket, vec![rule(vec![SeccompCondition::new(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, libc::AF_ALG as u64).expect("argument 0")])]),
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
        "afs_syscall" => libc::SYS_afs_syscall,
        "bpf" => libc::SYS_bpf,
        "chroot" => libc::SYS_chroot,
        "clock_adjtime" => libc::SYS_clock_adjtime,
        "clock_settime" => libc::SYS_clock_settime,
        "clone3" => libc::SYS_clone3,
        "create_module" => 174, // x86_64; the kernel has not implemented it since 2.6 (libc has no constant)
        "delete_module" => libc::SYS_delete_module,
        "fanotify_init" => libc::SYS_fanotify_init,
        "finit_module" => libc::SYS_finit_module,
        "fsconfig" => libc::SYS_fsconfig,
        "get_kernel_syms" => 177, // x86_64; not implemented since 2.6 (libc has no constant)
        "get_mempolicy" => libc::SYS_get_mempolicy,
        "getpmsg" => libc::SYS_getpmsg,
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
        "lsm_get_self_attr" => 459, // x86_64, Linux 6.8 (libc has no constant yet)
        "lsm_list_modules" => 461, // x86_64, Linux 6.8 (libc has no constant yet)
        "lsm_set_self_attr" => 460, // x86_64, Linux 6.8 (libc has no constant yet)
        "mbind" => libc::SYS_mbind,
        "memfd_secret" => libc::SYS_memfd_secret,
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
        "process_madvise" => libc::SYS_process_madvise,
        "process_vm_readv" => libc::SYS_process_vm_readv,
        "process_vm_writev" => libc::SYS_process_vm_writev,
        "ptrace" => libc::SYS_ptrace,
        "putpmsg" => libc::SYS_putpmsg,
        "query_module" => 178, // x86_64; not implemented since 2.6 (libc has no constant)
        "quotactl" => libc::SYS_quotactl,
        "quotactl_fd" => libc::SYS_quotactl_fd,
        "reboot" => libc::SYS_reboot,
        "request_key" => libc::SYS_request_key,
        "security" => libc::SYS_security,
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
        "tuxcall" => libc::SYS_tuxcall,
        "umount2" => libc::SYS_umount2,
        "unshare" => libc::SYS_unshare,
        "uselib" => libc::SYS_uselib,
        "userfaultfd" => libc::SYS_userfaultfd,
        "ustat" => libc::SYS_ustat,
        "vhangup" => libc::SYS_vhangup,
        "vserver" => libc::SYS_vserver,
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
    use partita_system::confinement::docker_refused;
    use seccompiler::sock_filter;

    /// Names of docker-refused.txt the profile does not refuse, each with the reason. The kernel never runs a
    /// seccomp filter for `uprobe` (x86_64 336, Linux 6.18): `seccomp_uprobe_exception` lets it through every
    /// filter, as it does `uretprobe` (which Docker allows); outside the kernel's own uprobe trampoline it
    /// answers ENXIO and does nothing. A filter entry would be dead code that claims a refusal.
    const KERNEL_EXEMPT: &[(&str, &str)] = &[("uprobe", "the kernel runs no seccomp filter for it (seccomp_uprobe_exception); outside the kernel's uprobe trampoline it answers ENXIO")];

    /// `struct seccomp_data` of an x86_64 call as 32-bit words: nr, arch, instruction pointer, the arguments (low
    /// word first).
    fn data(arch: u32, nr: i64, args: [u64; 6]) -> [u32; 16] {
        let mut d = [0u32; 16];
        d[0] = nr as u32;
        d[1] = arch;
        for (i, a) in args.iter().enumerate() {
            d[4 + 2 * i] = *a as u32;
            d[5 + 2 * i] = (*a >> 32) as u32;
        }
        d
    }

    /// What one filter answers, run as the kernel runs classic BPF. Only the instructions seccompiler and
    /// `newer_than` emit are known; any other is an error, not a guess.
    fn run(prog: &[sock_filter], d: &[u32; 16]) -> Result<u32, String> {
        let (mut a, mut pc) = (0u32, 0usize);
        let jmp = |op: u32| libc::BPF_JMP | op | libc::BPF_K;
        while let Some(s) = prog.get(pc) {
            pc += 1;
            let code = u32::from(s.code);
            let cond = if code == jmp(libc::BPF_JEQ) {
                Some(a == s.k)
            } else if code == jmp(libc::BPF_JGT) {
                Some(a > s.k)
            } else if code == jmp(libc::BPF_JGE) {
                Some(a >= s.k)
            } else if code == jmp(libc::BPF_JSET) {
                Some(a & s.k != 0)
            } else {
                None
            };
            if let Some(c) = cond {
                pc += usize::from(if c { s.jt } else { s.jf });
            } else if code == libc::BPF_LD | libc::BPF_W | libc::BPF_ABS {
                if s.k % 4 != 0 || s.k >= 64 {
                    return Err(format!("load at offset {} of seccomp_data (instruction {})", s.k, pc - 1));
                }
                a = d[s.k as usize / 4];
            } else if code == libc::BPF_JMP | libc::BPF_JA {
                pc += s.k as usize;
            } else if code == libc::BPF_ALU | libc::BPF_AND | libc::BPF_K {
                a &= s.k;
            } else if code == libc::BPF_RET | libc::BPF_K {
                return Ok(s.k);
            } else {
                return Err(format!("instruction {} has opcode {:#x}, which this interpreter does not know", pc - 1, s.code));
            }
        }
        Err("the program ran past its end".into())
    }

    /// What the kernel does with a call, given every filter's answer: the strictest, as `seccomp_run_filters`
    /// picks it (the action bits compared as a signed number, lower is stricter: KILL_PROCESS, KILL_THREAD,
    /// TRAP, ERRNO, USER_NOTIF, TRACE, LOG, ALLOW).
    fn verdict(f: &Filters, d: &[u32; 16]) -> Result<u32, String> {
        let action = |r: u32| (r & libc::SECCOMP_RET_ACTION_FULL) as i32;
        let mut out = libc::SECCOMP_RET_ALLOW;
        for prog in f.notify.iter().chain(&f.others) {
            let r = run(prog, d)?;
            if action(r) < action(out) {
                out = r;
            }
        }
        Ok(out)
    }

    fn x86_64(f: &Filters, nr: i64, args: [u64; 6]) -> u32 {
        verdict(f, &data(AUDIT_ARCH_X86_64, nr, args)).unwrap_or_else(|e| panic!("system call {nr}: {e}"))
    }

    fn with_arg0(a: u64) -> [u64; 6] {
        [a, 0, 0, 0, 0, 0]
    }

    /// Each name of `names` (docker-refused.txt's) that the profile's filters `f` let through, or that the
    /// profile has no number for, with what went wrong; the names of KERNEL_EXEMPT are passed over.
    fn not_refused(names: &[&str], f: &Filters) -> Vec<String> {
        let mut wrong = Vec::new();
        for name in names.iter().filter(|n| !KERNEL_EXEMPT.iter().any(|(x, _)| x == *n)) {
            let Some(nr) = number(name) else {
                wrong.push(format!("{name}: the profile has no number for it (add it to `number` in seccomp.rs and to a list of confinement.rs)"));
                continue;
            };
            match verdict(f, &data(AUDIT_ARCH_X86_64, nr, [0; 6])) {
                Ok(libc::SECCOMP_RET_ALLOW) => wrong.push(format!("{name} ({nr}): the filters allow it")),
                Ok(_) => {}
                Err(e) => wrong.push(format!("{name} ({nr}): {e}")),
            }
        }
        wrong
    }

    #[test]
    fn every_call_docker_refuses_is_refused() {
        let f = filters(&[]).unwrap();
        let names = docker_refused();
        for (name, why) in KERNEL_EXEMPT {
            assert!(names.contains(name), "{name} is exempted but docker-refused.txt does not list it");
            assert!(number(name).is_none() && !partita_system::confinement::is_seccomp_name(name), "{name} is exempted ({why}) yet the profile lists it");
            eprintln!("not checked: {name}: {why}");
        }
        let wrong = not_refused(&names, &f);
        assert!(wrong.is_empty(), "docker-refused.txt names calls the default profile does not refuse:\n{}", wrong.join("\n"));
        // The two the list was kept for, with the answer each gets.
        assert_eq!(x86_64(&f, libc::SYS_memfd_secret, [0; 6]), libc::SECCOMP_RET_ERRNO | libc::EPERM as u32);
        assert_eq!(x86_64(&f, libc::SYS_process_madvise, [0; 6]), libc::SECCOMP_RET_USER_NOTIF);
        assert_eq!(x86_64(&f, libc::SYS_clone3, [0; 6]), libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32);

        // What Docker refuses of the calls it allows with some arguments (the list file's header).
        let refused = |nr: i64, a: u64| x86_64(&f, nr, with_arg0(a)) != libc::SECCOMP_RET_ALLOW;
        for flag in [libc::CLONE_NEWNS, libc::CLONE_NEWCGROUP, libc::CLONE_NEWUTS, libc::CLONE_NEWIPC, libc::CLONE_NEWUSER, libc::CLONE_NEWPID, libc::CLONE_NEWNET] {
            assert_eq!(flag as u64 & 0x7e02_0000, flag as u64, "a flag of Docker's mask");
            assert!(refused(libc::SYS_clone, libc::SIGCHLD as u64 | flag as u64), "clone with {flag:#x}");
        }
        for p in [0x0040000, 0x0400000, 0x0100000] {
            // ADDR_NO_RANDOMIZE, READ_IMPLIES_EXEC, MMAP_PAGE_ZERO
            assert!(refused(libc::SYS_personality, p), "personality {p:#x}");
        }
        for family in [libc::AF_ALG, libc::AF_VSOCK] {
            assert!(refused(libc::SYS_socket, family as u64), "socket of family {family}");
        }
        // ... and what it allows of them: the filters do not refuse everything.
        for flags in [0x0120_0011, 0x003d_0f00] {
            // glibc's fork; pthread_create's threads
            assert!(!refused(libc::SYS_clone, flags), "clone {flags:#x}");
        }
        for p in PLAIN_PERSONALITIES {
            assert!(!refused(libc::SYS_personality, p), "personality {p:#x}");
        }
        for family in [libc::AF_UNIX, libc::AF_INET, libc::AF_INET6, libc::AF_NETLINK, 39, 41] {
            assert!(!refused(libc::SYS_socket, family as u64), "socket of family {family}");
        }
    }

    #[test]
    fn the_interpreter_sees_ordinary_calls_allowed_and_other_architectures_killed() {
        let f = filters(&[]).unwrap();
        for nr in [libc::SYS_read, libc::SYS_write, libc::SYS_openat, libc::SYS_futex, libc::SYS_clock_nanosleep, libc::SYS_mmap, libc::SYS_pidfd_open, libc::SYS_madvise] {
            assert_eq!(x86_64(&f, nr, [0; 6]), libc::SECCOMP_RET_ALLOW, "system call {nr}");
        }
        assert_eq!(x86_64(&f, i64::from(SECCOMP_NEWEST) + 1, [0; 6]), libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32, "newer than the profile");
        assert_eq!(x86_64(&f, 0x4000_0000, [0; 6]), libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32, "x32's read");
        // AUDIT_ARCH_I386 (int 0x80): seccompiler's filters kill the process.
        assert_eq!(verdict(&f, &data(0x4000_0003, 3, [0; 6])).unwrap(), libc::SECCOMP_RET_KILL_PROCESS);
        // The strictest answer wins, whichever filter gives it.
        let (allow, errno) = (vec![sock_filter { code: (libc::BPF_RET | libc::BPF_K) as u16, jt: 0, jf: 0, k: libc::SECCOMP_RET_ALLOW }], newer_than(0).unwrap());
        let two = Filters { notify: Some(allow.clone()), others: vec![errno, allow] };
        assert_eq!(verdict(&two, &data(AUDIT_ARCH_X86_64, 1, [0; 6])).unwrap(), libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32);
        // An instruction it does not know is an error, not an answer.
        let unknown = Filters { notify: Some(vec![sock_filter { code: (libc::BPF_LD | libc::BPF_W | libc::BPF_IND) as u16, jt: 0, jf: 0, k: 0 }]), others: vec![] };
        assert!(verdict(&unknown, &data(AUDIT_ARCH_X86_64, 0, [0; 6])).unwrap_err().contains("does not know"));
    }

    #[test]
    fn a_listed_call_the_profile_lets_through_or_cannot_name_fails_the_check() {
        let f = filters(&[]).unwrap();
        let wrong = not_refused(&["mount", "no_such_call"], &f);
        assert_eq!(wrong, ["no_such_call: the profile has no number for it (add it to `number` in seccomp.rs and to a list of confinement.rs)"]);
        // Filters that let listed calls through (as a system file's `seccomp.allow` does) fail it too.
        let lenient = filters(&["memfd_secret".to_string(), "process_madvise".to_string()]).unwrap();
        assert_eq!(not_refused(&docker_refused(), &lenient), ["memfd_secret (447): the filters allow it", "process_madvise (440): the filters allow it"]);
    }

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
