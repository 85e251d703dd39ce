//! Which binary runs which of partita's commands. The programs that run inside partitions are small binaries of
//! their own (crates/programs), installed beside the operator's `partita`: a command `partita route …` in a
//! system file runs `partita-route …`, `partita app recorder …` runs `partita-recorder …`, and so on. Any other
//! `partita …` command, or one whose small binary is not installed there, runs `partita` itself (which has
//! every command). A VM partition's guest gets `partita-guest` as its `/usr/bin/partita`.
use std::path::{Path, PathBuf};

/// The commands a small binary implements: the words after `partita`, and the binary.
pub const SMALL_BINARIES: &[(&[&str], &str)] = &[
    (&["route"], "partita-route"),
    (&["app", "recorder"], "partita-recorder"),
    (&["app", "monitor"], "partita-monitor"),
    (&["app", "vm"], "partita-vm-runner"),
    (&["app", "port"], "partita-port"),
    (&["app", "partition"], "partita-partition"),
];

/// The guest's own `partita`: `partita route` and the partition applications only.
pub const GUEST_BINARY: &str = "partita-guest";

/// The program and arguments that run `partita args…`, given where `partita` is: the small binary beside it
/// with the remaining arguments when one implements the command and is installed, else `partita` with `args`.
pub fn resolve(partita: &Path, args: &[String]) -> (PathBuf, Vec<String>) {
    for (words, binary) in SMALL_BINARIES {
        let matches = args.len() >= words.len() && args.iter().zip(words.iter()).all(|(a, w)| a == w);
        if matches {
            if let Some(small) = beside(partita, binary) {
                return (small, args[words.len()..].to_vec());
            }
        }
    }
    (partita.to_path_buf(), args.to_vec())
}

/// The binary to install as a guest's `/usr/bin/partita`: `partita-guest` beside `partita`, else `partita`.
pub fn guest_binary(partita: &Path) -> PathBuf {
    beside(partita, GUEST_BINARY).unwrap_or_else(|| partita.to_path_buf())
}

/// `name` in the directory of `partita`, when it is a file there.
fn beside(partita: &Path, name: &str) -> Option<PathBuf> {
    let p = partita.parent()?.join(name);
    p.is_file().then_some(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_command_of_a_small_binary_runs_it_when_it_is_installed_and_partita_otherwise() {
        let dir = std::env::temp_dir().join(format!("partita-programs-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let partita = dir.join("partita");
        std::fs::write(&partita, "").unwrap();
        // Not installed: partita runs every command.
        assert_eq!(resolve(&partita, &args(&["route", "--stats"])), (partita.clone(), args(&["route", "--stats"])));
        assert_eq!(guest_binary(&partita), partita);
        for (_, b) in SMALL_BINARIES.iter().chain([(&[][..], GUEST_BINARY)].iter()) {
            std::fs::write(dir.join(b), "").unwrap();
        }
        assert_eq!(resolve(&partita, &args(&["route", "--stats"])), (dir.join("partita-route"), args(&["--stats"])));
        assert_eq!(resolve(&partita, &args(&["app", "recorder"])), (dir.join("partita-recorder"), args(&[])));
        assert_eq!(resolve(&partita, &args(&["app", "vm", "--kernel", "k"])), (dir.join("partita-vm-runner"), args(&["--kernel", "k"])));
        assert_eq!(resolve(&partita, &args(&["app", "partition", "status"])), (dir.join("partita-partition"), args(&["status"])));
        // Commands of the operator's binary only, and options before the command, stay with partita.
        for other in [&["app", "udp-echo"][..], &["app"], &["--log", "debug", "route"], &["up"], &[]] {
            assert_eq!(resolve(&partita, &args(other)), (partita.clone(), args(other)), "{other:?}");
        }
        assert_eq!(guest_binary(&partita), dir.join(GUEST_BINARY));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
