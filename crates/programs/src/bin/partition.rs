//! `partita-partition`: the partition's control page from the shell (the same program as `partita app
//! partition`): its status, and requests to the supervisor (mode, error, plan).
#![forbid(unsafe_code)]
fn main() -> std::process::ExitCode {
    partita_programs::run_program("partita-partition", "the partition's control page from the shell: status, mode, error, plan", partita_programs::partition::run)
}
