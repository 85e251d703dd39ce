//! Who owns which system: one record per system that is up (or whose supervisor died), in a directory every
//! supervisor on the machine uses, whatever its state directory. A record names the supervisor (pid and start
//! time, so a reused pid is not mistaken for it) and every host object the system has, written before the
//! first one is created. `partita down` removes exactly the objects of systems whose supervisor is gone, and
//! leaves live systems alone; a second `up` of a system that is up is refused.
use crate::error::{path_err, Result, SupervisorError};
use partita_system::HostObjects;
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Where the records are.
pub const REGISTRY_DIR: &str = "/run/partita/registry";

/// The record of one system.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Owner {
    pub system: String,
    pub pid: u32,
    /// The supervisor's start time (`/proc/<pid>/stat` field 22, clock ticks since boot).
    pub start_time: u64,
    /// Its state directory (event log, partition output, DDS configurations).
    pub state_dir: PathBuf,
    pub objects: HostObjects,
}

impl Owner {
    /// Whether the supervisor that wrote this record still runs.
    pub fn alive(&self) -> bool {
        start_time(self.pid).is_some_and(|t| t == self.start_time)
    }
}

/// The start time of process `pid`, if it exists.
pub fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: count fields after its closing one.
    let rest = stat.rsplit_once(") ")?.1;
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// This process's record of a system, removed when the system is down.
#[derive(Debug)]
pub struct Registration {
    path: PathBuf,
}

impl Registration {
    /// Records that this process owns `system` with `objects`. Refused when the system is up already, or when
    /// a dead supervisor's objects of it are still on the machine.
    pub fn claim(system: &str, state_dir: &Path, objects: &HostObjects) -> Result<Registration> {
        Self::claim_in(Path::new(REGISTRY_DIR), system, state_dir, objects)
    }

    fn claim_in(dir: &Path, system: &str, state_dir: &Path, objects: &HostObjects) -> Result<Registration> {
        std::fs::create_dir_all(dir).map_err(path_err("mkdir", dir))?;
        let path = dir.join(format!("{system}.json"));
        let pid = std::process::id();
        let owner = Owner {
            system: system.into(),
            pid,
            start_time: start_time(pid).unwrap_or(0),
            state_dir: state_dir.into(),
            objects: objects.clone(),
        };
        let mut file = match std::fs::OpenOptions::new().write(true).create_new(true).open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                let why = match read(&path) {
                    Some(o) if o.alive() => format!("system {system} is up (supervisor pid {})", o.pid),
                    _ => format!("a supervisor of system {system} died and left its objects: run `partita down`"),
                };
                return Err(SupervisorError::Held(format!("{why} ({})", path.display())));
            }
            Err(e) => return Err(SupervisorError::Path { op: "create", path, source: e }),
        };
        let text = serde_json::to_string_pretty(&owner).map_err(|source| SupervisorError::Encode { what: "the system's record", source })?;
        let registration = Registration { path: path.clone() };
        file.write_all(text.as_bytes()).and_then(|_| file.sync_all()).map_err(path_err("write", &path))?;
        Ok(registration)
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

fn read(path: &Path) -> Option<Owner> {
    serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()
}

/// Every record, with its file.
pub fn owners() -> Vec<(PathBuf, Owner)> {
    owners_in(Path::new(REGISTRY_DIR))
}

fn owners_in(dir: &Path) -> Vec<(PathBuf, Owner)> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut out: Vec<(PathBuf, Owner)> =
        entries.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "json")).filter_map(|p| read(&p).map(|o| (p, o))).collect();
    out.sort_by(|a, b| a.1.system.cmp(&b.1.system));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir() -> PathBuf {
        let d = std::env::temp_dir().join(format!("partita-registry-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn a_system_is_claimed_once_and_released_on_drop() {
        let d = dir();
        let objects = HostObjects { namespaces: vec!["partita-s-a".into()], ..HostObjects::default() };
        let r = Registration::claim_in(&d, "s", Path::new("/tmp/s"), &objects).unwrap();
        let all = owners_in(&d);
        assert_eq!(all.len(), 1);
        assert!(all[0].1.alive(), "this process owns it");
        assert_eq!(all[0].1.objects, objects);
        let again = Registration::claim_in(&d, "s", Path::new("/tmp/s"), &objects).unwrap_err();
        assert!(again.to_string().contains("is up"), "{again}");
        drop(r);
        assert!(owners_in(&d).is_empty());
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_dead_supervisors_record_is_not_alive_and_blocks_a_new_claim() {
        let d = dir().with_extension("dead");
        std::fs::create_dir_all(&d).unwrap();
        // a start time no process of this pid has
        let dead = Owner { system: "s".into(), pid: std::process::id(), start_time: u64::MAX, state_dir: "/tmp/s".into(), objects: HostObjects::default() };
        std::fs::write(d.join("s.json"), serde_json::to_string(&dead).unwrap()).unwrap();
        assert!(!owners_in(&d)[0].1.alive());
        let e = Registration::claim_in(&d, "s", Path::new("/tmp/s"), &HostObjects::default()).unwrap_err();
        assert!(e.to_string().contains("partita down"), "{e}");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn start_time_of_this_process_is_stable_and_of_no_process_is_none() {
        let me = std::process::id();
        assert!(start_time(me).is_some());
        assert_eq!(start_time(me), start_time(me));
        assert_eq!(start_time(u32::MAX), None);
    }
}
