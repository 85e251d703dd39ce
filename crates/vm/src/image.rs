//! The guest image: Debian's cloud kernel as `scripts/setup.sh` unpacked it, and the base initramfs partita
//! builds from the host's busybox and its own binary.
//!
//! Cache layout (default `/var/cache/partita/vm`, or `$PARTITA_VM_CACHE`):
//!
//! ```text
//! vmlinuz-VERSION                      the kernel (setup moves it in after the modules: its presence means complete)
//! modules/VERSION/                     its modules, with modules.dep from depmod
//! vmlinux-VERSION                      the same kernel unpacked, booted directly through its PVH entry when present
//! initramfs/base-KEY.cpio              base initramfs, KEY = 16 hex digits of a SHA-256 over its inputs
//! accel-probe.json                     the acceleration probe's verdict (crate::probe)
//! ```
//!
//! The base archive holds busybox (`/bin/busybox` and a link per applet), partita stripped of its debug
//! information (`/usr/bin/partita`) with the shared libraries `ldd` names and the dynamic loader, the kernel
//! modules virtio-net needs on each bus (virtio-mmio for `microvm`, virtio-pci for `pc`/`q35`) in load order,
//! `/init` ([`crate::init`]) and `/etc/partita/image-key`. Its key is a SHA-256 over the image format version,
//! the init script, the kernel version, the module lists and the SHA-256 of the partita and busybox binaries:
//! the same inputs find the file built before; any change builds a new one.
//!
//! Crash and concurrency semantics: an archive is written to a temporary file in the same directory, synced,
//! then renamed onto its name, so a name never shows a partial file; two builders racing each write their own
//! temporary file and the last rename wins with identical contents. A cached file is reused only if it is a
//! complete archive (every header walks to the trailer) holding its own key; anything else is rebuilt.
//! Temporary files older than ten minutes (a builder that crashed) are removed, and only the four newest base
//! archives are kept.
use crate::cpio;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant, SystemTime};

pub const DEFAULT_CACHE_DIR: &str = "/var/cache/partita/vm";
/// Overrides [`DEFAULT_CACHE_DIR`].
pub const CACHE_DIR_VAR: &str = "PARTITA_VM_CACHE";
/// Bump when the layout of the base archive changes in a way its inputs do not show.
const FORMAT: &str = "partita-vm base image 1";
const KEY_FILE: &str = "etc/partita/image-key";
const KEPT_IMAGES: usize = 4;

/// The modules virtio-net needs, by bus; dependencies come from `modules.dep`.
pub const NET_MODULES: &[(&str, &[&str])] = &[("mmio", &["virtio_mmio", "virtio_net"]), ("pci", &["virtio_pci", "virtio_net"])];

#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    #[error("no guest kernel in {dir}: run scripts/setup.sh (it unpacks Debian's cloud kernel there), or set {CACHE_DIR_VAR}")]
    NoKernel { dir: PathBuf },
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("module {module} is not in {modules_dep}")]
    MissingModule { module: String, modules_dep: PathBuf },
    #[error("{program} {args}: {message}")]
    Tool { program: String, args: String, message: String },
    #[error("{0}")]
    Invalid(String),
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> ImageError + '_ {
    move |source| ImageError::Io { path: path.to_path_buf(), source }
}

/// The cache directory: `$PARTITA_VM_CACHE`, else [`DEFAULT_CACHE_DIR`].
pub fn cache_dir() -> PathBuf {
    std::env::var_os(CACHE_DIR_VAR).map(PathBuf::from).unwrap_or_else(|| PathBuf::from(DEFAULT_CACHE_DIR))
}

/// A guest kernel in the cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kernel {
    /// `6.1.0-56-cloud-amd64`.
    pub version: String,
    /// What QEMU boots (`-kernel`): `vmlinux-VERSION` when setup unpacked it (an ELF: QEMU enters it through its
    /// PVH note, skipping the firmware's boot code and the decompression, about 0.3 s sooner under TCG, see
    /// docs/vm.md), else `vmlinuz-VERSION`.
    pub image: PathBuf,
    /// `vmlinuz-VERSION`.
    pub compressed: PathBuf,
    /// `modules/VERSION`, holding `modules.dep`.
    pub modules: PathBuf,
}

impl Kernel {
    /// The newest complete kernel in `cache` (a `vmlinuz-VERSION` with `modules/VERSION/modules.dep`), newest
    /// by comparing the numbers in the version.
    pub fn find(cache: &Path) -> Result<Kernel, ImageError> {
        let listing = match std::fs::read_dir(cache) {
            Ok(l) => l,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(ImageError::NoKernel { dir: cache.into() }),
            Err(e) => return Err(ImageError::Io { path: cache.into(), source: e }),
        };
        let mut found: Vec<Kernel> = listing
            .filter_map(|e| e.ok())
            .filter_map(|e| e.file_name().to_str().and_then(|n| n.strip_prefix("vmlinuz-")).map(String::from))
            .map(|version| {
                let compressed = cache.join(format!("vmlinuz-{version}"));
                let unpacked = cache.join(format!("vmlinux-{version}"));
                let image = if is_elf(&unpacked) { unpacked } else { compressed.clone() };
                Kernel { image, compressed, modules: cache.join("modules").join(&version), version }
            })
            .filter(|k| k.modules.join("modules.dep").is_file())
            .collect();
        found.sort_by_key(|k| version_key(&k.version));
        found.pop().ok_or_else(|| ImageError::NoKernel { dir: cache.into() })
    }

    /// The `.ko` paths (relative to [`Kernel::modules`]) that loading `wanted` needs, in load order
    /// (dependencies first, each once).
    pub fn modules_in_load_order(&self, wanted: &[&str]) -> Result<Vec<String>, ImageError> {
        let dep_file = self.modules.join("modules.dep");
        let text = std::fs::read_to_string(&dep_file).map_err(io_err(&dep_file))?;
        let mut deps: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let mut by_name: BTreeMap<String, String> = BTreeMap::new();
        for line in text.lines() {
            let Some((module, rest)) = line.split_once(':') else { continue };
            by_name.insert(module_name(module), module.to_string());
            deps.insert(module.to_string(), rest.split_whitespace().map(String::from).collect());
        }
        let mut order = Vec::new();
        let mut seen = BTreeSet::new();
        for name in wanted {
            let path = by_name.get(&name.replace('-', "_")).ok_or_else(|| ImageError::MissingModule { module: name.to_string(), modules_dep: dep_file.clone() })?;
            visit(path, &deps, &mut seen, &mut order, 0).map_err(ImageError::Invalid)?;
        }
        Ok(order)
    }
}

fn visit(module: &str, deps: &BTreeMap<String, Vec<String>>, seen: &mut BTreeSet<String>, order: &mut Vec<String>, depth: usize) -> Result<(), String> {
    if depth > 64 {
        return Err(format!("modules.dep: a dependency cycle through {module}"));
    }
    if seen.contains(module) {
        return Ok(());
    }
    for d in deps.get(module).into_iter().flatten() {
        visit(d, deps, seen, order, depth + 1)?;
    }
    if seen.insert(module.to_string()) {
        order.push(module.to_string());
    }
    Ok(())
}

/// `kernel/drivers/net/virtio_net.ko[.xz]` → `virtio_net` (module names use `_` for `-`).
fn module_name(path: &str) -> String {
    let file = path.rsplit('/').next().unwrap_or(path);
    file.split(".ko").next().unwrap_or(file).replace('-', "_")
}

fn is_elf(path: &Path) -> bool {
    let mut magic = [0u8; 4];
    std::fs::File::open(path).and_then(|mut f| f.read_exact(&mut magic)).is_ok() && &magic == b"\x7fELF"
}

/// Orders versions by their numbers: `6.1.0-9` before `6.1.0-56`.
fn version_key(v: &str) -> Vec<u64> {
    v.split(|c: char| !c.is_ascii_digit()).filter(|s| !s.is_empty()).map(|s| s.parse().unwrap_or(u64::MAX)).collect()
}

/// How the base archive is stored. Measured under TCG (docs/vm.md): the uncompressed archive boots faster,
/// since the guest's decompression costs more emulated time than QEMU's copy of the larger file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Compression {
    #[default]
    None,
    Gzip,
}

impl Compression {
    fn suffix(self) -> &'static str {
        match self {
            Compression::None => "cpio",
            Compression::Gzip => "cpio.gz",
        }
    }
}

/// What the base archive is built from.
#[derive(Debug, Clone)]
pub struct BaseSpec {
    pub cache_dir: PathBuf,
    pub kernel: Kernel,
    /// The binary to put in the guest as its `/usr/bin/partita`: normally `partita-guest` beside the running
    /// binary (the partition programs only; `partita_env::programs::guest_binary`).
    pub partita: PathBuf,
    /// A statically linked busybox (Debian's busybox-static).
    pub busybox: PathBuf,
    pub compression: Compression,
}

impl BaseSpec {
    /// The newest kernel of `cache_dir`, the guest binary beside the running one, `/bin/busybox`, uncompressed.
    pub fn new(cache_dir: &Path) -> Result<BaseSpec, ImageError> {
        let running = std::env::current_exe().map_err(io_err(Path::new("/proc/self/exe")))?;
        let partita = partita_env::programs::guest_binary(&running);
        Ok(BaseSpec { kernel: Kernel::find(cache_dir)?, cache_dir: cache_dir.into(), partita, busybox: PathBuf::from("/bin/busybox"), compression: Compression::None })
    }
}

/// A base archive ready in the cache.
#[derive(Debug, Clone)]
pub struct BaseImage {
    pub path: PathBuf,
    pub key: String,
    pub kernel: Kernel,
    pub bytes: u64,
    /// Set when this call built the archive (else it was found in the cache).
    pub built: Option<BuildReport>,
}

#[derive(Debug, Clone)]
pub struct BuildReport {
    pub duration: Duration,
    pub entries: usize,
    /// The stripped partita binary's size.
    pub partita_bytes: u64,
}

/// The base archive for `spec`: the cached one when it is complete and holds its key, else built now.
pub fn prepare_base(spec: &BaseSpec) -> Result<BaseImage, ImageError> {
    let modules: Vec<(String, Vec<String>)> =
        NET_MODULES.iter().map(|(bus, wanted)| Ok((bus.to_string(), spec.kernel.modules_in_load_order(wanted)?))).collect::<Result<_, ImageError>>()?;
    let key = image_key(spec, &modules)?;
    let dir = spec.cache_dir.join("initramfs");
    let path = dir.join(format!("base-{key}.{}", spec.compression.suffix()));
    if let Ok(bytes) = std::fs::read(&path) {
        match check_archive(&bytes, spec.compression, &key) {
            Ok(()) => return Ok(BaseImage { bytes: bytes.len() as u64, path, key, kernel: spec.kernel.clone(), built: None }),
            Err(why) => tracing::warn!(target: "partita::vm", "{}: {why}; building it again", path.display()),
        }
    }
    std::fs::create_dir_all(&dir).map_err(io_err(&dir))?;
    remove_stale(&dir, &path);
    let started = Instant::now();
    let tmp = dir.join(format!(".base-{key}.{}.{}.tmp", std::process::id(), SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default().as_nanos()));
    let built = build(spec, &key, &modules, &tmp);
    let (entries, partita_bytes) = match built {
        Ok(r) => r,
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
    };
    std::fs::rename(&tmp, &path).map_err(io_err(&path))?;
    if let Ok(d) = std::fs::File::open(&dir) {
        let _ = d.sync_all();
    }
    let bytes = std::fs::metadata(&path).map_err(io_err(&path))?.len();
    Ok(BaseImage { path, key, kernel: spec.kernel.clone(), bytes, built: Some(BuildReport { duration: started.elapsed(), entries, partita_bytes }) })
}

/// SHA-256 of a file, in hexadecimal.
pub fn file_sha256(path: &Path) -> Result<String, ImageError> {
    let mut f = std::fs::File::open(path).map_err(io_err(path))?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf).map_err(io_err(path))?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(hex(&h.finalize()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn image_key(spec: &BaseSpec, modules: &[(String, Vec<String>)]) -> Result<String, ImageError> {
    let mut h = Sha256::new();
    for part in [FORMAT, crate::init::INIT_SCRIPT, &spec.kernel.version, &file_sha256(&spec.partita)?, &file_sha256(&spec.busybox)?, spec.compression.suffix()] {
        h.update(part.as_bytes());
        h.update([0]);
    }
    for (bus, list) in modules {
        h.update(format!("{bus}:{}\0", list.join(" ")).as_bytes());
    }
    Ok(hex(&h.finalize())[..16].to_string())
}

/// Why a cached archive may not be reused, if it may not.
fn check_archive(bytes: &[u8], compression: Compression, key: &str) -> Result<(), String> {
    let plain;
    let archive = match compression {
        Compression::None => bytes,
        Compression::Gzip => {
            let mut out = Vec::new();
            flate2::read::GzDecoder::new(bytes).read_to_end(&mut out).map_err(|e| format!("not a complete gzip stream: {e}"))?;
            plain = out;
            &plain
        }
    };
    let entries = cpio::entries(archive)?;
    let stored = entries.iter().find(|e| e.name == KEY_FILE).ok_or("no image key inside")?;
    let inside = &archive[stored.offset..stored.offset + stored.size];
    if inside != key.as_bytes() {
        return Err(format!("holds key {:?}, not {key}", String::from_utf8_lossy(inside)));
    }
    Ok(())
}

/// Removes temporary files of crashed builders and all but the newest base archives (besides `keep`).
fn remove_stale(dir: &Path, keep: &Path) {
    let Ok(listing) = std::fs::read_dir(dir) else { return };
    let now = SystemTime::now();
    let mut images = Vec::new();
    for e in listing.filter_map(|e| e.ok()) {
        let name = e.file_name().to_string_lossy().into_owned();
        let Ok(modified) = e.metadata().and_then(|m| m.modified()) else { continue };
        let age = now.duration_since(modified).unwrap_or_default();
        if name.starts_with(".base-") && name.ends_with(".tmp") && age > Duration::from_secs(600) {
            let _ = std::fs::remove_file(e.path());
        } else if name.starts_with("base-") && e.path() != keep {
            images.push((modified, e.path()));
        }
    }
    images.sort();
    let excess = images.len().saturating_sub(KEPT_IMAGES - 1);
    for (_, p) in images.into_iter().take(excess) {
        let _ = std::fs::remove_file(p);
    }
}

/// What goes into the archive, by path inside the guest (no leading `/`).
enum Node {
    Dir,
    File { perm: u32, source: Source },
    Symlink(String),
    CharDevice(u32, u32),
}

enum Source {
    Host(PathBuf),
    Bytes(Vec<u8>),
}

/// The archive's output: a file, or gzip into a file; `finish` reports what a drop would swallow.
enum Out {
    Plain(std::io::BufWriter<std::fs::File>),
    Gzip(flate2::write::GzEncoder<std::io::BufWriter<std::fs::File>>),
}

impl Write for Out {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Out::Plain(w) => w.write(buf),
            Out::Gzip(w) => w.write(buf),
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Out::Plain(w) => w.flush(),
            Out::Gzip(w) => w.flush(),
        }
    }
}

impl Out {
    fn finish(self) -> std::io::Result<()> {
        let mut inner = match self {
            Out::Plain(w) => w,
            Out::Gzip(w) => w.finish()?,
        };
        inner.flush()
    }
}

fn run_tool(program: &str, args: &[&str]) -> Result<Vec<u8>, ImageError> {
    let tool_err = |message: String| ImageError::Tool { program: program.into(), args: args.join(" "), message };
    let out = Command::new(program).args(args).output().map_err(|e| tool_err(e.to_string()))?;
    if !out.status.success() {
        return Err(tool_err(format!("{}: {}", out.status, String::from_utf8_lossy(&out.stderr).trim())));
    }
    Ok(out.stdout)
}

/// The shared objects `ldd` says `binary` loads (path as `ldd` names it), the dynamic loader included; empty
/// for a static binary.
pub fn shared_libraries(binary: &Path) -> Result<Vec<PathBuf>, ImageError> {
    let out = Command::new("ldd").arg(binary).output().map_err(|e| ImageError::Tool { program: "ldd".into(), args: binary.display().to_string(), message: e.to_string() })?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        if text.contains("not a dynamic executable") || String::from_utf8_lossy(&out.stderr).contains("not a dynamic executable") {
            return Ok(Vec::new());
        }
        return Err(ImageError::Tool { program: "ldd".into(), args: binary.display().to_string(), message: String::from_utf8_lossy(&out.stderr).trim().into() });
    }
    let mut libs = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.contains("not found") {
            return Err(ImageError::Tool { program: "ldd".into(), args: binary.display().to_string(), message: format!("missing library: {line}") });
        }
        // "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x…)" or "/lib64/ld-linux-x86-64.so.2 (0x…)";
        // linux-vdso has no file.
        let path = match line.split_once("=>") {
            Some((_, rest)) => rest.split_whitespace().next(),
            None => line.split_whitespace().next(),
        };
        if let Some(p) = path.filter(|p| p.starts_with('/')) {
            libs.push(PathBuf::from(p));
        }
    }
    Ok(libs)
}

fn build(spec: &BaseSpec, key: &str, modules: &[(String, Vec<String>)], tmp: &Path) -> Result<(usize, u64), ImageError> {
    let mut tree: BTreeMap<String, Node> = BTreeMap::new();
    for d in ["bin", "sbin", "usr/bin", "usr/sbin", "proc", "sys", "dev", "tmp", "run", "root", "mnt", "etc/partita", "var/lib"] {
        tree.insert(d.into(), Node::Dir);
    }
    tree.insert("dev/console".into(), Node::CharDevice(5, 1));
    tree.insert("dev/null".into(), Node::CharDevice(1, 3));
    tree.insert("init".into(), Node::File { perm: 0o755, source: Source::Bytes(crate::init::INIT_SCRIPT.into()) });
    tree.insert("etc/passwd".into(), Node::File { perm: 0o644, source: Source::Bytes(b"root:x:0:0:root:/root:/bin/sh\n".to_vec()) });
    tree.insert("etc/group".into(), Node::File { perm: 0o644, source: Source::Bytes(b"root:x:0:\n".to_vec()) });
    tree.insert(KEY_FILE.into(), Node::File { perm: 0o644, source: Source::Bytes(key.as_bytes().to_vec()) });

    // busybox and one link per applet (`--list-full` gives each applet's conventional path).
    let busybox = spec.busybox.to_str().ok_or_else(|| ImageError::Invalid(format!("{}: not UTF-8", spec.busybox.display())))?;
    let applets = run_tool(busybox, &["--list-full"])?;
    tree.insert("bin/busybox".into(), Node::File { perm: 0o755, source: Source::Host(spec.busybox.clone()) });
    for applet in String::from_utf8_lossy(&applets).lines().map(str::trim).filter(|l| !l.is_empty() && *l != "bin/busybox") {
        tree.insert(applet.trim_start_matches('/').into(), Node::Symlink("/bin/busybox".into()));
    }

    // partita without its debug information (about 55 MB with it), and what it links.
    let stripped = PathBuf::from(format!("{}.partita.tmp", tmp.display()));
    let partita = spec.partita.to_str().ok_or_else(|| ImageError::Invalid(format!("{}: not UTF-8", spec.partita.display())))?;
    run_tool("strip", &["--strip-debug", "-o", stripped.to_str().unwrap_or_default(), partita])?;
    let partita_bytes = std::fs::metadata(&stripped).map_err(io_err(&stripped))?.len();
    let partita_data = std::fs::read(&stripped).map_err(io_err(&stripped));
    let _ = std::fs::remove_file(&stripped);
    tree.insert(crate::init::GUEST_PARTITA.trim_start_matches('/').into(), Node::File { perm: 0o755, source: Source::Bytes(partita_data?) });
    for lib in shared_libraries(&spec.partita)? {
        tree.insert(lib.to_string_lossy().trim_start_matches('/').into(), Node::File { perm: 0o755, source: Source::Host(lib) });
    }

    // Kernel modules, and per bus the list /init loads in order.
    let in_guest = format!("lib/modules/{}", spec.kernel.version);
    for (bus, list) in modules {
        let mut text = String::new();
        for m in list {
            tree.insert(format!("{in_guest}/{m}"), Node::File { perm: 0o644, source: Source::Host(spec.kernel.modules.join(m)) });
            text.push_str(&format!("{}/{m}\n", spec.kernel.version));
        }
        tree.insert(format!("etc/partita/modules.{bus}"), Node::File { perm: 0o644, source: Source::Bytes(text.into_bytes()) });
    }

    // Every parent directory of every entry.
    let parents: Vec<String> = tree.keys().flat_map(|k| k.match_indices('/').map(|(i, _)| k[..i].to_string()).collect::<Vec<_>>()).collect();
    for p in parents {
        tree.entry(p).or_insert(Node::Dir);
    }

    let file = std::fs::File::create(tmp).map_err(io_err(tmp))?;
    let buffered = std::io::BufWriter::with_capacity(1 << 20, file.try_clone().map_err(io_err(tmp))?);
    let out = match spec.compression {
        Compression::None => Out::Plain(buffered),
        Compression::Gzip => Out::Gzip(flate2::write::GzEncoder::new(buffered, flate2::Compression::default())),
    };
    let mut w = cpio::Writer::new(out);
    for (name, node) in &tree {
        match node {
            Node::Dir => w.dir(name, 0o755),
            Node::Symlink(target) => w.symlink(name, target),
            Node::CharDevice(major, minor) => w.char_device(name, 0o600, *major, *minor),
            Node::File { perm, source: Source::Bytes(b) } => w.file(name, *perm, b),
            Node::File { perm, source: Source::Host(p) } => {
                let data = std::fs::read(p).map_err(io_err(p))?;
                w.file(name, *perm, &data)
            }
        }
        .map_err(io_err(tmp))?;
    }
    w.finish().and_then(Out::finish).map_err(io_err(tmp))?;
    file.sync_all().map_err(io_err(tmp))?;
    Ok((tree.len(), partita_bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_order_by_their_numbers() {
        let mut v = vec!["6.1.0-56-cloud-amd64", "6.1.0-9-cloud-amd64", "6.10.1-1-cloud-amd64"];
        v.sort_by_key(|s| version_key(s));
        assert_eq!(v, ["6.1.0-9-cloud-amd64", "6.1.0-56-cloud-amd64", "6.10.1-1-cloud-amd64"]);
    }

    #[test]
    fn modules_load_after_their_dependencies() {
        let dir = std::env::temp_dir().join(format!("partita-vm-modules-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("modules/1.0")).unwrap();
        std::fs::write(
            dir.join("modules/1.0/modules.dep"),
            "kernel/a/virtio_net.ko: kernel/a/net_failover.ko kernel/b/failover.ko kernel/c/virtio.ko kernel/c/virtio_ring.ko\n\
             kernel/a/net_failover.ko: kernel/b/failover.ko\nkernel/b/failover.ko:\nkernel/c/virtio.ko:\nkernel/c/virtio_ring.ko:\n\
             kernel/c/virtio_mmio.ko: kernel/c/virtio.ko kernel/c/virtio_ring.ko\n",
        )
        .unwrap();
        std::fs::write(dir.join("vmlinuz-1.0"), b"k").unwrap();
        let k = Kernel::find(&dir).unwrap();
        assert_eq!((k.version.as_str(), k.image.clone()), ("1.0", dir.join("vmlinuz-1.0")));
        std::fs::write(dir.join("vmlinux-1.0"), b"not an ELF").unwrap();
        assert_eq!(Kernel::find(&dir).unwrap().image, dir.join("vmlinuz-1.0"), "a damaged vmlinux is not booted");
        std::fs::write(dir.join("vmlinux-1.0"), b"\x7fELF...").unwrap();
        assert_eq!(Kernel::find(&dir).unwrap().image, dir.join("vmlinux-1.0"));
        let order = k.modules_in_load_order(&["virtio_mmio", "virtio_net"]).unwrap();
        let pos = |m: &str| order.iter().position(|o| o.ends_with(&format!("/{m}.ko"))).unwrap_or_else(|| panic!("{m} in {order:?}"));
        assert_eq!(order.len(), 6, "{order:?}");
        assert!(pos("virtio") < pos("virtio_mmio") && pos("virtio_ring") < pos("virtio_mmio"));
        assert!(pos("failover") < pos("net_failover") && pos("net_failover") < pos("virtio_net") && pos("virtio_mmio") < pos("virtio_net"));
        assert!(matches!(k.modules_in_load_order(&["e1000"]), Err(ImageError::MissingModule { .. })));
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(matches!(Kernel::find(&dir), Err(ImageError::NoKernel { .. })));
    }

    #[test]
    fn ldd_names_the_loader_and_libc_of_a_dynamic_program() {
        let libs = shared_libraries(Path::new("/bin/ls")).unwrap();
        assert!(libs.iter().any(|l| l.to_string_lossy().contains("ld-linux")), "{libs:?}");
        assert!(libs.iter().any(|l| l.to_string_lossy().contains("libc.so")), "{libs:?}");
        assert!(shared_libraries(Path::new("/bin/busybox")).unwrap().is_empty(), "busybox-static links nothing");
    }
}
