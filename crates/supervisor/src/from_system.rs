//! From the validated TOML model (`partita-system`) to what the supervisor builds ([`SystemSpec`]).
use crate::health::Action;
use crate::system::{ModuleSpec, PartitionSpec, PlanSpec, SystemSpec};
use partita_system::{HealthAction, System};
use std::time::Duration;

/// A model the supervisor cannot build yet, with what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}: module {module}: {problem}; {fix}")]
pub struct Unsupported {
    pub file: String,
    pub module: String,
    pub problem: String,
    pub fix: String,
}

fn action(h: &HealthAction) -> Action {
    match h {
        HealthAction::Restart { max_restarts, window } => {
            Action::Restart { max: *max_restarts, within: Duration::from_nanos(window.as_nanos()) }
        }
        HealthAction::Stop => Action::Stop,
        HealthAction::Ignore => Action::Ignore,
    }
}

/// Converts a validated system. Addresses are assigned by the supervisor from 198.18.0.0/15 in module and
/// partition order; the model's domains, plans, limits, commands and health actions are kept.
pub fn spec_from(system: &System) -> Result<SystemSpec, Unsupported> {
    let mut modules = Vec::new();
    for m in &system.modules {
        let plans = m.plans.iter().map(|p| PlanSpec {
            major_frame: Duration::from_nanos(p.major_frame.0.as_nanos()),
            windows: p
                .windows
                .iter()
                .map(|w| (w.partition.clone(), Duration::from_nanos(w.start.as_nanos()), Duration::from_nanos(w.duration.as_nanos())))
                .collect(),
            executor_cpu: Some(p.cpu),
        }).collect();
        let cpus = if m.cpus.is_empty() {
            None
        } else {
            Some(m.cpus.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(","))
        };
        modules.push(ModuleSpec {
            name: m.name.clone(),
            cpus,
            domain: m.network.domain.get(),
            plans,
            partitions: m
                .partitions
                .iter()
                .map(|p| PartitionSpec {
                    name: p.name.clone(),
                    command: p.command.clone(),
                    memory_bytes: Some(p.memory.0),
                    pids_max: p.pids_max,
                    action: action(&p.health),
                    io: p.io,
                    env: p
                        .env
                        .iter()
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .chain(p.router.iter().map(|r| (partita_system::ROUTER_ENV.to_string(), r.clone())))
                        .collect(),
                    address: Some((p.address, m.network.subnet.prefix())),
                    external_address: p.external_address.map(|a| (a, system.network.subnet.prefix())),
                })
                .collect(),
        });
    }
    for n in &system.nodes {
        modules.push(ModuleSpec {
            name: n.name.clone(),
            cpus: None,
            domain: n.domain.get(),
            plans: Vec::new(),
            partitions: vec![PartitionSpec {
                name: n.name.clone(),
                command: n.command.clone(),
                memory_bytes: n.memory.map(|b| b.0),
                pids_max: None,
                action: Action::Ignore,
                io: false,
                env: n.env.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
                address: None,
                external_address: Some((n.address, system.network.subnet.prefix())),
            }],
        });
    }
    Ok(SystemSpec { name: system.name.clone(), modules, external_domain: system.network.domain.get() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_papers_system_converts_with_its_plan() {
        let sys = partita_system::builtin_default().expect("the built-in default is valid");
        let spec = spec_from(&sys).unwrap();
        let recorder = spec.modules.iter().find(|m| !m.plans.is_empty()).expect("a partitioned module");
        let plan = &recorder.plans[0];
        assert_eq!(plan.major_frame, Duration::from_micros(1500));
        let mut windows: Vec<(String, Duration)> = plan.windows.iter().map(|(p, _, d)| (p.clone(), *d)).collect();
        windows.sort();
        assert_eq!(windows, vec![("recorder".into(), Duration::from_micros(700)), ("routing".into(), Duration::from_micros(800))]);
        assert_eq!(recorder.partitions.iter().filter(|p| p.io).count(), 1);
        let routing = recorder.partitions.iter().find(|p| p.io).unwrap();
        let router = routing.env.iter().find(|(k, _)| k == partita_system::ROUTER_ENV).map(|(_, v)| v.as_str());
        assert!(router.is_some_and(|t| t.contains("surveillance/*")), "the routing partition gets its router table: {router:?}");
        assert!(!recorder.partitions.iter().filter(|p| !p.io).any(|p| p.env.iter().any(|(k, _)| k == partita_system::ROUTER_ENV)));
        assert!(spec.modules.iter().any(|m| m.plans.is_empty()), "the monitoring node is native");
        assert_eq!(spec.external_domain, sys.network.domain.get());
    }
}
