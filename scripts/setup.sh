#!/usr/bin/env bash
# Installs everything partita needs on a fresh Debian machine, idempotently:
# system packages (only the missing ones), the Rust toolchain check, and the release build.
set -euo pipefail
cd "$(dirname "$0")/.."

# cmake + libclang-dev: cyclors builds the vendored Cyclone DDS 11.0.1 with CMake and binds it with bindgen.
# cyclonedds-tools: ddsperf, the independent DDS program of the interoperability tests and benchmarks.
# python3-venv: the Python Cyclone DDS binding used by the interoperability tests lives in a venv.
# rt-tests, stress-ng, iproute2: supervisor and paper benchmarks.
# qemu-system-x86, busybox-static: VM partitions (crates/vm): QEMU runs the guest, busybox is the guest's
# userland in the initramfs partita builds; kmod's depmod indexes the guest kernel's modules, lz4 unpacks the
# kernel for direct (PVH) boot (below).
# e2fsprogs, util-linux, bsdutils: mkfs.ext4 and mount -o loop, for each partition's state directory (an ext4 image of
# its own size); script and setpriv, for the space attacks made on the host.
# librsvg2-bin: rsvg-convert, the PNG copies of bench virt's and bench rt's figures.
# mold: a faster linker for the build (scripts/link-gcc uses it when installed).
# libfastrtps-dev, fastddsgen: eProsima Fast DDS 2.9 and its type generator, for the Fast DDS probe of the
# interoperability tests (crates/interop builds it).
# chromium: Debian's browser, which the web view's browser test (crates/cli/tests/web_browser.rs) drives with
# Playwright; Playwright's own browser downloads are never used.
PACKAGES=(cmake libclang-dev build-essential pkg-config iproute2 cyclonedds-tools rt-tests stress-ng
          python3-venv tcpdump qemu-system-x86 busybox-static kmod lz4 libfastrtps-dev fastddsgen librsvg2-bin mold
          libssl-dev openssl e2fsprogs util-linux bsdutils chromium)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  if [[ $(id -u) -ne 0 ]]; then SUDO=sudo; else SUDO=; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# The guest kernel of VM partitions: Debian's current cloud kernel (what the linux-image-cloud-amd64
# meta-package depends on), downloaded and unpacked into partita's cache, never installed on the host:
#   $VM_CACHE/vmlinuz-VERSION          the kernel
#   $VM_CACHE/modules/VERSION/...      its modules, with the modules.dep that depmod writes (the package has none)
#   $VM_CACHE/vmlinux-VERSION          the kernel unpacked (an ELF with a PVH entry): QEMU starts it directly,
#                                      without firmware boot code or decompression, about 0.3 s sooner under TCG
# vmlinuz is moved in after the modules, so its presence means they are complete; a second run skips.
VM_CACHE=${PARTITA_VM_CACHE:-/var/cache/partita/vm}
vm_kernel=$(apt-cache depends linux-image-cloud-amd64 2>/dev/null | awk '$1 == "Depends:" && $2 ~ /^linux-image-/ {print $2; exit}')
if [[ -z $vm_kernel ]]; then
  [[ $(id -u) -ne 0 ]] && SUDO=sudo || SUDO=
  $SUDO apt-get update -qq
  vm_kernel=$(apt-cache depends linux-image-cloud-amd64 | awk '$1 == "Depends:" && $2 ~ /^linux-image-/ {print $2; exit}')
fi
vm_version=${vm_kernel#linux-image-}
if [[ ! -f $VM_CACHE/vmlinuz-$vm_version ]]; then
  echo "setup: fetching the VM guest kernel $vm_kernel into $VM_CACHE" >&2
  [[ $(id -u) -ne 0 ]] && SUDO=sudo || SUDO=
  $SUDO mkdir -p "$VM_CACHE"
  work=$($SUDO mktemp -d "$VM_CACHE/.unpack.XXXXXX")
  # apt's download sandbox user cannot write root's directories: download in a directory it may write.
  $SUDO chmod 755 "$work"
  (cd "$work" && $SUDO apt-get download -qq "$vm_kernel" 2>/dev/null || $SUDO apt-get download "$vm_kernel")
  $SUDO dpkg-deb -x "$work"/"$vm_kernel"_*.deb "$work/root"
  $SUDO depmod -b "$work/root" "$vm_version"
  $SUDO mkdir -p "$VM_CACHE/modules"
  $SUDO rm -rf "$VM_CACHE/modules/$vm_version"
  $SUDO mv "$work/root/lib/modules/$vm_version" "$VM_CACHE/modules/$vm_version"
  $SUDO mv "$work/root/boot/vmlinuz-$vm_version" "$VM_CACHE/vmlinuz-$vm_version"
  $SUDO rm -rf "$work"
fi
# The bzImage's payload is LZ4 (legacy frame, magic 02 21 4c 18) in Debian's cloud kernel; without that magic or
# an ELF result partita boots vmlinuz, which works too.
if [[ -f $VM_CACHE/vmlinuz-$vm_version && ! -f $VM_CACHE/vmlinux-$vm_version ]]; then
  [[ $(id -u) -ne 0 ]] && SUDO=sudo || SUDO=
  offset=$(LC_ALL=C grep -obUaP '\x02\x21\x4c\x18' "$VM_CACHE/vmlinuz-$vm_version" | head -1 | cut -d: -f1 || true)
  if [[ -n $offset ]]; then
    tail -c +$((offset + 1)) "$VM_CACHE/vmlinuz-$vm_version" | lz4 -dc 2>/dev/null | $SUDO tee "$VM_CACHE/.vmlinux.tmp" >/dev/null || true
    if [[ $(head -c 4 "$VM_CACHE/.vmlinux.tmp" | od -An -tx1 | tr -d ' ') == 7f454c46 ]]; then
      $SUDO mv "$VM_CACHE/.vmlinux.tmp" "$VM_CACHE/vmlinux-$vm_version"
    fi
    $SUDO rm -f "$VM_CACHE/.vmlinux.tmp"
  fi
fi

if ! command -v cargo >/dev/null 2>&1; then
  [[ -f "$HOME/.cargo/env" ]] && . "$HOME/.cargo/env"
fi
command -v cargo >/dev/null 2>&1 || { echo "setup: cargo not found; install Rust (rustup) first" >&2; exit 1; }

# The Python binding of Cyclone DDS (PyPI 'cyclonedds'), a DDS program partita did not write, for interop tests.
VENV=target/pyenv
if [[ ! -x $VENV/bin/python ]] || ! $VENV/bin/python -c 'import cyclonedds' 2>/dev/null; then
  echo "setup: creating $VENV with cyclonedds" >&2
  python3 -m venv "$VENV"
  $VENV/bin/pip install -q 'cyclonedds==11.0.1'
fi
# Playwright (PyPI 'playwright'), the driver of the web view's browser test; it drives /usr/bin/chromium.
if ! $VENV/bin/python -c 'import playwright' 2>/dev/null; then
  echo "setup: adding playwright to $VENV" >&2
  $VENV/bin/pip install -q 'playwright==1.65.2'
fi
