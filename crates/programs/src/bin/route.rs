//! `partita-route`: partita's DDS routing service between domains (the same program as `partita route`).
#![forbid(unsafe_code)]
fn main() -> std::process::ExitCode {
    partita_programs::run_program("partita-route", "partita's DDS routing service between domains", partita_programs::route::run)
}
