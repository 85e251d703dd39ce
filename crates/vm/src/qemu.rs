//! QEMU's command line for a partition guest: no display, no defaults, no option ROMs, the serial console on
//! QEMU's stdout, `-no-reboot` (a guest reboot, and so a kernel panic with `panic=-1`, ends QEMU), the kernel
//! and initramfs loaded directly, and one virtio-net device per tap descriptor QEMU inherits.
use crate::launch::MacAddr;
use std::fmt;
use std::os::fd::RawFd;
use std::path::{Path, PathBuf};

/// The QEMU machine type. Boot times under TCG on the team's machines are in docs/vm.md.
///
/// `pc` is the default because a partition guest is frozen outside its windows, and it may be frozen while
/// its kernel calibrates the local APIC timer (about 100 ms early in the boot, timed by the TSC). On `pc` and
/// `q35` the kernel checks that measurement against the ACPI PM timer and corrects it; `microvm` has no PM
/// timer, so a freeze there leaves the guest's timers running many times too slow (15.8 times, seen here),
/// or disables the APIC timer altogether, and microvm's PIT interrupts do not reach the guest: the boot then
/// hangs with QEMU idle. `microvm` boots 0.2-0.8 s faster (docs/vm.md) and stays available
/// (`partita vm run --machine`) for guests that are never frozen while they boot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Machine {
    /// QEMU's minimal machine: virtio-mmio devices described by ACPI, one ISA serial port, no PCI, qboot.
    Microvm,
    /// The i440FX PC with virtio-pci.
    #[default]
    Pc,
    /// The Q35 PC with virtio-pci.
    Q35,
}

impl Machine {
    pub const ALL: [Machine; 3] = [Machine::Microvm, Machine::Pc, Machine::Q35];

    /// The virtio transport, as `/init` names its module list (`partita.bus=`).
    pub fn bus(self) -> &'static str {
        match self {
            Machine::Microvm => "mmio",
            Machine::Pc | Machine::Q35 => "pci",
        }
    }

    fn nic_device(self) -> &'static str {
        match self {
            Machine::Microvm => "virtio-net-device",
            Machine::Pc | Machine::Q35 => "virtio-net-pci",
        }
    }
}

impl fmt::Display for Machine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Machine::Microvm => "microvm",
            Machine::Pc => "pc",
            Machine::Q35 => "q35",
        })
    }
}

impl std::str::FromStr for Machine {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "microvm" => Ok(Machine::Microvm),
            "pc" => Ok(Machine::Pc),
            "q35" => Ok(Machine::Q35),
            _ => Err(format!("machine {s:?}: microvm, pc or q35")),
        }
    }
}

/// How QEMU runs the guest's instructions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Accel {
    /// QEMU's own translator: slow, but boots everywhere.
    Tcg,
    /// Hardware virtualization through /dev/kvm.
    Kvm,
}

impl fmt::Display for Accel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Accel::Tcg => "tcg",
            Accel::Kvm => "kvm",
        })
    }
}

impl std::str::FromStr for Accel {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "tcg" => Ok(Accel::Tcg),
            "kvm" => Ok(Accel::Kvm),
            _ => Err(format!("accel {s:?}: tcg or kvm (`auto` is resolved by the probe before the runner starts)")),
        }
    }
}

/// A tap descriptor the runner inherited, and the MAC address its guest NIC gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NetFd {
    pub fd: RawFd,
    pub mac: MacAddr,
}

/// The guest's hardware.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hardware {
    pub machine: Machine,
    pub accel: Accel,
    pub memory_mib: u64,
    pub cpus: u32,
}

impl Default for Hardware {
    fn default() -> Self {
        Hardware { machine: Machine::default(), accel: Accel::Tcg, memory_mib: 256, cpus: 1 }
    }
}

/// The kernel command line partita always gives: the console on the first serial port, only warnings and worse on
/// it (`loglevel=5`: every character costs an emulated UART write, and a warning such as "APIC frequency too slow,
/// disabling apic timer" is what explains a guest that never starts), reboot at once on a panic (so QEMU, with
/// `-no-reboot`, ends), the virtio bus for `/init`, and no waiting for hardware a partition guest lacks.
///
/// `tsc_khz`: under TCG the guest's TSC is the host's, and `microvm` has no HPET or ACPI PM timer, so the guest can
/// calibrate its TSC only against the PIT, which fails on a busy host ("tsc: Unable to calibrate against PIT") and
/// then hangs the boot (2 of 6 boots on a loaded team machine); given the rate, it does not calibrate at all
/// (6 of 6).
pub fn kernel_command_line(machine: Machine, tsc_khz: Option<u64>, extra: Option<&str>) -> String {
    // reboot=t: a panic reboots by triple fault, which QEMU turns into its exit at once on every machine type;
    // the default order (ACPI, keyboard controller, …) left microvm hanging after 1 panic in 3.
    let mut a = String::from("console=ttyS0 loglevel=5 panic=-1 oops=panic reboot=t rdinit=/init");
    a.push_str(&format!(" partita.bus={}", machine.bus()));
    // No keyboard controller to probe, one UART to set up, no clocksource watchdog to wait for.
    a.push_str(" i8042.noaux i8042.nokbd i8042.nopnp 8250.nr_uarts=1 tsc=reliable no_timer_check");
    if machine == Machine::Microvm {
        a.push_str(" pci=off");
    }
    if let Some(khz) = tsc_khz {
        a.push_str(&format!(" tsc_early_khz={khz}"));
    }
    if let Some(e) = extra.filter(|e| !e.trim().is_empty()) {
        a.push(' ');
        a.push_str(e.trim());
    }
    a
}

/// QEMU's arguments (without the program).
pub fn qemu_args(hw: &Hardware, kernel: &Path, initrd: &Path, nets: &[NetFd], append: &str) -> Vec<String> {
    let mut a: Vec<String> = Vec::new();
    let mut push = |items: &[&str]| a.extend(items.iter().map(|s| s.to_string()));
    push(&["-nodefaults", "-no-user-config", "-display", "none", "-serial", "stdio", "-no-reboot"]);
    match hw.machine {
        Machine::Microvm => {
            push(&["-M", "microvm,x-option-roms=off,isa-serial=on,rtc=on,pit=on,pic=on,acpi=on"]);
            if Path::new(QBOOT).exists() {
                push(&["-bios", QBOOT]);
            }
        }
        Machine::Pc => push(&["-M", "pc", "-vga", "none"]),
        Machine::Q35 => push(&["-M", "q35", "-vga", "none"]),
    }
    // QEMU's default CPU model under both: `-cpu host` fails under kvm_pvm, and TCG gains nothing from `max`.
    push(&["-accel", &hw.accel.to_string()]);
    push(&["-m", &format!("{}M", hw.memory_mib), "-smp", &hw.cpus.to_string()]);
    push(&["-kernel", &kernel.to_string_lossy(), "-initrd", &initrd.to_string_lossy(), "-append", append]);
    for (i, n) in nets.iter().enumerate() {
        push(&["-netdev", &format!("tap,id=n{i},fd={}", n.fd), "-device", &format!("{},netdev=n{i},mac={}", hw.machine.nic_device(), n.mac)]);
    }
    a
}

/// QEMU's small firmware for direct kernel boot (Debian's qemu-system-data has it); microvm falls back to
/// its SeaBIOS build without it.
pub const QBOOT: &str = "/usr/share/qemu/qboot.rom";

/// `qemu-system-x86_64`, or `$PARTITA_QEMU`.
pub fn qemu_program() -> PathBuf {
    std::env::var_os("PARTITA_QEMU").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("qemu-system-x86_64"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nics_are_taps_on_inherited_descriptors_with_their_macs() {
        let mac = MacAddr([2, 0, 0, 0, 0, 1]);
        let a = qemu_args(&Hardware::default(), Path::new("/k"), Path::new("/proc/self/fd/5"), &[NetFd { fd: 7, mac }], "console=ttyS0");
        let joined = a.join(" ");
        assert!(joined.contains("-M pc ") && joined.contains("-netdev tap,id=n0,fd=7 -device virtio-net-pci,netdev=n0,mac=02:00:00:00:00:01"), "{joined}");
        assert!(joined.contains("-nodefaults") && joined.contains("-no-reboot") && joined.contains("-serial stdio"));
        let micro = qemu_args(&Hardware { machine: Machine::Microvm, ..Hardware::default() }, Path::new("/k"), Path::new("/i"), &[NetFd { fd: 3, mac }], "");
        assert!(micro.join(" ").contains("virtio-net-device,netdev=n0"));
    }

    #[test]
    fn the_command_line_names_the_bus_and_panics_end_the_vm() {
        let c = kernel_command_line(Machine::Microvm, Some(2_596_146), Some(" lpj=1 "));
        assert!(c.contains("partita.bus=mmio") && c.contains("panic=-1") && c.contains("tsc_early_khz=2596146") && c.ends_with(" lpj=1"), "{c}");
        assert!(kernel_command_line(Machine::Pc, None, None).contains("partita.bus=pci"));
        for m in Machine::ALL {
            assert_eq!(m.to_string().parse::<Machine>().unwrap(), m);
        }
    }
}
