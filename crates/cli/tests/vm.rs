//! `partita app vm`, the VM partition's program, as the supervisor starts it: its exit status is the guest
//! command's, and a SIGTERM reaches QEMU. Boots under TCG (about 2–3 s each).
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const EXE: &str = env!("CARGO_BIN_EXE_partita");

/// The kernel, the base archive (built by `partita vm image`) and a launch archive running `command`.
fn runner_args(tag: &str, command: &[&str]) -> (Vec<String>, std::path::PathBuf) {
    let cache = partita_vm::image::cache_dir();
    let kernel = partita_vm::Kernel::find(&cache).unwrap_or_else(|e| panic!("{e}"));
    let out = Command::new(EXE).args(["vm", "image"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let base = String::from_utf8(out.stdout).unwrap().trim().to_string();
    let extra = std::env::temp_dir().join(format!("partita-cli-vm-{tag}-{}.cpio", std::process::id()));
    let out = Command::new(EXE).args(["vm", "extra", "--out", extra.to_str().unwrap(), "--partition", "cli", "--"]).args(command).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let args = ["app", "vm", "--kernel", kernel.image.to_str().unwrap(), "--initrd", &base, "--initrd", extra.to_str().unwrap(), "--accel", "tcg", "--boot-timeout", "60s"];
    (args.iter().map(|s| s.to_string()).collect(), extra)
}

#[test]
fn the_runner_exits_with_the_guest_commands_status() {
    let (args, extra) = runner_args("exit", &["sh", "-c", "echo from the guest: $PARTITA_PARTITION; exit 7"]);
    let out = Command::new(EXE).args(&args).output().unwrap();
    let _ = std::fs::remove_file(extra);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(7), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("from the guest: cli"), "the console is the runner's stdout: {stdout}");
    assert!(stdout.contains("partita vm: boot "), "the boot time is recorded: {stdout}");
}

#[test]
fn sigterm_to_the_runner_stops_qemu_and_exits_143() {
    let (args, extra) = runner_args("term", &["sleep", "60"]);
    let mut child = Command::new(EXE).args(&args).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let line = lines.next().expect("the runner ended before the guest started").unwrap();
        if line.contains("PARTITA-VM start") {
            break;
        }
        assert!(Instant::now() < deadline, "no start marker");
    }
    let qemu_children = || {
        std::fs::read_to_string(format!("/proc/{}/task/{}/children", child.id(), child.id())).unwrap_or_default().split_whitespace().count()
    };
    assert_eq!(qemu_children(), 1, "QEMU runs as the runner's child");
    let stopped_at = Instant::now();
    partita_os::process::send_signal(child.id() as i32, libc::SIGTERM).unwrap();
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    let status = child.wait().unwrap();
    let _ = std::fs::remove_file(extra);
    assert_eq!(status.code(), Some(143), "{rest:?}");
    assert!(stopped_at.elapsed() < Duration::from_secs(10), "stopped at once, not after the guest's 60 s");
    assert!(rest.iter().any(|l| l.contains("stopped by a signal")), "{rest:?}");
}
