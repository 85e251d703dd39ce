//! Finding and removing what partita created, by name: named network namespaces `partita-*`, interfaces
//! of the exact shapes partita gives them (`partita_system::names::is_link_name`), cgroups under
//! `partita/` in every hierarchy (only the processes inside those cgroups are killed), and the idle pollers'
//! cgroups of processes that are gone (`partita_os::idle_poll::remove_stale`). `partita down` removes
//! what is left of systems whose supervisor is gone and leaves the systems that are up alone (their owners are
//! in the registry, [`crate::registry`]); `--force` removes those too.
use crate::cgroup::{kill_dirs, rmdir_retrying, Layout, TOP};
use crate::command::ip;
use crate::error::{path_err, Result};
use crate::registry::{self, Owner};
use crate::vnet::NETNS_PREFIX;
use partita_system::names::is_link_name;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Leftovers {
    pub netns: Vec<String>,
    pub links: Vec<String>,
    pub cgroups: Vec<PathBuf>,
}

impl Leftovers {
    pub fn is_empty(&self) -> bool {
        self.netns.is_empty() && self.links.is_empty() && self.cgroups.is_empty()
    }
}

/// Named namespaces starting with `prefix` (`partita-` for everything).
pub fn netns_with_prefix(prefix: &str) -> Result<Vec<String>> {
    let out = ip(&["netns", "list"])?;
    Ok(out
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with(prefix))
        .map(String::from)
        .collect())
}

/// Host-namespace links starting with `prefix`.
pub fn links_with_prefix(prefix: &str) -> Result<Vec<String>> {
    let out = ip(&["-o", "link", "show"])?;
    Ok(out
        .lines()
        .filter_map(|l| l.split(": ").nth(1))
        .map(|n| n.split('@').next().unwrap_or(n).to_string())
        .filter(|n| n.starts_with(prefix))
        .collect())
}

/// Cgroup directories at or below `TOP/<sub>` in every hierarchy, deepest first.
pub fn cgroups_below(layout: &Layout, sub: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for root in layout.roots() {
        let top = if sub.is_empty() { root.join(TOP) } else { root.join(TOP).join(sub) };
        walk(&top, &mut out);
    }
    out
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
            walk(&e.path(), out);
        }
    }
    out.push(dir.to_path_buf());
}

/// What is left of partita on this machine (of one system when `system` is given), whoever owns it.
pub fn find(system: Option<&str>) -> Result<Leftovers> {
    let layout = Layout::detect()?;
    let (ns_prefix, sub) = match system {
        Some(s) => (format!("{NETNS_PREFIX}{s}-"), s.to_string()),
        None => (NETNS_PREFIX.to_string(), String::new()),
    };
    let links = match system {
        None => links_with_prefix(partita_system::names::LINK_PREFIX)?.into_iter().filter(|l| is_link_name(l)).collect(),
        Some(_) => Vec::new(),
    };
    Ok(Leftovers { netns: netns_with_prefix(&ns_prefix)?, links, cgroups: cgroups_below(&layout, &sub) })
}

/// What `partita down` did.
#[derive(Debug, Default, Clone)]
pub struct Down {
    pub removed: Leftovers,
    /// Systems that are up, left alone.
    pub live: Vec<Owner>,
    /// The host settings given back (`crate::host_tuning`).
    pub host_settings: Vec<String>,
    /// The uplinks given back (`crate::uplink`).
    pub uplinks: Vec<String>,
    /// Partitions' state directories unmounted (`crate::state_image`; their images are kept).
    pub state_mounts: Vec<PathBuf>,
}

/// Removes what partita left on this machine: every namespace, interface and cgroup of a system whose
/// supervisor is gone (recorded or found by name), its state directory and record. Systems whose supervisor
/// runs are left alone unless `force`.
pub fn down(force: bool) -> Result<Down> {
    let owners = registry::owners();
    let live: Vec<Owner> = owners.iter().filter(|(_, o)| !force && o.alive()).map(|(_, o)| o.clone()).collect();
    let mut kept_netns = BTreeSet::new();
    let mut kept_links = BTreeSet::new();
    let mut kept_systems = BTreeSet::new();
    for o in &live {
        kept_netns.extend(o.objects.namespaces.iter().cloned());
        kept_links.extend(o.objects.bridges.iter().chain(&o.objects.veths).chain(&o.objects.taps).cloned());
        kept_systems.insert(o.system.clone());
    }
    let layout = Layout::detect()?;
    let all = find(None)?;
    let mut removed = Leftovers {
        netns: all.netns.into_iter().filter(|n| !kept_netns.contains(n)).collect(),
        links: all.links.into_iter().filter(|l| !kept_links.contains(l)).collect(),
        cgroups: all
            .cgroups
            .into_iter()
            .filter(|d| {
                // partita/<system>/...: keep the live systems' directories and the shared top
                let below: Vec<String> = layout
                    .roots()
                    .iter()
                    .find_map(|r| d.strip_prefix(r.join(TOP)).ok())
                    .map(|rel| rel.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect())
                    .unwrap_or_default();
                match below.first() {
                    None => live.is_empty(),
                    Some(system) => !kept_systems.contains(system),
                }
            })
            .collect(),
    };
    kill_dirs(removed.cgroups.iter().map(|p| p.as_path()))?;
    // The partitions are gone: their state directories can be unmounted.
    let state_root = Path::new(partita_system::confinement::STATE_ROOT);
    let mut state_mounts = Vec::new();
    for system in crate::state_image::mounts_under(state_root).iter().filter_map(|m| m.strip_prefix(state_root).ok()?.components().next()).map(|c| c.as_os_str().to_string_lossy().into_owned()).collect::<BTreeSet<_>>() {
        if !kept_systems.contains(&system) {
            state_mounts.extend(crate::state_image::unmount_leftovers(&system));
        }
    }
    // Moved interfaces go back before their namespaces go (a veth end would go with its namespace).
    let (uplinks, refused) = crate::uplink::give_back_leftovers(&kept_systems.iter().cloned().collect::<Vec<_>>());
    if !refused.is_empty() {
        return Err(crate::error::SupervisorError::Held(format!("{}; the namespaces and records of those systems are kept", refused.join("; "))));
    }
    for ns in &removed.netns {
        ip(&["netns", "del", ns])?;
    }
    // Deleting one end of a veth deletes its peer: tolerate links already gone.
    for l in &removed.links {
        if let Err(e) = ip(&["link", "del", l]) {
            if links_with_prefix(l)?.iter().any(|x| x == l) {
                return Err(e);
            }
        }
    }
    for d in &removed.cgroups {
        rmdir_retrying(d)?;
    }
    for (record, o) in owners.iter().filter(|(_, o)| !kept_systems.contains(&o.system)) {
        remove_state_dir(&o.state_dir)?;
        std::fs::remove_file(record).map_err(path_err("remove", record))?;
    }
    remove_stale_state_dirs(Path::new(crate::supervisor::STATE_DIR), &live)?;
    // The host's settings, if no system that holds them is alive (or `force`).
    let host_settings = crate::host_tuning::restore_leftover(force)?;
    crate::stalls::remove_stale_instances();
    // The idle pollers' cgroups of processes that are gone (their pollers ended by themselves).
    removed.cgroups.extend(partita_os::idle_poll::remove_stale());
    Ok(Down { removed, live, host_settings, uplinks, state_mounts })
}

/// Removes the state directory the supervisor writes (`/run/partita/<system>`).
pub fn remove_state_dir(dir: &Path) -> Result<()> {
    if dir.exists() {
        std::fs::remove_dir_all(dir).map_err(path_err("remove", dir))?;
    }
    Ok(())
}

/// Removes every state directory under `root` but the registry and the live systems' own.
fn remove_stale_state_dirs(root: &Path, live: &[Owner]) -> Result<()> {
    let Ok(entries) = std::fs::read_dir(root) else { return Ok(()) };
    let registry = Path::new(registry::REGISTRY_DIR);
    for e in entries.flatten() {
        let p = e.path();
        if p == registry || p == Path::new(crate::uplink::RECORD_DIR) || live.iter().any(|o| o.state_dir == p) || !p.is_dir() {
            continue;
        }
        remove_state_dir(&p)?;
    }
    Ok(())
}
