//! The admin token: a file only root may read, compared in constant time; and the rule that keeps the view on
//! loopback unless admin actions are protected by a token.
use std::net::SocketAddr;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// Where `partita web` looks for its token when `--token-file` is not given.
pub const DEFAULT_TOKEN_FILE: &str = "/etc/partita/web.token";

/// Whether a token file's owner and mode are safe: owned by root (or by whoever runs the web view, for tests
/// under another uid) and neither group- nor other-readable/writable.
pub fn check_owner_and_mode(path: &Path, uid: u32, mode: u32, my_uid: u32) -> Result<(), String> {
    if uid != 0 && uid != my_uid {
        return Err(format!(
            "{}: the token file is owned by uid {uid}, not root; fix: `chown root:root {0} && chmod 600 {0}` (or make a new one with `partita web --new-token --token-file {0}`)",
            path.display()
        ));
    }
    if mode & 0o077 != 0 {
        return Err(format!(
            "{}: the token file's mode is {:03o}, so others may read it; fix: `chmod 600 {0}` (or make a new one with `partita web --new-token --token-file {0}`)",
            path.display(),
            mode & 0o777
        ));
    }
    Ok(())
}

/// Reads the token from `path`. A missing file is no token (`Ok(None)`) unless `must_exist` (the operator named
/// it); a file of bad owner or mode, or an empty or short token, is an error naming the file and the fix.
pub fn load_token(path: &Path, must_exist: bool) -> Result<Option<String>, String> {
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !must_exist => return Ok(None),
        Err(e) => {
            return Err(format!(
                "{}: {e}; fix: make a token with `partita web --new-token --token-file {0}`",
                path.display()
            ))
        }
    };
    if !meta.is_file() {
        return Err(format!("{}: not a regular file; the token file holds one line, the token", path.display()));
    }
    check_owner_and_mode(path, meta.uid(), meta.mode(), partita_os::process::effective_uid())?;
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let token = text.trim().to_string();
    if token.len() < 16 || token.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!(
            "{}: the token must be one line of at least 16 characters without spaces; fix: `partita web --new-token --token-file {0}`",
            path.display()
        ));
    }
    Ok(Some(token))
}

/// Makes a new random token (32 bytes from the kernel, hex) and writes it to `path`, mode 0600, replacing one
/// there. Returns the token.
pub fn new_token(path: &Path) -> Result<String, String> {
    let mut bytes = [0u8; 32];
    use std::io::Read;
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(|e| format!("/dev/urandom: {e}"))?;
    let token: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let tmp = path.with_extension("tmp-new");
    let _ = std::fs::remove_file(&tmp);
    let write = || -> std::io::Result<()> {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&tmp)?;
        f.set_permissions(std::fs::Permissions::from_mode(0o600))?;
        writeln!(f, "{token}")?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    };
    write().map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        format!("{}: {e}", path.display())
    })?;
    Ok(token)
}

/// Whether `a` equals `b`, in a time that depends only on their lengths (never on where they differ).
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = u8::from(a.len() != b.len());
    for i in 0..a.len().max(b.len()) {
        let x = a.get(i).copied().unwrap_or(0);
        let y = b.get(i).copied().unwrap_or(0xff);
        diff |= x ^ y;
    }
    diff == 0
}

/// The token of an `Authorization: Bearer TOKEN` header value.
pub fn bearer(value: &str) -> Option<&str> {
    let (scheme, rest) = value.trim().split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| rest.trim())
}

/// The view listens on loopback, or anywhere only with a token (its admin actions restart and stop partitions).
pub fn check_listen(addr: &SocketAddr, has_token: bool) -> Result<(), String> {
    if addr.ip().is_loopback() || has_token {
        return Ok(());
    }
    Err(format!(
        "--listen {addr}: not a loopback address, and no admin token is set: anyone who reaches {addr} could see the system and, once a token exists, needs it for admin actions; fix: listen on 127.0.0.1 (the default), or make a token first with `partita web --new-token` ({DEFAULT_TOKEN_FILE}) or name one with --token-file"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_compare_equal_only_when_equal() {
        assert!(constant_time_eq(b"abcdef", b"abcdef"));
        assert!(!constant_time_eq(b"abcdef", b"abcdeg"));
        assert!(!constant_time_eq(b"abcdef", b"abcde"));
        assert!(!constant_time_eq(b"", b"a"));
        assert!(constant_time_eq(b"", b""));
        // Lengths that differ by a multiple of 256 are still unequal.
        assert!(!constant_time_eq(&[0u8; 256], &[0u8; 512]));
    }

    #[test]
    fn bearer_headers_give_their_token() {
        assert_eq!(bearer("Bearer abc"), Some("abc"));
        assert_eq!(bearer("bearer  abc "), Some("abc"));
        assert_eq!(bearer("Basic abc"), None);
        assert_eq!(bearer("Bearer"), None);
    }

    #[test]
    fn only_loopback_without_a_token() {
        let lo: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        let lo6: SocketAddr = "[::1]:8080".parse().unwrap();
        let out: SocketAddr = "198.18.0.1:8080".parse().unwrap();
        let any: SocketAddr = "0.0.0.0:8080".parse().unwrap();
        assert!(check_listen(&lo, false).is_ok());
        assert!(check_listen(&lo6, false).is_ok());
        let e = check_listen(&out, false).unwrap_err();
        assert!(e.contains("198.18.0.1:8080") && e.contains("--new-token") && e.contains("loopback"), "{e}");
        assert!(check_listen(&any, false).is_err());
        assert!(check_listen(&out, true).is_ok());
    }

    #[test]
    fn token_files_must_be_roots_and_private() {
        let p = Path::new("/etc/partita/web.token");
        assert!(check_owner_and_mode(p, 0, 0o100600, 0).is_ok());
        assert!(check_owner_and_mode(p, 0, 0o100400, 1000).is_ok());
        let e = check_owner_and_mode(p, 0, 0o100644, 0).unwrap_err();
        assert!(e.contains("/etc/partita/web.token") && e.contains("644") && e.contains("chmod 600"), "{e}");
        assert!(check_owner_and_mode(p, 0, 0o100660, 0).is_err());
        let e = check_owner_and_mode(p, 1000, 0o100600, 0).unwrap_err();
        assert!(e.contains("uid 1000") && e.contains("chown root"), "{e}");
    }

    #[test]
    fn a_new_token_is_private_and_loads_and_a_readable_one_is_refused() {
        let dir = std::env::temp_dir().join(format!("partita-web-token-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let p = dir.join("sub/web.token");
        assert_eq!(load_token(&p, false), Ok(None), "a missing default file is no token");
        assert!(load_token(&p, true).unwrap_err().contains("--new-token"));
        let t = new_token(&p).unwrap();
        assert_eq!(t.len(), 64);
        assert_eq!(std::fs::metadata(&p).unwrap().mode() & 0o777, 0o600);
        assert_eq!(load_token(&p, true), Ok(Some(t.clone())));
        let t2 = new_token(&p).unwrap();
        assert_ne!(t, t2, "a new token replaces the old one");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(load_token(&p, false).unwrap_err().contains("chmod 600"));
        std::fs::write(&p, "short\n").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(load_token(&p, false).unwrap_err().contains("at least 16"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
