//! What of the host a confined partition sees: its program and the libraries it links (found with the
//! dynamic loader's `--list`, as `ldd` does), a script's interpreter, what its system file binds by name
//! (`binds`: files, directories, programs looked up in `PATH`; an ELF file in them brings its libraries), a few
//! files of `/etc` every program may read, and for a VM partition QEMU with its firmware and modules. Each one is
//! seen at its own path, read-only; the symbolic links on the way (`/bin` → `usr/bin`, …) are made again in the
//! view. Nothing else of the host's root is there: no `/work`, `/home`, `/root`, `/srv`, other systems' state.
use crate::error::{Result, SupervisorError};
use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};

/// Files of `/etc` a partition's programs may read (those this machine has): users and groups for names, the
/// resolver's files, the loader's cache, the time zone.
pub const ETC_BASICS: [&str; 9] =
    ["/etc/passwd", "/etc/group", "/etc/hosts", "/etc/nsswitch.conf", "/etc/host.conf", "/etc/gai.conf", "/etc/ld.so.cache", "/etc/localtime", "/etc/protocols"];

/// The dynamic loader that lists a program's libraries.
const LOADER: &str = "/lib64/ld-linux-x86-64.so.2";

/// The most entries of a bound directory looked at for ELF files.
const MAX_WALK: usize = 20_000;

/// The host paths a partition sees, each at its own path: real files and directories (no symbolic link among
/// their components), and the symbolic links passed on the way to them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Seen {
    /// Files and directories bound read-only; none lies under another.
    pub binds: Vec<PathBuf>,
    /// `(link, target as the host has it)`, in the order they are made (a link's parents first).
    pub links: Vec<(PathBuf, PathBuf)>,
}

#[derive(Default)]
struct Collector {
    binds: BTreeSet<PathBuf>,
    links: Vec<(PathBuf, PathBuf)>,
    looked_at: BTreeSet<PathBuf>,
}

impl Collector {
    /// Adds `path` (absolute) as the host has it: its symbolic links and the real file or directory.
    fn add(&mut self, path: &Path) -> Option<PathBuf> {
        let real = self.resolve(path, 0)?;
        self.binds.insert(real.clone());
        Some(real)
    }

    /// Walks `path` component by component, recording each symbolic link met; returns the real path.
    fn resolve(&mut self, path: &Path, depth: u32) -> Option<PathBuf> {
        if depth > 40 {
            return None;
        }
        let mut at = PathBuf::from("/");
        let mut rest: Vec<Component> = path.components().collect();
        rest.reverse();
        while let Some(c) = rest.pop() {
            match c {
                Component::RootDir | Component::CurDir => continue,
                Component::ParentDir => {
                    at.pop();
                    continue;
                }
                Component::Normal(n) => at.push(n),
                Component::Prefix(_) => return None,
            }
            let meta = std::fs::symlink_metadata(&at).ok()?;
            if meta.file_type().is_symlink() {
                let target = std::fs::read_link(&at).ok()?;
                if !self.links.iter().any(|(l, _)| *l == at) {
                    self.links.push((at.clone(), target.clone()));
                }
                let base = at.parent().map(Path::to_path_buf).unwrap_or_else(|| PathBuf::from("/"));
                let followed = if target.is_absolute() { target } else { base.join(target) };
                let real = self.resolve(&followed, depth + 1)?;
                let mut tail: Vec<Component> = rest.clone();
                tail.reverse();
                let joined = tail.iter().fold(real, |p, c| p.join(c.as_os_str()));
                return self.resolve(&joined, depth + 1);
            }
        }
        Some(at)
    }

    /// Adds `path` and, for an ELF file, the libraries it links; for a script, its interpreter (and those).
    fn add_program(&mut self, path: &Path) {
        let Some(real) = self.add(path) else { return };
        self.libraries_of(&real, true);
        // A Python interpreter brings its standard library (`/usr/lib/python3.11` beside `/usr/bin/python3.11`).
        let name = real.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        if name.strip_prefix("python3.").is_some_and(|v| !v.is_empty() && v.chars().all(|c| c.is_ascii_digit())) {
            if let Some(lib) = real.parent().and_then(Path::parent).map(|prefix| prefix.join("lib").join(&name)).filter(|l| l.is_dir()) {
                self.add_tree(&lib);
            }
        }
    }

    /// The libraries of an ELF file; with `scripts`, a script's interpreter too (not for the files of a bound
    /// directory: their `#!/usr/bin/env python3` would bring whatever `python3` PATH finds first).
    fn libraries_of(&mut self, real: &Path, scripts: bool) {
        if !self.looked_at.insert(real.to_path_buf()) {
            return;
        }
        let mut head = [0u8; 256];
        let n = std::fs::File::open(real).and_then(|mut f| std::io::Read::read(&mut f, &mut head)).unwrap_or(0);
        let head = &head[..n];
        if head.starts_with(b"\x7fELF") {
            for lib in loader_list(real) {
                if let Some(r) = self.add(&lib) {
                    self.looked_at.insert(r);
                }
            }
        } else if let Some(line) = head.strip_prefix(b"#!").filter(|_| scripts) {
            let line = String::from_utf8_lossy(line.split(|b| *b == b'\n').next().unwrap_or_default()).into_owned();
            let mut words = line.split_whitespace();
            if let Some(interpreter) = words.next() {
                self.add_program(Path::new(interpreter));
                // `#!/usr/bin/env python3`: the program env runs.
                if interpreter.ends_with("/env") {
                    if let Some(p) = words.find(|w| !w.starts_with('-')).and_then(|w| find_in_path(w)) {
                        self.add_program(&p);
                    }
                }
            }
        }
    }

    /// Adds a directory and the libraries of the ELF files in it.
    fn add_tree(&mut self, dir: &Path) {
        let Some(real) = self.add(dir) else { return };
        let mut stack = vec![real];
        let mut seen = 0;
        while let Some(d) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&d) else { continue };
            for e in entries.flatten() {
                seen += 1;
                if seen > MAX_WALK {
                    return;
                }
                let Ok(t) = e.file_type() else { continue };
                if t.is_dir() {
                    stack.push(e.path());
                } else if t.is_file() && e.file_name().to_string_lossy().contains(".so") || e.metadata().map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0).unwrap_or(false) {
                    self.libraries_of(&e.path(), false);
                }
            }
        }
    }

    fn finish(self) -> Seen {
        // Nothing is bound under a directory bound already (it is there with it), and no link is made there.
        let mut binds: Vec<PathBuf> = Vec::new();
        for p in self.binds {
            if !binds.iter().any(|b| p.starts_with(b)) {
                binds.retain(|b| !b.starts_with(&p));
                binds.push(p);
            }
        }
        let links = self.links.into_iter().filter(|(l, _)| !binds.iter().any(|b| l.starts_with(b) && l != b)).collect();
        Seen { binds, links }
    }
}

/// The libraries the dynamic loader would map for `elf` (none for a static program, or when the loader is
/// missing).
fn loader_list(elf: &Path) -> Vec<PathBuf> {
    let Ok(out) = std::process::Command::new(LOADER).arg("--list").arg(elf).env_clear().output() else { return Vec::new() };
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let l = l.trim();
            let path = match l.split_once(" => ") {
                Some((_, right)) => right.split(" (").next()?,
                None => l.split(" (").next()?,
            };
            path.starts_with('/').then(|| PathBuf::from(path))
        })
        .collect()
}

/// `name` looked up in `PATH` as the launcher looks up a program.
fn find_in_path(name: &str) -> Option<PathBuf> {
    super::resolve_program(name).ok()
}

/// What a partition running `program` (a path on the host) sees of the host, with `binds` (absolute paths, or
/// program names looked up in `PATH`), and for a VM partition's runner QEMU's files and `extra` (the guest's
/// kernel and base archive from partita's cache).
pub fn seen(program: &Path, binds: &[String], qemu: bool, extra: &[PathBuf]) -> Result<Seen> {
    let mut c = Collector::default();
    c.add_program(program);
    for e in extra {
        c.add(e);
    }
    for b in binds {
        let path = if b.starts_with('/') {
            PathBuf::from(b)
        } else {
            find_in_path(b).ok_or_else(|| SupervisorError::Bind { bind: format!("{b:?}"), problem: "which is no program in PATH on this machine; give a path or a program that is installed" })?
        };
        if !path.exists() {
            return Err(SupervisorError::Bind { bind: path.display().to_string(), problem: "which this machine does not have; give a path that exists" });
        }
        if path.is_dir() {
            c.add_tree(&path);
        } else {
            c.add_program(&path);
        }
    }
    for e in ETC_BASICS.iter().map(Path::new).filter(|p| p.exists()) {
        c.add(e);
    }
    if qemu {
        for q in qemu_files() {
            if q.is_dir() {
                c.add_tree(&q);
            } else {
                c.add_program(&q);
            }
        }
    }
    Ok(c.finish())
}

/// QEMU (x86-64), its firmware directories and its modules directory (Debian builds TCG as a module), as this
/// machine has them.
fn qemu_files() -> Vec<PathBuf> {
    let program = partita_vm::qemu::qemu_program();
    let Some(program) = (if program.is_absolute() { Some(program) } else { find_in_path(&program.to_string_lossy()) }) else { return Vec::new() };
    let bin = std::fs::canonicalize(&program).ok().and_then(|p| p.parent().map(Path::to_path_buf)).unwrap_or_else(|| PathBuf::from("/usr/bin"));
    let prefix = bin.parent().map(Path::to_path_buf).unwrap_or_else(|| PathBuf::from("/usr"));
    let mut out = vec![program];
    out.extend(
        [prefix.join("share/qemu"), prefix.join("share/seabios"), prefix.join("lib/ipxe/qemu"), prefix.join("lib/x86_64-linux-gnu/qemu")]
            .into_iter()
            .filter(|p| p.exists()),
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_program_brings_its_libraries_and_the_links_on_the_way() {
        let sh = find_in_path("sh").expect("sh");
        let s = seen(&sh, &[], false, &[]).unwrap();
        let real = std::fs::canonicalize(&sh).unwrap();
        assert!(s.binds.contains(&real), "{s:?}");
        assert!(s.binds.iter().any(|b| b.file_name().is_some_and(|n| n.to_string_lossy().starts_with("libc.so"))), "libc comes with sh: {s:?}");
        assert!(s.binds.iter().any(|b| b.to_string_lossy().contains("ld-linux")), "the loader comes with it: {s:?}");
        assert!(s.binds.contains(&PathBuf::from("/etc/passwd")));
        // /bin/sh on a merged-/usr machine: /bin is a link, sh another.
        for (l, _) in &s.links {
            assert!(std::fs::symlink_metadata(l).unwrap().file_type().is_symlink(), "{l:?}");
        }
        assert!(!s.binds.iter().any(|b| b.starts_with("/home") || b.starts_with("/root") || b.starts_with("/work") || b == Path::new("/")), "{s:?}");
    }

    #[test]
    fn a_bound_directory_covers_what_lies_in_it_and_a_missing_bind_is_refused() {
        let s = seen(Path::new("/bin/sh"), &["/etc".into()], false, &[]).unwrap();
        assert!(s.binds.contains(&PathBuf::from("/etc")));
        assert!(!s.binds.iter().any(|b| b.starts_with("/etc") && b != Path::new("/etc")), "nothing under a bound directory: {s:?}");
        let e = seen(Path::new("/bin/sh"), &["/no/such/thing".into()], false, &[]).unwrap_err().to_string();
        assert!(e.contains("/no/such/thing") && e.contains("path that exists"), "{e}");
        let e = seen(Path::new("/bin/sh"), &["no-such-program-here".into()], false, &[]).unwrap_err().to_string();
        assert!(e.contains("no-such-program-here") && e.contains("PATH"), "{e}");
    }

    #[test]
    fn a_script_brings_its_interpreter() {
        let dir = std::env::temp_dir().join(format!("partita-view-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let script = dir.join("s");
        std::fs::write(&script, "#!/bin/sh\necho hi\n").unwrap();
        let s = seen(&script, &[], false, &[]).unwrap();
        let sh = std::fs::canonicalize("/bin/sh").unwrap();
        assert!(s.binds.contains(&sh), "{s:?}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
