//! Partition modes' file side: named plans, `default_plan`, `system_partition` and the health-monitor tables.
//! A good file reads into the expected model; each broken rule is refused with its field path and its fix.
use partita_system::spec::*;
use partita_system::*;

/// Two named plans over CPUs 0 and 1, a system partition, and a health-monitor table at every level.
const GOOD: &str = r#"
[system]
name = "t"

[health_monitor]
power_fail = "stop_module"
deadline_missed = "ignore"

[[module]]
name = "core"
cpus = [0, 1]
default_plan = "normal"

[module.health_monitor]
hardware_fault = "stop_module"
illegal_request = { action = "restart_warm", max = 3, within = "10s", then = "stop_module" }

[[module.partition]]
name = "routing"
command = ["prog"]
io = true
system_partition = true

[module.partition.health_monitor]
application_error = "restart_warm"
exited = { action = "restart_cold", max = 2, within = "60s", then = "switch_plan", plan = "degraded" }
deadline_missed = { action = "switch_plan", plan = "degraded" }

[[module.partition]]
name = "camera"
command = ["prog"]
cpus = [1]

[[module.partition]]
name = "recorder"
command = ["prog"]

[[module.plan]]
name = "normal"
cpu = 0
major_frame = "1500us"

[[module.plan.window]]
partition = "routing"
start = "0us"
duration = "700us"

[[module.plan.window]]
partition = "recorder"
start = "700us"
duration = "800us"

[[module.plan]]
name = "normal"
cpu = 1
major_frame = "1ms"

[[module.plan.window]]
partition = "camera"
start = "0us"
duration = "1ms"

[[module.plan]]
name = "degraded"
cpu = 0
major_frame = "1ms"

[[module.plan.window]]
partition = "routing"
start = "0us"
duration = "1ms"

[[module.plan]]
name = "degraded"
cpu = 1
major_frame = "2ms"

[[module.plan.window]]
partition = "camera"
start = "0us"
duration = "500us"
"#;

fn host() -> Host {
    Host::with_cpus(2)
}

fn us(n: u64) -> Duration {
    Duration::from_micros(n)
}

fn errors(text: &str) -> Vec<Diagnostic> {
    match parse(text, "sys.toml", &host()) {
        Ok(_) => panic!("expected errors in:\n{text}"),
        Err(e) => e.0,
    }
}

/// `GOOD` with `from` replaced by `to` (which must occur).
fn good_with(from: &str, to: &str) -> String {
    assert!(GOOD.contains(from), "{from}");
    GOOD.replacen(from, to, 1)
}

fn line_of(text: &str, needle: &str) -> usize {
    text[..text.find(needle).unwrap_or_else(|| panic!("{needle:?}"))].matches('\n').count() + 1
}

/// The one error of `text` at field `path`, whose message says `fix`; its line is that of `at`.
fn refused(text: &str, path: &str, fix: &str, at: &str) -> Diagnostic {
    let e = errors(text);
    let d = e.iter().find(|d| d.path == path).unwrap_or_else(|| panic!("no error at {path}: {e:#?}")).clone();
    let msg = d.to_string();
    assert!(msg.contains(fix), "{path}: the message does not say {fix:?}: {msg}");
    assert_eq!(d.line, line_of(text, at), "{path}: {msg}");
    assert!(msg.starts_with(&format!("sys.toml:{}:", d.line)), "{msg}");
    d
}

#[test]
fn two_named_plans_and_tables_at_every_level_load_into_the_model() {
    let s = parse(GOOD, "sys.toml", &host()).unwrap_or_else(|e| panic!("{e}"));
    let m = &s.modules[0];
    // The default plan, one Plan per CPU by CPU; the other named plans in file order, in the same CPU order.
    assert_eq!(m.plan_name, "normal");
    assert_eq!(m.plans.iter().map(|p| (p.cpu, p.frame())).collect::<Vec<_>>(), [(0, us(1500)), (1, us(1000))]);
    assert_eq!(m.other_plans.len(), 1);
    assert_eq!(m.other_plans[0].name, "degraded");
    assert_eq!(m.other_plans[0].plans.iter().map(|p| (p.cpu, p.frame())).collect::<Vec<_>>(), [(0, us(1000)), (1, us(2000))]);
    let sets = m.plan_sets();
    assert_eq!(sets.iter().map(|(n, p)| (*n, p.len())).collect::<Vec<_>>(), [("normal", 2), ("degraded", 2)]);
    assert_eq!(sets[1].1[0].windows, [Window { partition: "routing".into(), start: us(0), duration: us(1000) }]);
    assert_eq!((m.plan_index("normal"), m.plan_index("degraded"), m.plan_index("safe")), (Some(0), Some(1), None));
    // Partition.plan indexes `plans` by the partition's CPU (the recorder has no window in "degraded").
    let p = |n: &str| m.partition(n).unwrap();
    assert_eq!((p("routing").plan, p("camera").plan, p("recorder").plan), (Some(0), Some(1), Some(0)));
    assert_eq!((p("routing").tree.cpus.as_slice(), p("camera").tree.cpus.as_slice()), (&[0][..], &[1][..]));
    assert!(p("routing").system_partition && !p("camera").system_partition);

    // The tables, exactly.
    let entry = HmEntry::new;
    let sys = HmTable { entries: [(ErrorKind::PowerFail, entry(HmAction::StopModule)), (ErrorKind::DeadlineMissed, entry(HmAction::Ignore))].into() };
    assert_eq!(s.health_monitor, sys);
    let module = HmTable {
        entries: [
            (ErrorKind::HardwareFault, entry(HmAction::StopModule)),
            (ErrorKind::IllegalRequest, HmEntry { action: HmAction::RestartWarm, escalate: Some(HmEscalation { max: 3, within: Duration::from_millis(10_000), then: HmAction::StopModule }) }),
        ]
        .into(),
    };
    assert_eq!(m.health_monitor, module);
    let routing = HmTable {
        entries: [
            (ErrorKind::ApplicationError, entry(HmAction::RestartWarm)),
            (ErrorKind::Exited, HmEntry { action: HmAction::RestartCold, escalate: Some(HmEscalation { max: 2, within: Duration::from_millis(60_000), then: HmAction::SwitchPlan("degraded".into()) }) }),
            (ErrorKind::DeadlineMissed, entry(HmAction::SwitchPlan("degraded".into()))),
        ]
        .into(),
    };
    assert_eq!(p("routing").health_monitor, routing);
    assert!(p("camera").health_monitor.is_empty());

    // Resolution: the partition's table, its module's, the system's, then the defaults.
    let r = |part: &str, kind, at_exit| s.hm_resolve(m, p(part), kind, at_exit);
    assert_eq!(r("routing", ErrorKind::DeadlineMissed, false), HmResolution::Table { level: HmLevel::Partition, entry: entry(HmAction::SwitchPlan("degraded".into())) });
    assert_eq!(r("camera", ErrorKind::DeadlineMissed, false), HmResolution::Table { level: HmLevel::System, entry: entry(HmAction::Ignore) });
    assert_eq!(r("camera", ErrorKind::HardwareFault, true), HmResolution::Table { level: HmLevel::Module, entry: entry(HmAction::StopModule) });
    assert_eq!(r("camera", ErrorKind::Exited, true), HmResolution::Health(p("camera").tree.health));
    assert_eq!(r("camera", ErrorKind::NumericError, true), HmResolution::Health(p("camera").tree.health));
    assert_eq!(r("camera", ErrorKind::NumericError, false), HmResolution::Default { level: HmLevel::Partition, action: HmAction::Ignore });
    assert_eq!(r("camera", ErrorKind::MissedWindow, false), HmResolution::Default { level: HmLevel::Partition, action: HmAction::Ignore });
    let bare = parse(&good_with("power_fail = \"stop_module\"\n", ""), "sys.toml", &host()).unwrap();
    let (bm, bp) = (&bare.modules[0], bare.modules[0].partition("camera").unwrap());
    assert_eq!(bare.hm_resolve(bm, bp, ErrorKind::PowerFail, false), HmResolution::Default { level: HmLevel::System, action: HmAction::StopModule });
}

#[test]
fn the_same_system_built_with_the_spec_builders_is_the_files() {
    let ms = Duration::from_millis;
    let spec = SystemSpec::new("t")
        .hm_entry(ErrorKind::PowerFail, HmEntrySpec::new("stop_module"))
        .hm_entry(ErrorKind::DeadlineMissed, HmEntrySpec::new("ignore"))
        .module(
            ModuleSpec::new("core")
                .cpus([0, 1])
                .default_plan("normal")
                .hm_entry(ErrorKind::HardwareFault, HmEntrySpec::new("stop_module"))
                .hm_entry(ErrorKind::IllegalRequest, HmEntrySpec::new("restart_warm").escalate(3, ms(10_000), "stop_module"))
                .partition(
                    PartitionSpec::new("routing", ["prog"])
                        .io(true)
                        .system_partition(true)
                        .hm_entry(ErrorKind::ApplicationError, HmEntrySpec::new("restart_warm"))
                        .hm_entry(ErrorKind::Exited, HmEntrySpec::new("restart_cold").escalate(2, ms(60_000), "switch_plan").plan("degraded"))
                        .hm_entry(ErrorKind::DeadlineMissed, HmEntrySpec::from(&HmAction::SwitchPlan("degraded".into()))),
                )
                .partition(PartitionSpec::new("camera", ["prog"]).cpus([1]))
                .partition(PartitionSpec::new("recorder", ["prog"]))
                .plan(PlanSpec::new(0, us(1500)).name("normal").window("routing", us(0), us(700)).window("recorder", us(700), us(800)))
                .plan(PlanSpec::new(1, ms(1)).name("normal").window("camera", us(0), ms(1)))
                .plan(PlanSpec::new(0, ms(1)).name("degraded").window("routing", us(0), ms(1)))
                .plan(PlanSpec::new(1, ms(2)).name("degraded").window("camera", us(0), us(500))),
        );
    let built = spec.build(&host(), "sys.toml").unwrap_or_else(|e| panic!("{e}\n{}", spec.to_toml()));
    let file = parse(GOOD, "sys.toml", &host()).unwrap();
    assert_eq!(format!("{built:#?}"), format!("{file:#?}"));
    assert_eq!(SystemSpec::from_toml(GOOD).unwrap(), spec);
    let text = spec.to_toml();
    for needle in ["default_plan = \"normal\"", "system_partition = true", "name = \"degraded\"", "application_error = \"restart_warm\"", "[health_monitor]"] {
        assert!(text.contains(needle), "{needle} in\n{text}");
    }
    // A table read into a spec refuses a key that is not an error kind, as the loader does.
    let e = SystemSpec::from_toml(&good_with("power_fail = ", "power_failure = ")).unwrap_err();
    assert!(e.message().contains("power_failure") && e.message().contains("power_fail"), "{e}");
}

#[test]
fn unnamed_plans_are_one_plan_named_default() {
    let text = GOOD
        .replace("name = \"degraded\"\n", "name = \"normal\"\n")
        .replace("default_plan = \"normal\"\n", "")
        .replace("name = \"normal\"\ncpu", "cpu")
        .replace("plan = \"degraded\"", "plan = \"default\"");
    // Without names, the "degraded" tables are second tables for CPUs 0 and 1: refused as before.
    let e = errors(&text);
    assert!(e.iter().any(|d| matches!(d.problem, Problem::DuplicatePlan { cpu: 0 }) && d.path == "module[core].plan[2].cpu"), "{e:#?}");
    let one = text[..text.find("[[module.plan]]\ncpu = 0\nmajor_frame = \"1ms\"").unwrap()].to_string();
    let s = parse(&one, "sys.toml", &host()).unwrap_or_else(|e| panic!("{e}\n{one}"));
    let m = &s.modules[0];
    assert_eq!((m.plan_name.as_str(), m.other_plans.len(), m.plan_sets().len(), m.plan_index(DEFAULT_PLAN)), ("default", 0, 1, Some(0)));
    // One name and no default_plan: that plan is the default; several, one of them "default": that one.
    let s = parse(&good_with("default_plan = \"normal\"\n", ""), "sys.toml", &host());
    assert!(s.is_err());
    let s = parse(&good_with("default_plan = \"normal\"\n", "").replace("\"normal\"", "\"default\""), "sys.toml", &host()).unwrap();
    assert_eq!((s.modules[0].plan_name.as_str(), s.modules[0].other_plans[0].name.as_str()), ("default", "degraded"));
    let s = parse(&good_with("default_plan = \"normal\"", "default_plan = \"degraded\""), "sys.toml", &host()).unwrap();
    assert_eq!((s.modules[0].plan_name.as_str(), s.modules[0].plans[1].frame()), ("degraded", us(2000)));
    assert_eq!(s.modules[0].plan_sets()[1].0, "normal");
}

// --- Health-monitor tables ----------------------------------------------------------------------------------

#[test]
fn an_unknown_error_kind_is_refused_naming_the_kinds() {
    let text = good_with("application_error = \"restart_warm\"", "application_eror = \"restart_warm\"");
    let d = refused(&text, "module[core].partition[routing].health_monitor.application_eror", "use one of deadline_missed, application_error, numeric_error", "application_eror");
    assert_eq!(d.problem, Problem::UnknownErrorKind { kind: "application_eror".into() });
    assert!(d.to_string().contains("ran_outside_window, exited"), "{d}");
}

#[test]
fn an_unknown_action_is_refused_naming_the_actions() {
    let text = good_with("application_error = \"restart_warm\"", "application_error = \"reboot\"");
    let d = refused(&text, "module[core].partition[routing].health_monitor.application_error", "use one of ignore, restart_cold, restart_warm, idle, stop, switch_plan, stop_module", "application_error = \"reboot\"");
    assert_eq!(d.problem, Problem::UnknownHmAction { action: "reboot".into() });
    // in a table's `action` and `then` alike
    let text = good_with("then = \"stop_module\"", "then = \"halt\"");
    refused(&text, "module[core].health_monitor.illegal_request.then", "unknown health-monitor action \"halt\"", "then = \"halt\"");
}

#[test]
fn an_action_the_level_may_not_take_is_refused_saying_which_level_takes_it() {
    // stop_module at partition level
    let text = good_with("application_error = \"restart_warm\"", "application_error = \"stop_module\"");
    let d = refused(&text, "module[core].partition[routing].health_monitor.application_error", "stop_module is taken at module and system level: put the entry in [module.health_monitor] or [health_monitor]", "application_error = \"stop_module\"");
    assert!(matches!(d.problem, Problem::HmActionNotAllowed { action: "stop_module", level: HmLevel::Partition, .. }), "{d:?}");
    assert!(d.to_string().contains("(it takes ignore, restart_cold, restart_warm, idle, stop, switch_plan)"), "{d}");
    // idle at module level
    let text = good_with("hardware_fault = \"stop_module\"", "hardware_fault = \"idle\"");
    refused(&text, "module[core].health_monitor.hardware_fault", "it acts on one partition; idle is taken at partition level: put the entry in [module.partition.health_monitor]", "hardware_fault = \"idle\"");
    // restart_cold and switch_plan at system level
    let text = good_with("deadline_missed = \"ignore\"", "deadline_missed = \"restart_cold\"");
    refused(&text, "health_monitor.deadline_missed", "restart_cold is taken at partition and module level", "deadline_missed = \"restart_cold\"");
    let text = good_with("deadline_missed = \"ignore\"", "deadline_missed = { action = \"switch_plan\", plan = \"degraded\" }");
    let d = refused(&text, "health_monitor.deadline_missed.action", "a system-level table does not say which module's plan to switch", "deadline_missed = { action");
    assert!(matches!(d.problem, Problem::HmActionNotAllowed { action: "switch_plan", level: HmLevel::System, .. }), "{d:?}");
    // an escalation's `then` too
    let text = good_with("then = \"stop_module\"", "then = \"stop\"");
    refused(&text, "module[core].health_monitor.illegal_request.then", "stop is taken at partition level", "then = \"stop\"");
}

#[test]
fn switch_plan_names_a_plan_of_the_module() {
    // a plan the module does not have: the module's plans are listed
    let text = good_with("deadline_missed = { action = \"switch_plan\", plan = \"degraded\" }", "deadline_missed = { action = \"switch_plan\", plan = \"safe\" }");
    let d = refused(&text, "module[core].partition[routing].health_monitor.deadline_missed.plan", "module \"core\" has no plan \"safe\" (its plans: normal, degraded)", "plan = \"safe\"");
    assert_eq!(d.problem, Problem::UnknownPlan { name: "safe".into(), module: "core".into(), known: "normal, degraded".into() });
    // switch_plan without a plan
    let text = good_with("deadline_missed = { action = \"switch_plan\", plan = \"degraded\" }", "deadline_missed = \"switch_plan\"");
    refused(&text, "module[core].partition[routing].health_monitor.deadline_missed.plan", "add plan = \"…\" naming one of the module's plans (normal, degraded)", "deadline_missed = \"switch_plan\"");
    // a plan without switch_plan
    let text = good_with("deadline_missed = { action = \"switch_plan\", plan = \"degraded\" }", "deadline_missed = { action = \"stop\", plan = \"degraded\" }");
    let d = refused(&text, "module[core].partition[routing].health_monitor.deadline_missed.plan", "remove it or make the action switch_plan", "deadline_missed = { action = \"stop\"");
    assert_eq!(d.problem, Problem::PlanWithoutSwitch);
}

#[test]
fn an_escalation_is_complete_and_in_range() {
    for (max, why) in [("0", "max = 0 occurrences: give 1..=1000"), ("1001", "max = 1001 occurrences: give 1..=1000"), ("-1", "max = -1 occurrences")] {
        let text = good_with("max = 2,", &format!("max = {max},"));
        refused(&text, "module[core].partition[routing].health_monitor.exited.max", why, "exited = ");
    }
    for (within, why) in [("500ms", "within = 500ms: give 1s to 86400s (24 h)"), ("86401s", "within = 86401s: give 1s to 86400s"), ("soon", "\"soon\" is not a duration")] {
        let text = good_with("within = \"60s\"", &format!("within = \"{within}\""));
        refused(&text, "module[core].partition[routing].health_monitor.exited.within", why, "exited = ");
    }
    // bounds themselves are fine
    assert!(parse(&good_with("max = 2, within = \"60s\"", "max = 1000, within = \"86400s\""), "x", &host()).is_ok());
    assert!(parse(&good_with("max = 2, within = \"60s\"", "max = 1, within = \"1s\""), "x", &host()).is_ok());
    // then without max and within, and the reverse
    let text = good_with("action = \"restart_warm\", max = 3, within = \"10s\", then = \"stop_module\"", "action = \"restart_warm\", then = \"stop_module\"");
    refused(&text, "module[core].health_monitor.illegal_request.max", "an escalation needs max, within and then together", "illegal_request");
    assert!(errors(&text).iter().any(|d| d.to_string().contains("add max and within or remove then")), "{:#?}", errors(&text));
    let text = good_with("action = \"restart_warm\", max = 3, within = \"10s\", then = \"stop_module\"", "action = \"restart_warm\", max = 3, within = \"10s\"");
    refused(&text, "module[core].health_monitor.illegal_request.then", "add then or remove max and within", "illegal_request");
    // a key an entry does not have
    let text = good_with("max = 3,", "maximum = 3,");
    refused(&text, "module[core].health_monitor.illegal_request", "unknown field `maximum`", "illegal_request");
}

#[test]
fn system_partition_needs_a_module_with_plans() {
    let text = r#"
[system]
name = "t"

[[module]]
name = "native"

[[module.partition]]
name = "p"
command = ["prog"]
system_partition = true
"#;
    let d = refused(text, "module[native].partition[p].system_partition", "remove system_partition or give the module [[module.plan]] tables", "system_partition = true");
    assert_eq!(d.problem, Problem::SystemPartitionWithoutPlans { module: "native".into() });
    // false is fine anywhere; default_plan is refused in a module without plans
    assert!(parse(&text.replace("= true", "= false"), "x", &host()).is_ok());
    let text = text.replace("name = \"native\"\n", "name = \"native\"\ndefault_plan = \"normal\"\n");
    refused(&text, "module[native].default_plan", "has no [[module.plan]]; remove default_plan or add plans", "default_plan");
}

// --- Named plans --------------------------------------------------------------------------------------------

#[test]
fn every_named_plan_covers_the_modules_cpus() {
    let cut = GOOD.rfind("[[module.plan]]\nname = \"degraded\"\ncpu = 1").unwrap();
    let text = GOOD[..cut].to_string();
    let d = refused(&text, "module[core].plan[2]", "add a [[module.plan]] with name = \"degraded\", cpu = 1", "name = \"degraded\"");
    assert_eq!(d.problem, Problem::PlanMissingCpu { plan: "degraded".into(), cpu: 1, other: "normal".into() });
}

#[test]
fn a_partition_runs_on_one_cpu_in_every_plan() {
    // in "degraded", the camera (CPU 1 in "normal") is moved to CPU 0
    let text = good_with("partition = \"routing\"\nstart = \"0us\"\nduration = \"1ms\"", "partition = \"camera\"\nstart = \"0us\"\nduration = \"1ms\"");
    let text = text.replacen("cpus = [1]\n", "", 1);
    let d = refused(&text, "module[core].plan[2].window[0].partition", "keep its windows on CPU 1 in every plan", "partition = \"camera\"\nstart = \"0us\"\nduration = \"1ms\"\n\n[[module.plan]]\nname = \"degraded\"\ncpu = 1");
    assert_eq!(d.problem, Problem::PartitionOnTwoCpus { partition: "camera".into(), cpu: 1, other_plan: "normal".into(), other: 1 });
}

#[test]
fn default_plan_names_a_plan() {
    let text = good_with("default_plan = \"normal\"", "default_plan = \"nominal\"");
    let d = refused(&text, "module[core].default_plan", "default_plan \"nominal\" names no plan of the module (its plans: normal, degraded); name one of them", "default_plan");
    assert_eq!(d.problem, Problem::UnknownDefaultPlan { name: "nominal".into(), known: "normal, degraded".into() });
}

#[test]
fn several_plan_names_need_a_default_plan() {
    let text = good_with("default_plan = \"normal\"\n", "");
    let d = refused(&text, "module[core].default_plan", "the module has several plans (normal, degraded) and none is named \"default\"; set default_plan", "name = \"core\"");
    assert_eq!(d.problem, Problem::NoDefaultPlan { known: "normal, degraded".into() });
}

#[test]
fn plan_names_follow_the_name_rule_and_a_cpu_has_one_table_per_plan() {
    let text = good_with("name = \"degraded\"\ncpu = 0", "name = \"de graded\"\ncpu = 0");
    let d = refused(&text, "module[core].plan[2].name", "use 1 to 24 characters from [A-Za-z0-9_-]", "name = \"de graded\"");
    assert!(matches!(d.problem, Problem::BadName { .. }), "{d:?}");
    let text = good_with("name = \"degraded\"\ncpu = 1", "name = \"degraded\"\ncpu = 0");
    let d = refused(&text, "module[core].plan[3].cpu", "plan \"degraded\" has two [[module.plan]] tables for CPU 0 (the first is plan[2]); merge their windows into one", "cpu = 0\nmajor_frame = \"2ms\"");
    assert_eq!(d.problem, Problem::DuplicateNamedPlan { name: "degraded".into(), cpu: 0, first: 2 });
}

#[test]
fn error_kind_codes_words_and_levels() {
    for (i, k) in ErrorKind::ALL.into_iter().enumerate() {
        assert_eq!((k.code() as usize, ErrorKind::from_code(i as u64)), (i, Some(k)));
        assert_eq!(k.as_str().parse::<ErrorKind>(), Ok(k));
    }
    assert_eq!(ErrorKind::from_code(14), None);
    assert_eq!(ErrorKind::ALL.iter().filter(|k| k.raisable()).map(|k| k.as_str()).collect::<Vec<_>>(), ["deadline_missed", "application_error", "numeric_error", "stack_overflow"]);
    let e = "segfault".parse::<ErrorKind>().unwrap_err().to_string();
    assert!(e.contains("memory_violation") && e.contains("exited"), "{e}");
    let at = |a: HmAction| [HmLevel::Partition, HmLevel::Module, HmLevel::System].map(|l| a.allowed_at(l));
    assert_eq!(at(HmAction::Ignore), [true, true, true]);
    assert_eq!(at(HmAction::RestartCold), [true, true, false]);
    assert_eq!(at(HmAction::RestartWarm), [true, true, false]);
    assert_eq!(at(HmAction::Idle), [true, false, false]);
    assert_eq!(at(HmAction::Stop), [true, false, false]);
    assert_eq!(at(HmAction::SwitchPlan("x".into())), [true, true, false]);
    assert_eq!(at(HmAction::StopModule), [false, true, true]);
}

#[test]
fn an_entry_may_be_written_as_a_table_of_its_own_and_a_table_inline() {
    let text = good_with("exited = { action = \"restart_cold\", max = 2, within = \"60s\", then = \"switch_plan\", plan = \"degraded\" }\n", "").replacen(
        "deadline_missed = { action = \"switch_plan\", plan = \"degraded\" }\n",
        "deadline_missed = { action = \"switch_plan\", plan = \"degraded\" }\n\n[module.partition.health_monitor.exited]\naction = \"restart_cold\"\nmax = 2\nwithin = \"60s\"\nthen = \"switch_plan\"\nplan = \"degraded\"\n",
        1,
    );
    let (a, b) = (parse(&text, "sys.toml", &host()).unwrap_or_else(|e| panic!("{e}\n{text}")), parse(GOOD, "sys.toml", &host()).unwrap());
    assert_eq!(a.modules[0].partitions[0].health_monitor, b.modules[0].partitions[0].health_monitor);
    // … and an error in it points at the entry's table
    let bad = text.replace("max = 2\n", "max = 0\n");
    refused(&bad, "module[core].partition[routing].health_monitor.exited.max", "give 1..=1000", "[module.partition.health_monitor.exited]");
    let inline = good_with("system_partition = true\n", "system_partition = true\nhealth_monitor = { oom = \"stop\" }\n");
    let inline = inline.replace("\n[module.partition.health_monitor]\napplication_error = \"restart_warm\"\nexited = { action = \"restart_cold\", max = 2, within = \"60s\", then = \"switch_plan\", plan = \"degraded\" }\ndeadline_missed = { action = \"switch_plan\", plan = \"degraded\" }\n", "");
    let s = parse(&inline, "sys.toml", &host()).unwrap_or_else(|e| panic!("{e}\n{inline}"));
    assert_eq!(s.modules[0].partitions[0].health_monitor.get(ErrorKind::Oom), Some(&HmEntry::new(HmAction::Stop)));
}
