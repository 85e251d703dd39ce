//! Shared by the VM tests: an independent newc reader (so the writer is not checked against itself), where
//! the guest kernel and the partita binary are, and a network namespace fixture.
#![allow(dead_code)]
use std::path::{Path, PathBuf};
use std::process::Command;

/// One entry as the reader finds it.
#[derive(Debug, Clone)]
pub struct Read {
    pub name: String,
    pub mode: u32,
    pub rdev: (u32, u32),
    pub data: Vec<u8>,
}

/// Reads a newc archive field by field, as buffer-format.rst describes it: 110-byte header, name, padding to
/// 4, data, padding to 4; stops at TRAILER!!!. Panics on anything malformed.
pub fn read_newc(bytes: &[u8]) -> Vec<Read> {
    let mut out = Vec::new();
    let mut at = 0;
    let align = |x: usize| (x + 3) & !3;
    loop {
        assert_eq!(&bytes[at..at + 6], b"070701", "magic at {at}");
        let hex = |i: usize| u32::from_str_radix(std::str::from_utf8(&bytes[at + 6 + i * 8..at + 14 + i * 8]).unwrap(), 16).unwrap();
        let (mode, filesize, rdevmajor, rdevminor, namesize) = (hex(1), hex(6) as usize, hex(9), hex(10), hex(11) as usize);
        assert_eq!(hex(2), 0, "uid");
        assert_eq!(hex(3), 0, "gid");
        let name_start = at + 110;
        assert_eq!(bytes[name_start + namesize - 1], 0, "name NUL");
        let name = String::from_utf8(bytes[name_start..name_start + namesize - 1].to_vec()).unwrap();
        let data_start = align(name_start + namesize);
        if name == "TRAILER!!!" {
            assert!(bytes[data_start..].iter().all(|b| *b == 0), "only zero padding after the trailer");
            return out;
        }
        out.push(Read { name, mode, rdev: (rdevmajor, rdevminor), data: bytes[data_start..data_start + filesize].to_vec() });
        at = align(data_start + filesize);
    }
}

/// The VM cache scripts/setup.sh fills (or $PARTITA_VM_CACHE).
pub fn vm_cache() -> PathBuf {
    let dir = partita_vm::image::cache_dir();
    assert!(
        partita_vm::Kernel::find(&dir).is_ok(),
        "no guest kernel in {}: run scripts/setup.sh (it downloads Debian's cloud kernel there)",
        dir.display()
    );
    dir
}

/// target/release/partita (or debug), beside this test's deps directory; scripts/test.sh builds it first.
pub fn partita_binary() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let p = exe.parent().and_then(Path::parent).unwrap().join("partita");
    assert!(p.is_file(), "{} is missing: build it first (cargo build --release -p partita-cli)", p.display());
    p
}

pub fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("ip (iproute2)");
    assert!(out.status.success(), "ip {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr));
}

/// A network namespace made for one test, removed on drop (with every interface in it).
pub struct Netns(pub String);

impl Netns {
    pub fn new(name: &str) -> Netns {
        let _ = Command::new("ip").args(["netns", "del", name]).output();
        ip(&["netns", "add", name]);
        ip(&["-n", name, "link", "set", "lo", "up"]);
        Netns(name.to_string())
    }
    pub fn path(&self) -> PathBuf {
        partita_os::netns::named_path(&self.0)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).output();
    }
}
