"""Space attacks of a partition on what it shares with the host: the operator's terminal, its own log, the
host's disk, the kernel's per-user counts, the I/O partition's other side. Made from wherever this runs: inside
a partition (where each must be refused) or on the host against scratch targets (where each must work).

Usage: space.py ROLE CONTEXT.json, ROLE one of:
  attacker   every attack in turn; prints `RESULT <attack>: DONE <what>` or `RESULT <attack>: REFUSED <why>`;
             then holds what it took of the kernel's counts (`HOLDING`) until CONTEXT's `release` file appears
  listener   (the I/O partition) listens where the attacker aims and prints `GOT <port> <text>` for each
             datagram or connection; once CONTEXT's `check` file appears, checks the kernel counts it needs
             (`NEIGHBOUR <count>: ok|failed <why>`)
  probe      checks the kernel counts (as `listener` does) once and exits

CONTEXT: view (the host's paths the view attacks look for: source_tree, other_state, host_paths, watch, and
watched, the file that says the host has touched the watched places), state (a writable directory: the partition's state directory, or a scratch one), disk_bytes (how much
the disk attack tries to write), files (how many files the inode attack tries), log_bytes (how much the flood
writes to stdout), targets (the attack on the other side: {device, other_address, module_address, dds_port,
plain_port, tcp_port}, or absent), release and check (paths of files that end the holding and start the
neighbour's check)."""
import ctypes, errno, json, os, select, signal, socket, sys, time

libc = ctypes.CDLL(None, use_errno=True)
role, ctx = sys.argv[1], json.load(open(sys.argv[2]))
say = lambda text: print(text, flush=True)


said = []  # every result, said again before HOLDING (a working `erase the log` erases the first ones)


def result(attack, fn):
    try:
        line = "RESULT %s: %s" % (attack, fn())
    except OSError as e:
        line = "RESULT %s: REFUSED %s" % (attack, e)
    said.append(line)
    say(line)


def errno_of(ret):
    return ctypes.get_errno() if ret == -1 else 0


# The operator's terminal: stdin is what `partita up` was started with.
def terminal():
    if os.isatty(0):
        return "DONE fd 0 is a terminal (%s)" % os.readlink("/proc/self/fd/0")
    data = os.read(0, 64) if select.select([0], [], [], 0.2)[0] else b""
    if data:
        return "DONE read %r from stdin" % data
    return "REFUSED stdin is %s: no terminal, nothing to read" % os.readlink("/proc/self/fd/0")


def grow_log():
    os.posix_fallocate(1, 0, 1 << 30)
    return "DONE fallocate of 1 GiB on fd 1 (%s)" % os.readlink("/proc/self/fd/1")


def erase_log():
    os.ftruncate(1, 0)
    return "DONE ftruncate of fd 1 (%s)" % os.readlink("/proc/self/fd/1")


def flood_log():
    chunk = ("x" * 1023 + "\n") * 64
    for _ in range(ctx["log_bytes"] // len(chunk)):
        sys.stdout.write(chunk)
    sys.stdout.flush()
    return "DONE wrote %d bytes to stdout" % ctx["log_bytes"]


def fill_disk():
    path, written = os.path.join(ctx["state"], "fill"), 0
    try:
        with open(path, "wb", buffering=0) as f:
            block = b"\xa5" * (1 << 20)
            while written < ctx["disk_bytes"]:
                written += f.write(block)
            os.fsync(f.fileno())
    except OSError as e:
        if e.errno in (errno.ENOSPC, errno.EDQUOT):
            return "REFUSED %s after %d MiB" % (errno.errorcode[e.errno], written >> 20)
        raise
    finally:
        try:
            os.unlink(path)
        except OSError:
            pass
    return "DONE wrote %d MiB" % (written >> 20)


def fill_inodes():
    d, made = os.path.join(ctx["state"], "inodes"), 0
    os.makedirs(d, exist_ok=True)
    try:
        while made < ctx["files"]:
            open(os.path.join(d, str(made)), "w").close()
            made += 1
    except OSError as e:
        if e.errno in (errno.ENOSPC, errno.EDQUOT):
            return "REFUSED %s after %d files" % (errno.errorcode[e.errno], made)
        raise
    finally:
        for n in range(made):
            os.unlink(os.path.join(d, str(n)))
        os.rmdir(d)
    return "DONE made %d files" % made


held = []  # what the counters attacks keep until released


def inotify_instances():
    n = 0
    while n < 100000:
        fd = libc.inotify_init1(os.O_CLOEXEC)
        if fd < 0:
            return "took %d instances, then %s" % (n, errno.errorcode.get(ctypes.get_errno(), "?"))
        held.append(fd)
        n += 1
    return "took %d instances" % n


class MqAttr(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_long), ("maxmsg", ctypes.c_long), ("msgsize", ctypes.c_long), ("curmsgs", ctypes.c_long), ("pad", ctypes.c_long * 4)]


def mq_open(name, maxmsg=10, msgsize=8192):
    attr = MqAttr(0, maxmsg, msgsize, 0)
    libc.mq_open.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int, ctypes.POINTER(MqAttr)]
    return libc.mq_open(name.encode(), os.O_CREAT | os.O_RDWR, 0o600, ctypes.byref(attr))


def message_queues():
    n = 0
    while n < 10000:
        name = "/partita-attack-%d-%d" % (os.getpid(), n)
        fd = mq_open(name)
        if fd < 0:
            return "took %d queues of 80 KiB, then %s" % (n, errno.errorcode.get(ctypes.get_errno(), "?"))
        libc.mq_unlink(name.encode())
        held.append(fd)
        n += 1
    return "took %d queues" % n


class SigVal(ctypes.Union):
    _fields_ = [("i", ctypes.c_int), ("p", ctypes.c_void_p)]


def sigqueue_self(sig):
    libc.sigqueue.argtypes = [ctypes.c_int, ctypes.c_int, SigVal]
    return libc.sigqueue(os.getpid(), sig, SigVal(0))


def queued_signals():
    sig = signal.SIGRTMIN
    signal.pthread_sigmask(signal.SIG_BLOCK, [sig])
    n = 0
    while n < 200000:
        if sigqueue_self(sig) != 0:
            return "queued %d signals, then %s" % (n, errno.errorcode.get(ctypes.get_errno(), "?"))
        n += 1
    return "queued %d signals" % n


def counts_work():
    """The kernel counts a program needs, tried once each: `<count>: ok` or `<count>: failed <errno>`."""
    out = []
    fd = libc.inotify_init1(os.O_CLOEXEC)
    out.append("inotify: " + ("ok" if fd >= 0 else "failed " + errno.errorcode.get(ctypes.get_errno(), "?")))
    if fd >= 0:
        os.close(fd)
    name = "/partita-probe-%d" % os.getpid()
    q = mq_open(name, 10, 8192)
    out.append("mq_open: " + ("ok" if q >= 0 else "failed " + errno.errorcode.get(ctypes.get_errno(), "?")))
    if q >= 0:
        libc.mq_unlink(name.encode())
        os.close(q)
    sig = signal.SIGRTMIN + 1
    signal.pthread_sigmask(signal.SIG_BLOCK, [sig])
    r = sigqueue_self(sig)
    out.append("sigqueue: " + ("ok" if r == 0 else "failed " + errno.errorcode.get(ctypes.get_errno(), "?")))
    if r == 0:
        signal.sigwait([sig])
    return out


def other_side():
    t = ctx.get("targets")
    if not t:
        return []
    out = []

    def udp(address, port, text):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, t["device"].encode())
        s.sendto(text.encode(), (address, port))
        s.close()
        return "sent %r to %s:%d through %s" % (text, address, port, t["device"])

    # The control: the I/O partition's own module address, a port of no DDS domain: must arrive.
    out.append(("reach the I/O partition's module address", lambda: "DONE " + udp(t["module_address"], t["plain_port"], "control")))
    out.append(("UDP to the other side's address", lambda: "SENT " + udp(t["other_address"], t["plain_port"], "other-address")))
    out.append(("UDP to the other side's DDS port", lambda: "SENT " + udp(t["module_address"], t["dds_port"], "other-domain")))

    def tcp():
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, t["device"].encode())
        s.settimeout(2)
        try:
            s.connect((t["other_address"], t["tcp_port"]))
            return "DONE connected to %s:%d" % (t["other_address"], t["tcp_port"])
        except ConnectionRefusedError:
            return "DONE answered with a reset by %s:%d" % (t["other_address"], t["tcp_port"])
        except (socket.timeout, TimeoutError):
            return "REFUSED no answer from %s:%d in 2 s" % (t["other_address"], t["tcp_port"])
        finally:
            s.close()

    out.append(("TCP to the other side's address", tcp))
    return out


def view_attacks():
    v = ctx.get("view")
    if not v:
        return []
    out = []

    def source_tree():
        names = os.listdir(v["source_tree"])
        return "DONE listed %s: %s" % (v["source_tree"], ",".join(sorted(names)[:6]))

    def homes():
        found = [d for d in ("/home", "/root", "/srv", "/work") if os.path.exists(d)]
        if not found:
            raise OSError(errno.ENOENT, "none of /home /root /srv /work in view")
        return "DONE saw %s" % ",".join(found)

    def other_state():
        names = os.listdir(v["other_state"])
        return "DONE listed %s: %s" % (v["other_state"], ",".join(names))

    def mountinfo():
        text = open("/proc/self/mountinfo").read()
        named = [p for p in v["host_paths"] if p in text]
        if not named:
            raise OSError(errno.ENOENT, "no host path in mountinfo (%d lines)" % len(text.splitlines()))
        return "DONE mountinfo names %s" % ",".join(named)

    out += [("read the source tree", source_tree), ("see the host's home directories", homes),
            ("see another system's state", other_state), ("read host paths in mountinfo", mountinfo)]
    return out


def watch_the_host():
    v = ctx["view"]
    fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
    libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
    watching = [d for d in v["watch"] if os.path.isdir(d) and libc.inotify_add_watch(fd, d.encode(), 0x100 | 0x200 | 0x2 | 0x4) >= 0]
    say("WATCHING " + ",".join(watching))
    wait_for(v["watched"])
    time.sleep(0.5)
    try:
        data = os.read(fd, 65536)
    except BlockingIOError:
        data = b""
    os.close(fd)
    if data:
        return "DONE saw %d bytes of events on %s" % (len(data), ",".join(watching))
    return "REFUSED no event on %s" % (",".join(watching) or "nothing in view")


def wait_for(path):
    while not os.path.exists(path):
        time.sleep(0.05)


if role == "attacker":
    for attack, fn in [("read the operator's terminal", terminal), ("grow the log", grow_log), ("erase the log", erase_log),
                       ("fill the host's disk", fill_disk), ("use up the host's inodes", fill_inodes)]:
        result(attack, fn)
    for attack, fn in other_side():
        result(attack, fn)
    for attack, fn in view_attacks():
        result(attack, fn)
    if ctx.get("view"):
        result("watch the host's files", watch_the_host)
    for count, fn in [("inotify", inotify_instances), ("mq", message_queues), ("signals", queued_signals)]:
        say("TOOK %s: %s" % (count, fn()))
    for line in said:
        say(line)
    say("HOLDING")
    wait_for(ctx["release"])
    result("flood the log", flood_log)
    say("ATTACKER DONE")
elif role == "listener":
    t = ctx["targets"]
    socks = []
    for port in (t["plain_port"], t["dds_port"]):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind(("0.0.0.0", port))
        socks.append(s)
    l = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    l.bind(("0.0.0.0", t["tcp_port"]))
    l.listen(4)
    socks.append(l)
    say("LISTENING")
    checked = False
    while True:
        for s in select.select(socks, [], [], 0.1)[0]:
            if s is l:
                c, peer = l.accept()
                say("GOT %d connection from %s" % (t["tcp_port"], peer[0]))
                c.close()
            else:
                data, peer = s.recvfrom(100)
                say("GOT %d %s" % (s.getsockname()[1], data.decode()))
        if not checked and os.path.exists(ctx["check"]):
            for line in counts_work():
                say("NEIGHBOUR " + line)
            checked = True
elif role == "probe":
    for line in counts_work():
        say(line)
