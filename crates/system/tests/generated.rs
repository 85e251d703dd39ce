//! No system file makes validation panic: 20,000 generated files (`support/system_gen.rs`: mutations of the
//! project's system files, and random files built from the schema), each parsed against a machine with two
//! CPUs that looks no program up and against one whose `PATH` is empty, are either accepted or refused with
//! errors. A valid system is then put through everything `partita check` computes from it (plans, networks,
//! host objects), and a refusal through its printed form.
//!
//! About 6 s in a release build. A debug build (`cargo test -p partita-system --test generated`, about 75 s)
//! also has overflow checks on, so there an arithmetic overflow is a panic too. Before the router's checked
//! durations (24d5c03), 30 of these 20,000 files panicked in the router table's `stats_period` or
//! `batch_delay` (`Duration::from_secs_f64` on `99999999999999999999999s` and such).
use partita_system::{parse, Errors, Host, System};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::Mutex;

#[path = "support/system_gen.rs"]
mod system_gen;

/// How many files; `PARTITA_GENERATED_FILES` asks for more (and `PARTITA_GENERATED_SEED` for others) in a
/// longer run by hand.
const FILES: usize = 20_000;

fn setting(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// What `partita check` computes from a valid system, so that a panic there counts too.
fn use_system(s: &System) -> usize {
    let mut n = format!("{s:?}").len();
    for m in &s.modules {
        for plan in &m.plans {
            n += plan.sorted_windows().len();
            n += plan.idle().to_string().len() + plan.frame().to_string().len();
            for w in &plan.windows {
                n += w.end().to_string().len() + w.start.to_std().as_nanos() as usize % 7;
            }
            for p in &m.partitions {
                n += plan.worst_case_wait(&p.name).map_or(0, |d| d.to_string().len());
                n += (plan.share(&p.name) * 100.0) as usize + plan.time_of(&p.name).to_string().len();
            }
        }
        n += m.windows_by_cpu().len();
    }
    for (id, net) in s.networks() {
        n += s.addresses_on(id).len() + net.subnet.to_string().len() + net.domain.to_string().len();
    }
    for (_, t) in s.trees() {
        n += t.memory.map_or(0, |m| m.to_string().len());
        if let partita_system::HealthAction::Restart { window, .. } = t.health {
            n += window.to_std().as_secs() as usize % 7;
        }
    }
    n + s.host_objects().cgroups.len() + s.cpu_dma_latency.map_or(0, |d| d.to_string().len())
}

fn use_errors(e: &Errors) -> usize {
    e.to_string().len()
}

#[derive(Default, Debug)]
struct Tally {
    valid: usize,
    refused: usize,
    /// Refused by validation, not by the TOML reader.
    refused_past_syntax: usize,
}

/// Where the panics were: location and message, with the first text that made each.
static PANICS: Mutex<Vec<(String, String)>> = Mutex::new(Vec::new());
static LAST: Mutex<String> = Mutex::new(String::new());

#[test]
fn no_generated_system_file_makes_validation_panic() {
    let started = std::time::Instant::now();
    let files = setting("PARTITA_GENERATED_FILES", FILES as u64) as usize;
    let texts = system_gen::texts(setting("PARTITA_GENERATED_SEED", 0x5eed_0f57_57e3), files);
    let generated_in = started.elapsed();
    let hosts = [("2 CPUs, programs not looked up", Host::with_cpus(2)), ("2 CPUs, empty PATH", Host { cpus: vec![0, 1], path: Some(Vec::<PathBuf>::new()) })];
    let mut tallies = [Tally::default(), Tally::default()];
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(|info| {
        let place = info.location().map(|l| format!("{}:{}", l.file(), l.line())).unwrap_or_default();
        *LAST.lock().unwrap_or_else(|p| p.into_inner()) = format!("{place}: {info}");
    }));
    let mut panicked = 0;
    for text in &texts {
        for ((_, host), tally) in hosts.iter().zip(tallies.iter_mut()) {
            let outcome = catch_unwind(AssertUnwindSafe(|| match parse(text, "gen.toml", host) {
                Ok(s) => {
                    use_system(&s);
                    Ok(())
                }
                Err(e) => {
                    use_errors(&e);
                    Err(e.0.iter().all(|d| !matches!(d.problem, partita_system::Problem::Syntax(_))))
                }
            }));
            match outcome {
                Ok(Ok(())) => tally.valid += 1,
                Ok(Err(past_syntax)) => {
                    tally.refused += 1;
                    tally.refused_past_syntax += past_syntax as usize;
                }
                Err(_) => {
                    panicked += 1;
                    let what = LAST.lock().unwrap_or_else(|p| p.into_inner()).clone();
                    let mut panics = PANICS.lock().unwrap_or_else(|p| p.into_inner());
                    if !panics.iter().any(|(w, _)| *w == what) {
                        panics.push((what, text.clone()));
                    }
                }
            }
        }
    }
    std::panic::set_hook(previous);
    eprintln!("{files} system files generated in {generated_in:?}, each parsed twice in {:?}", started.elapsed() - generated_in);
    for ((name, _), t) in hosts.iter().zip(&tallies) {
        eprintln!("  {name}: {} valid, {} refused ({} past the TOML reader)", t.valid, t.refused, t.refused_past_syntax);
    }
    eprintln!("  panics: {panicked}");
    let panics = PANICS.lock().unwrap_or_else(|p| p.into_inner());
    for (what, text) in panics.iter() {
        let shown: String = text.chars().take(3000).collect();
        eprintln!("---- {what}\n{shown}\n----");
    }
    assert_eq!(panicked, 0, "{} distinct panics, listed above", panics.len());
    // A generator whose files all died in the TOML reader, or were all valid, would test little.
    for ((name, _), t) in hosts.iter().zip(&tallies) {
        assert_eq!(t.valid + t.refused, files);
        assert!(t.valid * 20 >= files, "{name}: only {} of {files} files valid", t.valid);
        assert!(t.refused_past_syntax * 4 >= files, "{name}: only {} of {files} files refused past the TOML reader", t.refused_past_syntax);
    }
    // An empty PATH finds no program but `partita`, so it refuses files the other machine accepts.
    assert!(tallies[1].valid < tallies[0].valid, "{tallies:?}");
}
