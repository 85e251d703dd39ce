#!/usr/bin/env bash
# Installs everything partita needs on a fresh Debian machine, idempotently:
# system packages (only the missing ones), the Rust toolchain check, and the release build.
set -euo pipefail
cd "$(dirname "$0")/.."

# cmake + libclang-dev: cyclors builds the vendored Cyclone DDS 11.0.1 with CMake and binds it with bindgen.
# cyclonedds-tools: ddsperf, the independent DDS program of the interoperability tests and benchmarks.
# python3-venv: the Python Cyclone DDS binding used by the interoperability tests lives in a venv.
# rt-tests, stress-ng, iproute2, libfastrtps-dev, qemu-system-x86: supervisor, paper benchmarks, later backends.
PACKAGES=(cmake libclang-dev build-essential pkg-config iproute2 cyclonedds-tools rt-tests stress-ng
          python3-venv tcpdump)

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
