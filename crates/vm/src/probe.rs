//! Which acceleration a VM partition gets when its system file says `auto`: KVM only if the real guest boots
//! under it on this machine, else TCG.
//!
//! `/dev/kvm` being there proves little: on the team's machines it is `kvm_pvm` (nested, paravirtualized),
//! under which a stock guest kernel hangs right after the firmware. So the probe boots the actual guest (the
//! kernel and base initramfs partitions use, running `true`) under KVM with a short timeout and looks for the
//! start marker. The verdict and its reason are cached in `accel-probe.json` beside the images, keyed by the
//! guest kernel, the host kernel release and the KVM module, so only the first VM partition on a machine pays
//! for the probe (up to its timeout when KVM hangs).
use crate::launch::LaunchSpec;
use crate::qemu::{Accel, Hardware, Machine};
use crate::runner::{self, Outcome, RunConfig};
use partita_env::PartitionEnv;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// The probe's default boot timeout: a stock guest boots in well under a second under working KVM.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
pub const CACHE_FILE: &str = "accel-probe.json";

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Verdict {
    pub accel: Accel,
    /// Why, in words (what the KVM boot did).
    pub reason: String,
    /// What the verdict holds for: the guest kernel file, the host's kernel release, the KVM module.
    pub guest_kernel: String,
    pub host_kernel: String,
    pub kvm_module: Option<String>,
    /// Runner start to start marker under KVM, when it booted.
    pub kvm_boot_s: Option<f64>,
    pub probed_at_unix: u64,
    /// Whether this came from the cache file rather than a boot just now.
    #[serde(skip)]
    pub cached: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("the probe's guest: {0}")]
    Launch(#[from] crate::launch::LaunchError),
}

/// The loaded KVM module (`kvm_intel`, `kvm_amd`, `kvm_pvm`), if any.
pub fn kvm_module() -> Option<String> {
    ["kvm_pvm", "kvm_intel", "kvm_amd"].iter().find(|m| Path::new("/sys/module").join(m).exists()).map(|m| m.to_string())
}

fn host_kernel() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease").map(|s| s.trim().to_string()).unwrap_or_default()
}

/// The cached verdict for `kernel` on this host (kernel release and KVM module as they are now), without
/// booting anything; `None` when there is none yet.
pub fn cached(kernel: &Path, cache_dir: &Path) -> Option<Verdict> {
    let guest_kernel = kernel.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let mut v = std::fs::read(cache_dir.join(CACHE_FILE)).ok().and_then(|b| serde_json::from_slice::<Verdict>(&b).ok())?;
    (v.guest_kernel == guest_kernel && v.host_kernel == host_kernel() && v.kvm_module == kvm_module()).then(|| {
        v.cached = true;
        v
    })
}

/// The verdict for booting `kernel` with `base`: from `cache_dir/accel-probe.json` when it holds one for this
/// guest kernel, host kernel and KVM module (and `fresh` is false), else by booting under KVM now.
pub fn probe(kernel: &Path, base: &Path, cache_dir: &Path, timeout: Duration, fresh: bool) -> Result<Verdict, ProbeError> {
    let guest_kernel = kernel.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let (host, module) = (host_kernel(), kvm_module());
    let cache = cache_dir.join(CACHE_FILE);
    if !fresh {
        if let Some(v) = cached(kernel, cache_dir) {
            return Ok(v);
        }
    }
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_secs();
    let mut verdict = Verdict { accel: Accel::Tcg, reason: String::new(), guest_kernel, host_kernel: host, kvm_module: module.clone(), kvm_boot_s: None, probed_at_unix: now, cached: false };
    let kvm_name = module.as_deref().unwrap_or("no KVM module loaded");
    match std::fs::OpenOptions::new().read(true).write(true).open("/dev/kvm") {
        Err(e) => verdict.reason = format!("/dev/kvm cannot be opened ({e})"),
        Ok(_) => {
            let outcome = boot_under_kvm(kernel, base, cache_dir, timeout)?;
            match &outcome {
                Outcome::Exited { status: 0, times } => {
                    verdict.accel = Accel::Kvm;
                    verdict.kvm_boot_s = Some(times.boot.as_secs_f64());
                    verdict.reason = format!("the guest booted under KVM ({kvm_name}) in {:.2} s", times.boot.as_secs_f64());
                }
                Outcome::BootTimeout { after, .. } => {
                    verdict.reason = format!("under KVM ({kvm_name}) the guest gave no start marker within {:.0} s (it hangs there)", after.as_secs_f64())
                }
                other => verdict.reason = format!("under KVM ({kvm_name}) the guest did not run: {}", other.summary()),
            }
        }
    }
    std::fs::create_dir_all(cache_dir).map_err(|source| ProbeError::Io { path: cache_dir.into(), source })?;
    let tmp = cache_dir.join(format!(".{CACHE_FILE}.{}.tmp", std::process::id()));
    let text = serde_json::to_vec_pretty(&verdict).expect("a verdict serializes");
    std::fs::write(&tmp, text).and_then(|_| std::fs::rename(&tmp, &cache)).map_err(|source| ProbeError::Io { path: cache.clone(), source })?;
    Ok(verdict)
}

fn boot_under_kvm(kernel: &Path, base: &Path, cache_dir: &Path, timeout: Duration) -> Result<Outcome, ProbeError> {
    let env = PartitionEnv { partition: "accel-probe".into(), module: "probe".into(), domain: 0, external_domain: None, uplink_domain: None, router_file: None, cyclonedds_uri: String::new(), fastdds_profile: None, state_dir: None, ports: Vec::new() };
    let spec = LaunchSpec { env, extra_env: Vec::new(), nics: Vec::new(), argv: vec!["true".into()], programs: Vec::new(), router_file: None };
    let extra = cache_dir.join(format!(".probe-{}.cpio", std::process::id()));
    spec.write_archive(&extra)?;
    let mut config = RunConfig::new(kernel.to_path_buf(), vec![base.to_path_buf(), extra.clone()]);
    config.hardware = Hardware { machine: Machine::default(), accel: Accel::Kvm, memory_mib: 256, cpus: 1 };
    config.boot_timeout = timeout;
    let mut console = Vec::new();
    let outcome = runner::run(&config, &mut console, &AtomicBool::new(false));
    let _ = std::fs::remove_file(&extra);
    tracing::debug!(target: "partita::vm", "acceleration probe console:\n{}", String::from_utf8_lossy(&console));
    Ok(outcome)
}
