//! Runtime and lab are two layers: no runtime crate, and none of the programs that run inside partitions,
//! depends on a lab crate (benchmarks, studies, the papers, the DBE), on another DDS implementation (RustDDS,
//! iceoryx2, Fast DDS) or on the operator's binary. Read from `cargo tree` of each runtime crate.
use std::path::Path;
use std::process::Command;

/// The crates a deployed system runs (docs/architecture.md, "Runtime and lab").
const RUNTIME: &[&str] = &[
    "partita-os",
    "partita-env",
    "partita-dds",
    "partita-router-config",
    "partita-system",
    "partita-vm",
    "partita-router",
    "partita-apps",
    "partita-supervisor",
    "partita-programs",
    "partita-ports",
    "partita-apex",
    "partita-ports-c",
];

/// What the runtime must never link: the lab's crates, the operator's binary, and the other DDS implementations
/// the lab compares partita with (a package whose name starts with one of these).
const NEVER_IN_RUNTIME: &[&str] = &[
    "partita-lab",
    "partita-bench",
    "partita-paper",
    "partita-studies",
    "partita-dbe",
    "partita-interop",
    "partita-fastdds-build",
    "partita-cli",
    "rustdds",
    "iceoryx2",
    "fastdds",
    "fastrtps",
];

/// The packages `krate` depends on, itself included (normal and build dependencies: what goes into its
/// binaries), as `cargo tree` lists them.
fn tree(krate: &str) -> Vec<String> {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = Command::new(env!("CARGO"))
        .args(["tree", "--offline", "--quiet", "-p", krate, "-e", "normal,build", "--prefix", "none", "--format", "{p}"])
        .current_dir(&workspace)
        .output()
        .expect("cargo runs");
    assert!(out.status.success(), "cargo tree -p {krate}: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    let mut names: Vec<String> = text.lines().filter_map(|l| l.split_whitespace().next()).map(String::from).collect();
    names.sort();
    names.dedup();
    names
}

fn forbidden(names: &[String]) -> Vec<&String> {
    names.iter().filter(|n| NEVER_IN_RUNTIME.iter().any(|f| n.starts_with(f))).collect()
}

#[test]
fn no_runtime_crate_and_no_partition_program_depends_on_the_lab_or_another_dds() {
    for krate in RUNTIME {
        let names = tree(krate);
        assert!(names.iter().any(|n| n == krate), "cargo tree -p {krate} lists {names:?}");
        let bad = forbidden(&names);
        assert!(bad.is_empty(), "{krate} depends on {bad:?}");
    }
}

#[test]
fn the_check_sees_the_lab_where_it_is() {
    // The operator's binary has every command, the lab's included: the same check finds them there.
    let names = tree("partita-cli");
    let bad = forbidden(&names);
    for expected in ["partita-lab", "partita-bench", "partita-dbe", "rustdds", "iceoryx2"] {
        assert!(bad.iter().any(|n| n.starts_with(expected)), "{expected} not found in partita-cli's tree: {names:?}");
    }
}

/// The guest's `partita` has the partition programs' commands and none of the lab's.
#[test]
fn the_guests_partita_runs_partition_programs_only() {
    let guest = env!("CARGO_BIN_EXE_partita-guest");
    let help = Command::new(guest).args(["app", "--help"]).output().unwrap();
    assert!(help.status.success());
    let text = String::from_utf8_lossy(&help.stdout);
    for program in ["recorder", "monitor", "udp-echo", "exchange-server", "exchange-client"] {
        assert!(text.contains(program), "{program} missing from:\n{text}");
    }
    for lab in ["fault", "dbe-agent", "probe"] {
        let out = Command::new(guest).args(["app", lab, "--help"]).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "partita-guest app {lab}: {out:?}");
    }
    let route = Command::new(guest).args(["route", "--help"]).output().unwrap();
    assert!(route.status.success());
    for operator in ["up", "bench", "check"] {
        let out = Command::new(guest).arg(operator).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "partita-guest {operator}: {out:?}");
    }
}

/// Each small binary takes its program's arguments and the global ones.
#[test]
fn each_small_binary_takes_its_programs_arguments() {
    for (exe, option) in [
        (env!("CARGO_BIN_EXE_partita-route"), "--stats"),
        (env!("CARGO_BIN_EXE_partita-recorder"), "--ring-size"),
        (env!("CARGO_BIN_EXE_partita-monitor"), "--save-frame"),
        (env!("CARGO_BIN_EXE_partita-vm-runner"), "--ready-fd"),
    ] {
        let out = Command::new(exe).arg("--help").output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success() && text.contains(option) && text.contains("--log") && text.contains("--lock-memory"), "{exe} --help:\n{text}");
    }
    // A bad argument is refused with the usage status, before anything starts.
    let out = Command::new(env!("CARGO_BIN_EXE_partita-route")).arg("--no-such-option").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = Command::new(env!("CARGO_BIN_EXE_partita-route")).args(["--check", "/no/such/router.toml"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("/no/such/router.toml"));
}
