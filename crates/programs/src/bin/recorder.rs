//! `partita-recorder`: the Video_Recorder partition: synthetic cameras recorded into an on-disk ring, frames served over DDS (the same program as `partita app recorder`).
#![forbid(unsafe_code)]
fn main() -> std::process::ExitCode {
    partita_programs::run_program("partita-recorder", "the Video_Recorder partition: synthetic cameras recorded into an on-disk ring, frames served over DDS", partita_programs::recorder::run)
}
