//! VM partitions on the host (`kind = "vm"`): the taps that are their V-NICs, the guest image, the
//! acceleration, and the runner (`partita app vm`) the launcher starts as the partition's program.
//!
//! A VM partition is a process partition whose program is the runner: QEMU runs as the runner's child inside
//! the partition's namespaces, cgroup, user namespace, read-only view and seccomp filter, so the plan
//! freezes and thaws it, the health monitor restarts it and its cgroup holds its memory, like any other.
//! What differs is the network: the partition's network namespace holds no V-NIC; its V-NICs are taps on the
//! module's bridges, created here in the host's namespace and handed to the runner as descriptors 3, 4, …
//! (QEMU's virtio-net devices use them). The runner cannot create, attach or reconfigure any interface.
use crate::command::{self, ip};
use crate::error::{path_err, Result, SupervisorError};
use crate::launch::rootfs::{GUEST_ARCHIVE, GUEST_INITRAMFS, GUEST_KERNEL};
use crate::vnet::{check_link_name, Bridge};
use partita_env::PartitionEnv;
use partita_system::{NetworkId, ProcessTree, System, Vm};
use partita_vm::{BaseImage, GuestNic, Hardware, MacAddr, NetFd, RunConfig};
use std::collections::BTreeMap;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use partita_vm::Accel;

/// A tap on a bridge, up, no address on the host: a VM partition's V-NIC. The kernel removes the interface
/// when the last descriptor on it closes (the supervisor's, and the copy in the partition's QEMU), so a
/// crashed supervisor leaves none behind once its partitions are gone.
#[derive(Debug)]
pub struct Tap {
    name: String,
    fd: Arc<OwnedFd>,
}

impl Tap {
    pub fn create(name: &str, bridge: &Bridge) -> Result<Tap> {
        check_link_name(name)?;
        let fd = partita_os::tap::create(name).map_err(|e| SupervisorError::Sys { call: "TUNSETIFF", context: format!("tap {name}"), source: e })?;
        let tap = Tap { name: name.into(), fd: Arc::new(fd) };
        // No IPv6 link-local address or router solicitations from the host side, as for a veth V-NIC.
        let _ = ip(&["link", "set", name, "addrgenmode", "none"]);
        ip(&["link", "set", name, "master", bridge.name(), "up"])?;
        Ok(tap)
    }

    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for Tap {
    /// Deleted by name as well: a tap made persistent (by a partition granted the tap requests) would
    /// otherwise outlive its descriptors.
    fn drop(&mut self) {
        let _ = ip(&["link", "del", &self.name]);
    }
}

/// A character device node for `/dev/kvm`, owned by one partition's host uid and readable by it alone (the
/// host's own node is root's); bound at `/dev/kvm` in that partition's view. Removed on drop.
#[derive(Debug)]
pub struct KvmNode(PathBuf);

impl KvmNode {
    /// `/dev/kvm` is the misc device 10:232.
    fn create(path: &Path, uid: u32) -> Result<KvmNode> {
        let _ = std::fs::remove_file(path);
        command::run("mknod", &["-m", "600", &path.display().to_string(), "c", "10", "232"])?;
        let node = KvmNode(path.into());
        std::os::unix::fs::chown(path, Some(uid), Some(uid)).map_err(path_err("chown", path))?;
        Ok(node)
    }
}

impl Drop for KvmNode {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// What one VM partition needs on the host while it runs, and how to start it.
pub struct Guest {
    pub taps: Vec<Tap>,
    pub kvm: Option<KvmNode>,
    /// The per-launch archive on the host (bound into the partition's view at [`GUEST_ARCHIVE`]).
    pub archive: PathBuf,
    /// The files of the host the runner reads, each with where it is bound in the partition's view: the
    /// per-launch archive, and the system file's kernel and archive when it names them.
    pub files: Vec<(PathBuf, &'static str)>,
    /// The runner's arguments after `partita`.
    pub args: Vec<String>,
    /// partita's own guest kernel and base archive (in its cache), which the runner reads where they are: its
    /// partition sees them there, read-only.
    pub seen: Vec<PathBuf>,
    pub accel: Accel,
}

impl Guest {
    /// The taps' descriptors, in NIC order: the runner gets them as 3, 4, …
    pub fn pass_fds(&self) -> Vec<Arc<OwnedFd>> {
        self.taps.iter().map(|t| t.fd.clone()).collect()
    }

    /// The KVM node to bind into the partition's view, if the guest runs under KVM.
    pub fn kvm_node(&self) -> Option<PathBuf> {
        self.kvm.as_ref().map(|k| k.0.clone())
    }
}

/// What the VM partitions of one system share: the base image (built once per content, cached on disk) and
/// the acceleration verdict per guest kernel.
#[derive(Default)]
pub struct Guests {
    base: Option<BaseImage>,
    verdicts: BTreeMap<PathBuf, (Accel, String)>,
    /// What busybox provides in the guest (`busybox --list`), read once.
    applets: Option<Vec<String>>,
}

/// The host program a guest's command needs copied into the guest, if any: an absolute path to a file of the
/// host, or a bare name that neither partita nor the guest's busybox provides and the host's `PATH` does. The
/// command then names the copy by its absolute path.
fn host_program(argv0: &str, applets: &[String], path: Option<&std::ffi::OsStr>) -> Option<PathBuf> {
    if argv0 == partita_system::PARTITA_PROGRAM || argv0.ends_with("/partita") {
        return None;
    }
    if argv0.starts_with('/') {
        return Path::new(argv0).is_file().then(|| PathBuf::from(argv0));
    }
    if argv0.contains('/') || applets.iter().any(|a| a == argv0) {
        return None;
    }
    std::env::split_paths(path?).map(|d| d.join(argv0)).find(|p| partita_os::process::is_executable(p))
}

fn image_error(partition: &str, e: impl std::fmt::Display) -> SupervisorError {
    SupervisorError::Guest { partition: partition.to_string(), step: "the guest image", source: e.to_string().into() }
}

/// Where a guest's pieces come from, for one partition.
pub struct GuestPlace<'a> {
    pub partition: &'a str,
    pub vm: &'a Vm,
    pub tree: &'a ProcessTree,
    /// The supervisor's variables for the partition (its `CYCLONEDDS_URI` becomes the guest's file).
    pub env: PartitionEnv,
    /// The partita binary: the guest's own copy, and the runner on the host.
    pub partita: &'a Path,
    /// The system's state directory under /run/partita (the archive goes there).
    pub state_path: &'a Path,
    /// The partition's host uid and its state directory (the KVM node goes beside it, on a filesystem that
    /// allows device nodes).
    pub uid: u32,
    pub state_dir: &'a Path,
    /// An I/O partition's router file (its text), put in the guest.
    pub router_file: Option<String>,
}

impl Guests {
    /// Creates the partition's taps on `bridge_of` its networks, writes its guest archive and works out its
    /// acceleration. On error what was made so far goes with the returned error.
    pub fn prepare<'b>(&mut self, system: &System, place: GuestPlace, bridge_of: impl Fn(NetworkId) -> Option<&'b Bridge>) -> Result<Guest> {
        let name = place.partition;
        let base = match &self.base {
            Some(b) => b.clone(),
            None => {
                let mut spec = partita_vm::BaseSpec::new(&partita_vm::image::cache_dir()).map_err(|e| image_error(name, e))?;
                spec.partita = partita_env::programs::guest_binary(place.partita);
                let base = partita_vm::prepare_base(&spec).map_err(|e| image_error(name, e))?;
                if let Some(r) = &base.built {
                    tracing::info!(target: "partita::supervisor::vm", "guest base image {} built in {:.1} s", base.path.display(), r.duration.as_secs_f64());
                }
                self.base = Some(base.clone());
                base
            }
        };
        let kernel = place.vm.kernel.clone().unwrap_or_else(|| base.kernel.image.clone());
        let (accel, reason) = match place.vm.accel {
            partita_system::Accel::Tcg => (Accel::Tcg, "accel = \"tcg\" in the system file".to_string()),
            partita_system::Accel::Kvm => (Accel::Kvm, "accel = \"kvm\" in the system file".to_string()),
            partita_system::Accel::Auto => match self.verdicts.get(&kernel) {
                Some(v) => v.clone(),
                None => {
                    let cache = partita_vm::image::cache_dir();
                    let v = partita_vm::probe::probe(&kernel, &base.path, &cache, partita_vm::probe::DEFAULT_TIMEOUT, false)
                        .map_err(|e| SupervisorError::Guest { partition: name.to_string(), step: "the acceleration probe", source: Box::new(e) })?;
                    let verdict = (v.accel, v.reason.clone());
                    self.verdicts.insert(kernel.clone(), verdict.clone());
                    verdict
                }
            },
        };
        tracing::info!(target: "partita::supervisor::vm", "{name}: guest under {accel} ({reason})");
        let mut taps = Vec::new();
        let mut nics = Vec::new();
        let mut nets = Vec::new();
        for (i, nic) in place.tree.nics.iter().enumerate() {
            let net = system.network(nic.network);
            let (Some(net), Some(bridge)) = (net, bridge_of(nic.network)) else {
                return Err(SupervisorError::Model { member: name.to_string(), broken: "a V-NIC names a network the system does not have" });
            };
            taps.push(Tap::create(&nic.host_name, bridge)?);
            let mac = MacAddr::for_interface(&nic.host_name);
            nets.push(NetFd { fd: 3 + i as i32, mac });
            nics.push(GuestNic {
                name: nic.name.clone(),
                mac,
                address: nic.address,
                prefix: net.subnet.prefix(),
                domain: nic.domain.get(),
                peers: system.addresses_on(nic.network),
            });
        }
        let mut env = place.env;
        env.cyclonedds_uri = partita_vm::launch::GUEST_DDS_URI.into();
        env.fastdds_profile = None;
        if self.applets.is_none() {
            let list = command::run("/bin/busybox", &["--list"]).map_err(|e| image_error(name, e))?;
            self.applets = Some(list.lines().map(str::trim).filter(|l| !l.is_empty()).map(String::from).collect());
        }
        let mut argv = place.tree.command.clone();
        let mut programs = Vec::new();
        if let Some(program) = argv.first().and_then(|a| host_program(a, self.applets.as_deref().unwrap_or_default(), std::env::var_os("PATH").as_deref())) {
            argv[0] = program.display().to_string();
            programs.push(program);
        }
        let spec = partita_vm::LaunchSpec { env, extra_env: place.tree.env.iter().map(|(k, v)| (k.clone(), v.clone())).collect(), nics, argv, programs, router_file: place.router_file };
        let archive = place.state_path.join(format!("{name}.guest.cpio"));
        spec.write_archive(&archive).map_err(|e| SupervisorError::Guest { partition: name.to_string(), step: "its guest archive", source: Box::new(e) })?;
        let kvm = match accel {
            Accel::Kvm => Some(KvmNode::create(&place.state_dir.with_file_name(format!(".{name}.kvm")), place.uid)?),
            Accel::Tcg => None,
        };
        // The runner, confined, reads the system file's kernel and archive where they are bound in its view;
        // partita's own (in its cache, which partitions see) where they are.
        let mut files = vec![(archive.clone(), GUEST_ARCHIVE)];
        let mut seen = vec![base.path.clone()];
        let kernel = match &place.vm.kernel {
            Some(k) => {
                files.push((k.clone(), GUEST_KERNEL));
                PathBuf::from(GUEST_KERNEL)
            }
            None => {
                seen.push(kernel.clone());
                kernel
            }
        };
        let mut initrds = vec![base.path.clone()];
        if let Some(extra) = &place.vm.initramfs {
            files.push((extra.clone(), GUEST_INITRAMFS));
            initrds.push(PathBuf::from(GUEST_INITRAMFS));
        }
        initrds.push(PathBuf::from(GUEST_ARCHIVE));
        let mut run = RunConfig::new(kernel, initrds);
        run.hardware = Hardware { accel, memory_mib: place.vm.memory.0 >> 20, cpus: place.vm.vcpus, ..Hardware::default() };
        run.nets = nets;
        run.append = (!place.vm.append.is_empty()).then(|| place.vm.append.join(" "));
        run.boot_timeout = place.vm.boot_timeout.to_std();
        // After the taps: the pipe whose end tells that the guest's command started (`launch_guest`).
        run.ready_fd = Some(3 + taps.len() as i32);
        Ok(Guest { taps, kvm, archive, files, seen, args: run.runner_args(), accel })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_guest_command_takes_the_hosts_program_only_where_the_guest_has_none() {
        let applets = vec!["sh".to_string(), "true".to_string()];
        let dir = std::env::temp_dir().join(format!("partita-guest-path-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let tool = dir.join("tool");
        std::fs::write(&tool, b"#!/bin/sh\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::write(dir.join("sh"), b"").unwrap();
        let path = Some(dir.as_os_str());
        assert_eq!(host_program("tool", &applets, path), Some(tool.clone()), "a bare name found on the host's PATH");
        assert_eq!(host_program("sh", &applets, path), None, "busybox's applet wins");
        assert_eq!(host_program("partita", &applets, path), None, "the guest has its own partita");
        assert_eq!(host_program("/opt/x/partita", &applets, path), None);
        assert_eq!(host_program(tool.to_str().unwrap(), &applets, None), Some(tool.clone()), "an absolute path on the host");
        assert_eq!(host_program("/no/such/program", &applets, path), None, "left to the guest");
        assert_eq!(host_program("missing", &applets, path), None);
        assert_eq!(host_program("./tool", &applets, path), None, "a relative path is the guest's");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
