//! The base initramfs: what it holds (read back with an independent reader), and its cache (reuse, rebuild of
//! damaged files, concurrent builders).
mod common;

use common::read_newc;
use partita_vm::image::{prepare_base, BaseSpec, Compression, Kernel};
use std::io::Read as _;
use std::path::{Path, PathBuf};

/// A cache of its own for one test, holding links to the real kernel and modules.
struct TempCache(PathBuf);

impl TempCache {
    fn new(tag: &str) -> TempCache {
        let real = Kernel::find(&common::vm_cache()).unwrap();
        let dir = std::env::temp_dir().join(format!("partita-vm-test-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("modules")).unwrap();
        std::os::unix::fs::symlink(&real.compressed, dir.join(format!("vmlinuz-{}", real.version))).unwrap();
        std::os::unix::fs::symlink(&real.modules, dir.join("modules").join(&real.version)).unwrap();
        TempCache(dir)
    }

    /// A spec whose "partita" is a small dynamic program (quick to strip and hash).
    fn spec(&self, partita: &Path) -> BaseSpec {
        let mut s = BaseSpec::new(&self.0).unwrap();
        s.partita = partita.into();
        s
    }
}

impl Drop for TempCache {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn find<'a>(entries: &'a [common::Read], name: &str) -> &'a common::Read {
    entries.iter().find(|e| e.name == name).unwrap_or_else(|| panic!("{name} is not in the archive"))
}

fn check_contents(archive: &[u8], spec: &BaseSpec) {
    let entries = read_newc(archive);
    let init = find(&entries, "init");
    assert_eq!(init.mode, 0o100755);
    assert_eq!(init.data, partita_vm::init::INIT_SCRIPT.as_bytes());
    let console = find(&entries, "dev/console");
    assert_eq!((console.mode & 0o170000, console.rdev), (0o020000, (5, 1)), "a character device 5:1");
    let busybox = find(&entries, "bin/busybox");
    assert_eq!(busybox.data, std::fs::read(&spec.busybox).unwrap());
    let sh = find(&entries, "bin/sh");
    assert_eq!((sh.mode, sh.data.as_slice()), (0o120777, &b"/bin/busybox"[..]), "applets are links to busybox");
    for applet in ["sbin/insmod", "sbin/ip", "sbin/poweroff", "bin/mount"] {
        assert_eq!(find(&entries, applet).data, b"/bin/busybox", "{applet}");
    }
    let partita = find(&entries, "usr/bin/partita");
    assert_eq!(partita.mode, 0o100755);
    assert_eq!(&partita.data[..4], b"\x7fELF");
    assert!(partita.data.len() as u64 <= std::fs::metadata(&spec.partita).unwrap().len(), "stripped, never larger");
    for lib in partita_vm::image::shared_libraries(&spec.partita).unwrap() {
        let e = find(&entries, lib.to_str().unwrap().trim_start_matches('/'));
        assert_eq!(e.data, std::fs::read(&lib).unwrap(), "{}", lib.display());
    }
    assert!(entries.iter().any(|e| e.name.starts_with("lib64/ld-linux")), "the dynamic loader");
    for bus in ["mmio", "pci"] {
        let list = String::from_utf8(find(&entries, &format!("etc/partita/modules.{bus}")).data.clone()).unwrap();
        let modules: Vec<&str> = list.lines().collect();
        assert!(modules.last().unwrap().ends_with("/virtio_net.ko"), "{bus}: virtio_net last: {modules:?}");
        assert!(modules.iter().any(|m| m.ends_with(if bus == "mmio" { "/virtio_mmio.ko" } else { "/virtio_pci.ko" })), "{modules:?}");
        for m in &modules {
            let e = find(&entries, &format!("lib/modules/{m}"));
            let host = spec.kernel.modules.join(m.split_once('/').unwrap().1);
            assert_eq!(e.data, std::fs::read(host).unwrap(), "{m}");
        }
    }
    // Every parent directory comes before what it holds.
    let names: Vec<&str> = entries.iter().map(|e| e.name.as_str()).collect();
    for (i, e) in entries.iter().enumerate() {
        if let Some((parent, _)) = e.name.rsplit_once('/') {
            let p = names.iter().position(|n| *n == parent).unwrap_or_else(|| panic!("no directory {parent}"));
            assert!(p < i && entries[p].mode & 0o170000 == 0o040000, "{parent} before {}", e.name);
        }
    }
}

#[test]
fn the_base_archive_holds_busybox_partita_its_libraries_the_modules_and_init() {
    let cache = TempCache::new("content");
    let spec = cache.spec(Path::new("/bin/ls"));
    let img = prepare_base(&spec).unwrap();
    assert!(img.built.is_some());
    assert!(img.path.starts_with(&cache.0) && img.path.to_string_lossy().ends_with(".cpio"));
    check_contents(&std::fs::read(&img.path).unwrap(), &spec);
}

#[test]
fn the_gzip_archive_holds_the_same() {
    let cache = TempCache::new("gzip");
    let mut spec = cache.spec(Path::new("/bin/ls"));
    spec.compression = Compression::Gzip;
    let img = prepare_base(&spec).unwrap();
    assert!(img.path.to_string_lossy().ends_with(".cpio.gz"));
    let mut plain = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(&img.path).unwrap()).read_to_end(&mut plain).unwrap();
    check_contents(&plain, &spec);
}

#[test]
fn the_cache_is_reused_and_a_damaged_archive_is_built_again() {
    let cache = TempCache::new("reuse");
    let spec = cache.spec(Path::new("/bin/ls"));
    let first = prepare_base(&spec).unwrap();
    let built_at = std::fs::metadata(&first.path).unwrap().modified().unwrap();
    let again = prepare_base(&spec).unwrap();
    assert!(again.built.is_none(), "the second call finds the archive");
    assert_eq!((again.path.clone(), again.key.clone()), (first.path.clone(), first.key.clone()));
    assert_eq!(std::fs::metadata(&again.path).unwrap().modified().unwrap(), built_at, "not rewritten");

    let good = std::fs::read(&first.path).unwrap();
    type Damage<'a> = Box<dyn Fn(&mut Vec<u8>) + 'a>;
    let damages: [(&str, Damage); 4] = [
        ("cut in half (a partial file)", Box::new(|b: &mut Vec<u8>| b.truncate(b.len() / 2))),
        ("empty", Box::new(|b: &mut Vec<u8>| b.clear())),
        ("a header damaged", Box::new(|b: &mut Vec<u8>| b[0] = b'X')),
        ("holding another key", Box::new(|b: &mut Vec<u8>| {
            let at = b.windows(first.key.len()).position(|w| w == first.key.as_bytes()).unwrap();
            b[at] ^= 1;
        })),
    ];
    for (what, damage) in damages {
        let mut bytes = good.clone();
        damage(&mut bytes);
        std::fs::write(&first.path, &bytes).unwrap();
        let rebuilt = prepare_base(&spec).unwrap();
        assert!(rebuilt.built.is_some(), "{what}: not rebuilt");
        assert_eq!(std::fs::read(&rebuilt.path).unwrap(), good, "{what}: the rebuilt archive is the same as the first");
    }
    // Another input, another key and file; the first stays.
    let other = prepare_base(&cache.spec(Path::new("/bin/cat"))).unwrap();
    assert_ne!(other.key, first.key);
    assert!(other.built.is_some() && first.path.is_file());
    let leftovers: Vec<_> = std::fs::read_dir(cache.0.join("initramfs")).unwrap().filter_map(|e| e.ok()).map(|e| e.file_name()).filter(|n| n.to_string_lossy().ends_with(".tmp")).collect();
    assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
}

#[test]
fn concurrent_builders_leave_one_complete_archive() {
    let cache = TempCache::new("race");
    let spec = cache.spec(Path::new("/bin/ls"));
    let builders: Vec<_> = (0..3)
        .map(|_| {
            let s = spec.clone();
            std::thread::spawn(move || prepare_base(&s).unwrap())
        })
        .collect();
    let images: Vec<_> = builders.into_iter().map(|b| b.join().unwrap()).collect();
    assert!(images.iter().all(|i| i.path == images[0].path));
    check_contents(&std::fs::read(&images[0].path).unwrap(), &spec);
    assert!(prepare_base(&spec).unwrap().built.is_none(), "what they left is reused");
    let names: Vec<String> = std::fs::read_dir(cache.0.join("initramfs")).unwrap().filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).collect();
    assert_eq!(names.len(), 1, "one archive and no temporary file: {names:?}");
}

#[test]
fn without_a_kernel_the_error_says_to_run_setup() {
    let dir = std::env::temp_dir().join(format!("partita-vm-test-empty-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let e = BaseSpec::new(&dir).unwrap_err().to_string();
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(e.contains("scripts/setup.sh"), "{e}");
}
