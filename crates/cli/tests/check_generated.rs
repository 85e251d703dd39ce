//! `partita check` itself on generated system files (`crates/system/tests/support/system_gen.rs`): against
//! this machine's CPUs and `PATH`, and through everything it prints for a valid system (plans, timelines,
//! networks, host objects), it exits 0 (valid) or 2 (refused), never 101 (a panic) or by a signal.
use partita_system::{parse, Host};
use std::process::Command;

#[path = "../../system/tests/support/system_gen.rs"]
mod system_gen;

/// Files run through the binary: valid ones first (they reach the report), then refused ones.
const VALID: usize = 150;
const REFUSED: usize = 250;

mod common;
use common::TempDir;

/// Runs `partita check` on `bytes` written to `file`; its exit code, or a failure naming the file (kept for a
/// look) when it is neither 0 nor 2.
fn check(file: &std::path::Path, bytes: &[u8], i: usize) -> (i32, String, String) {
    std::fs::write(file, bytes).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_partita")).arg("check").arg(file).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    match out.status.code() {
        Some(code @ (0 | 2)) => (code, stdout, stderr),
        other => {
            let kept = std::env::temp_dir().join(format!("partita-check-crash-{}-{i}.toml", std::process::id()));
            std::fs::copy(file, &kept).unwrap();
            panic!("partita check {} exited with {other:?} (file kept as {}):\n{stderr}", file.display(), kept.display());
        }
    }
}

#[test]
fn partita_check_exits_2_on_files_that_are_not_toml_at_all() {
    let dir = TempDir::new("check", "odd");
    let deep = |open: &str, close: &str| format!("[system]\nname = \"a\"\nx = {}1{}\n", open.repeat(100_000), close.repeat(100_000));
    let odd: Vec<Vec<u8>> = vec![
        Vec::new(),
        vec![0; 4096],
        vec![0xff, 0xfe, 0x80, b'\n'],
        b"[system]\nname = \"\xff\"\n".to_vec(),
        // Cut inside a string.
        partita_system::BUILTIN_DEFAULT.as_bytes()[..partita_system::BUILTIN_DEFAULT.find("\"recorder\"").unwrap() + 4].to_vec(),
        deep("[", "]").into_bytes(),
        deep("{a=", "}").into_bytes(),
        format!("[system]\nname = \"a\"\n[{}b]\n", "a.".repeat(100_000)).into_bytes(),
        format!("[system]\nname = \"{}\"\n", "ü".repeat(1 << 20)).into_bytes(),
    ];
    for (i, bytes) in odd.iter().enumerate() {
        let (code, _, stderr) = check(&dir.0.join(format!("odd-{i}.toml")), bytes, i);
        assert_eq!(code, 2, "odd file {i}: {stderr}");
    }
}

#[test]
fn partita_check_exits_0_or_2_on_generated_system_files() {
    // Pick from a larger pool so that enough files are valid (the generator makes about one in eight).
    let pool = system_gen::texts(0xc4ec_0001, 4_000);
    let host = Host::with_cpus(2);
    let (valid, refused): (Vec<&String>, Vec<&String>) = pool.iter().partition(|t| parse(t, "gen.toml", &host).is_ok());
    assert!(valid.len() >= VALID && refused.len() >= REFUSED, "{} valid, {} refused", valid.len(), refused.len());
    let dir = TempDir::new("check", "generated");
    let (mut exit0, mut exit2) = (0, 0);
    for (i, text) in valid.iter().take(VALID).chain(refused.iter().take(REFUSED)).enumerate() {
        let file = dir.0.join(format!("gen-{i:03}.toml"));
        match check(&file, text.as_bytes(), i) {
            (0, stdout, _) => {
                assert!(stdout.contains(": valid"), "{}", file.display());
                exit0 += 1;
            }
            (_, _, stderr) => {
                assert!(stderr.contains("the system is not valid"), "{}: {stderr}", file.display());
                exit2 += 1;
            }
        }
    }
    eprintln!("partita check on {} generated files: {exit0} valid (exit 0), {exit2} refused (exit 2)", VALID + REFUSED);
    // This machine may lack a CPU or program a file asks for, so some of the files valid above are refused.
    assert_eq!(exit0 + exit2, VALID + REFUSED);
    assert!(exit0 > 0, "no file passed partita check, so its report was never printed");
}
