//! The schedule analysis applied to a system file: which plan, which request path, and the chosen plan written
//! back as a file that validates like any other and keeps every partition's share.
use crate::windows::PlanWindows;
use crate::write::{with_plan, WriteError};
use partita_system::{Errors, Host, System};
use thiserror::Error;

/// Where a plan is, in the system and in its file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Located {
    pub module: usize,
    pub plan: usize,
    pub cpu: usize,
}

#[derive(Debug, Error)]
pub enum SystemError {
    #[error("{file}: no plan schedules CPU {cpu}; the plans are on CPUs {have}")]
    NoPlanOnCpu { file: String, cpu: usize, have: String },
    #[error("{file}: no plan has windows of two or more partitions, so there is nothing to lay out; add a [[module.plan]]")]
    NothingToLayOut { file: String },
    #[error("{file}: the path names {partition:?}, which no plan schedules; name partitions of the plan ({known})")]
    UnknownInPath { file: String, partition: String, known: String },
    #[error("{file}: CPU {cpu}'s plan has no I/O partition and another one to form a request path; give --path, e.g. --path a,b,a, or declare a [[module.path]]")]
    NoDefaultPath { file: String, cpu: usize },
    #[error(transparent)]
    Write(#[from] WriteError),
    #[error("the written plan does not validate (a bug of the optimiser):\n{0}")]
    Invalid(Errors),
    #[error("the written plan changes {partition}'s share of CPU {cpu} (a bug of the optimiser)")]
    ShareChanged { partition: String, cpu: usize },
}

/// The plan of `cpu`, or the first plan with windows of at least two partitions.
pub fn locate(system: &System, cpu: Option<usize>) -> Result<Located, SystemError> {
    let file = system.source.clone();
    let mut all = Vec::new();
    for (mi, m) in system.modules.iter().enumerate() {
        for (pi, p) in m.plans.iter().enumerate() {
            all.push((Located { module: mi, plan: pi, cpu: p.cpu }, p));
        }
    }
    match cpu {
        Some(c) => all.iter().find(|(l, _)| l.cpu == c).map(|(l, _)| *l).ok_or_else(|| SystemError::NoPlanOnCpu {
            file,
            cpu: c,
            have: all.iter().map(|(l, _)| l.cpu.to_string()).collect::<Vec<_>>().join(", "),
        }),
        None => all
            .iter()
            .find(|(_, p)| {
                let mut names: Vec<&str> = p.windows.iter().map(|w| w.partition.as_str()).collect();
                names.sort_unstable();
                names.dedup();
                names.len() >= 2
            })
            .map(|(l, _)| *l)
            .ok_or(SystemError::NothingToLayOut { file }),
    }
}

/// The request path of a plan when none is given: the module's first `[[module.path]]` that visits the plan's
/// partitions, else from the module's I/O partition to the first other partition of the plan and back (a request
/// from the network and its answer).
pub fn default_path(system: &System, at: Located) -> Result<Vec<String>, SystemError> {
    let m = &system.modules[at.module];
    let plan = &m.plans[at.plan];
    let in_plan = |p: &str| plan.windows.iter().any(|w| w.partition == p);
    if let Some(declared) = m.paths.iter().find(|p| p.through.iter().any(|x| in_plan(x))) {
        return Ok(declared.through.clone());
    }
    let io = m.partitions.iter().find(|p| p.io && in_plan(&p.name));
    let other = plan.sorted_windows().into_iter().map(|w| w.partition.clone()).find(|n| io.is_some_and(|io| io.name != *n));
    match (io, other) {
        (Some(io), Some(other)) => Ok(vec![io.name.clone(), other, io.name.clone()]),
        _ => Err(SystemError::NoDefaultPath { file: system.source.clone(), cpu: at.cpu }),
    }
}

/// The request paths of module `module` to analyse: its `[[module.path]]`s (name, visits), or else the default
/// path of each of its plans.
pub fn paths_of(system: &System, module: usize) -> Vec<(String, Vec<String>)> {
    let m = &system.modules[module];
    if !m.paths.is_empty() {
        return m.paths.iter().map(|p| (p.name.clone(), p.through.clone())).collect();
    }
    (0..m.plans.len())
        .filter_map(|pi| default_path(system, Located { module, plan: pi, cpu: m.plans[pi].cpu }).ok().map(|p| ("request".to_string(), p)))
        .collect()
}

/// Checks that every partition of `path` is scheduled by some plan of `system`.
pub fn check_path(system: &System, path: &[String]) -> Result<(), SystemError> {
    let plans = PlanWindows::of_system(system);
    for p in path {
        if !plans.iter().any(|pl| pl.has(p)) {
            let mut known: Vec<String> = plans.iter().flat_map(|pl| pl.slots.iter().map(|s| s.partition.clone())).collect();
            known.sort();
            known.dedup();
            return Err(SystemError::UnknownInPath { file: system.source.clone(), partition: p.clone(), known: known.join(", ") });
        }
    }
    Ok(())
}

/// `text` (the file of `system`) with the plan at `at` replaced by `new`, validated on `host` as `check` would,
/// and checked to give every partition the share it had.
pub fn written(system: &System, text: &str, host: &Host, at: Located, new: &PlanWindows) -> Result<(String, System), SystemError> {
    let out = with_plan(text, &system.source, at.module, new)?;
    let parsed = partita_system::parse(&out, &system.source, host).map_err(SystemError::Invalid)?;
    let (old, now) = (&system.modules[at.module].plans[at.plan], &parsed.modules[at.module].plans[at.plan]);
    for w in &old.windows {
        let a = old.time_of(&w.partition).as_nanos() as u128 * now.frame().as_nanos() as u128;
        let b = now.time_of(&w.partition).as_nanos() as u128 * old.frame().as_nanos() as u128;
        if a != b {
            return Err(SystemError::ShareChanged { partition: w.partition.clone(), cpu: at.cpu });
        }
    }
    Ok((out, parsed))
}
