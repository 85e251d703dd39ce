//! The runner (`partita app vm`): QEMU as its child, the guest's serial console copied to its stdout (the
//! partition's log), and the guest command's exit status as its own.
//!
//! Exit codes, besides the guest command's own 0..=255 (which can collide with these: the runner's last
//! line says which it was):
//!
//! | code | meaning |
//! |---|---|
//! | [`exit_code::PANIC`] (193) | the guest kernel panicked (its console showed "Kernel panic - not syncing") |
//! | [`exit_code::QEMU_FAILED`] (194) | QEMU did not start, failed, or ended without the guest reporting an exit |
//! | [`exit_code::BOOT_TIMEOUT`] (195) | no start marker within the boot timeout: QEMU was killed |
//! | [`exit_code::SETUP_FAILED`] (196) | `/init` could not set the guest up (a module, a NIC) and powered off |
//! | [`exit_code::STOPPED`] (143) | the runner got SIGTERM/SIGINT/SIGHUP/SIGQUIT and passed SIGTERM on to QEMU |
//!
//! 193–196 are 128 + 65…68: above every signal number, so no exit by a signal (128 + N) looks like them.
//!
//! Times: the boot time is from the start of [`run`] (the runner's start, give or take the few ms of argument
//! parsing) to the start marker, the moment before `/init` runs the command; the guest's own uptime at that
//! point is printed too. A partition frozen outside its windows boots in wall-clock time that includes the
//! frozen time: its boot timeout must allow for its share of the plan.
use crate::init::{EXIT_MARKER, PANIC_TEXT, SETUP_FAILED_MARKER, START_MARKER};
use crate::qemu::{self, Accel, Hardware, NetFd};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub mod exit_code {
    pub const PANIC: u8 = 193;
    pub const QEMU_FAILED: u8 = 194;
    pub const BOOT_TIMEOUT: u8 = 195;
    pub const SETUP_FAILED: u8 = 196;
    pub const STOPPED: u8 = 143;
}

/// What the runner runs.
#[derive(Debug, Clone)]
pub struct RunConfig {
    pub qemu: PathBuf,
    pub kernel: PathBuf,
    /// The base initramfs, then the per-launch archive (concatenated, each padded to 4 bytes).
    pub initrds: Vec<PathBuf>,
    pub hardware: Hardware,
    pub nets: Vec<NetFd>,
    /// Added to [`qemu::kernel_command_line`].
    pub append: Option<String>,
    pub boot_timeout: Duration,
    /// A descriptor the runner gets from its parent (a pipe's write end) and closes once the guest's command
    /// starts (the start marker), or when the runner ends: the supervisor's health monitor holds the time a
    /// VM partition uses before that (QEMU starting, the guest booting) against its launch, not its program.
    pub ready_fd: Option<i32>,
}

impl RunConfig {
    pub fn new(kernel: PathBuf, initrds: Vec<PathBuf>) -> RunConfig {
        RunConfig { qemu: qemu::qemu_program(), kernel, initrds, hardware: Hardware::default(), nets: Vec::new(), append: None, boot_timeout: Duration::from_secs(60), ready_fd: None }
    }

    /// The runner's command line (`partita` then these), for a supervisor that starts it as a partition's
    /// program. The tap descriptors must be open, without close-on-exec, at the same numbers in the runner.
    pub fn runner_args(&self) -> Vec<String> {
        let mut a: Vec<String> = vec!["app".into(), "vm".into(), "--kernel".into(), self.kernel.display().to_string()];
        for i in &self.initrds {
            a.extend(["--initrd".into(), i.display().to_string()]);
        }
        let hw = &self.hardware;
        a.extend([
            "--memory".into(),
            format!("{}MiB", hw.memory_mib),
            "--cpus".into(),
            hw.cpus.to_string(),
            "--accel".into(),
            hw.accel.to_string(),
            "--machine".into(),
            hw.machine.to_string(),
        ]);
        for n in &self.nets {
            a.extend(["--net-fd".into(), format!("{},mac={}", n.fd, n.mac)]);
        }
        if let Some(x) = &self.append {
            a.extend(["--append".into(), x.clone()]);
        }
        a.extend(["--boot-timeout".into(), format!("{}ms", self.boot_timeout.as_millis())]);
        if let Some(fd) = self.ready_fd {
            a.extend(["--ready-fd".into(), fd.to_string()]);
        }
        // Always given: the runner may run where the caller's PARTITA_QEMU is not set (a partition's environment).
        a.extend(["--qemu".into(), self.qemu.display().to_string()]);
        a
    }
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The guest command ended with `status`.
    Exited { status: u8, times: Times },
    Panicked { line: String, boot: Option<Duration> },
    SetupFailed { reason: String },
    QemuFailed { reason: String },
    /// `qemu_cpu`: the CPU time QEMU had used when it was killed (`None` if it could not be read). Near the
    /// partition's share of the timeout, the guest was busy all along (a loop); far below it, the guest sat
    /// idle waiting for something (a lost interrupt, a console that stopped draining) or QEMU was kept off the
    /// CPU.
    BootTimeout { after: Duration, qemu_cpu: Option<Duration> },
    Stopped,
}

/// When things happened, from the start of [`run`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Times {
    /// To the start marker.
    pub boot: Duration,
    /// The guest kernel's uptime at the start marker, in seconds.
    pub guest_uptime: f64,
    /// From the start marker to the exit marker.
    pub command: Duration,
    /// To QEMU's end.
    pub total: Duration,
}

impl Outcome {
    pub fn exit_code(&self) -> u8 {
        match self {
            Outcome::Exited { status, .. } => *status,
            Outcome::Panicked { .. } => exit_code::PANIC,
            Outcome::QemuFailed { .. } => exit_code::QEMU_FAILED,
            Outcome::BootTimeout { .. } => exit_code::BOOT_TIMEOUT,
            Outcome::SetupFailed { .. } => exit_code::SETUP_FAILED,
            Outcome::Stopped => exit_code::STOPPED,
        }
    }

    /// The runner's last line.
    pub fn summary(&self) -> String {
        match self {
            Outcome::Exited { status, times } => format!(
                "partita vm: the guest command exited with status {status}; boot {:.3} s (runner start to start marker; guest uptime {:.3} s), command {:.3} s, VM total {:.3} s",
                times.boot.as_secs_f64(),
                times.guest_uptime,
                times.command.as_secs_f64(),
                times.total.as_secs_f64()
            ),
            Outcome::Panicked { line, .. } => {
                let hint = if out_of_memory(line) { "; the guest ran out of memory: give the partition more `vm.memory`" } else { "" };
                format!("partita vm: the guest kernel panicked ({}){hint}: exit code {}", line.trim(), exit_code::PANIC)
            }
            Outcome::SetupFailed { reason } => format!("partita vm: the guest's /init failed: {reason}: exit code {}", exit_code::SETUP_FAILED),
            Outcome::QemuFailed { reason } => format!("partita vm: QEMU failed: {reason}: exit code {}", exit_code::QEMU_FAILED),
            Outcome::BootTimeout { after, qemu_cpu } => {
                let cpu = qemu_cpu.map(|c| format!(" after using {:.1} s of CPU", c.as_secs_f64())).unwrap_or_default();
                format!("partita vm: no start marker within the boot timeout ({:.1} s): QEMU killed{cpu}, exit code {}", after.as_secs_f64(), exit_code::BOOT_TIMEOUT)
            }
            Outcome::Stopped => format!("partita vm: stopped by a signal, passed on to QEMU: exit code {}", exit_code::STOPPED),
        }
    }
}

/// Whether a kernel's panic line says it ran out of memory ("System is deadlocked on memory", "Out of memory
/// and no killable processes").
fn out_of_memory(panic_line: &str) -> bool {
    let l = panic_line.to_ascii_lowercase();
    l.contains("deadlocked on memory") || l.contains("out of memory")
}

/// Bytes of QEMU's stderr kept for the failure message.
const STDERR_KEPT: usize = 4096;
/// How long QEMU may take to end after the guest reported its exit or panicked, or after SIGTERM.
const GRACE: Duration = Duration::from_secs(5);

enum Event {
    Line(String),
    End,
}

/// The boot timeout struck: the CPU time QEMU had used by then (`None` if it could not be read).
struct TimedOut {
    qemu_cpu: Option<Duration>,
}

/// Runs the guest: QEMU's console goes to `console` line by line (carriage returns dropped), with the
/// runner's own lines (`partita vm: …`). `stop` asks for a stop (the process's stop-signal flag in the
/// binary); it is passed on to QEMU as SIGTERM.
pub fn run(config: &RunConfig, console: &mut dyn Write, stop: &AtomicBool) -> Outcome {
    run_reporting(config, console, stop, None)
}

/// [`run`], closing `ready` (the descriptor of [`RunConfig::ready_fd`], owned here and close-on-exec, so
/// QEMU does not hold it) when the guest's command starts.
pub fn run_reporting(config: &RunConfig, console: &mut dyn Write, stop: &AtomicBool, mut ready: Option<std::os::fd::OwnedFd>) -> Outcome {
    let started = Instant::now();
    // A failure before QEMU runs is the runner's last line too.
    let failed = |console: &mut dyn Write, reason: String| {
        let outcome = Outcome::QemuFailed { reason };
        let _ = writeln!(console, "{}", outcome.summary());
        outcome
    };
    let initrd = match concatenate(&config.initrds) {
        Ok(f) => f,
        Err(e) => return failed(console, format!("preparing the initramfs: {e}")),
    };
    for n in &config.nets {
        if let Err(e) = check_tap(n.fd) {
            return failed(console, format!("--net-fd {}: {e}", n.fd));
        }
    }
    let initrd_path = PathBuf::from(format!("/proc/self/fd/{}", initrd.as_raw_fd()));
    let tsc_khz = match config.hardware.accel {
        Accel::Tcg => partita_os::clock::tsc_khz(Duration::from_millis(5)),
        Accel::Kvm => None, // kvmclock
    };
    let append = qemu::kernel_command_line(config.hardware.machine, tsc_khz, config.append.as_deref());
    let args = qemu::qemu_args(&config.hardware, &config.kernel, &initrd_path, &config.nets, &append);
    tracing::debug!(target: "partita::vm", "{} {}", config.qemu.display(), args.join(" "));
    let mut child = match Command::new(&config.qemu).args(&args).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn() {
        Ok(c) => c,
        Err(e) => return failed(console, format!("starting {}: {e} (Debian package qemu-system-x86; scripts/setup.sh installs it)", config.qemu.display())),
    };
    drop(initrd); // QEMU holds its own copy of the descriptor.
    let pid = child.id() as i32;
    let (tx, rx) = mpsc::channel();
    let stdout = child.stdout.take().expect("piped");
    let reader = std::thread::spawn(move || read_lines(stdout, tx));
    let stderr_tail = Arc::new(Mutex::new(String::new()));
    let stderr = child.stderr.take().expect("piped");
    let tail = Arc::clone(&stderr_tail);
    let err_reader = std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            eprintln!("qemu: {line}");
            let mut t = tail.lock().unwrap_or_else(|e| e.into_inner());
            t.push_str(&line);
            t.push('\n');
            if t.len() > STDERR_KEPT {
                let cut = t.len() - STDERR_KEPT;
                let cut = (cut..t.len()).find(|i| t.is_char_boundary(*i)).unwrap_or(t.len());
                t.drain(..cut);
            }
        }
    });

    let mut boot: Option<(Duration, f64)> = None;
    let mut exit: Option<(u8, Duration)> = None;
    let mut panic: Option<String> = None;
    let mut setup_failed: Option<String> = None;
    let mut timed_out: Option<TimedOut> = None;
    let mut stopped = false;
    let mut kill_at: Option<Instant> = None;
    let mut killed = false;
    loop {
        match rx.recv_timeout(Duration::from_millis(20)) {
            Ok(Event::Line(line)) => {
                let _ = writeln!(console, "{line}");
                if let Some(rest) = after(&line, START_MARKER) {
                    if boot.is_none() {
                        let uptime = rest.trim().parse().unwrap_or(f64::NAN);
                        let at = started.elapsed();
                        boot = Some((at, uptime));
                        drop(ready.take());
                        let _ = writeln!(console, "partita vm: boot {:.3} s (runner start to start marker; guest uptime {uptime:.3} s; {})", at.as_secs_f64(), config.hardware.accel);
                    }
                } else if let Some(rest) = after(&line, EXIT_MARKER) {
                    if exit.is_none() {
                        exit = Some((rest.trim().parse().unwrap_or(255), started.elapsed()));
                        kill_at.get_or_insert(Instant::now() + GRACE);
                    }
                } else if let Some(rest) = after(&line, SETUP_FAILED_MARKER) {
                    setup_failed.get_or_insert(rest.trim().to_string());
                    kill_at.get_or_insert(Instant::now() + GRACE);
                } else if line.contains(PANIC_TEXT) && panic.is_none() {
                    panic = Some(line.trim().to_string());
                    kill_at.get_or_insert(Instant::now() + GRACE);
                }
            }
            Ok(Event::End) | Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
        if stop.load(Ordering::SeqCst) && !stopped {
            stopped = true;
            let _ = partita_os::process::send_signal(pid, libc::SIGTERM);
            kill_at.get_or_insert(Instant::now() + GRACE);
        }
        if boot.is_none() && timed_out.is_none() && started.elapsed() >= config.boot_timeout {
            let cpu = partita_os::process::cpu_times_ns(pid as u32).map(|(u, s)| Duration::from_nanos(u + s));
            timed_out = Some(TimedOut { qemu_cpu: cpu });
            kill_at = Some(Instant::now());
        }
        if !killed && kill_at.is_some_and(|t| Instant::now() >= t) {
            killed = true;
            let _ = child.kill();
        }
    }
    let status = child.wait();
    let _ = reader.join();
    let _ = err_reader.join();
    let total = started.elapsed();
    let outcome = if stopped {
        Outcome::Stopped
    } else if let Some(TimedOut { qemu_cpu }) = timed_out {
        Outcome::BootTimeout { after: config.boot_timeout, qemu_cpu }
    } else if let (Some((status, ended)), Some((boot, guest_uptime))) = (exit, boot) {
        Outcome::Exited { status, times: Times { boot, guest_uptime, command: ended.saturating_sub(boot), total } }
    } else if let Some(line) = panic {
        Outcome::Panicked { line, boot: boot.map(|b| b.0) }
    } else if let Some(reason) = setup_failed {
        Outcome::SetupFailed { reason }
    } else {
        let tail = stderr_tail.lock().unwrap_or_else(|e| e.into_inner()).trim().to_string();
        let how = match status {
            Ok(s) => s.to_string(),
            Err(e) => format!("waiting for it: {e}"),
        };
        let when = if boot.is_some() { "after the start marker, without an exit marker" } else { "before the guest started its command" };
        Outcome::QemuFailed { reason: format!("QEMU ended ({how}) {when}{}", if tail.is_empty() { String::new() } else { format!("; it said: {tail}") }) }
    };
    let _ = writeln!(console, "{}", outcome.summary());
    let _ = console.flush();
    outcome
}

/// The text after `marker` in `line`, if it holds it.
fn after<'a>(line: &'a str, marker: &str) -> Option<&'a str> {
    line.find(marker).map(|i| &line[i + marker.len()..])
}

fn read_lines(stdout: impl Read, tx: mpsc::Sender<Event>) {
    let mut r = BufReader::with_capacity(64 * 1024, stdout);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        // Lines longer than 64 KiB arrive in pieces.
        match r.by_ref().take(64 * 1024).read_until(b'\n', &mut buf) {
            Ok(0) | Err(_) => break,
            Ok(_) => {
                while matches!(buf.last(), Some(b'\n' | b'\r')) {
                    buf.pop();
                }
                let line = String::from_utf8_lossy(&buf).replace('\r', "");
                if tx.send(Event::Line(line)).is_err() {
                    return;
                }
            }
        }
    }
    let _ = tx.send(Event::End);
}

/// The initramfs archives as one in-memory file QEMU inherits, each padded to 4 bytes as the kernel wants.
fn concatenate(parts: &[PathBuf]) -> std::io::Result<std::fs::File> {
    if parts.is_empty() {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, "no --initrd"));
    }
    let mut f = partita_os::fd::memfd("partita-vm-initrd")?;
    for p in parts {
        let mut src = std::fs::File::open(p).map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", p.display())))?;
        let n = std::io::copy(&mut src, &mut f)?;
        f.write_all(&[0u8; 3][..crate::cpio::pad4(n as usize)])?;
    }
    partita_os::fd::set_inheritable(f.as_raw_fd(), true)?;
    Ok(f)
}

/// A tap descriptor QEMU can use: open, a tap, passed on to QEMU (close-on-exec off).
fn check_tap(fd: i32) -> Result<(), String> {
    if !partita_os::fd::is_open(fd) {
        return Err("not an open descriptor of this process".into());
    }
    let name = partita_os::tap::name_of(fd).map_err(|e| format!("not a tap device ({e})"))?;
    partita_os::fd::set_inheritable(fd, true).map_err(|e| format!("tap {name}: {e}"))
}
