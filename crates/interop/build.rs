//! Builds the Fast DDS probe from `idl/partita_interop.idl` and `fastdds/probe.cpp`; the binary's path reaches
//! the crate as `PARTITA_FASTDDS_PROBE`.
fn main() {
    let binary = partita_fastdds_build::build(&partita_fastdds_build::Program {
        idl: "idl/partita_interop.idl",
        source: "fastdds/probe.cpp",
        binary: "partita-fastdds-probe",
        what: "the Fast DDS probe",
    });
    println!("cargo::rustc-env=PARTITA_FASTDDS_PROBE={}", binary.display());
}
