//! `partita vm …`: the guest image, the acceleration probe, a guest run by hand (the runner, a VM partition's
//! program, is crates/programs' `partita-vm-runner`, `partita app vm`).
use clap::{Args, Subcommand};
use partita_programs::vm_runner::{parse_accel, parse_duration, parse_memory, AccelChoice};
use partita_vm::image::{self, BaseSpec, Compression};
use partita_vm::launch::{GuestNic, LaunchSpec, MacAddr};
use partita_vm::qemu::{Hardware, Machine, NetFd};
use partita_vm::runner::{self, RunConfig};
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::process::{Command, ExitCode};
use std::time::Duration;

#[derive(Args)]
pub struct VmArgs {
    #[command(subcommand)]
    command: VmCommand,
}

#[derive(Args)]
struct CacheArgs {
    /// The VM cache [default: $PARTITA_VM_CACHE, else /var/cache/partita/vm].
    #[arg(long)]
    cache: Option<PathBuf>,
}

impl CacheArgs {
    fn dir(&self) -> PathBuf {
        self.cache.clone().unwrap_or_else(image::cache_dir)
    }
}

#[derive(Args)]
struct ImageArgs {
    #[command(flatten)]
    cache: CacheArgs,
    /// Store the base archive gzip-compressed (boots slower under TCG; see docs/vm.md).
    #[arg(long)]
    gzip: bool,
    /// The binary to put in the guest as its `partita` [default: partita-guest beside this binary, else this one].
    #[arg(long)]
    partita: Option<PathBuf>,
}

impl ImageArgs {
    fn prepare(&self) -> Result<partita_vm::BaseImage, String> {
        let mut spec = BaseSpec::new(&self.cache.dir()).map_err(|e| e.to_string())?;
        if let Some(p) = &self.partita {
            spec.partita = p.clone();
        }
        if self.gzip {
            spec.compression = Compression::Gzip;
        }
        image::prepare_base(&spec).map_err(|e| e.to_string())
    }
}

#[derive(Subcommand)]
enum VmCommand {
    /// Build (or find in the cache) the base initramfs and print its path, size and build time.
    Image(ImageArgs),
    /// Decide the acceleration `auto` means here (boots the guest under KVM unless a verdict is cached).
    Probe {
        #[command(flatten)]
        cache: CacheArgs,
        /// Probe again even when a verdict is cached.
        #[arg(long)]
        fresh: bool,
        #[arg(long, default_value = "10s", value_parser = parse_duration)]
        timeout: Duration,
    },
    /// Write a per-launch archive (environment, command; no NICs) for `partita app vm --initrd`.
    Extra {
        #[arg(long)]
        out: PathBuf,
        #[arg(long, default_value = "vm")]
        partition: String,
        /// NAME=VALUE, added to the guest's environment.
        #[arg(long)]
        env: Vec<String>,
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
    /// Boot a guest that runs COMMAND and exit with its status: the image, the per-launch archive and the
    /// runner in one step (for trying things by hand and measuring).
    Run(RunArgs),
}

#[derive(Args)]
struct RunArgs {
    #[command(flatten)]
    image: ImageArgs,
    #[arg(long, default_value = "pc")]
    machine: Machine,
    #[arg(long, default_value = "tcg", value_parser = parse_accel)]
    accel: AccelChoice,
    #[arg(long, default_value = "256MiB", value_parser = parse_memory)]
    memory: u64,
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    boot_timeout: Duration,
    #[arg(long, allow_hyphen_values = true)]
    append: Option<String>,
    /// A guest NIC on a new tap attached to a bridge of this network namespace:
    /// `tap=NAME,bridge=BRIDGE,address=198.18.x.y/P[,peer=198.18.…]`; the guest calls it vnic0, vnic1, … in order.
    #[arg(long)]
    nic: Vec<String>,
    /// The guest's DDS domain on its NICs.
    #[arg(long, default_value_t = 0)]
    domain: u32,
    /// A host program to put in the guest at its own path, with the shared libraries it needs (once per
    /// program): what the command runs that busybox and partita do not provide (iproute2's `ip`, say).
    #[arg(long, value_name = "PATH")]
    program: Vec<PathBuf>,
    #[arg(last = true, required = true)]
    command: Vec<String>,
}

pub fn run(a: VmArgs) -> ExitCode {
    match a.command {
        VmCommand::Image(i) => match i.prepare() {
            Ok(img) => {
                println!("{}", img.path.display());
                match &img.built {
                    Some(b) => eprintln!(
                        "partita vm image: built in {:.2} s: {} bytes, {} entries (partita stripped: {} bytes), kernel {}, key {}",
                        b.duration.as_secs_f64(),
                        img.bytes,
                        b.entries,
                        b.partita_bytes,
                        img.kernel.version,
                        img.key
                    ),
                    None => eprintln!("partita vm image: cached: {} bytes, kernel {}, key {}", img.bytes, img.kernel.version, img.key),
                }
                ExitCode::SUCCESS
            }
            Err(e) => fail("image", &e),
        },
        VmCommand::Probe { cache, fresh, timeout } => {
            let dir = cache.dir();
            let img = match (ImageArgs { cache, gzip: false, partita: None }).prepare() {
                Ok(i) => i,
                Err(e) => return fail("probe", &e),
            };
            match partita_vm::probe::probe(&img.kernel.image, &img.path, &dir, timeout, fresh) {
                Ok(v) => {
                    println!("{} ({}){}", v.accel, v.reason, if v.cached { " [cached verdict]" } else { "" });
                    ExitCode::SUCCESS
                }
                Err(e) => fail("probe", &e.to_string()),
            }
        }
        VmCommand::Extra { out, partition, env, command } => {
            let extra_env = match env.iter().map(|kv| kv.split_once('=').map(|(k, v)| (k.to_string(), v.to_string())).ok_or(kv)).collect::<Result<Vec<_>, _>>() {
                Ok(e) => e,
                Err(kv) => return fail("extra", &format!("--env {kv:?}: give NAME=VALUE")),
            };
            let spec = LaunchSpec { env: plain_env(&partition), extra_env, nics: Vec::new(), argv: command, programs: Vec::new(), router_file: None };
            match spec.write_archive(&out) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => fail("extra", &e.to_string()),
            }
        }
        VmCommand::Run(r) => run_guest(r),
    }
}

fn fail(what: &str, msg: &str) -> ExitCode {
    eprintln!("partita vm {what}: error: {msg}");
    ExitCode::FAILURE
}

fn plain_env(partition: &str) -> partita_env::PartitionEnv {
    partita_env::PartitionEnv {
        partition: partition.into(),
        module: partition.into(),
        domain: 0,
        external_domain: None,
        uplink_domain: None,
        router_file: None,
        cyclonedds_uri: partita_vm::launch::GUEST_DDS_URI.into(),
        fastdds_profile: None,
        state_dir: None,
        ports: Vec::new(),
    }
}

struct NicArg {
    tap: String,
    bridge: String,
    address: Ipv4Addr,
    prefix: u8,
    peers: Vec<Ipv4Addr>,
}

fn parse_nic(s: &str) -> Result<NicArg, String> {
    let (mut tap, mut bridge, mut cidr, mut peers) = (None, None, None, Vec::new());
    for part in s.split(',') {
        match part.split_once('=') {
            Some(("tap", v)) => tap = Some(v.to_string()),
            Some(("bridge", v)) => bridge = Some(v.to_string()),
            Some(("address", v)) => cidr = Some(v.to_string()),
            Some(("peer", v)) => peers.push(v.parse().map_err(|_| format!("--nic: peer {v:?} is not an IPv4 address"))?),
            _ => return Err(format!("--nic {s:?}: tap=NAME,bridge=BRIDGE,address=A.B.C.D/P[,peer=A.B.C.D]")),
        }
    }
    let cidr = cidr.ok_or("--nic: address= is missing")?;
    let (addr, prefix) = cidr.split_once('/').ok_or_else(|| format!("--nic: address {cidr:?} needs /PREFIX"))?;
    Ok(NicArg {
        tap: tap.ok_or("--nic: tap= is missing")?,
        bridge: bridge.ok_or("--nic: bridge= is missing")?,
        address: addr.parse().map_err(|_| format!("--nic: {addr:?} is not an IPv4 address"))?,
        prefix: prefix.parse().map_err(|_| format!("--nic: prefix {prefix:?} is not a number"))?,
        peers,
    })
}

fn run_guest(r: RunArgs) -> ExitCode {
    partita_os::signal::install_stop_signals();
    let nic_args = match r.nic.iter().map(|s| parse_nic(s)).collect::<Result<Vec<_>, _>>() {
        Ok(n) => n,
        Err(e) => return fail("run", &e),
    };
    let base = match r.image.prepare() {
        Ok(i) => i,
        Err(e) => return fail("run", &e),
    };
    // Taps live while this process holds their descriptors: they go with it.
    let mut taps = Vec::new();
    let mut nics = Vec::new();
    let mut nets = Vec::new();
    for (i, n) in nic_args.iter().enumerate() {
        let tap = match partita_os::tap::create(&n.tap) {
            Ok(t) => t,
            Err(e) => return fail("run", &format!("tap {}: {e}", n.tap)),
        };
        let attached = Command::new("ip").args(["link", "set", &n.tap, "master", &n.bridge, "up"]).status();
        if !attached.is_ok_and(|s| s.success()) {
            return fail("run", &format!("ip link set {} master {} up failed", n.tap, n.bridge));
        }
        let mac = MacAddr::for_interface(&n.tap);
        use std::os::fd::AsRawFd;
        nets.push(NetFd { fd: tap.as_raw_fd(), mac });
        taps.push(tap);
        nics.push(GuestNic { name: format!("vnic{i}"), mac, address: n.address, prefix: n.prefix, domain: r.domain, peers: n.peers.clone() });
    }
    let mut env = plain_env("vm");
    env.domain = r.domain;
    let spec = LaunchSpec { env, extra_env: Vec::new(), nics, argv: r.command, programs: r.program, router_file: None };
    let extra = std::env::temp_dir().join(format!("partita-vm-run-{}.cpio", std::process::id()));
    if let Err(e) = spec.write_archive(&extra) {
        return fail("run", &e.to_string());
    }
    let accel = match r.accel {
        AccelChoice::Fixed(a) => a,
        AccelChoice::Auto => match partita_vm::probe::probe(&base.kernel.image, &base.path, &r.image.cache.dir(), partita_vm::probe::DEFAULT_TIMEOUT, false) {
            Ok(v) => {
                println!("partita vm: acceleration {} ({})", v.accel, v.reason);
                v.accel
            }
            Err(e) => {
                let _ = std::fs::remove_file(&extra);
                return fail("run", &e.to_string());
            }
        },
    };
    let mut config = RunConfig::new(base.kernel.image.clone(), vec![base.path.clone(), extra.clone()]);
    config.hardware = Hardware { machine: r.machine, accel, memory_mib: r.memory, cpus: 1 };
    config.nets = nets;
    config.append = r.append;
    config.boot_timeout = r.boot_timeout;
    let stdout = std::io::stdout();
    let outcome = runner::run(&config, &mut stdout.lock(), partita_os::signal::stop_flag());
    let _ = std::fs::remove_file(&extra);
    drop(taps);
    ExitCode::from(outcome.exit_code())
}
