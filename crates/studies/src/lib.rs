//! The studies of papers 003 and 004, run on the machine at hand with native, process-partition and
//! VM-partition rows, each as systems under partita's supervisor:
//!
//! - [`virt`]: `partita bench virt`, paper 003: a DDS client-server exchange with server work swept from 0 to
//!   100 µs, against raw UDP (the paper's "ideal" middleware), with the server native, in a process partition
//!   and in a VM partition, alone on its CPU and in a plan with a neighbour; overhead split and deadline shares.
//! - [`rt`]: `partita bench rt`, paper 004: `cyclictest` under `stress-ng` load in the testing profiles TP1–TP6
//!   on the system profiles native, process partition, process partition under a plan and VM partition; the
//!   paper's statistics, box plots, stability over time and a verdict against the paper's Table 1.
//! - [`isolation`]: `partita bench isolation`, issue 31's fault suite: what a busy partition keeps of its planned
//!   time while its neighbour makes the kernel work (writes, fsync, huge pages, calls over many memory areas,
//!   timers, a packet flood, fork storms…), as a process partition and as a VM partition.
//! - [`boxstats`] and [`plot`]: the statistics of paper 004's tables and the figures (SVG, PNG through
//!   `rsvg-convert`).
#![forbid(unsafe_code)]
pub mod boxstats;
pub mod isolation;
pub mod plot;
pub mod rt;
pub mod virt;

/// A TOML array of strings (a command in a generated system file).
pub(crate) fn toml_strings(v: &[String]) -> String {
    toml::Value::Array(v.iter().cloned().map(toml::Value::String).collect()).to_string()
}

/// The machine, as reports name it: CPU, CPUs, kernel, and what virtualizes it (`systemd-detect-virt`, or the
/// CPU's hypervisor flag).
pub fn machine() -> String {
    let virt = std::process::Command::new("systemd-detect-virt")
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|s| !s.is_empty());
    let flag = std::fs::read_to_string("/proc/cpuinfo").map(|t| t.contains(" hypervisor")).unwrap_or(false);
    let what = match (virt.as_deref(), flag) {
        (Some("none"), false) | (None, false) => "bare metal (no hypervisor flag)".to_string(),
        (Some("none") | None, true) => "a virtual machine (the CPU's hypervisor flag; systemd-detect-virt names none)".to_string(),
        (Some(v), _) => format!("a virtual machine (systemd-detect-virt: {v}; hypervisor flag {})", if flag { "set" } else { "not set" }),
    };
    format!("{}; itself {what}", partita_paper::bench::machine())
}
