//! CLOCK_MONOTONIC in nanoseconds, the time base shared by the supervisor, its logs and every partition (from
//! partita-os, which makes the calls).
pub use partita_os::clock::{monotonic_ns, sleep_until_ns, unix_ms};
