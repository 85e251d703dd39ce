//! A partition's state directory as a file system of its own: an ext4 image of the size its system file
//! grants (`state = { size, inodes }`), allocated in full when it is made (so the partition's writes never take
//! more of the host's disk) and loop-mounted at the directory while the system is up. Writing past it fails
//! inside the partition with ENOSPC; the host's free space does not move. The image lies beside the directory
//! (`/var/lib/partita/<system>/.<partition>.state`), out of the partition's view, and is kept across runs with
//! what the partition wrote; an image left with nothing in it goes when the system goes down.
use crate::command::run;
use crate::error::{path_err, Result, SupervisorError};
use partita_system::StateQuota;
use std::path::{Path, PathBuf};

/// The image of a state directory.
pub fn image_of(state_dir: &Path) -> PathBuf {
    let name = state_dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    state_dir.with_file_name(format!(".{name}.state"))
}

/// A mounted state directory, unmounted on drop (its image deleted if nothing is left in it).
#[derive(Debug)]
pub struct StateImage {
    dir: PathBuf,
    image: PathBuf,
    /// Mounted to inspect what a partition left: never deleted.
    kept: bool,
}

impl StateImage {
    /// Mounts the partition's image at `dir` (owned by `uid`, mode 0700), making it first if there is none:
    /// what the directory already holds is copied into a new image. An image of another size than `quota` is
    /// refused, with the fix.
    pub fn mount(dir: &Path, quota: StateQuota, uid: u32) -> Result<StateImage> {
        let image = image_of(dir);
        std::fs::create_dir_all(dir).map_err(path_err("mkdir", dir))?;
        if is_mount_point(dir) {
            return Err(SupervisorError::Held(format!("{} is mounted already: another system of this name is up, or `partita down` has not cleaned up after one", dir.display())));
        }
        match std::fs::metadata(&image) {
            Ok(m) if m.len() != quota.bytes => {
                return Err(SupervisorError::StateImage {
                    image: image.clone(),
                    problem: format!(
                        "the state image of {} is {} bytes, the system file's `state.size` says {}; set `state.size` back, or remove the image (and the partition's files in it) to make a new one",
                        dir.display(),
                        m.len(),
                        quota.bytes
                    ),
                })
            }
            Ok(_) => {}
            Err(_) => make(&image, dir, quota, uid)?,
        }
        let (i, d) = (image.display().to_string(), dir.display().to_string());
        run("mount", &["-t", "ext4", "-o", "loop,nosuid,nodev", &i, &d])?;
        let mounted = StateImage { dir: dir.to_path_buf(), image, kept: false };
        std::os::unix::fs::chown(dir, Some(uid), Some(uid)).map_err(path_err("chown", dir))?;
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(path_err("chmod", dir))?;
        Ok(mounted)
    }

    pub fn image(&self) -> &Path {
        &self.image
    }

    /// Mounts the image of a system that is down at its directory, to look at or take what the partition left
    /// there (`mount -o loop <image> <dir>` does the same by hand); unmounted on drop, the image kept.
    pub fn mount_to_inspect(dir: &Path) -> Result<StateImage> {
        let image = image_of(dir);
        if !image.is_file() {
            return Err(SupervisorError::StateImage { image, problem: "no state image (the partition left nothing, or never ran)".into() });
        }
        std::fs::create_dir_all(dir).map_err(path_err("mkdir", dir))?;
        let (i, d) = (image.display().to_string(), dir.display().to_string());
        run("mount", &["-t", "ext4", "-o", "loop,nosuid,nodev,noexec", &i, &d])?;
        Ok(StateImage { dir: dir.to_path_buf(), image, kept: true })
    }
}

impl Drop for StateImage {
    fn drop(&mut self) {
        let empty = std::fs::read_dir(&self.dir).map(|d| d.flatten().all(|e| e.file_name() == "lost+found")).unwrap_or(false);
        if unmount(&self.dir).is_ok() && empty && !self.kept {
            let _ = std::fs::remove_file(&self.image);
        }
    }
}

/// Makes the image: allocated in full, ext4 with `quota.inodes` inodes and no blocks reserved for root, its
/// root owned by `uid`; the directory's files copied in.
fn make(image: &Path, dir: &Path, quota: StateQuota, uid: u32) -> Result<()> {
    let fresh = image.with_extension("new");
    let _ = std::fs::remove_file(&fresh);
    let f = std::fs::File::create(&fresh).map_err(path_err("create", &fresh))?;
    let allocated = partita_os::fd::allocate(&f, quota.bytes);
    drop(f);
    let made = allocated
        .map_err(|e| SupervisorError::StateImage { image: fresh.clone(), problem: format!("cannot allocate {} bytes for a state image ({e}): free disk space or lower `state.size`", quota.bytes) })
        .and_then(|_| {
            let (inodes, owner, path) = (quota.inodes.to_string(), format!("root_owner={uid}:{uid},nodiscard"), fresh.display().to_string());
            run("mkfs.ext4", &["-q", "-F", "-N", &inodes, "-m", "0", "-E", &owner, &path]).map(|_| ())
        })
        .and_then(|_| copy_in(dir, &fresh));
    if let Err(e) = made {
        let _ = std::fs::remove_file(&fresh);
        return Err(e);
    }
    std::fs::rename(&fresh, image).map_err(path_err("rename", image))
}

/// Copies what `dir` holds into the new image (and takes it out of `dir`, which the image is mounted over).
fn copy_in(dir: &Path, image: &Path) -> Result<()> {
    if std::fs::read_dir(dir).map(|mut d| d.next().is_none()).unwrap_or(true) {
        return Ok(());
    }
    let at = image.with_extension("copy");
    std::fs::create_dir_all(&at).map_err(path_err("mkdir", &at))?;
    let (i, a) = (image.display().to_string(), at.display().to_string());
    run("mount", &["-t", "ext4", "-o", "loop", &i, &a])?;
    let copied = run("cp", &["-a", &format!("{}/.", dir.display()), &a]);
    let _ = unmount(&at);
    let _ = std::fs::remove_dir(&at);
    copied?;
    for e in std::fs::read_dir(dir).map_err(path_err("read", dir))?.flatten() {
        let p = e.path();
        let _ = if p.is_dir() && !p.is_symlink() { std::fs::remove_dir_all(&p) } else { std::fs::remove_file(&p) };
    }
    Ok(())
}

/// Removes a partition's state of a system that is down: its directory and its image (the next run starts empty).
pub fn remove(dir: &Path) {
    if !is_mount_point(dir) {
        let _ = std::fs::remove_file(image_of(dir));
        let _ = std::fs::remove_dir_all(dir);
    }
}

fn unmount(dir: &Path) -> Result<()> {
    run("umount", &[&dir.display().to_string()]).map(|_| ())
}

/// Whether `dir` is a mount point (its own line in this process's mountinfo).
pub fn is_mount_point(dir: &Path) -> bool {
    mounts_under(dir).iter().any(|m| m == dir)
}

/// The mount points at or under `root` (mountinfo's fifth field, octal escapes read).
pub fn mounts_under(root: &Path) -> Vec<PathBuf> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    info.lines().filter_map(|l| l.split(' ').nth(4)).map(|m| PathBuf::from(unescape(m))).filter(|m| m.starts_with(root)).collect()
}

fn unescape(s: &str) -> String {
    let mut out = Vec::new();
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c)) {
            out.push(u8::from_str_radix(&s[i + 1..i + 4], 8).unwrap_or(b'?'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Unmounts the state directories of `system` left mounted by a supervisor that is gone (`partita down`).
pub fn unmount_leftovers(system: &str) -> Vec<PathBuf> {
    let root = Path::new(partita_system::confinement::STATE_ROOT).join(system);
    let mut done = Vec::new();
    for m in mounts_under(&root).into_iter().rev() {
        if m != root && unmount(&m).is_ok() {
            done.push(m);
        }
    }
    done
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_image_lies_beside_the_directory_hidden() {
        assert_eq!(image_of(Path::new("/var/lib/partita/s/p")), Path::new("/var/lib/partita/s/.p.state"));
    }

    #[test]
    fn mountinfo_escapes_are_read() {
        assert_eq!(unescape(r"/var/lib/partita/a\040b"), "/var/lib/partita/a b");
        assert_eq!(unescape("/plain"), "/plain");
    }
}
