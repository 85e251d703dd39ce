//! The guest's `/init` (busybox `sh`, PID 1) and the console markers it prints for the runner.
//!
//! It mounts `/proc`, `/sys`, `/dev`, loads the virtio modules of the bus the runner names on the kernel
//! command line (`partita.bus=mmio|pci`), brings up `lo` and each NIC of `/etc/partita/net` (found by its MAC,
//! renamed, given its address; no DHCP), exports `/etc/partita/env`, prints the start marker with the guest's
//! uptime, runs the command of `/etc/partita/command`, prints the exit marker with its status, and powers the
//! VM off at once. A step that fails prints the setup-failure marker and powers off. If `/init` itself dies the
//! kernel panics ("Attempted to kill init"), which the runner recognizes like any other panic.

/// Marker lines, each alone on a console line (the runner finds them anywhere in a line, after a command's
/// output that did not end its last line).
pub const START_MARKER: &str = "PARTITA-VM start uptime=";
pub const EXIT_MARKER: &str = "PARTITA-VM exit status=";
pub const SETUP_FAILED_MARKER: &str = "PARTITA-VM setup failed: ";
/// What the kernel prints first when it panics.
pub const PANIC_TEXT: &str = "Kernel panic - not syncing";

/// Where the per-launch archive puts things (the base archive has none of them).
pub const ENV_FILE: &str = "etc/partita/env";
pub const COMMAND_FILE: &str = "etc/partita/command";
pub const NET_FILE: &str = "etc/partita/net";
pub const DDS_FILE: &str = "etc/partita/dds.xml";
pub const ROUTER_FILE: &str = "etc/partita/router.toml";
/// The guest's own partita binary.
pub const GUEST_PARTITA: &str = "/usr/bin/partita";

/// `/init`. Busybox applets only; no loop waits longer than 2 s.
pub const INIT_SCRIPT: &str = r#"#!/bin/sh
# /init of a partita VM partition, written by partita-vm (crates/vm/src/init.rs).
export PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root
fail() {
  echo "PARTITA-VM setup failed: $*"
  poweroff -f
  exit 1
}
mount -t proc proc /proc || fail "mount /proc"
mount -t sysfs sysfs /sys || fail "mount /sys"
mount -t devtmpfs devtmpfs /dev || fail "mount /dev"
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs -o mode=1777 tmpfs /dev/shm
bus=
for arg in $(cat /proc/cmdline); do
  case $arg in partita.bus=*) bus=${arg#partita.bus=} ;; esac
done
[ -f "/etc/partita/modules.$bus" ] || fail "no module list for bus '$bus' (partita.bus=mmio|pci on the kernel command line)"
while read -r module; do
  insmod "/lib/modules/$module" || fail "insmod $module"
done < "/etc/partita/modules.$bus"
ip link set lo up || fail "lo up"
if [ -f /etc/partita/net ]; then
  while read -r mac name cidr; do
    dev=
    tries=0
    while :; do
      for d in /sys/class/net/*; do
        [ "$(cat "$d/address")" = "$mac" ] && dev=${d##*/}
      done
      [ -n "$dev" ] && break
      tries=$((tries + 1))
      [ $tries -le 200 ] || fail "no NIC with MAC $mac (for $name)"
      sleep 0.01
    done
    [ "$dev" = "$name" ] || ip link set dev "$dev" name "$name" || fail "rename $dev to $name"
    ip addr add "$cidr" dev "$name" || fail "address $cidr on $name"
    ip link set "$name" up || fail "$name up"
  done < /etc/partita/net
fi
[ -f /etc/partita/env ] && . /etc/partita/env
[ -n "$PARTITA_PARTITION" ] && hostname "$PARTITA_PARTITION"
[ -f /etc/partita/command ] || fail "no command"
. /etc/partita/command
cd /
read -r up idle < /proc/uptime
echo "PARTITA-VM start uptime=$up"
"$@"
status=$?
echo
echo "PARTITA-VM exit status=$status"
poweroff -f
"#;

/// `text` as one single-quoted shell word: any byte but NUL survives `sh` unchanged.
pub fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// Whether `name` can be a shell variable name.
pub fn is_variable_name(name: &str) -> bool {
    let mut b = name.bytes();
    matches!(b.next(), Some(c) if c == b'_' || c.is_ascii_alphabetic()) && b.all(|c| c == b'_' || c.is_ascii_alphanumeric())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    #[test]
    fn quoted_words_come_back_unchanged_through_sh() {
        let words = ["plain", "two words", "it's", "\"double\"", "$HOME `id` $(id)", "new\nline", "back\\slash", ""];
        let script = format!("for w in {}; do printf '%s\\0' \"$w\"; done", words.iter().map(|w| shell_quote(w)).collect::<Vec<_>>().join(" "));
        let out = Command::new("sh").arg("-c").arg(&script).output().unwrap();
        let back: Vec<&[u8]> = out.stdout.split(|b| *b == 0).collect();
        assert_eq!(back.len(), words.len() + 1);
        for (w, b) in words.iter().zip(back) {
            assert_eq!(w.as_bytes(), b);
        }
    }

    #[test]
    fn variable_names() {
        assert!(is_variable_name("PARTITA_DOMAIN") && is_variable_name("_x1"));
        assert!(!is_variable_name("") && !is_variable_name("1A") && !is_variable_name("A-B") && !is_variable_name("A B"));
    }

    #[test]
    fn the_script_is_valid_sh() {
        let out = Command::new("sh").args(["-n", "-c", INIT_SCRIPT]).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        for marker in [START_MARKER, EXIT_MARKER, SETUP_FAILED_MARKER] {
            assert!(INIT_SCRIPT.contains(marker), "{marker}");
        }
    }
}
