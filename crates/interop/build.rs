//! Builds the Fast DDS probe: fastddsgen generates the type support of `idl/partita_interop.idl`, and the C++
//! compiler links it with `fastdds/probe.cpp` against Debian's libfastrtps-dev (Fast DDS 2.9) and libfastcdr.
//! scripts/setup.sh installs both packages; without them the build stops here and says so.
use std::path::{Path, PathBuf};
use std::process::Command;

fn run(program: &str, args: &[&str], what: &str) {
    let out = Command::new(program).args(args).output().unwrap_or_else(|e| {
        panic!("{what}: cannot run {program} ({e}); run scripts/setup.sh, which installs fastddsgen and libfastrtps-dev")
    });
    if !out.status.success() {
        panic!("{what}: {program} failed ({}):\n{}{}", out.status, String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    }
}

fn main() {
    let dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    let idl = dir.join("idl/partita_interop.idl");
    let probe = dir.join("fastdds/probe.cpp");
    for f in [&idl, &probe] {
        println!("cargo::rerun-if-changed={}", f.display());
    }
    println!("cargo::rerun-if-env-changed=CXX");
    let gen = out.join("fastdds-gen");
    std::fs::create_dir_all(&gen).unwrap();
    let s = |p: &Path| p.to_str().expect("a UTF-8 path").to_string();
    run("fastddsgen", &["-replace", "-d", &s(&gen), &s(&idl)], "generating the Fast DDS type support");
    let binary = out.join("partita-fastdds-probe");
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "c++".into());
    run(
        &cxx,
        &[
            "-std=c++17",
            "-O2",
            "-I",
            &s(&gen),
            &s(&probe),
            &s(&gen.join("partita_interop.cxx")),
            &s(&gen.join("partita_interopPubSubTypes.cxx")),
            "-lfastrtps",
            "-lfastcdr",
            "-o",
            &s(&binary),
        ],
        "compiling the Fast DDS probe",
    );
    println!("cargo::rustc-env=PARTITA_FASTDDS_PROBE={}", binary.display());
}
