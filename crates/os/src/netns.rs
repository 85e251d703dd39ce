//! Network namespaces from the parent's side: where named ones live, and running code inside one.
//!
//! A thread's network namespace is its own (setns(2) with CLONE_NEWNET changes the calling thread only), so
//! the code runs on a new thread: the caller's namespace never changes, and the thread, with every socket it
//! opened there, ends with the closure.
use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// Where `ip netns add NAME` (and the supervisor) puts the namespace named `name`.
pub fn named_path(name: &str) -> PathBuf {
    Path::new("/run/netns").join(name)
}

#[derive(Debug, Error)]
pub enum NetnsError {
    #[error("open network namespace {path}: {source}")]
    Open { path: PathBuf, #[source] source: io::Error },
    #[error("join network namespace {path}: {source}{}", join_hint(source))]
    Join { path: PathBuf, #[source] source: io::Error },
    #[error("the thread inside network namespace {path} panicked")]
    Panicked { path: PathBuf },
}

fn join_hint(e: &io::Error) -> &'static str {
    match e.raw_os_error() {
        Some(libc::EPERM) => " (needs root or CAP_SYS_ADMIN)",
        Some(libc::EINVAL) => " (not a network namespace)",
        _ => "",
    }
}

/// Runs `f` on a new thread that has joined the network namespace at `path` (a `/run/netns/NAME` or a
/// `/proc/PID/ns/net`), and returns its result. Sockets `f` opens live in that namespace.
pub fn run_in_netns<T: Send + 'static>(path: &Path, f: impl FnOnce() -> T + Send + 'static) -> Result<T, NetnsError> {
    let file = std::fs::File::open(path).map_err(|source| NetnsError::Open { path: path.into(), source })?;
    let shown = path.to_path_buf();
    std::thread::spawn(move || {
        // The descriptor is ours for the call's duration; only this thread's network namespace changes.
        if !crate::prexec::join_network_namespace(file.as_raw_fd()) {
            return Err(NetnsError::Join { path: shown, source: io::Error::last_os_error() });
        }
        drop(file);
        Ok(f())
    })
    .join()
    .map_err(|_| NetnsError::Panicked { path: path.into() })?
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Child, Command};
    use std::time::{Duration, Instant};

    fn ns_of(link: &str) -> PathBuf {
        std::fs::read_link(link).unwrap()
    }

    /// A process in a network namespace of its own, killed and reaped on drop.
    struct Unshared(Child);
    impl Drop for Unshared {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    #[test]
    fn code_runs_in_the_namespace_it_joined_and_the_caller_stays_put() {
        let ours = ns_of("/proc/thread-self/ns/net");
        let child = match Command::new("unshare").args(["--net", "sleep", "30"]).spawn() {
            Ok(c) => Unshared(c),
            Err(e) => panic!("unshare (util-linux) is needed for this test: {e}"),
        };
        let path = PathBuf::from(format!("/proc/{}/ns/net", child.0.id()));
        // unshare switches namespaces before it execs sleep: wait until it has.
        let deadline = Instant::now() + Duration::from_secs(10);
        while ns_of(path.to_str().unwrap()) == ours {
            assert!(Instant::now() < deadline, "unshare did not make a namespace");
            std::thread::sleep(Duration::from_millis(5));
        }
        let theirs = ns_of(path.to_str().unwrap());
        match run_in_netns(&path, || ns_of("/proc/thread-self/ns/net")) {
            Ok(inside) => assert_eq!(inside, theirs),
            // Without CAP_SYS_ADMIN the join is refused, and the error says so.
            Err(e) => assert!(matches!(&e, NetnsError::Join { .. }) && e.to_string().contains("CAP_SYS_ADMIN"), "{e}"),
        }
        assert_eq!(ns_of("/proc/thread-self/ns/net"), ours);
    }

    #[test]
    fn errors_name_the_namespace_and_the_step() {
        let missing = named_path("partita-os-test-no-such-namespace");
        let e = run_in_netns(&missing, || ()).unwrap_err();
        assert!(matches!(&e, NetnsError::Open { path, .. } if *path == missing), "{e:?}");
        assert!(e.to_string().contains("/run/netns/partita-os-test-no-such-namespace"), "{e}");
        // A file that is not a namespace cannot be joined.
        let e = run_in_netns(Path::new("/proc/self/status"), || ()).unwrap_err();
        assert!(matches!(&e, NetnsError::Join { .. }), "{e:?}");
        match run_in_netns(Path::new("/proc/self/ns/net"), || panic!("inside")).unwrap_err() {
            NetnsError::Panicked { path } => assert_eq!(path, Path::new("/proc/self/ns/net")),
            // Without CAP_SYS_ADMIN the closure never runs.
            NetnsError::Join { source, .. } => assert_eq!(source.raw_os_error(), Some(libc::EPERM)),
            e => panic!("{e:?}"),
        }
    }
}
