//! Facts about the machine a result was measured on, what disturbed it while a run measured (the hypervisor's
//! steal time, the CPU frequency), and wall-clock timestamps (RFC 3339, UTC).
use serde::{Deserialize, Serialize};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Machine {
    pub hostname: String,
    pub kernel: String,
    pub cpu_model: String,
    pub cores: usize,
}

fn read_trim(path: &str) -> String {
    std::fs::read_to_string(path).map(|s| s.trim().to_string()).unwrap_or_else(|_| "unknown".into())
}

impl Machine {
    pub fn probe() -> Machine {
        let cpu_model = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("model name"))
                    .and_then(|l| l.split_once(':'))
                    .map(|(_, v)| v.trim().to_string())
            })
            .unwrap_or_else(|| "unknown".into());
        Machine {
            hostname: read_trim("/proc/sys/kernel/hostname"),
            kernel: read_trim("/proc/sys/kernel/osrelease"),
            cpu_model,
            cores: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        }
    }
}

/// The machine as every report names it: CPU model, CPUs, kernel, how idle CPUs wait (figures taken with idle
/// CPUs polling are comparable, figures of a machine whose idle CPUs halt are not), and what virtualizes it
/// (`systemd-detect-virt`, or the CPU's hypervisor flag).
pub fn describe() -> String {
    let m = Machine::probe();
    // Whether a held wake-up latency bound of 0 µs keeps idle CPUs polling through the kernel's cpuidle driver, or
    // through partita's own idle pollers (partita_os::cpu_latency).
    let idle = match partita_os::cpu_latency::idle_driver() {
        Some(d) => format!("cpuidle driver {d}"),
        None => "no cpuidle driver (idle CPUs kept polling by partita's idle pollers while a 0 µs bound is held)".into(),
    };
    format!("{}, {} CPUs, Linux {}, {idle}; itself {}", m.cpu_model, m.cores, m.kernel, virtualization())
}

/// What virtualizes this machine, in words.
fn virtualization() -> String {
    let virt = std::process::Command::new("systemd-detect-virt")
        .stderr(std::process::Stdio::null())
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|s| !s.is_empty());
    let flag = std::fs::read_to_string("/proc/cpuinfo").map(|t| t.contains(" hypervisor")).unwrap_or(false);
    match (virt.as_deref(), flag) {
        (Some("none"), false) | (None, false) => "bare metal (no hypervisor flag)".to_string(),
        (Some("none") | None, true) => "a virtual machine (the CPU's hypervisor flag; systemd-detect-virt names none)".to_string(),
        (Some(v), _) => format!("a virtual machine (systemd-detect-virt: {v}; hypervisor flag {})", if flag { "set" } else { "not set" }),
    }
}

/// What the host did to the machine while one run measured: the CPUs' steal time (time the hypervisor ran
/// something else while a CPU of this machine wanted to run, from `/proc/stat`) and their mean frequency (from
/// cpufreq or `/proc/cpuinfo`, where the kernel says), at the run's start and end. Recorded beside every figure,
/// so that a reader can tell the host's noise from the program's.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Disturbance {
    /// The run's length, s.
    pub seconds: f64,
    /// Steal time as a share of all CPU time of the run, %.
    pub steal_pct: f64,
    /// Mean CPU frequency at the start and at the end, MHz (absent where the kernel does not say).
    pub mhz_start: Option<f64>,
    pub mhz_end: Option<f64>,
}

/// What a table's `host` column says (one note under the table).
pub const HOST_NOTE: &str = "Host: the most the host disturbed any run of the row: the CPUs' steal time (time the hypervisor gave \
     this machine's CPUs to others, from /proc/stat) and their mean frequency at the run's start and end, where the kernel \
     says; `(moved)` when steal exceeded 1 % or the frequency moved more than 5 %: the row's figures then carry the host's \
     noise as well as the program's.";

/// Above this share of steal time a figure is flagged: the host took a CPU away often enough to show in a tail.
pub const STEAL_FLAG_PCT: f64 = 1.0;
/// A frequency that moved more than this share between a run's start and end flags its figure.
pub const MHZ_FLAG_SHARE: f64 = 0.05;

impl Disturbance {
    /// Whether the host disturbed the run enough to flag its figure.
    pub fn moved(&self) -> bool {
        let mhz_moved = match (self.mhz_start, self.mhz_end) {
            (Some(a), Some(b)) if a > 0.0 => ((b - a) / a).abs() > MHZ_FLAG_SHARE,
            _ => false,
        };
        self.steal_pct > STEAL_FLAG_PCT || mhz_moved
    }

    /// `steal 0.4 %, 2994→2994 MHz` (with ` (moved)` when [`Disturbance::moved`]).
    pub fn note(&self) -> String {
        let mhz = |m: Option<f64>| m.map_or("?".to_string(), |m| format!("{m:.0}"));
        let mut t = format!("steal {:.1} %", self.steal_pct);
        if self.mhz_start.is_some() || self.mhz_end.is_some() {
            t.push_str(&format!(", {}→{} MHz", mhz(self.mhz_start), mhz(self.mhz_end)));
        }
        if self.moved() {
            t.push_str(" (moved)");
        }
        t
    }

    /// The worst of several runs' disturbances (the longest run's length, the highest steal, the frequencies of
    /// the one that moved most).
    pub fn worst(all: &[Disturbance]) -> Option<Disturbance> {
        let mut it = all.iter().copied();
        let first = it.next()?;
        Some(it.fold(first, |w, d| {
            let swing = |x: &Disturbance| match (x.mhz_start, x.mhz_end) {
                (Some(a), Some(b)) => (b - a).abs(),
                _ => 0.0,
            };
            let (mhz_start, mhz_end) = if swing(&d) > swing(&w) { (d.mhz_start, d.mhz_end) } else { (w.mhz_start, w.mhz_end) };
            Disturbance { seconds: w.seconds.max(d.seconds), steal_pct: w.steal_pct.max(d.steal_pct), mhz_start, mhz_end }
        }))
    }
}

/// A run being watched: [`Watch::start`] before it measures, [`Watch::stop`] after.
#[derive(Debug, Clone)]
pub struct Watch {
    at: Instant,
    ticks: Option<CpuTicks>,
    mhz: Option<f64>,
}

impl Watch {
    pub fn start() -> Watch {
        Watch { at: Instant::now(), ticks: CpuTicks::read(), mhz: mean_mhz() }
    }

    /// The disturbance since [`Watch::start`].
    pub fn stop(&self) -> Disturbance {
        let steal_pct = match (self.ticks, CpuTicks::read()) {
            (Some(a), Some(b)) => b.since(a),
            _ => 0.0,
        };
        Disturbance { seconds: self.at.elapsed().as_secs_f64(), steal_pct, mhz_start: self.mhz, mhz_end: mean_mhz() }
    }
}

/// The `cpu` line of `/proc/stat`: all ticks, and the steal ticks.
#[derive(Debug, Clone, Copy, PartialEq)]
struct CpuTicks {
    total: u64,
    steal: u64,
}

impl CpuTicks {
    fn read() -> Option<CpuTicks> {
        CpuTicks::parse(&std::fs::read_to_string("/proc/stat").ok()?)
    }

    /// `cpu  user nice system idle iowait irq softirq steal guest guest_nice`; guest time is already counted in
    /// user and nice, so it is left out of the total.
    fn parse(stat: &str) -> Option<CpuTicks> {
        let line = stat.lines().find(|l| l.starts_with("cpu "))?;
        let v: Vec<u64> = line.split_whitespace().skip(1).map(|x| x.parse().ok()).collect::<Option<_>>()?;
        if v.len() < 8 {
            return None;
        }
        Some(CpuTicks { total: v[..8].iter().sum(), steal: v[7] })
    }

    /// Steal as a share of the ticks since `before`, %.
    fn since(self, before: CpuTicks) -> f64 {
        let total = self.total.saturating_sub(before.total);
        if total == 0 {
            return 0.0;
        }
        100.0 * self.steal.saturating_sub(before.steal) as f64 / total as f64
    }
}

/// The CPUs' mean current frequency, MHz: cpufreq's `scaling_cur_freq` where the kernel has it, else the
/// `cpu MHz` lines of `/proc/cpuinfo`; `None` when neither says.
fn mean_mhz() -> Option<f64> {
    let mut khz = Vec::new();
    for cpu in 0..std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1) {
        let p = format!("/sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_cur_freq");
        if let Some(v) = std::fs::read_to_string(p).ok().and_then(|t| t.trim().parse::<f64>().ok()) {
            khz.push(v / 1000.0);
        }
    }
    if khz.is_empty() {
        let info = std::fs::read_to_string("/proc/cpuinfo").ok()?;
        khz = info.lines().filter(|l| l.starts_with("cpu MHz")).filter_map(|l| l.split(':').nth(1)?.trim().parse().ok()).collect();
    }
    (!khz.is_empty()).then(|| khz.iter().sum::<f64>() / khz.len() as f64)
}

/// Civil date from days since 1970-01-01 (proleptic Gregorian).
fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

fn parts(t: SystemTime) -> (i64, u32, u32, u64, u64, u64, u32) {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs();
    let (y, mo, day) = civil((secs / 86_400) as i64);
    let s = secs % 86_400;
    (y, mo, day, s / 3600, s / 60 % 60, s % 60, d.subsec_millis())
}

/// `2026-11-22T11:45:03.123Z`
pub fn rfc3339(t: SystemTime) -> String {
    let (y, mo, d, h, mi, s, ms) = parts(t);
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{ms:03}Z")
}

pub fn now_rfc3339() -> String {
    rfc3339(SystemTime::now())
}

/// `20261122T114503Z`, for folder names.
pub fn compact_now() -> String {
    let (y, mo, d, h, mi, s, _) = parts(SystemTime::now());
    format!("{y:04}{mo:02}{d:02}T{h:02}{mi:02}{s:02}Z")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn known_instants() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        // 2000-02-29 (a leap day in a century leap year) 12:34:56.789
        let t = UNIX_EPOCH + Duration::from_millis(951_827_696_789);
        assert_eq!(rfc3339(t), "2000-02-29T12:34:56.789Z");
        let t = UNIX_EPOCH + Duration::from_secs(1_798_761_599);
        assert_eq!(rfc3339(t), "2026-12-31T23:59:59.000Z");
    }

    #[test]
    fn machine_has_cores() {
        assert!(Machine::probe().cores >= 1);
        assert!(describe().contains(" CPUs, Linux "), "{}", describe());
    }

    #[test]
    fn steal_is_the_share_of_ticks_since_the_start() {
        let a = CpuTicks::parse("cpu  100 0 50 800 10 0 0 40 0 0\ncpu0 1 2 3").unwrap();
        assert_eq!(a, CpuTicks { total: 1000, steal: 40 });
        let b = CpuTicks::parse("cpu  150 0 60 1000 10 0 0 70 5 0\n").unwrap();
        // 290 ticks later, 30 of them stolen.
        assert!((b.since(a) - 100.0 * 30.0 / 290.0).abs() < 1e-9);
        assert_eq!(a.since(a), 0.0);
        assert_eq!(CpuTicks::parse("cpu  1 2 3\n"), None, "a kernel without the steal column");
        assert_eq!(CpuTicks::parse("intr 5\n"), None);
    }

    #[test]
    fn a_run_is_flagged_when_steal_or_frequency_moved() {
        let quiet = Disturbance { seconds: 1.0, steal_pct: 0.2, mhz_start: Some(3000.0), mhz_end: Some(3010.0) };
        assert!(!quiet.moved());
        assert_eq!(quiet.note(), "steal 0.2 %, 3000→3010 MHz");
        let stolen = Disturbance { steal_pct: 4.0, ..quiet };
        assert!(stolen.moved());
        assert!(stolen.note().ends_with("(moved)"));
        let slowed = Disturbance { mhz_end: Some(2000.0), ..quiet };
        assert!(slowed.moved());
        let unknown = Disturbance { mhz_start: None, mhz_end: None, ..quiet };
        assert!(!unknown.moved());
        assert_eq!(unknown.note(), "steal 0.2 %");
        let w = Disturbance::worst(&[quiet, stolen, slowed]).unwrap();
        assert_eq!((w.steal_pct, w.mhz_end), (4.0, Some(2000.0)));
        assert_eq!(Disturbance::worst(&[]), None);
    }

    #[test]
    fn a_watched_run_reads_this_machine() {
        let w = Watch::start();
        let d = w.stop();
        assert!(d.seconds >= 0.0 && (0.0..=100.0).contains(&d.steal_pct), "{d:?}");
    }
}
