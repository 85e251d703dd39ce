"""Attacks on ARINC 653 channel memory, made from inside a partition (`partition`) and, to show that each would
work without the supervisor's confinement, on the host against a scratch memory file (`host`). In `partition`
mode it also attacks the partition's control page and the supervisor's control socket (`CONTROL` lines).

Each attack prints `RESULT <name>: SUCCEEDED` or `RESULT <name>: refused (<why>)`. In `partition` mode the
script then acts as a hostile writer of its own queuing channel `junk`: garbage counters and lengths, which
the reader must report and survive."""
import mmap
import os
import subprocess
import sys
import time


def ports():
    out = {}
    for e in filter(None, os.environ.get("PARTITA_PORTS", "").split(";")):
        f = e.split(",")
        out[f[0]] = {"kind": f[1], "direction": f[2], "max": int(f[3]), "data": int(f[5]), "status": int(f[6]), "ack": int(f[7]) if len(f) > 7 else None}
    return out


def attempt(name, fn):
    try:
        fn()
        print(f"RESULT {name}: SUCCEEDED", flush=True)
    except OSError as e:
        print(f"RESULT {name}: refused ({e.strerror})", flush=True)


def reopen_for_writing(fd):
    os.close(os.open(f"/proc/self/fd/{fd}", os.O_RDWR))


def map_writable(fd):
    """Maps the port's memory writable by any way: its descriptor, else the same file reopened."""
    try:
        mmap.mmap(fd, 0, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE).close()
    except OSError:
        rw = os.open(f"/proc/self/fd/{fd}", os.O_RDWR)
        try:
            mmap.mmap(rw, 0, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE).close()
        finally:
            os.close(rw)


def other_channels(own):
    """Opens a partita memory file held by any other process it can see (its own descriptors excluded)."""
    own_links = {os.readlink(f"/proc/self/fd/{fd}") for fd in own}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        if int(pid) == os.getpid():
            continue
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            path = f"/proc/{pid}/fd/{fd}"
            try:
                link = os.readlink(path)
            except OSError:
                continue
            if link.startswith("/memfd:partita-") and link not in own_links:
                os.close(os.open(path, os.O_RDONLY))
                return
    raise OSError(2, "no other channel's memory is visible")


def run(read_only_fd, writable_fd, own):
    attempt("reopen-read-only-port-for-writing", lambda: reopen_for_writing(read_only_fd))
    attempt("map-read-only-port-writable", lambda: map_writable(read_only_fd))
    attempt("shrink-own-channel-under-its-reader", lambda: os.ftruncate(writable_fd, 0))
    attempt("grow-own-channel", lambda: os.ftruncate(writable_fd, 1 << 30))
    attempt("open-another-channel", lambda: other_channels(own))


def host():
    # A scratch memory file as the supervisor would make it without mode, owner or seals, and a second one
    # held by another process.
    fd = os.memfd_create("partita-scratch", 0)
    os.ftruncate(fd, 1 << 16)
    ro = os.open(f"/proc/self/fd/{fd}", os.O_RDONLY)
    other = os.memfd_create("partita-channel-scratch", 0)
    holder = subprocess.Popen(["sleep", "30"], pass_fds=[other])
    os.close(other)
    try:
        time.sleep(0.1)
        run(ro, fd, [fd, ro])
    finally:
        holder.kill()
        holder.wait()


def hostile(p):
    """A hostile writer of its own queuing channel `junk`: the reader must report it and keep going."""
    junk = p["junk"]
    m = mmap.mmap(junk["data"], 0, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    # a tail far more than a queue ahead of what the reader took
    m[0:4] = (100000).to_bytes(4, "little")
    time.sleep(0.5)
    # one message whose length is far beyond the channel's maximum
    m[0:4] = (1).to_bytes(4, "little")
    m[64:68] = (0xFFFFFFFF).to_bytes(4, "little")
    print("HOSTILE done", flush=True)


def control(name, fn):
    """Prints `CONTROL <name>: SUCCEEDED` or `CONTROL <name>: refused (<why>)`."""
    try:
        why = fn()
        print(f"CONTROL {name}: " + ("SUCCEEDED" if why is None else f"refused ({why})"), flush=True)
    except OSError as e:
        print(f"CONTROL {name}: refused ({e.strerror})", flush=True)


def page_request(page, kind, arg):
    """Posts a request on the control page as a hostile program would (no library) and waits for the answer:
    None when it was done, else why not."""
    seq = int.from_bytes(page[64:72], "little") + 1
    page[72:80] = kind.to_bytes(8, "little")
    page[80:88] = arg.to_bytes(8, "little")
    page[88:96] = (0).to_bytes(8, "little")
    page[64:72] = seq.to_bytes(8, "little")
    deadline = time.time() + 5
    while time.time() < deadline:
        if int.from_bytes(page[512:520], "little") == seq:
            result = int.from_bytes(page[520:528], "little")
            return None if result == 0 else {1: "refused by the supervisor", 2: "invalid", 3: "no such plan"}.get(result, f"result {result}")
        time.sleep(0.01)
    return "no answer"


def connect_control_sockets():
    import glob
    import socket
    found = glob.glob("/run/partita/*/control.sock")
    if not found:
        raise OSError(2, "no control socket is visible")
    for path in found:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(path)
        s.sendall(b'{"op":"switch_plan","module":null,"plan":"default","now":true}\n')
        return None


def control_attacks():
    fd = int(os.environ["PARTITA_CONTROL"])
    page = mmap.mmap(fd, 4096, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    control("switch-plan-from-a-partition-not-marked-system", lambda: page_request(page, 3, 0))
    control("garbage-request-on-own-page", lambda: page_request(page, 77, 1 << 40))
    control("raise-power-fail", lambda: page_request(page, 2, 7))
    control("resize-own-control-page", lambda: os.ftruncate(fd, 1 << 20))
    control("reach-the-supervisors-control-socket", connect_control_sockets)


def partition():
    control_attacks()
    p = ports()
    own = [v[k] for v in p.values() for k in ("data", "status", "ack") if v[k] is not None]
    run(p["position"]["data"], p["junk"]["data"], own)
    hostile(p)


if __name__ == "__main__":
    {"host": host, "partition": partition}[sys.argv[1]]()
