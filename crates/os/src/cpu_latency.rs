//! A CPU wake-up latency bound through `/dev/cpu_dma_latency`, as `cyclictest` sets one: while the file is
//! held open with a bound written to it, the kernel keeps every CPU out of idle states whose exit latency
//! exceeds the bound (a PM QoS request, ended when the file is closed, also when the process dies).
use std::fs::File;
use std::io::{self, Read, Write};
use thiserror::Error;

pub const PATH: &str = "/dev/cpu_dma_latency";

#[derive(Debug, Error)]
pub enum CpuLatencyError {
    /// The kernel takes the bound as an `i32`.
    #[error("{PATH}: a bound of {bound_us} µs is above {} µs", i32::MAX)]
    OutOfRange { bound_us: u32 },
    #[error("{PATH}: {source}{}", if source.kind() == io::ErrorKind::PermissionDenied { " (needs root)" } else { "" })]
    Io { #[source] source: io::Error },
}

/// Keeps the CPUs out of idle states slower than the bound while it lives.
#[derive(Debug)]
pub struct CpuLatencyHold {
    bound_us: u32,
    /// The open request; closing it (on drop) ends the bound.
    _request: File,
}

impl CpuLatencyHold {
    /// Holds a bound of `bound_us` µs (0 keeps the CPUs out of every idle state but polling).
    pub fn new(bound_us: u32) -> Result<Self, CpuLatencyError> {
        let value = i32::try_from(bound_us).map_err(|_| CpuLatencyError::OutOfRange { bound_us })?;
        let io = |source| CpuLatencyError::Io { source };
        let mut request = std::fs::OpenOptions::new().write(true).open(PATH).map_err(io)?;
        // One write of the binary value; the kernel also takes hex text, but only the i32 is unambiguous.
        request.write_all(&value.to_ne_bytes()).map_err(io)?;
        Ok(CpuLatencyHold { bound_us, _request: request })
    }

    pub fn bound_us(&self) -> u32 {
        self.bound_us
    }
}

/// The bound in force now, in µs: the tightest of all holds in the system (a very large value when none).
pub fn current_bound_us() -> Result<i32, CpuLatencyError> {
    let io = |source| CpuLatencyError::Io { source };
    let mut value = [0u8; 4];
    File::open(PATH).map_err(io)?.read_exact(&mut value).map_err(io)?;
    Ok(i32::from_ne_bytes(value))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_bound_is_in_force_until_dropped() {
        // A bound no other program is likely to hold, so the one read back is ours (or a tighter one).
        const BOUND: u32 = 1234;
        let hold = match CpuLatencyHold::new(BOUND) {
            Ok(h) => h,
            Err(e) => {
                // Not root: the error must say so. (The project's tests run as root, where this is not taken.)
                assert!(e.to_string().contains("needs root") || !std::path::Path::new(PATH).exists(), "{e}");
                return;
            }
        };
        assert_eq!(hold.bound_us(), BOUND);
        let held = current_bound_us().unwrap();
        assert!(held <= BOUND as i32, "bound in force {held} µs, held {BOUND} µs");
        let before_drop = held;
        drop(hold);
        let after = current_bound_us().unwrap();
        // Another hold tighter than ours may be in force throughout; otherwise ours is gone.
        assert!(after > BOUND as i32 || after == before_drop && before_drop < BOUND as i32, "{after} µs after the drop");
    }

    #[test]
    fn a_bound_beyond_i32_is_refused() {
        let e = CpuLatencyHold::new(u32::MAX).unwrap_err();
        assert!(matches!(e, CpuLatencyError::OutOfRange { bound_us: u32::MAX }), "{e:?}");
    }

    #[test]
    fn permission_errors_say_root_is_needed() {
        let e = CpuLatencyError::Io { source: io::Error::from(io::ErrorKind::PermissionDenied) };
        assert!(e.to_string().ends_with("(needs root)"), "{e}");
    }
}
