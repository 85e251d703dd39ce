//! The optimiser's plans, written into system files: every one validates as `partita check` validates a file
//! and gives each partition exactly the share it had, for the paper's system, a three-partition module with idle
//! time, and the multicore variant (one partition per CPU, nothing to lay out).
use partita_schedule::optimise::{layouts, optimise, Objective, Search};
use partita_schedule::system::{default_path, locate, written, SystemError};
use partita_schedule::{Arrivals, Model, PlanWindows};
use partita_system::Host;

fn host() -> Host {
    Host { cpus: vec![0, 1], path: None }
}

fn search() -> Search {
    Search { min_window_ns: 50_000, min_frame_ns: 100_000, max_frame_ns: 3_000_000, max_overhead: 0.25, objective: Objective::P99, search_requests: 500, final_requests: 2000 }
}

const THREE: &str = r#"
[system]
name = "three"
[[module]]
name = "m"
cpus = [0]
[[module.partition]]
name = "io"
command = ["true"]
io = true
[[module.partition]]
name = "control"
command = ["true"]
[[module.partition]]
name = "logger"
command = ["true"]
[[module.plan]]
cpu = 0
major_frame = "2ms"   # 200 us idle at the end
[[module.plan.window]]
partition = "io"
start = "0us"
duration = "600us"
[[module.plan.window]]
partition = "control"
start = "600us"
duration = "800us"
[[module.plan.window]]
partition = "logger"
start = "1400us"
duration = "400us"
"#;

#[test]
fn every_layout_written_into_the_file_validates_and_keeps_the_shares() {
    for (text, name) in [(partita_system::BUILTIN_DEFAULT, "paper"), (THREE, "three")] {
        let system = partita_system::parse(text, name, &host()).unwrap();
        let at = locate(&system, None).unwrap();
        let base = PlanWindows::of_plan(&system.modules[at.module].plans[at.plan]);
        let all = layouts(&base, &search());
        assert!(all.len() >= 10, "{name}: {} layouts", all.len());
        for (plan, _) in all {
            let (file, parsed) = written(&system, text, &host(), at, &plan).unwrap_or_else(|e| panic!("{name}: {e}\n{plan:?}"));
            assert_eq!(PlanWindows::of_plan(&parsed.modules[at.module].plans[at.plan]).slots, plan.slots);
            // Everything else stays: the partitions, the nodes, the comments.
            assert_eq!(parsed.modules[0].partitions.len(), system.modules[0].partitions.len());
            assert_eq!(parsed.nodes.len(), system.nodes.len());
            assert!(name != "paper" || file.contains("# A native (non-partitioned) node on the inter-module network"), "{file}");
        }
    }
}

#[test]
fn the_chosen_plan_of_the_three_partition_module_is_a_valid_file() {
    let system = partita_system::parse(THREE, "three", &host()).unwrap();
    let at = locate(&system, Some(0)).unwrap();
    let path = default_path(&system, at).unwrap();
    assert_eq!(path, ["io", "control", "io"]);
    let model = Model { chain: path, switch_ns: 25_000, switch_samples: Vec::new(), arrivals: Arrivals::Open, requests: 2000, background: Vec::new() };
    let plans = PlanWindows::of_system(&system);
    let out = optimise(&plans, 0, &model, &[50_000, 90_000], &search()).unwrap();
    let chosen = &out.candidates[out.chosen];
    assert!(chosen.overhead <= 0.25);
    let (_, parsed) = written(&system, THREE, &host(), at, &chosen.plan).unwrap();
    assert_eq!(parsed.modules[0].plans[0].idle().as_nanos() * 2_000_000, 200_000 * parsed.modules[0].plans[0].frame().as_nanos());
}

#[test]
fn systems_without_a_plan_to_lay_out_say_so() {
    let multicore = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/video-surveillance-multicore.toml")).unwrap();
    let system = partita_system::parse(&multicore, "multicore", &host()).unwrap();
    let e = locate(&system, None).unwrap_err();
    assert!(matches!(e, SystemError::NothingToLayOut { .. }), "{e}");
    assert!(e.to_string().contains("multicore"), "{e}");
    let paper = partita_system::parse(partita_system::BUILTIN_DEFAULT, "paper", &host()).unwrap();
    let e = locate(&paper, Some(5)).unwrap_err();
    assert!(e.to_string().contains("no plan schedules CPU 5"), "{e}");
}

/// Plans need not be listed in CPU order: the plan of the CPU laid out is the one replaced.
#[test]
fn the_plan_replaced_is_the_one_of_its_cpu_whatever_the_order_in_the_file() {
    let text = r#"
[system]
name = "two"
[[module]]
name = "m"
cpus = [0, 1]
[[module.partition]]
name = "a"
command = ["true"]
cpus = [1]
[[module.partition]]
name = "b"
command = ["true"]
cpus = [1]
[[module.partition]]
name = "c"
command = ["true"]
cpus = [0]
[[module.plan]]
cpu = 1
major_frame = "1ms"
window = [{ partition = "a", start = "0us", duration = "500us" }, { partition = "b", start = "500us", duration = "500us" }]
[[module.plan]]
cpu = 0
major_frame = "1ms"
window = [{ partition = "c", start = "0us", duration = "1ms" }]
[[module.path]]
name = "ab"
through = ["a", "b"]
"#;
    let system = partita_system::parse(text, "two", &host()).unwrap();
    let at = locate(&system, None).unwrap();
    assert_eq!(at.cpu, 1);
    assert_eq!(default_path(&system, at).unwrap(), ["a", "b"], "the declared path");
    let base = PlanWindows::of_plan(&system.modules[0].plans[at.plan]);
    let (plan, _) = layouts(&base, &search()).into_iter().find(|(p, _)| p.slots.len() == 4).unwrap();
    let (_, parsed) = written(&system, text, &host(), at, &plan).unwrap();
    let cpu = |s: &partita_system::System, c: usize| s.modules[0].plans.iter().find(|p| p.cpu == c).cloned().unwrap();
    assert_eq!(PlanWindows::of_plan(&cpu(&parsed, 1)).slots, plan.slots);
    let (a, b) = (cpu(&parsed, 0), cpu(&system, 0));
    assert_eq!((a.major_frame, a.windows), (b.major_frame, b.windows), "the other CPU's plan is left alone");
}
