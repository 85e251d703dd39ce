//! Builds the Fast DDS agent of the benchmark: fastddsgen generates the type support of `idl/dbe.idl` (paper 002's
//! `PubMessage` and `AckMessage`), and the C++ compiler links it with `fastdds/agent.cpp` against Debian's
//! libfastrtps-dev (Fast DDS 2.9) and libfastcdr. The binary's path reaches the crate as
//! `PARTITA_DBE_FASTDDS_AGENT`. scripts/setup.sh installs both packages; without them the build stops here and
//! says so.
use std::path::{Path, PathBuf};
use std::process::Command;

fn run(program: &str, args: &[&str], what: &str) {
    let out = Command::new(program).args(args).output().unwrap_or_else(|e| {
        panic!("{what}: cannot run {program} ({e}); run scripts/setup.sh, which installs fastddsgen and libfastrtps-dev")
    });
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let missing = ["fastdds/dds/", "fastrtps/", "fastcdr/", "-lfastrtps", "-lfastcdr"]
            .iter()
            .any(|m| stderr.contains(m) && (stderr.contains("No such file") || stderr.contains("cannot find")));
        let hint = if missing { "\n(Fast DDS is missing: run scripts/setup.sh, which installs libfastrtps-dev)" } else { "" };
        panic!("{what}: {program} failed ({}):\n{}{stderr}{hint}", out.status, String::from_utf8_lossy(&out.stdout));
    }
}

fn main() {
    let dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    let idl = dir.join("idl/dbe.idl");
    let agent = dir.join("fastdds/agent.cpp");
    for f in [&idl, &agent] {
        println!("cargo::rerun-if-changed={}", f.display());
    }
    println!("cargo::rerun-if-env-changed=CXX");
    let gen = out.join("fastdds-gen");
    std::fs::create_dir_all(&gen).unwrap();
    let s = |p: &Path| p.to_str().expect("a UTF-8 path").to_string();
    run("fastddsgen", &["-replace", "-d", &s(&gen), &s(&idl)], "generating the Fast DDS type support");
    let binary = out.join("partita-dbe-fastdds-agent");
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "c++".into());
    run(
        &cxx,
        &[
            "-std=c++17",
            "-O2",
            "-I",
            &s(&gen),
            &s(&agent),
            &s(&gen.join("dbe.cxx")),
            &s(&gen.join("dbePubSubTypes.cxx")),
            "-lfastrtps",
            "-lfastcdr",
            "-lpthread",
            "-o",
            &s(&binary),
        ],
        "compiling the Fast DDS agent",
    );
    println!("cargo::rustc-env=PARTITA_DBE_FASTDDS_AGENT={}", binary.display());
}
