//! `partita bench dbe` (paper 002's DDS Benchmark Environment), `partita bench dbe report`, and the agents'
//! entry `partita app dbe-agent`.
use clap::{Args, Subcommand};
use partita_dbe::interop::{self, InteropResult};
use partita_dbe::matrix::{self, Matrix};
use partita_dbe::run::{self, RunConfig};
use partita_dbe::store::{self, Store};
use partita_dbe::system::Programs;
use partita_supervisor::supervisor::{install_stop_signals, STATE_DIR};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct DbeArgs {
    #[command(subcommand)]
    command: Option<DbeCommand>,
    /// The test matrix (docs/dbe.md); the built-in one (examples/dbe-paper-002.toml) when left out.
    matrix: Option<PathBuf>,
    /// The results tree: one file per cell under <results>/<machine>/.
    #[arg(long, default_value = "results/dbe")]
    results: PathBuf,
    /// Where report.md and the figures go [default: <results>/<machine>/report].
    #[arg(long)]
    out: Option<PathBuf>,
    /// Measure cells the tree has already (by default a rerun skips them).
    #[arg(long)]
    force: bool,
    /// Only the groups whose test id contains this (repeatable), e.g. `--only latency-cyclone`.
    #[arg(long, value_name = "TEXT")]
    only: Vec<String>,
    /// Skip the interoperability matrix.
    #[arg(long)]
    no_interop: bool,
    /// How long each interoperability pair's agents wait to discover each other before the pair is judged not
    /// to work (e.g. 20s).
    #[arg(long, default_value = "20s", value_parser = parse_match_timeout)]
    interop_match_timeout: std::time::Duration,
    /// Print the cells the matrix names, and which are measured, without running anything.
    #[arg(long)]
    list: bool,
    #[command(flatten)]
    setup: crate::bench::SetupArgs,
}

#[derive(Subcommand)]
enum DbeCommand {
    /// Redraw the report and Figs. 7–10 from stored results, without measuring.
    Report(ReportArgs),
}

#[derive(Args)]
struct ReportArgs {
    /// The results tree.
    #[arg(long, default_value = "results/dbe")]
    results: PathBuf,
    /// The machine whose results to report [default: this machine's, else the only one in the tree].
    #[arg(long)]
    machine: Option<String>,
    /// The matrix, for its list of combinations that cannot run [default: the built-in one].
    #[arg(long)]
    matrix: Option<PathBuf>,
    /// Where report.md and the figures go [default: <results>/<machine>/report].
    #[arg(long)]
    out: Option<PathBuf>,
}

fn usage(m: String) -> ExitCode {
    eprintln!("error: {m}");
    ExitCode::from(2)
}

fn load_matrix(path: Option<&Path>) -> Result<Matrix, String> {
    match path {
        Some(p) => matrix::load(p).map_err(|e| e.to_string()),
        None => matrix::parse(matrix::DEFAULT_MATRIX, "<built-in matrix examples/dbe-paper-002.toml>").map_err(|e| e.to_string()),
    }
}

fn read_interop(store: &Store) -> Option<InteropResult> {
    serde_json::from_str(&std::fs::read_to_string(store.dir().join("interop.json")).ok()?).ok()
}

pub fn run(a: DbeArgs) -> ExitCode {
    if let Some(DbeCommand::Report(r)) = a.command {
        return report(r);
    }
    let matrix = match load_matrix(a.matrix.as_deref()) {
        Ok(m) => m,
        Err(e) => return usage(e),
    };
    let setup = match a.setup.setup() {
        Ok(s) => s,
        Err(e) => return usage(e.to_string()),
    };
    let machine = store::machine_key();
    let store = Store::new(&a.results, &machine);
    let cfg = RunConfig {
        programs: Programs { partita: crate::paper::exe(), fastdds: partita_dbe::FASTDDS_AGENT.into() },
        state_root: STATE_DIR.into(),
        setup,
        force: a.force,
        only: a.only.clone(),
        machine: machine.clone(),
        failed_logs: Some(store.dir().join("failed")),
    };
    if a.list {
        for p in &matrix.planned {
            for &s in &p.sizes {
                let id = p.group.cell_id(s);
                println!("{id}\t{}", if store.measured(&id) { "measured" } else { "to measure" });
            }
        }
        for n in &matrix.not_applicable {
            println!("{}\tnot applicable: {}", n.group.id(), n.why);
        }
        return ExitCode::SUCCESS;
    }
    let (groups, skipped) = run::to_measure(&matrix, &store, &cfg);
    let needs_fastdds =
        !a.no_interop || groups.iter().any(|p| matches!(p.group.implementation, matrix::Implementation::Fastdds | matrix::Implementation::FastddsShm));
    if needs_fastdds && !Path::new(&cfg.programs.fastdds).exists() {
        eprintln!("partita bench dbe: the Fast DDS agent {} is missing; build partita with scripts/setup.sh first", cfg.programs.fastdds);
        return ExitCode::FAILURE;
    }
    if let Err(e) = std::fs::create_dir_all(store.dir()) {
        return usage(format!("--results {}: {e}", a.results.display()));
    }
    install_stop_signals();
    eprintln!("partita bench dbe: {}; results in {}", setup.caption(), store.dir().display());
    let summary = match run::run(&groups, skipped, &store, &cfg, |l| eprintln!("{l}")) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("partita bench dbe: {e}");
            return ExitCode::FAILURE;
        }
    };
    let interop = if a.no_interop {
        read_interop(&store)
    } else {
        let r = interop::run(&cfg.programs, &setup, Path::new(STATE_DIR), &machine, a.interop_match_timeout, |l| eprintln!("{l}"));
        if partita_supervisor::supervisor::stop_requested() {
            eprintln!("partita bench dbe: interrupted (Ctrl-C or SIGTERM); the systems were torn down");
            return ExitCode::FAILURE;
        }
        let _ = std::fs::write(store.dir().join("interop.json"), serde_json::to_string_pretty(&r).expect("plain data"));
        Some(r)
    };
    let out = a.out.unwrap_or_else(|| store.dir().join("report"));
    match partita_dbe::report::write(&out, &machine, &store.all(), Some(&matrix), interop.as_ref()) {
        Ok(text) => print!("{text}"),
        Err(e) => {
            eprintln!("partita bench dbe: writing {}: {e}", out.display());
            return ExitCode::FAILURE;
        }
    }
    eprintln!(
        "partita bench dbe: {} cells measured, {} skipped (measured before), {} failed; report in {}",
        summary.measured,
        summary.skipped,
        summary.failed.len(),
        out.join("report.md").display()
    );
    if summary.failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn report(r: ReportArgs) -> ExitCode {
    let matrix = match load_matrix(r.matrix.as_deref()) {
        Ok(m) => m,
        Err(e) => return usage(e),
    };
    let machines = Store::machines(&r.results);
    let machine = match r.machine {
        Some(m) if machines.contains(&m) => m,
        Some(m) => return usage(format!("--machine {m}: no results in {} (machines there: {})", r.results.display(), machines.join(", "))),
        None => {
            let here = store::machine_key();
            if machines.contains(&here) {
                here
            } else if machines.len() == 1 {
                machines[0].clone()
            } else {
                return usage(format!("--results {}: {} machines there ({}); name one with --machine", r.results.display(), machines.len(), machines.join(", ")));
            }
        }
    };
    let store = Store::new(&r.results, &machine);
    let out = r.out.unwrap_or_else(|| store.dir().join("report"));
    match partita_dbe::report::write(&out, &machine, &store.all(), Some(&matrix), read_interop(&store).as_ref()) {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("partita bench dbe report: writing {}: {e}", out.display());
            ExitCode::FAILURE
        }
    }
}

/// `partita app dbe-agent ARGS…`: a built-in agent (crates/dbe/src/agent/PROTOCOL.md).
pub fn agent(args: Vec<String>) -> ExitCode {
    ExitCode::from(partita_dbe::agent::run(&args) as u8)
}

/// `--interop-match-timeout`: a length with its unit, at least 1 s.
fn parse_match_timeout(s: &str) -> Result<std::time::Duration, String> {
    match partita_router_config::parse_duration(s) {
        Ok(d) if d >= std::time::Duration::from_secs(1) => Ok(d),
        Ok(_) => Err(format!("{s:?}: give at least 1s (discovery takes that long)")),
        Err(e) => Err(format!("{s:?} {e}: give a length such as 20s")),
    }
}
