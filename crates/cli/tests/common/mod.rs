//! Helpers shared by the CLI's integration tests (each test file uses some of them).
#![allow(dead_code)]
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// A fresh folder `partita-<prefix>-<tag>-<pid>` under the temporary directory, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(prefix: &str, tag: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!("partita-{prefix}-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `partita up FILE --duration SECONDS`, started: its standard error goes to `err` (a file, which nobody has to
/// drain while the test watches the system), its standard output nowhere.
pub fn spawn_up(file: &Path, seconds: u32, err: &Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_partita"))
        .args(["up", file.to_str().unwrap(), "--duration", &seconds.to_string()])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(err).unwrap())
        .spawn()
        .unwrap()
}

/// Lets `up` run until `seen()` says the test has what it checks, `up` ends by itself, or `limit` has passed;
/// then stops it with SIGTERM (which tears the system down as the end of `--duration` does). Returns its exit
/// status and what it wrote to `err`.
pub fn stop_up_when(mut up: Child, err: &Path, limit: Duration, mut seen: impl FnMut() -> bool) -> (ExitStatus, String) {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline && !seen() && up.try_wait().unwrap().is_none() {
        std::thread::sleep(Duration::from_millis(200));
    }
    if up.try_wait().unwrap().is_none() {
        // `up` is this test's own child.
        let _ = partita_os::process::send_signal(up.id() as i32, libc::SIGTERM);
    }
    let status = up.wait().unwrap();
    (status, std::fs::read_to_string(err).unwrap_or_default())
}

/// A running system's state file (`/run/partita/<name>/state.json`), or null while there is none.
pub fn state(name: &str) -> serde_json::Value {
    std::fs::read_to_string(Path::new("/run/partita").join(name).join("state.json")).ok().and_then(|t| serde_json::from_str(&t).ok()).unwrap_or_default()
}

/// Whether `what` holds within `limit`, looking every 100 ms.
pub fn wait_for(limit: Duration, what: impl Fn() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if what() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    what()
}
