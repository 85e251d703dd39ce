#!/usr/bin/env python3
"""The space attacks of crates/supervisor/tests/space_attacks.rs (tests/attacks/space.py) made from a partition of
any partita build, as root, inside a network namespace of its own: what the attacker, root on the host and the
I/O partition said. For a build from before partitions had a minimal root (no `binds` key), add --old.

  unshare --net sh -c 'ip link set lo up; scripts/space-attacks-on-a-build.py PARTITA_BINARY SYSTEM_NAME [--old]'

It runs `partita up` under `script` (so that the partition's stdin would be a terminal if the build lets it
through), holds root's counts for a moment if the build lets the partition take them, writes 256 MiB into the
partition's state directory if the build lets it, and creates and removes a file in /etc, /var/lib and /usr/bin.
Afterwards: `PARTITA_BINARY down`, and remove /var/lib/partita/SYSTEM_NAME and /var/lib/partita/SYSTEM_NAME-other."""
import json, os, subprocess, sys, time
exe, name = sys.argv[1], sys.argv[2]
old = "--old" in sys.argv[3:]
repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
script = os.path.join(repo, "crates/supervisor/tests/attacks/space.py")
binds = "" if old else 'binds = ["sleep", "/usr/bin/python3"]\nlog_size = "64KiB"\n'

wait = lambda role: ('while [ ! -f \\"$PARTITA_STATE_DIR/context.json\\" ]; do sleep 0.05; done; '
                     'exec /usr/bin/python3 \\"$PARTITA_STATE_DIR/space.py\\" %s \\"$PARTITA_STATE_DIR/context.json\\"' % role)
text = f'''[system]
name = "{name}"
[[module]]
name = "m"
cpus = [1]
[[module.partition]]
name = "attacker"
command = ["sh", "-c", "{wait('attacker')}"]
{binds}health = {{ action = "stop" }}
[[module.partition]]
name = "io"
command = ["sh", "-c", "{wait('listener')}"]
{binds}io = true
health = {{ action = "stop" }}
'''
system_file = "/tmp/partita-space-attacks-%s.toml" % name
open(system_file, "w").write(text)
st = "/var/lib/partita/" + name
a_state, io_state = st + "/attacker", st + "/io"
for d in (a_state, io_state):
    os.makedirs(d, exist_ok=True)
    open(d + "/space.py", "w").write(open(script).read())
other = "/var/lib/partita/%s-other/p" % name
os.makedirs(other, exist_ok=True)
up = subprocess.Popen(["script", "-q", "-c", f"{exe} up {system_file} --duration 60", "/dev/null"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
run = "/run/partita/" + name
def text_of(p):
    try:
        return open(p, errors="replace").read()
    except OSError:
        return ""
def wait_for(p, t, s=60):
    end = time.time() + s
    while t not in text_of(p) and time.time() < end:
        time.sleep(0.05)
    return text_of(p)
while not os.path.exists(run + "/state.json"):
    time.sleep(0.1)
time.sleep(1)
parts = {p["partition"]: p for p in json.load(open(run + "/state.json"))["partitions"]}
targets = {"device": "vnic0", "other_address": parts["io"]["external_address"], "module_address": parts["io"]["address"],
           "dds_port": 7640, "plain_port": 9999, "tcp_port": 9998}
view = {"source_tree": repo, "other_state": os.path.dirname(other),
        "host_paths": [repo, name + "/attacker.xml", name + "-other"], "watch": ["/etc", "/var/lib", "/usr/bin"],
        "watched": a_state + "/watched"}
ctx = lambda s: json.dumps({"view": view, "state": s, "disk_bytes": 256 << 20, "files": 5000, "log_bytes": 1 << 20,
                            "targets": targets, "release": a_state + "/release", "check": io_state + "/check"})
open(io_state + "/context.json", "w").write(ctx(io_state))
wait_for(run + "/io.log", "LISTENING")
open(a_state + "/context.json", "w").write(ctx(a_state))
wait_for(run + "/attacker.log", "WATCHING")
for d in ("/etc", "/var/lib", "/usr/bin"):
    p = "%s/partita-probe-%d" % (d, os.getpid())
    open(p, "w").write("x")
    os.unlink(p)
open(a_state + "/watched", "w").close()
held = wait_for(run + "/attacker.log", "HOLDING", 120)
probe = subprocess.run(["/usr/bin/python3", script, "probe", a_state + "/context.json"], capture_output=True, text=True).stdout
open(io_state + "/check", "w").close()
neighbour = wait_for(run + "/io.log", "NEIGHBOUR sigqueue")
open(a_state + "/release", "w").close()
wait_for(run + "/attacker.log", "ATTACKER DONE")
up.wait()
print("ATTACKER:\n" + "\n".join(l.lstrip("\0") for l in held.splitlines() if l.lstrip("\0").startswith(("RESULT", "TOOK"))))
print("ROOT ON THE HOST while held:\n" + probe)
print("I/O PARTITION:\n" + "\n".join(l for l in neighbour.splitlines() if l.startswith(("GOT", "NEIGHBOUR"))))
logs = [run + "/attacker.log", run + "/attacker.log.1"]
print("attacker's log after a 1 MiB flood: %s bytes" % " + ".join(str(os.path.getsize(p)) for p in logs if os.path.exists(p)))
os.unlink(system_file)
