//! `partita-port`: a partition's ARINC 653 ports from the shell (the same program as `partita app port`).
#![forbid(unsafe_code)]
fn main() -> std::process::ExitCode {
    partita_programs::run_program("partita-port", "a partition's ARINC 653 ports from the shell: list, write, read, send, receive", partita_programs::port::run)
}
