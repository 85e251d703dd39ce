//! A partition's output log. The partition's stdout and stderr are the write end of a pipe; the supervisor
//! reads the other end and appends what comes to a file only it holds, in a place the partition does not see.
//! The file is capped: once it would pass its size it becomes `<log>.1` (an older `.1` goes) and a fresh one
//! starts, so a partition's output takes at most twice its cap of the host's disk, and a partition can neither
//! grow the file past that (`fallocate` on a pipe fails) nor erase it (`ftruncate` on a pipe fails). Its stdin
//! is `/dev/null`: nothing of the operator's terminal reaches it.
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// The log of one partition (or node), shared by every launch of it: a restart appends to the same file.
#[derive(Debug)]
pub struct PartitionLog {
    path: PathBuf,
    cap: u64,
    file: Mutex<Option<(File, u64)>>,
    /// Pumps still draining a pipe, and the signal that one ended.
    active: Mutex<usize>,
    ended: Condvar,
}

impl PartitionLog {
    /// A log at `path`, rotated once it would pass `cap` bytes.
    pub fn new(path: PathBuf, cap: u64) -> Arc<PartitionLog> {
        Arc::new(PartitionLog { path, cap: cap.max(1), file: Mutex::new(None), active: Mutex::new(0), ended: Condvar::new() })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The rotated file: the log's older part.
    pub fn older(&self) -> PathBuf {
        let mut p = self.path.clone().into_os_string();
        p.push(".1");
        PathBuf::from(p)
    }

    /// Appends `bytes`, first rotating the file if they would take it past its cap.
    pub fn append(&self, bytes: &[u8]) -> std::io::Result<()> {
        let mut guard = self.file.lock().unwrap_or_else(|e| e.into_inner());
        if guard.is_none() {
            let f = OpenOptions::new().create(true).append(true).open(&self.path)?;
            let len = f.metadata()?.len();
            *guard = Some((f, len));
        }
        let (_, len) = guard.as_ref().expect("opened above");
        if *len > 0 && len.saturating_add(bytes.len() as u64) > self.cap {
            *guard = None;
            std::fs::rename(&self.path, self.older())?;
            let f = OpenOptions::new().create(true).write(true).truncate(true).open(&self.path)?;
            *guard = Some((f, 0));
        }
        let (f, len) = guard.as_mut().expect("opened above");
        f.write_all(bytes)?;
        *len += bytes.len() as u64;
        Ok(())
    }

    /// Drains `pipe` into the log on a thread of its own, until every process holding its write end has
    /// closed it (the partition has ended).
    pub fn pump(self: &Arc<Self>, pipe: OwnedFd, name: &str) -> std::io::Result<()> {
        *self.active.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        let log = Arc::clone(self);
        let spawned = std::thread::Builder::new().name(format!("log-{name}")).spawn(move || {
            let mut pipe = File::from(pipe);
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                match pipe.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => {
                        if let Err(e) = log.append(&buf[..n]) {
                            tracing::warn!(target: "partita::supervisor", "partition log {}: {e}", log.path.display());
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(_) => break,
                }
            }
            *log.active.lock().unwrap_or_else(|e| e.into_inner()) -= 1;
            log.ended.notify_all();
        });
        if let Err(e) = spawned {
            *self.active.lock().unwrap_or_else(|e| e.into_inner()) -= 1;
            return Err(e);
        }
        Ok(())
    }

    /// Waits (at most `timeout`) until every pump has written what its partition wrote: after the partition's
    /// processes have ended, its last words are in the file. Returns false on the timeout.
    pub fn drained(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut active = self.active.lock().unwrap_or_else(|e| e.into_inner());
        while *active > 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            active = self.ended.wait_timeout(active, left).unwrap_or_else(|e| e.into_inner()).0;
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("partita-log-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn the_log_rotates_at_its_cap_and_keeps_one_older_part() {
        let d = dir("rotate");
        let log = PartitionLog::new(d.join("p.log"), 100);
        for i in 0..25 {
            log.append(format!("line {i:02}\n").as_bytes()).unwrap();
        }
        let now = std::fs::read_to_string(log.path()).unwrap();
        let older = std::fs::read_to_string(log.older()).unwrap();
        assert!(now.len() <= 100 && older.len() <= 100, "{} and {} bytes", now.len(), older.len());
        assert!(now.ends_with("line 24\n"), "{now}");
        assert!(older.ends_with(&format!("line {:02}\n", 24 - now.lines().count())), "the older part ends where the log starts: {older}");
        assert_eq!(std::fs::read_dir(&d).unwrap().count(), 2, "one older part, no more");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_pump_writes_everything_before_it_counts_as_drained() {
        let d = dir("pump");
        let log = PartitionLog::new(d.join("p.log"), 1 << 20);
        let (r, w) = partita_os::process::cloexec_pipe().unwrap();
        log.pump(r, "test").unwrap();
        let mut w = File::from(w);
        for i in 0..1000 {
            writeln!(w, "line {i}").unwrap();
        }
        assert!(!log.drained(Duration::from_millis(50)), "the writer is still open");
        drop(w);
        assert!(log.drained(Duration::from_secs(5)));
        let text = std::fs::read_to_string(log.path()).unwrap();
        assert_eq!(text.lines().count(), 1000);
        assert!(text.ends_with("line 999\n"));
        let _ = std::fs::remove_dir_all(&d);
    }
}
