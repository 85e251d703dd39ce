//! partita-vm: a partition as a QEMU guest on the module's V-NETWORK.
//!
//! The pieces, in the order a supervisor uses them:
//!
//! 1. [`image`]: the guest kernel (Debian's cloud kernel, unpacked by `scripts/setup.sh` into the cache) and the
//!    **base initramfs** partita builds itself ([`cpio`] writes the format): busybox, partita stripped, its
//!    shared libraries, the virtio-net modules, [`init`]'s `/init`. Built once per content key, reused.
//! 2. [`launch`]: the small **per-launch archive** appended to it: environment, DDS configuration, NICs,
//!    command.
//! 3. [`probe`]: `auto` acceleration: KVM only if the real guest boots under it here.
//! 4. [`runner`]: `partita app vm`, the partition's program: QEMU as its child on inherited tap descriptors,
//!    the console as its log, the guest command's exit status as its own (crash codes documented there).
//!
//! The taps themselves come from `partita_os::tap`. Measured boot times, sizes and round trips: docs/vm.md.
#![forbid(unsafe_code)]

pub mod cpio;
pub mod image;
pub mod init;
pub mod launch;
pub mod probe;
pub mod qemu;
pub mod runner;

pub use image::{prepare_base, BaseImage, BaseSpec, Compression, Kernel};
pub use launch::{GuestNic, LaunchSpec, MacAddr, GUEST_ROUTER_FILE};
pub use qemu::{Accel, Hardware, Machine, NetFd};
pub use runner::{exit_code, Outcome, RunConfig};
