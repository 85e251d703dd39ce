//! `partita-vm-runner`: a VM partition's runner: QEMU on inherited taps, the guest's console on stdout (the same program as `partita app vm`).
#![forbid(unsafe_code)]
fn main() -> std::process::ExitCode {
    partita_programs::run_program("partita-vm-runner", "a VM partition's runner: QEMU on inherited taps, the guest's console on stdout", partita_programs::vm_runner::run)
}
