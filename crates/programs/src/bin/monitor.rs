//! `partita-monitor`: a monitoring node: requests frames, measures response times, saves the latest frame (the same program as `partita app monitor`).
#![forbid(unsafe_code)]
fn main() -> std::process::ExitCode {
    partita_programs::run_program("partita-monitor", "a monitoring node: requests frames, measures response times, saves the latest frame", partita_programs::monitor::run)
}
