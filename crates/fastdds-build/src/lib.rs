//! For build scripts: builds one Fast DDS C++ program. fastddsgen generates the type support of an IDL file, and
//! the C++ compiler (`$CXX`, else `c++`) links it with the program's source against Debian's libfastrtps-dev
//! (Fast DDS 2.9) and libfastcdr. scripts/setup.sh installs both packages; without them the build stops and
//! says so.
use std::path::{Path, PathBuf};
use std::process::Command;

/// What to build: the crate-relative IDL file and C++ source, and the program's file name in `OUT_DIR`.
pub struct Program<'a> {
    pub idl: &'a str,
    pub source: &'a str,
    pub binary: &'a str,
    /// What the program is, for messages ("the Fast DDS probe").
    pub what: &'a str,
}

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

/// Builds `p` (call from a build script) and returns the binary's path; tells cargo what to watch.
pub fn build(p: &Program) -> PathBuf {
    let dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("run from a build script"));
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("run from a build script"));
    let (idl, source) = (dir.join(p.idl), dir.join(p.source));
    for f in [&idl, &source] {
        println!("cargo::rerun-if-changed={}", f.display());
    }
    println!("cargo::rerun-if-env-changed=CXX");
    let gen = out.join("fastdds-gen");
    std::fs::create_dir_all(&gen).expect("creating OUT_DIR/fastdds-gen");
    let s = |p: &Path| p.to_str().expect("a UTF-8 path").to_string();
    run("fastddsgen", &["-replace", "-d", &s(&gen), &s(&idl)], &format!("generating the type support of {}", p.what));
    let stem = idl.file_stem().and_then(|s| s.to_str()).expect("an IDL file name");
    let binary = out.join(p.binary);
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "c++".into());
    let (types, pubsub) = (gen.join(format!("{stem}.cxx")), gen.join(format!("{stem}PubSubTypes.cxx")));
    run(
        &cxx,
        &["-std=c++17", "-O2", "-I", &s(&gen), &s(&source), &s(&types), &s(&pubsub), "-lfastrtps", "-lfastcdr", "-lpthread", "-o", &s(&binary)],
        &format!("compiling {}", p.what),
    );
    binary
}
