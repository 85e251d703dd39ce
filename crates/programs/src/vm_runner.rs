//! A VM partition's program (`partita-vm-runner`, `partita app vm`): runs QEMU on inherited tap descriptors,
//! copies the guest's console to stdout, and exits with the guest command's status or one of the runner's codes.
use clap::Args;
use partita_vm::image;
use partita_vm::launch::MacAddr;
use partita_vm::qemu::{Accel, Hardware, Machine, NetFd};
use partita_vm::runner::{self, exit_code, RunConfig};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

/// `tcg`, `kvm`, or `auto` (the probe decides).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum AccelChoice {
    Auto,
    Fixed(Accel),
}

pub fn parse_accel(s: &str) -> Result<AccelChoice, String> {
    if s == "auto" {
        Ok(AccelChoice::Auto)
    } else {
        s.parse().map(AccelChoice::Fixed)
    }
}

pub fn parse_duration(s: &str) -> Result<Duration, String> {
    partita_router_config::parse_duration(s).map_err(|e| format!("{s:?} {e}"))
}

/// Memory in MiB: `256MiB`, `256M`, `1GiB`, `1G`, or a bare number of MiB.
pub fn parse_memory(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (n, unit) = t.split_at(split);
    let n: u64 = n.parse().map_err(|_| format!("{s:?}: give the memory as 256MiB or 1GiB"))?;
    let mib = match unit {
        "" | "M" | "MiB" | "MB" => n,
        "G" | "GiB" | "GB" => n.saturating_mul(1024),
        _ => return Err(format!("{s:?}: unknown unit (MiB or GiB)")),
    };
    if !(16..=1 << 20).contains(&mib) {
        return Err(format!("{s:?}: between 16MiB and 1TiB"));
    }
    Ok(mib)
}

/// `N` or `N,mac=02:…`: a tap descriptor this process inherited.
fn parse_net_fd(s: &str) -> Result<(i32, Option<MacAddr>), String> {
    let (fd, rest) = s.split_once(',').unwrap_or((s, ""));
    let fd: i32 = fd.parse().map_err(|_| format!("--net-fd {s:?}: a descriptor number, optionally `,mac=02:…`"))?;
    let mac = match rest {
        "" => None,
        r => Some(r.strip_prefix("mac=").ok_or_else(|| format!("--net-fd {s:?}: only `mac=` may follow the number"))?.parse()?),
    };
    Ok((fd, mac))
}

#[derive(Args)]
pub struct VmAppArgs {
    /// The guest kernel (vmlinux-VERSION, else vmlinuz-VERSION, in the VM cache).
    #[arg(long)]
    kernel: PathBuf,
    /// Initramfs archives, concatenated in this order: the base image, then the per-launch archive.
    #[arg(long, required = true)]
    initrd: Vec<PathBuf>,
    #[arg(long, default_value = "256MiB", value_parser = parse_memory)]
    memory: u64,
    #[arg(long, default_value_t = 1)]
    cpus: u32,
    /// tcg, kvm, or auto (KVM only if the guest really boots under it here; the verdict is cached).
    #[arg(long, default_value = "tcg", value_parser = parse_accel)]
    accel: AccelChoice,
    /// pc, q35, or microvm (boots 0.2-0.8 s faster, but its guests' timers can go wrong when the guest is
    /// frozen while it boots: docs/vm.md).
    #[arg(long, default_value = "pc")]
    machine: Machine,
    /// A tap descriptor inherited from the parent, as `N` or `N,mac=02:…` (default MAC: derived from the
    /// tap's name); once per guest NIC, in the guest's NIC order.
    #[arg(long = "net-fd", value_parser = parse_net_fd)]
    net_fd: Vec<(i32, Option<MacAddr>)>,
    /// More kernel command-line arguments.
    #[arg(long, allow_hyphen_values = true)]
    append: Option<String>,
    /// Kill the guest when its command has not started by then (wall time from the runner's start).
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    boot_timeout: Duration,
    /// The QEMU binary [default: qemu-system-x86_64, or $PARTITA_QEMU].
    #[arg(long)]
    qemu: Option<PathBuf>,
    /// An inherited descriptor (a pipe's write end) to close once the guest's command starts: how the
    /// supervisor learns that a VM partition's boot is over.
    #[arg(long)]
    ready_fd: Option<i32>,
}

/// `partita app vm`: exits with the guest command's status, or with one of the runner's codes.
pub fn run(a: VmAppArgs) -> ExitCode {
    partita_os::signal::install_stop_signals();
    let accel = match a.accel {
        AccelChoice::Fixed(x) => x,
        AccelChoice::Auto => {
            let cache = a.kernel.parent().map(Path::to_path_buf).unwrap_or_else(image::cache_dir);
            match partita_vm::probe::probe(&a.kernel, &a.initrd[0], &cache, partita_vm::probe::DEFAULT_TIMEOUT, false) {
                Ok(v) => {
                    println!("partita vm: acceleration {} ({}{})", v.accel, v.reason, if v.cached { ", cached verdict" } else { "" });
                    v.accel
                }
                Err(e) => {
                    println!("partita vm: acceleration probe failed ({e}); using tcg");
                    Accel::Tcg
                }
            }
        }
    };
    let mut nets = Vec::new();
    for (fd, mac) in &a.net_fd {
        let mac = match mac {
            Some(m) => *m,
            None => match partita_os::tap::name_of(*fd) {
                Ok(name) => MacAddr::for_interface(&name),
                Err(e) => {
                    eprintln!("partita app vm: error: --net-fd {fd}: not a tap device ({e})");
                    return ExitCode::from(exit_code::QEMU_FAILED);
                }
            },
        };
        nets.push(NetFd { fd: *fd, mac });
    }
    let mut config = RunConfig::new(a.kernel, a.initrd);
    if let Some(q) = a.qemu {
        config.qemu = q;
    }
    config.hardware = Hardware { machine: a.machine, accel, memory_mib: a.memory, cpus: a.cpus.max(1) };
    config.nets = nets;
    config.append = a.append;
    config.boot_timeout = a.boot_timeout;
    let ready = match a.ready_fd.map(partita_os::fd::take_inherited).transpose() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("partita app vm: error: --ready-fd {}: {e}", a.ready_fd.unwrap_or(-1));
            return ExitCode::from(exit_code::QEMU_FAILED);
        }
    };
    let stdout = std::io::stdout();
    let outcome = runner::run_reporting(&config, &mut stdout.lock(), partita_os::signal::stop_flag(), ready);
    ExitCode::from(outcome.exit_code())
}

