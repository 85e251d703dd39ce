//! partita's own supervisor on the cgroup layout most machines have (root): this machine mounts cgroups hybrid
//! (v1 controllers beside the v2 hierarchy), while Debian 12, Ubuntu 24.04 and RHEL 9 mount pure cgroup v2. A
//! QEMU guest (TCG, Debian's 6.1 cloud kernel) mounts only cgroup2 and runs `partita up` of a module with a plan
//! there: its windows are kept, its memory limit holds (the partition that outgrows it is killed by the kernel
//! and the health monitor logs it), and `partita down` leaves no cgroup, namespace or interface behind.
//!
//! The guest's root is partita's initramfs, which cannot be `pivot_root`ed nor holds user namespaces from a
//! chroot: the guest command first copies it into a tmpfs moved over `/` (as `switch_root` does), then runs the
//! supervisor there with iproute2's `ip` and the bridge and veth modules the test puts in the guest.
use std::path::PathBuf;
use std::process::Command;

const EXE: &str = env!("CARGO_BIN_EXE_partita");

const SYSTEM: &str = r#"
[system]
name = "cg2"
cpu_dma_latency = "off"

[[module]]
name = "m"
cpus = [0]

[[module.partition]]
name = "a"
command = ["sleep", "30"]
memory = "32MiB"

# Reads 64 MiB of zeros into one buffer (busybox's dd allocates its block whole; `fullblock`: a read that the
# freezing cut short goes on where it stopped): past its 16 MiB limit the kernel kills it, within a few of its windows even under TCG (a shell string doubled to the limit took more
# than 8 s of them on a slow day). Its time overruns (the kernel's page clearing runs past its window) are only
# logged, so that it lives to meet its memory limit.
[[module.partition]]
name = "hog"
command = ["/bin/busybox", "dd", "if=/dev/zero", "of=/dev/null", "bs=64M", "count=1", "iflag=fullblock"]
memory = "16MiB"
health = { action = "stop" }
time_overrun = { action = "ignore" }

[[module.plan]]
cpu = 0
major_frame = "2ms"

[[module.plan.window]]
partition = "a"
start = "0us"
duration = "1ms"

[[module.plan.window]]
partition = "hog"
start = "1ms"
duration = "1ms"
"#;

/// In the guest's new root: the modules, a pure cgroup2 mount, `up` for 8 s (its limits read while it runs),
/// `down`, and what is left.
const INNER: &str = r#"
export PATH=/usr/bin:/usr/sbin:/sbin:/bin
for k in $MODULES; do insmod "$k" || echo "insmod $k failed"; done
mount -t tmpfs tmpfs /run; mount -t tmpfs tmpfs /tmp
mount -t cgroup2 none /sys/fs/cgroup || echo "mount cgroup2 failed"
echo "cgroup mounts: $(grep cgroup /proc/mounts | awk '{print $3 "@" $2}' | tr '\n' ' ')"
printf '%s' "$SYSTEM" > /tmp/s.toml
partita up /tmp/s.toml --duration 8 > /tmp/up.out 2>&1 &
i=0; while [ $i -lt 150 ] && ! grep -q "is up" /tmp/up.out; do sleep 0.2; i=$((i+1)); done
sleep 1
echo "hog memory.max: $(cat /sys/fs/cgroup/partita/cg2/hog/memory.max)"
echo "a memory.max: $(cat /sys/fs/cgroup/partita/cg2/a/memory.max)"
wait $!; echo "up: $?"
cat /tmp/up.out
echo "hog events: $(grep '"hog"' /run/partita/cg2/events.jsonl | sed 's/.*"event":"\([a-z_]*\)".*/\1/' | tr '\n' ' ')"
partita down; echo "down: $?"
echo "left: cgroups [$(ls /sys/fs/cgroup/partita 2>/dev/null | tr '\n' ' ')] netns [$(ip netns list | tr '\n' ' ')] links [$(ip -o link | cut -d: -f2 | tr -d ' ' | tr '\n' ' ')]"
"#;

/// Moves a tmpfs copy of the initramfs over `/` and runs INNER there.
const OUTER: &str = r#"
mkdir -p /nr && mount -t tmpfs -o size=900m tmpfs /nr || exit 10
for d in bin sbin usr lib lib64 etc root var; do [ -e /$d ] && cp -a /$d /nr/; done
mkdir -p /nr/proc /nr/sys /nr/dev /nr/run /nr/tmp
mount --move /proc /nr/proc && mount --move /sys /nr/sys && mount --move /dev /nr/dev || exit 11
cd /nr && mount --move . / || exit 12
exec chroot . /bin/sh -c "$INNER"
"#;

/// The guest kernel's modules directory in the VM cache.
fn modules_dir() -> PathBuf {
    let root = partita_vm::image::cache_dir().join("modules");
    let version = std::fs::read_dir(&root).unwrap_or_else(|e| panic!("{}: {e} (scripts/setup.sh fetches the guest kernel)", root.display())).flatten().next().expect("a kernel version").path();
    version.join("kernel")
}

fn line<'a>(out: &'a str, prefix: &str) -> &'a str {
    out.lines().find_map(|l| l.strip_prefix(prefix)).unwrap_or_else(|| panic!("no line {prefix:?} in:\n{out}"))
}

#[test]
#[cfg_attr(partita_not_root, ignore = "needs root")]
fn a_module_with_a_plan_comes_up_keeps_its_windows_and_limits_and_leaves_nothing_under_pure_cgroup_v2() {
    let kernel = modules_dir();
    // A partition's state directory is an ext4 image the supervisor makes (mkfs.ext4) and loop-mounts.
    let modules: Vec<PathBuf> = ["net/llc/llc.ko", "net/802/stp.ko", "net/bridge/bridge.ko", "drivers/net/veth.ko", "drivers/block/loop.ko"].iter().map(|m| kernel.join(m)).collect();
    let list = modules.iter().map(|m| m.display().to_string()).collect::<Vec<_>>().join(" ");
    let script = format!("SYSTEM=$(cat <<'XEOF'\n{SYSTEM}\nXEOF\n)\nINNER=$(cat <<'XEOF'\n{INNER}\nXEOF\n)\nMODULES={list:?}\nexport SYSTEM INNER MODULES\n{OUTER}");
    let mut cmd = Command::new(EXE);
    // The guest runs the supervisor itself: it gets the operator's partita, not the partition programs' partita-guest.
    cmd.args(["vm", "run", "--partita", EXE, "--accel", "tcg", "--memory", "1GiB", "--boot-timeout", "120s", "--program", "/usr/bin/ip", "--program", "/usr/sbin/mkfs.ext4"]);
    for m in &modules {
        cmd.arg("--program").arg(m);
    }
    let out = cmd.args(["--", "sh", "-c", &script]).output().unwrap();
    let console = String::from_utf8_lossy(&out.stdout).into_owned();
    let said = String::from_utf8_lossy(&out.stderr);
    eprintln!("{console}");
    assert!(out.status.success(), "the guest ran the script (TCG):\n{console}\n{said}");
    // only cgroup2 is mounted
    assert_eq!(line(&console, "cgroup mounts: ").trim(), "cgroup2@/sys/fs/cgroup", "{console}");
    // up came up and ran its plan: two windows per 2 ms frame for 8 s are 8000 window starts; most must be kept
    assert_eq!(line(&console, "up: "), "0", "{console}");
    let starts: u64 = line(&console, "plan 0: ").split_whitespace().next().unwrap().parse().unwrap();
    assert!(starts >= 6000, "{starts} window starts in 8 s:\n{console}");
    // the limits were set in the v2 files and held: the hog was killed at its memory limit
    assert_eq!(line(&console, "hog memory.max: "), (16u64 << 20).to_string(), "{console}");
    assert_eq!(line(&console, "a memory.max: "), (32u64 << 20).to_string(), "{console}");
    let hog = line(&console, "hog events: ");
    assert!(hog.contains("oom") || hog.contains("memory_limit"), "the hog met its memory limit: {hog}\n{console}");
    // down left nothing
    assert_eq!(line(&console, "down: "), "0", "{console}");
    assert_eq!(line(&console, "left: "), "cgroups [] netns [] links [lo ]", "{console}");
}
