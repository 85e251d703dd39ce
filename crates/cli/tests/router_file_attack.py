"""Attacks on an I/O partition's router file, made from wherever this runs: inside the I/O partition (each must
be refused) or on the host against a scratch copy of the same layout in a private mount namespace (each must
work, which shows the test can see an attack succeed). Usage: router_file_attack.py BASE SYSTEM. Prints one line
per attack, `DONE <what>` or `REFUSED <what>: <ERRNO> <why>` (ERRNO's name, e.g. EACCES), then `END`, and sleeps so that the test can reload the
partition's route table after the attacks."""
import ctypes, errno, os, socket, sys, time

base, system = sys.argv[1], sys.argv[2]
own = os.path.join(base, "run/partita")
router = os.path.join(own, "router.toml")
libc = ctypes.CDLL(None, use_errno=True)


def check(ret, what):
    if ret == -1:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e), what)


def write_it():
    with open(router, "a") as f:
        f.write("\n[[route]]\nfrom = \"network\"\nto = \"module\"\n# written by the partition\n")


def chmod_it():
    os.chmod(router, 0o666)


def replace_it():
    os.unlink(router)
    with open(router, "w") as f:
        f.write("# the partition's own table\n")


def add_a_file():
    with open(os.path.join(own, "planted"), "w") as f:
        f.write("x")


def plant_a_link_for_the_supervisor():
    os.symlink("/etc/partita-attack-target", os.path.join(own, ".router.toml.new"))


def rename_the_directory():
    os.rename(own, os.path.join(base, "run/partita-old"))
    os.mkdir(own)


def unmount_it():
    check(libc.umount2(own.encode(), 2), "umount2")  # MNT_DETACH


def mount_over_it():
    check(libc.mount(b"tmpfs", own.encode(), b"tmpfs", 0, None), "mount")


def ask_the_supervisor():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(os.path.join(base, "run/partita", system, "control.sock"))
    s.close()


ATTACKS = [
    ("reach the supervisor's control socket", ask_the_supervisor),
    ("write into its router file", write_it),
    ("make its router file writable", chmod_it),
    ("replace its router file", replace_it),
    ("add a file beside its router file", add_a_file),
    ("plant a link where the supervisor writes", plant_a_link_for_the_supervisor),
    ("rename /run/partita away", rename_the_directory),
    ("mount over /run/partita", mount_over_it),
    ("unmount /run/partita", unmount_it),
]

# Each attack in a child of its own: a call the partition's seccomp filter kills ends only that child.
for what, attack in ATTACKS:
    pid = os.fork()
    if pid == 0:
        try:
            attack()
            print("DONE", what, flush=True)
        except OSError as e:
            print("REFUSED %s: %s %s" % (what, errno.errorcode.get(e.errno, "E?"), e), flush=True)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        print("REFUSED %s: SIGNAL killed by signal %d" % (what, os.WTERMSIG(status)), flush=True)
print("END", flush=True)
if base == "/":
    time.sleep(120)
