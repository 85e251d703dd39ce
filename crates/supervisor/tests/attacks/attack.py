"""One attack on a partitioned system, made from wherever this runs: inside a partition (where it must be
refused) or on the host against scratch targets (where it must work, which shows the test can see an attack
succeed). Usage: attack.py NAME CONTEXT.json. Prints one line: `DONE <what>` when the attack worked, or
`REFUSED <why>`; a process the seccomp filter kills prints nothing and dies of SIGSYS.

CONTEXT: victim_pid (a host pid), victim_cgroups (host cgroup directories of the victim), netns (a path under
/run/netns), supervisor_state (a directory of the supervisor's), scratch (a writable directory)."""
import ctypes, errno, json, os, socket, sys

libc = ctypes.CDLL(None, use_errno=True)
name = sys.argv[1]
ctx = json.load(open(sys.argv[2])) if name != "list" else {}


def check(ret, what):
    if ret == -1:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e), what)
    return ret


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


def write_host_etc():
    p = "/etc/partita-attack-%d" % os.getpid()
    write(p, "x")
    os.unlink(p)
    return "wrote " + p


def escape_cgroup():
    # move this process to the root of every cgroup hierarchy it can find
    moved = []
    for root in ["/sys/fs/cgroup", "/sys/fs/cgroup/unified", "/sys/fs/cgroup/memory", "/sys/fs/cgroup/pids",
                 "/sys/fs/cgroup/cpuset", "/sys/fs/cgroup/freezer"]:
        try:
            write(root + "/cgroup.procs", str(os.getpid()))
            moved.append(root)
        except OSError:
            pass
    if not moved:
        raise OSError(errno.ENOENT, "no cgroup.procs to write", "/sys/fs/cgroup")
    return "moved to " + ",".join(moved)


def freeze_neighbour():
    done = []
    for d in ctx["victim_cgroups"]:
        for f, v in [("cgroup.freeze", "1"), ("freezer.state", "FROZEN")]:
            if os.path.exists(os.path.join(d, f)):
                write(os.path.join(d, f), v)
                done.append(os.path.join(d, f))
    if not done:
        raise OSError(errno.ENOENT, "no freezer file of the victim in view", ctx["victim_cgroups"][0])
    for d in ctx["victim_cgroups"]:  # thaw it again (the host run's scratch victim)
        for f, v in [("cgroup.freeze", "0"), ("freezer.state", "THAWED")]:
            if os.path.exists(os.path.join(d, f)):
                write(os.path.join(d, f), v)
    return "froze " + ",".join(done)


def kill_neighbour_through_cgroup():
    for d in ctx["victim_cgroups"]:
        if os.path.exists(os.path.join(d, "cgroup.kill")):
            write(os.path.join(d, "cgroup.kill"), "1")
            return "killed through " + d
        if os.path.exists(os.path.join(d, "cgroup.procs")):
            pids = open(os.path.join(d, "cgroup.procs")).read().split()
            for p in pids:
                os.kill(int(p), 9)
            return "killed %d processes listed in %s" % (len(pids), d)
    raise OSError(errno.ENOENT, "no cgroup of the victim in view", ctx["victim_cgroups"][0])


def raise_priority():
    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(95))
    os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
    return "ran SCHED_FIFO 95"


def join_io_network():
    fd = os.open(ctx["netns"], os.O_RDONLY)
    check(libc.setns(fd, 0x40000000), "setns")
    return "joined " + ctx["netns"]


def mount():
    target = os.path.join(ctx["scratch"], "m")
    os.makedirs(target, exist_ok=True)
    check(libc.mount(b"tmpfs", target.encode(), b"tmpfs", 0, None), "mount")
    check(libc.umount2(target.encode(), 2), "umount")
    return "mounted a tmpfs"


def sysctl():
    write("/proc/sys/kernel/hostname", "partita-attack")
    return "wrote /proc/sys/kernel/hostname"


def load_module():
    fd = os.open("/dev/null", os.O_RDONLY)
    r = libc.syscall(313, fd, b"", 0)  # finit_module
    e = ctypes.get_errno()
    if r == -1 and e in (errno.EPERM, errno.EACCES):
        raise OSError(e, os.strerror(e), "finit_module")
    return "finit_module reached the kernel (%s)" % (os.strerror(e) if r == -1 else "loaded")


def ptrace_neighbour():
    pid = ctx["victim_pid"]
    check(libc.ptrace(16, pid, None, None), "ptrace attach")  # PTRACE_ATTACH
    os.waitpid(pid, 0x40000000)  # __WALL
    libc.ptrace(17, pid, None, None)  # PTRACE_DETACH
    return "attached to %d" % pid


def raw_socket():
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
    s.close()
    return "opened a packet socket"


def device_node():
    p = os.path.join(ctx["scratch"], "mem-%d" % os.getpid())
    os.mknod(p, 0o600 | 0o020000, os.makedev(1, 1))
    os.unlink(p)
    return "made a character device node"


def signal_neighbour():
    os.kill(ctx["victim_pid"], 0)
    return "signalled %d" % ctx["victim_pid"]


def supervisor_state():
    return "listed %d entries of %s" % (len(os.listdir(ctx["supervisor_state"])), ctx["supervisor_state"])


def cpu_dma_latency():
    fd = os.open("/dev/cpu_dma_latency", os.O_WRONLY)
    os.close(fd)
    return "opened /dev/cpu_dma_latency"


def new_user_namespace():
    check(libc.unshare(0x10000000), "unshare")  # CLONE_NEWUSER
    return "entered a new user namespace"


def newer_system_call():
    # setxattrat (463, Linux 6.13), newer than the profile: the kernel here has it and answers EBADF for fd -1;
    # a partition's filter answers ENOSYS before the kernel sees it.
    r = libc.syscall(463, -1, b"x", 0, b"user.x", None, 0)
    e = ctypes.get_errno()
    if r == -1 and e == errno.ENOSYS:
        raise OSError(e, os.strerror(e), "setxattrat")
    return "setxattrat reached the kernel (%s)" % (os.strerror(e) if r == -1 else "done")


def numa_policy():
    mask = ctypes.c_ulong(1)
    check(libc.syscall(238, 2, ctypes.byref(mask), 64), "set_mempolicy")  # MPOL_BIND to node 0
    libc.syscall(238, 0, None, 0)  # MPOL_DEFAULT
    return "bound its memory to NUMA node 0"


def no_address_randomization():
    old = check(libc.personality(0xFFFFFFFF), "personality query")
    check(libc.personality(0x0040000), "personality")  # ADDR_NO_RANDOMIZE
    libc.personality(old)
    return "turned address randomization off"


def vsock():
    s = socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM)
    s.close()
    return "opened a vsock socket (a channel to the hypervisor no network namespace confines)"


def secret_memory():
    # memfd_secret (447): memory the kernel takes out of its own direct map when first touched, which splits the
    # direct map's large pages for every partition's kernel work; it needs no capability.
    import mmap
    fd = check(libc.syscall(447, 0), "memfd_secret")
    try:
        os.ftruncate(fd, 4096)
        area = mmap.mmap(fd, 4096)
        area[:6] = b"secret"
        area.close()
    finally:
        os.close(fd)
    return "made a page of secret memory (memfd_secret), out of the kernel's direct map"


def advise_another_process_memory():
    # process_madvise (440) with MADV_COLD (20) on another process's memory: its pages reclaimed first, a
    # neighbour's working set pushed out. The other process is a child of its own, the one a partition can name
    # (its neighbours are outside its PID namespace); the child sleeps on a pipe with a touched megabyte.
    import mmap
    size = 1 << 20
    area = mmap.mmap(-1, size)
    area.write(b"\x01" * size)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(w)
        os.read(r, 1)
        os._exit(0)
    os.close(r)
    try:
        pidfd = os.pidfd_open(pid)
        try:
            iov = (ctypes.c_void_p * 2)(ctypes.addressof(ctypes.c_char.from_buffer(area)), size)  # struct iovec
            n = check(libc.syscall(440, pidfd, iov, 1, 20, 0), "process_madvise")
        finally:
            os.close(pidfd)
    finally:
        os.close(w)
        os.waitpid(pid, 0)
    return "advised %d bytes of another process's memory cold (process_madvise)" % n


def flush_the_machine():
    # sync(2) writes back every dirty page of the machine; syncfs(2) those of one file system (here the one the
    # scratch directory is on, the host's). Called through syscall(2) to see the answer: libc's sync() has none.
    check(libc.syscall(162), "sync")
    fd = os.open(ctx["scratch"], os.O_RDONLY)
    try:
        check(libc.syscall(306, fd), "syncfs")
    finally:
        os.close(fd)
    return "wrote back the machine's dirty pages (sync, syncfs)"


def undo_demotion():
    # A partition that runs past its window is demoted through its cpu controller group (cpu.idle); the victim's
    # group here stands for any partition's, its own included.
    done = []
    for d in ctx["victim_cgroups"]:
        if os.path.exists(os.path.join(d, "cpu.idle")):
            write(os.path.join(d, "cpu.idle"), "0")
            write(os.path.join(d, "cpu.shares"), "262144")
            write(os.path.join(d, "cpu.shares"), "1024")
            done.append(d)
    if not done:
        raise OSError(errno.ENOENT, "no cpu controller group of the victim in view", ctx["victim_cgroups"][0])
    return "wrote cpu.idle and cpu.shares in " + ",".join(done)


def same_value(path):
    # Writes back what the file holds: the permission is what is tried, the host's setting stays as it is.
    value = open(path).read().strip()
    write(path, value)
    return "wrote %s = %s" % (path, value)


def move_interrupts():
    return same_value("/proc/irq/default_smp_affinity")


def move_kernel_work():
    return same_value("/sys/devices/virtual/workqueue/cpumask")


ATTACKS = {
    "write to the host's /etc": write_host_etc,
    "move to the root cgroups": escape_cgroup,
    "freeze the neighbour through its cgroup": freeze_neighbour,
    "kill the neighbour through its cgroup": kill_neighbour_through_cgroup,
    "raise itself to SCHED_FIFO 95": raise_priority,
    "join the I/O partition's network namespace": join_io_network,
    "mount a file system": mount,
    "change a sysctl": sysctl,
    "load a kernel module": load_module,
    "ptrace the neighbour": ptrace_neighbour,
    "open a raw socket": raw_socket,
    "create a device node": device_node,
    "signal the neighbour by its pid": signal_neighbour,
    "read the supervisor's state": supervisor_state,
    "hold the CPUs out of idle states": cpu_dma_latency,
    "create a user namespace": new_user_namespace,
    "make a system call newer than the profile": newer_system_call,
    "place its memory on a NUMA node": numa_policy,
    "turn address randomization off": no_address_randomization,
    "open a vsock socket": vsock,
    "flush the machine's dirty pages": flush_the_machine,
    "make secret memory": secret_memory,
    "advise another process's memory cold": advise_another_process_memory,
    "undo a demotion through the cpu controller": undo_demotion,
    "move the host's interrupts": move_interrupts,
    "move the host's unbound kernel work": move_kernel_work,
}


def exhaust_memory():
    # 16 MiB at a time, each written by one memset: the limit is crossed within a few steps. Allocating 1 MiB at
    # a time ran the interpreter between steps; once, in CI, the attack then ran for over 90 s without being
    # killed, most likely because near the limit the kernel's reclaim kept evicting the interpreter's own code
    # pages and reading them back (no swap, cgroup v1 memory controller).
    hoard = []
    for _ in range(256):  # up to 4 GiB, far above a partition's limit
        hoard.append(b"\x01" * (16 << 20))
    return "allocated %d MiB" % (16 * len(hoard))


def exhaust_pids():
    children = []
    try:
        for _ in range(4096):
            pid = os.fork()
            if pid == 0:
                import time
                time.sleep(30)
                os._exit(0)
            children.append(pid)
        return "started %d processes" % len(children)
    except OSError as e:
        raise OSError(e.errno, "%s after %d processes" % (e.strerror, len(children)), "fork")
    finally:
        for pid in children:
            os.kill(pid, 9)
            os.waitpid(pid, 0)


# Attacks on the partition's own limits: made from inside only (on the host they would hurt the machine).
LIMITS = {"exhaust memory": exhaust_memory, "exhaust process ids": exhaust_pids}

if name == "list":
    print("\n".join(ATTACKS))
    sys.exit(0)
if name == "all":
    # Every attack in a process of its own (a seccomp kill ends only that one), one RESULT line each; with
    # "rounds" in the context, again each time the file go-N appears beside the context (N = 2, 3, ...).
    import subprocess, time
    for round_ in range(1, ctx.get("rounds", 1) + 1):
        go = os.path.join(os.path.dirname(sys.argv[2]), "go-%d" % round_)
        while round_ > 1 and not os.path.exists(go):
            time.sleep(0.05)
        for attack in ctx.get("only") or (list(ATTACKS) + list(LIMITS)):
            r = subprocess.run([sys.executable, sys.argv[0], attack, sys.argv[2]], capture_output=True, text=True)
            line = r.stdout.strip().splitlines()[-1] if r.stdout.strip() else ""
            if r.returncode < 0:
                line = "REFUSED killed by signal %d %s" % (-r.returncode, line)
            print("RESULT %s: %s" % (attack, line or "REFUSED exit %d %s" % (r.returncode, r.stderr.strip()[-200:])))
            sys.stdout.flush()
        print("ROUND %d DONE" % round_)
        sys.stdout.flush()
    print("ALL DONE")
    sys.stdout.flush()
    sys.exit(0)
ATTACKS.update(LIMITS)
try:
    print("DONE", ATTACKS[name]())
except OSError as e:
    print("REFUSED", e)
sys.stdout.flush()
