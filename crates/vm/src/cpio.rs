//! The initramfs format the Linux kernel unpacks: "newc" cpio (`Documentation/driver-api/early-userspace/
//! buffer-format.rst`), written directly.
//!
//! Each entry is a 110-byte ASCII header — the magic `070701` and thirteen 8-digit hexadecimal fields (inode,
//! mode, uid, gid, nlink, mtime, file size, device major/minor, rdev major/minor, name size with its NUL,
//! checksum) — then the NUL-terminated name, padded to a multiple of 4 bytes, then the contents (a symbolic
//! link's contents are its target), padded to 4 bytes. The entry named `TRAILER!!!` ends the archive.
//!
//! Archives may be concatenated (each starting on a 4-byte boundary, zero bytes between them are skipped): the
//! kernel unpacks them in order, a later entry replacing an earlier one of the same name. A VM partition's
//! initramfs is partita's base archive followed by a small one with what differs per launch.
//!
//! Every entry here belongs to root, has mtime 0 and a fresh inode number, so the same inputs always give the
//! same bytes.
use std::io::{self, Write};

pub const MAGIC: &[u8; 6] = b"070701";
pub const HEADER_LEN: usize = 110;
pub const TRAILER: &str = "TRAILER!!!";

/// File type bits of `mode`.
pub const S_IFDIR: u32 = 0o040000;
pub const S_IFREG: u32 = 0o100000;
pub const S_IFLNK: u32 = 0o120000;
pub const S_IFCHR: u32 = 0o020000;
pub const S_IFMT: u32 = 0o170000;

/// Writes one newc archive to `out`. Names are paths without a leading `/` (`bin/sh`); parents come first.
pub struct Writer<W: Write> {
    out: W,
    next_ino: u32,
    written: u64,
}

impl<W: Write> Writer<W> {
    pub fn new(out: W) -> Self {
        Writer { out, next_ino: 1, written: 0 }
    }

    /// Bytes written so far.
    pub fn written(&self) -> u64 {
        self.written
    }

    pub fn dir(&mut self, name: &str, perm: u32) -> io::Result<()> {
        self.entry(name, S_IFDIR | (perm & 0o7777), 2, (0, 0), &[])
    }

    pub fn file(&mut self, name: &str, perm: u32, data: &[u8]) -> io::Result<()> {
        self.entry(name, S_IFREG | (perm & 0o7777), 1, (0, 0), data)
    }

    pub fn symlink(&mut self, name: &str, target: &str) -> io::Result<()> {
        self.entry(name, S_IFLNK | 0o777, 1, (0, 0), target.as_bytes())
    }

    /// A character device node (the kernel opens `/dev/console` before `/init` runs).
    pub fn char_device(&mut self, name: &str, perm: u32, major: u32, minor: u32) -> io::Result<()> {
        self.entry(name, S_IFCHR | (perm & 0o7777), 1, (major, minor), &[])
    }

    /// Writes the trailer, pads the archive to a multiple of 512 bytes (what cpio tools do; the kernel needs 4)
    /// and returns the output.
    pub fn finish(mut self) -> io::Result<W> {
        self.next_ino = 0;
        self.entry(TRAILER, 0, 1, (0, 0), &[])?;
        let pad = (512 - (self.written % 512) as usize) % 512;
        self.put(&vec![0u8; pad])?;
        self.out.flush()?;
        Ok(self.out)
    }

    fn entry(&mut self, name: &str, mode: u32, nlink: u32, rdev: (u32, u32), data: &[u8]) -> io::Result<()> {
        if name.is_empty() || name.starts_with('/') || name.contains('\0') || name.split('/').any(|c| c == ".." || c.is_empty()) {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("cpio entry name {name:?}: a relative path without empty, `..` or NUL parts")));
        }
        let size = u32::try_from(data.len()).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, format!("{name}: newc holds files below 4 GiB")))?;
        let ino = self.next_ino;
        if self.next_ino != 0 {
            self.next_ino += 1;
        }
        let fields = [ino, mode, 0, 0, nlink, 0, size, 0, 0, rdev.0, rdev.1, name.len() as u32 + 1, 0];
        let mut header = Vec::with_capacity(HEADER_LEN + name.len() + 4);
        header.extend_from_slice(MAGIC);
        for f in fields {
            header.extend_from_slice(format!("{f:08x}").as_bytes());
        }
        header.extend_from_slice(name.as_bytes());
        header.push(0);
        header.resize(header.len() + pad4(header.len()), 0);
        self.put(&header)?;
        self.put(data)?;
        self.put(&[0u8; 3][..pad4(data.len())])
    }

    fn put(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.out.write_all(bytes)?;
        self.written += bytes.len() as u64;
        Ok(())
    }
}

/// Zero bytes that bring `len` to a multiple of 4.
pub fn pad4(len: usize) -> usize {
    (4 - len % 4) % 4
}

/// One entry as [`entries`] finds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub name: String,
    pub mode: u32,
    /// Where its contents start in the archive, and their length.
    pub offset: usize,
    pub size: usize,
}

/// Walks the headers of one uncompressed newc archive and returns its entries up to the trailer, or says what
/// is wrong: a cut-off or damaged archive is refused. Used to check a cached image before reusing it.
pub fn entries(archive: &[u8]) -> Result<Vec<Entry>, String> {
    let mut at = 0usize;
    let mut found = Vec::new();
    loop {
        let header = archive.get(at..at + HEADER_LEN).ok_or_else(|| format!("archive cut off at byte {at} (no trailer)"))?;
        if &header[..6] != MAGIC {
            return Err(format!("no newc header at byte {at}"));
        }
        let field = |i: usize| -> Result<usize, String> {
            let text = std::str::from_utf8(&header[6 + 8 * i..14 + 8 * i]).map_err(|_| format!("header at byte {at}: not ASCII"))?;
            usize::from_str_radix(text, 16).map_err(|_| format!("header at byte {at}: field {i} {text:?} is not hexadecimal"))
        };
        let (mode, size, namesize) = (field(1)? as u32, field(6)?, field(11)?);
        let name_end = at + HEADER_LEN + namesize;
        let name = archive.get(at + HEADER_LEN..name_end).ok_or_else(|| format!("archive cut off in a name at byte {at}"))?;
        let name = match name.split_last() {
            Some((0, n)) => String::from_utf8_lossy(n).into_owned(),
            _ => return Err(format!("name at byte {at} is not NUL-terminated")),
        };
        let offset = name_end + pad4(name_end);
        if name == TRAILER {
            return Ok(found);
        }
        if offset + size > archive.len() {
            return Err(format!("{name}: contents cut off ({size} bytes from byte {offset}, archive has {})", archive.len()));
        }
        found.push(Entry { name, mode, offset, size });
        at = offset + size + pad4(offset + size);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_layout_is_newc() {
        let mut w = Writer::new(Vec::new());
        w.file("a", 0o644, b"xyz").unwrap();
        let out = w.finish().unwrap();
        assert_eq!(&out[..6], b"070701");
        // ino 1, mode 0100644, size 3, namesize 2
        assert_eq!(&out[6..14], b"00000001");
        assert_eq!(&out[14..22], b"000081a4");
        assert_eq!(&out[54..62], b"00000003");
        assert_eq!(&out[94..102], b"00000002");
        // name "a\0" at 110, padded to 112, then contents and one byte of padding.
        assert_eq!(&out[110..116], b"a\0xyz\0");
        assert_eq!(out.len() % 512, 0);
        let e = entries(&out).unwrap();
        assert_eq!(e, vec![Entry { name: "a".into(), mode: 0o100644, offset: 112, size: 3 }]);
    }

    #[test]
    fn bad_names_and_cut_archives_are_refused() {
        let mut w = Writer::new(Vec::new());
        for bad in ["", "/abs", "a/../b", "a//b"] {
            assert!(w.file(bad, 0o644, b"").is_err(), "{bad:?}");
        }
        w.file("ok", 0o644, &[7; 100]).unwrap();
        let out = w.finish().unwrap();
        assert!(entries(&out[..150]).unwrap_err().contains("cut off"));
        assert!(entries(&out[..300]).unwrap_err().contains("cut off"));
        let mut damaged = out.clone();
        damaged[0] = b'x';
        assert!(entries(&damaged).unwrap_err().contains("no newc header"));
    }
}
