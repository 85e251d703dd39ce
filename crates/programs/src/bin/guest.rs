//! `partita-guest`: the guest's own `partita` in a VM partition (`/usr/bin/partita` there): `partita route` and
//! the partition applications, nothing else.
#![forbid(unsafe_code)]
fn main() -> std::process::ExitCode {
    partita_programs::guest::main()
}
