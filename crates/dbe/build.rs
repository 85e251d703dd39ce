//! Builds the Fast DDS agent of the benchmark from `idl/dbe.idl` (paper 002's `PubMessage` and `AckMessage`) and
//! `fastdds/agent.cpp`; the binary's path reaches the crate as `PARTITA_DBE_FASTDDS_AGENT`.
fn main() {
    let binary = partita_fastdds_build::build(&partita_fastdds_build::Program {
        idl: "idl/dbe.idl",
        source: "fastdds/agent.cpp",
        binary: "partita-dbe-fastdds-agent",
        what: "the Fast DDS agent",
    });
    println!("cargo::rustc-env=PARTITA_DBE_FASTDDS_AGENT={}", binary.display());
}
