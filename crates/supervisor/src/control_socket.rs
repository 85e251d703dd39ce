//! The supervisor's control socket, `<state dir>/control.sock`: how `partita plan switch`, `partita partition
//! restart|stop` and `partita web`'s admin actions reach a running supervisor. The socket is mode 0600 and every connection's peer is checked by the kernel's record
//! (`SO_PEERCRED`): only the supervisor's own uid (root) is served. Partitions see neither the socket nor the
//! state directory (their view of the file system holds neither).
//!
//! One request per connection, one JSON line each way.
use crate::error::{path_err, Result, SupervisorError};
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader, Write};
use std::os::fd::AsFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

pub const SOCKET: &str = "control.sock";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum Request {
    /// Switch `module`'s plan (the only module with several plans when `None`) to `plan`, at the end of the
    /// current major frame or at once.
    SwitchPlan { module: Option<String>, plan: String, now: bool },
    /// Restart a partition or node (cold: its state directory emptied first), also one kept stopped.
    RestartPartition { partition: String, cold: bool },
    /// Stop a partition or node and keep it stopped (its windows go on, unused) until restarted.
    StopPartition { partition: String },
    /// Read the system file again and give each I/O partition whose route table changed its new router file
    /// (`partita router reload`, crate::router_reload).
    ReloadRouters,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Response {
    pub ok: bool,
    pub detail: String,
}

/// The listening socket; removed on drop.
pub struct ControlSocket {
    listener: UnixListener,
    path: PathBuf,
}

/// The longest a client may take to send its request line.
const READ_TIMEOUT: Duration = Duration::from_millis(500);
/// The longest request line read.
const MAX_REQUEST: u64 = 4096;

impl ControlSocket {
    pub fn bind(state_dir: &Path) -> Result<ControlSocket> {
        let path = state_dir.join(SOCKET);
        let _ = std::fs::remove_file(&path);
        let listener = UnixListener::bind(&path).map_err(path_err("bind", &path))?;
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).map_err(path_err("chmod", &path))?;
        listener.set_nonblocking(true).map_err(path_err("fcntl", &path))?;
        Ok(ControlSocket { listener, path })
    }

    /// The connections waiting, each with its request read (or why it was refused: the peer's uid, a line that
    /// is not a request). Never waits for a connection; a client that does not send its line in time is dropped.
    pub fn accept(&self) -> Vec<(UnixStream, std::result::Result<Request, String>)> {
        let mut out = Vec::new();
        // A bounded number per look.
        for _ in 0..16 {
            let Ok((stream, _)) = self.listener.accept() else { break };
            let me = partita_os::process::effective_uid();
            let request = match partita_os::socket::peer_uid(stream.as_fd()) {
                Ok(uid) if uid == me => read_request(&stream),
                Ok(uid) => Err(format!("uid {uid} may not control this system (only uid {me})")),
                Err(e) => Err(format!("the peer's credentials: {e}")),
            };
            out.push((stream, request));
        }
        out
    }
}

impl Drop for ControlSocket {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

fn read_request(stream: &UnixStream) -> std::result::Result<Request, String> {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_read_timeout(Some(READ_TIMEOUT));
    let mut line = String::new();
    let mut reader = BufReader::new(std::io::Read::take(stream, MAX_REQUEST));
    reader.read_line(&mut line).map_err(|e| format!("reading the request: {e}"))?;
    serde_json::from_str(line.trim()).map_err(|e| format!("not a request ({e}): {line:?}"))
}

/// Answers a connection and closes it.
pub fn answer(mut stream: UnixStream, response: &Response) {
    let _ = stream.set_write_timeout(Some(READ_TIMEOUT));
    if let Ok(text) = serde_json::to_string(response) {
        let _ = writeln!(stream, "{text}");
    }
}

/// Sends `request` to the supervisor whose state directory is `state_dir` and waits up to `timeout` for its
/// answer.
pub fn send(state_dir: &Path, request: &Request, timeout: Duration) -> Result<Response> {
    let path = state_dir.join(SOCKET);
    let mut stream = UnixStream::connect(&path).map_err(path_err("connect", &path))?;
    stream.set_read_timeout(Some(timeout)).map_err(path_err("setsockopt", &path))?;
    let text = serde_json::to_string(request).map_err(|source| SupervisorError::Encode { what: "a control request", source })?;
    writeln!(stream, "{text}").map_err(path_err("write", &path))?;
    let mut line = String::new();
    BufReader::new(&stream).read_line(&mut line).map_err(path_err("read", &path))?;
    serde_json::from_str(line.trim()).map_err(|e| SupervisorError::Sys {
        call: "read",
        context: format!("{}: the supervisor's answer {line:?}", path.display()),
        source: std::io::Error::new(std::io::ErrorKind::InvalidData, e),
    })
}
