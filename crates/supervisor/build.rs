//! (Also the build script of crates/cli and crates/os.) Tests that need root (namespaces, cgroups, real-time scheduling) are marked
//! `#[cfg_attr(partita_not_root, ignore = "needs root")]`: built by another user, they show as ignored with
//! that reason instead of failing on a permission error. CI and the team's machines build and test as root.
fn main() {
    println!("cargo::rustc-check-cfg=cfg(partita_not_root)");
    // Rerun only when the package's manifest changes (cargo reruns a build script whose own source changed
    // anyway). Not `build.rs`: crates/cli, os and vm name this file from their manifests, have no build.rs of
    // their own, and a path that does not exist makes cargo rerun the script, and rebuild the crate and
    // everything above it, on every build.
    println!("cargo::rerun-if-changed=Cargo.toml");
    let uid = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("Uid:")).and_then(|l| l.split_whitespace().nth(2)).map(String::from));
    if uid.as_deref() != Some("0") {
        println!("cargo::rustc-cfg=partita_not_root");
    }
}
