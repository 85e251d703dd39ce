"""Attacks on ARINC 653 channel memory, made from inside a partition (`partition`) and, to show that each would
work without the supervisor's confinement, on the host against a scratch memory file (`host`).

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


def partition():
    p = ports()
    own = [v[k] for v in p.values() for k in ("data", "status", "ack") if v[k] is not None]
    run(p["position"]["data"], p["junk"]["data"], own)
    hostile(p)


if __name__ == "__main__":
    {"host": host, "partition": partition}[sys.argv[1]]()
