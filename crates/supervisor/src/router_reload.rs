//! `partita router reload SYSTEM`: a running system's I/O partitions take over their changed route tables
//! (`[module.partition.router]`) without a restart.
//!
//! The supervisor reads the system file again and validates it as `partita check` does; it refuses a file that
//! changes anything else (that needs `partita down` and `up`) or a key of the table a running router cannot take
//! over (its sides, `name`, `[[port]]`, `stats_side`, `mirror_participants`). Then it rewrites each changed
//! partition's router file: the host's copy (which a restart of the partition reads) and, for a confined
//! partition, the copy in the partition's own `/run/partita` (a tmpfs of the host root's that the partition can
//! read and not change, see `launch::rootfs`), reached through `/proc/PID/root` of the partition's process
//! without following any link the partition could have planted. Its router (`partita route` without a file
//! watches its router file) sees the new file within a second and takes it over as `--watch` does
//! (docs/router.md, "Hot reload"). A VM partition's router file is in its guest's archive: refused.
use partita_router_config::RouterConfig;
use partita_system::System;
use std::fmt;
use std::path::{Path, PathBuf};

/// How an I/O partition's router reads its router file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reads {
    /// The host's copy, by its path (an unconfined partition).
    HostCopy,
    /// Its own copy, in its view's `/run/partita` (a confined partition).
    OwnCopy,
    /// A copy in its guest's archive (a VM partition): not rewritable while it runs.
    GuestCopy,
}

/// An I/O partition's router file, as `up` wrote it.
#[derive(Debug, Clone)]
pub struct RouterFile {
    pub partition: String,
    /// The host's copy (beside the system's state).
    pub host: PathBuf,
    pub reads: Reads,
}

/// The first lines of a router file the supervisor writes.
pub fn header(system: &System, partition: &str) -> String {
    format!("The routing service of I/O partition {partition} of system {}, written by partita's supervisor from\n{} (docs/router.md).", system.name, system.source)
}

/// Why a reload was refused; nothing was written then.
#[derive(Debug)]
pub enum Refused {
    /// The system runs from the built-in default: there is no file to read again.
    BuiltIn,
    /// The file does not validate (its errors, as `partita check` prints them).
    Invalid(String),
    /// It changes more than route tables: what else, by member.
    OtherChanges { file: String, what: Vec<String> },
    /// A partition's table changes keys its running router cannot take over: (field, what changed).
    Fixed { file: String, partition: String, fields: Vec<(String, String)> },
    /// The partition is a VM.
    VirtualMachine { partition: String },
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refused::BuiltIn => write!(f, "the system runs from partita's built-in default, which has no file to read again; bring it up from a file to reload its route tables"),
            Refused::Invalid(errors) => write!(f, "{errors}\nnot reloaded: fix the file (`partita check FILE` shows the same errors); the running route tables stay"),
            Refused::OtherChanges { file, what } => write!(
                f,
                "{file}: only the I/O partitions' [module.partition.router] tables can change while the system runs, and the file also changes {}; \
                 put those back as they were to reload the route tables, or bring the system down and up again (partita down, partita up) to change them; nothing was reloaded",
                what.join(", ")
            ),
            Refused::Fixed { file, partition, fields } => {
                let fields: Vec<String> = fields.iter().map(|(field, what)| format!("{field}: {what}")).collect();
                write!(
                    f,
                    "{file}: [module.partition.router] of I/O partition {partition}: {}: a running router cannot take this over; put it back as it was to reload the rest, \
                     or bring the system down and up again to change it; nothing was reloaded",
                    fields.join("; ")
                )
            }
            Refused::VirtualMachine { partition } => write!(
                f,
                "I/O partition {partition} is a virtual machine, whose router file is in its guest's archive; bring the system down and up again to change its route table; nothing was reloaded"
            ),
        }
    }
}

/// `system` with every I/O partition's route table left out: what must not change.
fn without_tables(system: &System) -> System {
    let mut s = system.clone();
    for p in s.modules.iter_mut().flat_map(|m| m.partitions.iter_mut()) {
        p.router = None;
    }
    s
}

/// What differs between `old` and `new` besides route tables, by member (for the refusal); empty when only
/// route tables changed.
fn other_changes(old: &System, new: &System) -> Vec<String> {
    let (old, new) = (without_tables(old), without_tables(new));
    if old == new {
        return Vec::new();
    }
    let mut what = Vec::new();
    let names = |s: &System| s.modules.iter().map(|m| m.name.clone()).collect::<Vec<_>>();
    if names(&old) != names(&new) || old.nodes.iter().map(|n| &n.name).ne(new.nodes.iter().map(|n| &n.name)) {
        what.push("the modules or nodes themselves".to_string());
    } else {
        for (a, b) in old.modules.iter().zip(&new.modules) {
            if a.partitions.iter().map(|p| &p.name).ne(b.partitions.iter().map(|p| &p.name)) {
                what.push(format!("module {}'s partitions", a.name));
                continue;
            }
            for (pa, _) in a.partitions.iter().zip(&b.partitions).filter(|(pa, pb)| pa != pb) {
                what.push(format!("partition {} (besides its router table)", pa.name));
            }
            let (mut ma, mut mb) = (a.clone(), b.clone());
            (ma.partitions, mb.partitions) = (Vec::new(), Vec::new());
            if ma != mb {
                what.push(format!("module {} (its CPUs, network, plans, paths or health monitor)", a.name));
            }
        }
        for (a, _) in old.nodes.iter().zip(&new.nodes).filter(|(a, b)| a != b) {
            what.push(format!("node {}", a.name));
        }
    }
    let (mut sa, mut sb) = (old.clone(), new.clone());
    (sa.modules, sb.modules, sa.nodes, sb.nodes) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    if sa != sb {
        what.push("the system's own settings ([system], the inter-module network, hosts, peers, health monitor)".to_string());
    }
    if what.is_empty() {
        what.push("the system".to_string());
    }
    what
}

/// An I/O partition whose router configuration a reload changes.
#[derive(Debug)]
pub struct Change {
    pub partition: String,
    /// The whole configuration it runs with, and the one it gets.
    pub was: RouterConfig,
    pub now: RouterConfig,
    /// Its new `[module.partition.router]` table, for the running model.
    pub table: Option<RouterConfig>,
}

impl Change {
    /// "2 routes → 3 routes", for the answer.
    pub fn summary(&self) -> String {
        format!("{} routes → {} routes", self.was.routes.len(), self.now.routes.len())
    }
}

/// The I/O partitions whose router configuration `new` changes; refused when `new` changes anything else, or a
/// key a running router cannot take over. Pure: reads and writes nothing.
pub fn changes(old: &System, new: &System) -> Result<Vec<Change>, Refused> {
    let what = other_changes(old, new);
    if !what.is_empty() {
        return Err(Refused::OtherChanges { file: new.source.clone(), what });
    }
    let mut out = Vec::new();
    // Only route tables differ: the modules and partitions correspond one to one.
    let pairs = old.modules.iter().flat_map(|m| &m.partitions).zip(new.modules.iter().flat_map(|m| &m.partitions));
    for (a, b) in pairs {
        let (Some(was), Some(now)) = (old.router_config(a), new.router_config(b)) else { continue };
        if was == now {
            continue;
        }
        let fields = was.fixed_differences(&now);
        if !fields.is_empty() {
            return Err(Refused::Fixed { file: new.source.clone(), partition: a.name.clone(), fields });
        }
        out.push(Change { partition: a.name.clone(), was, now, table: b.router.clone() });
    }
    Ok(out)
}

/// The system file `running` came from, read and validated again against this machine (the same part of a
/// system spanning hosts).
pub fn read_again(running: &System) -> Result<System, Refused> {
    if running.source == partita_system::BUILTIN_DEFAULT_NAME {
        return Err(Refused::BuiltIn);
    }
    let new = partita_system::load(Path::new(&running.source)).map_err(|e| Refused::Invalid(e.to_string()))?;
    match &running.part {
        Some(host) => new.part(host).map_err(Refused::Invalid),
        None => Ok(new),
    }
}

/// Where a confined partition's own router file is, below its process's root.
const OWN_DIR: &str = "run/partita";

/// Rewrites the router file in the view of the partition whose process is `pid`: `/proc/PID/root`, then
/// `run/partita` beneath it without following a link, which must be the root of a tmpfs, the host root's and not
/// writable by others (the one `launch::rootfs` mounts), then the file replaced at once.
pub fn write_own_copy(pid: i32, text: &str) -> std::io::Result<()> {
    use partita_os::beneath;
    let root = beneath::open_dir(&Path::new("/proc").join(pid.to_string()).join("root"))?;
    let dir = beneath::open_dir_beneath(&root, Path::new(OWN_DIR))?;
    let (uid, mode) = beneath::owner_and_mode(&dir)?;
    if uid != 0 || mode & 0o022 != 0 || !beneath::is_tmpfs_mount_root(&dir)? {
        return Err(std::io::Error::new(std::io::ErrorKind::PermissionDenied, format!("its /{OWN_DIR} is not the tmpfs the supervisor mounted (owner {uid}, mode {mode:o})")));
    }
    let name = Path::new(crate::launch::rootfs::ROUTER_FILE).file_name().and_then(|n| n.to_str()).unwrap_or("router.toml");
    beneath::replace_file(&dir, name, text.as_bytes(), 0o444)
}

/// Replaces the host's copy at `path` at once (a new file renamed over it).
pub fn write_host_copy(path: &Path, text: &str) -> std::io::Result<()> {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name().and_then(|n| n.to_str())) else {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a file path"));
    };
    partita_os::beneath::replace_file(&partita_os::beneath::open_dir(dir)?, name, text.as_bytes(), 0o644)
}

#[cfg(test)]
mod tests {
    use super::*;
    use partita_system::{parse, Host};

    const SYSTEM: &str = r#"
[system]
name = "rr"

[[module]]
name = "m"
cpus = [0]

[[module.partition]]
name = "app"
command = ["sleep", "60"]

[[module.partition]]
name = "io"
command = ["partita", "route"]
io = true

[module.partition.router]
[[module.partition.router.route]]
from = "module"
to = "network"
allow = ["a/*"]

[[module.plan]]
cpu = 0
major_frame = "2ms"
window = [{ partition = "app", start = "0us", duration = "1ms" }, { partition = "io", start = "1ms", duration = "1ms" }]
"#;

    fn system(text: &str) -> System {
        parse(text, "rr.toml", &Host::with_cpus(2)).unwrap_or_else(|e| panic!("{e}\n{text}"))
    }

    #[test]
    fn a_changed_route_table_is_a_change_of_its_partition_alone() {
        let old = system(SYSTEM);
        assert!(changes(&old, &old).unwrap().is_empty(), "the same file changes nothing");
        let new = system(&SYSTEM.replace("allow = [\"a/*\"]", "allow = [\"a/*\", \"b/*\"]"));
        let c = changes(&old, &new).unwrap();
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].partition, "io");
        assert_eq!(c[0].now.routes[0].allow, vec!["a/*".to_string(), "b/*".to_string()]);
        assert_eq!(c[0].summary(), "1 routes → 1 routes");
        assert_eq!(c[0].table.as_ref().map(|t| t.routes.len()), Some(1), "the new table, for the running model");
        // The file written reads back to the same configuration, sides included.
        let text = c[0].now.to_file(&header(&new, "io"));
        assert_eq!(RouterConfig::parse(&text, Path::new("router.toml")).unwrap(), c[0].now);
    }

    #[test]
    fn any_other_change_is_refused_naming_what_changed() {
        let old = system(SYSTEM);
        let cases = [
            (SYSTEM.replace("command = [\"sleep\", \"60\"]", "command = [\"sleep\", \"61\"]"), "partition app"),
            (SYSTEM.replace("major_frame = \"2ms\"", "major_frame = \"3ms\""), "module m"),
            (SYSTEM.replace("io = true", "io = true\nmemory = \"96MiB\""), "partition io"),
            (SYSTEM.replace("name = \"rr\"", "name = \"rs\""), "the system's own settings"),
        ];
        for (text, named) in cases {
            assert_ne!(text, SYSTEM, "{named}");
            let e = changes(&old, &system(&text)).expect_err(named);
            assert!(matches!(e, Refused::OtherChanges { .. }), "{e}");
            let shown = e.to_string();
            assert!(shown.contains(named) && shown.contains("partita down") && shown.contains("rr.toml"), "{shown}");
        }
    }

    #[test]
    fn a_key_a_running_router_cannot_take_over_is_refused_by_name() {
        let old = system(SYSTEM);
        let new = system(&SYSTEM.replace("[module.partition.router]\n", "[module.partition.router]\nname = \"other\"\n"));
        let e = changes(&old, &new).unwrap_err();
        let shown = e.to_string();
        assert!(matches!(e, Refused::Fixed { ref partition, .. } if partition == "io"), "{shown}");
        assert!(shown.contains("name:") && shown.contains("\"other\"") && shown.contains("put it back"), "{shown}");
    }
}
