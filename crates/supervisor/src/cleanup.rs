//! Finding and removing everything partita created, by name: named network namespaces `partita-*`, links
//! starting with `pt` in the host namespace, and cgroups under `partita/` in every hierarchy (only the
//! processes inside those cgroups are killed). Used by `partita down` after a supervisor that crashed.
use crate::cgroup::{kill_dirs, rmdir_retrying, Layout, TOP};
use crate::command::ip;
use crate::error::{path_err, Result};
use crate::vnet::{LINK_PREFIX, NETNS_PREFIX};
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

/// Host-namespace links starting with `prefix` (`pt` for everything).
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

/// What is left of partita on this machine (of one system when `system` is given).
pub fn find(system: Option<&str>) -> Result<Leftovers> {
    let layout = Layout::detect()?;
    let (ns_prefix, sub) = match system {
        Some(s) => (format!("{NETNS_PREFIX}{s}-"), s.to_string()),
        None => (NETNS_PREFIX.to_string(), String::new()),
    };
    Ok(Leftovers {
        netns: netns_with_prefix(&ns_prefix)?,
        links: if system.is_none() { links_with_prefix(LINK_PREFIX)? } else { Vec::new() },
        cgroups: cgroups_below(&layout, &sub),
    })
}

/// Removes all partita leftovers: processes in partita's cgroups, then namespaces, links and cgroups.
pub fn remove_all() -> Result<Leftovers> {
    let found = find(None)?;
    kill_dirs(found.cgroups.iter().map(|p| p.as_path()))?;
    for ns in &found.netns {
        ip(&["netns", "del", ns])?;
    }
    // Deleting one end of a veth deletes its peer: tolerate links already gone.
    for l in &found.links {
        if let Err(e) = ip(&["link", "del", l]) {
            if links_with_prefix(l)?.iter().any(|x| x == l) {
                return Err(e);
            }
        }
    }
    for d in &found.cgroups {
        rmdir_retrying(d)?;
    }
    Ok(found)
}

/// Removes the state directory the supervisor writes (`/run/partita/<system>`).
pub fn remove_state_dir(dir: &Path) -> Result<()> {
    if dir.exists() {
        std::fs::remove_dir_all(dir).map_err(path_err("remove", dir))?;
    }
    Ok(())
}
