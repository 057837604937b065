#!/usr/bin/env bash
# Installs what ioshare needs on a fresh Debian machine (idempotent): the Rust toolchain's
# components, the Debian packages the tests and benchmarks use (fio for the engine's calibration; QEMU and a
# static busybox for the cgroup-v2 lab guest), and the lab guest's kernel (extracted into a cache by
# scripts/lab --setup: not installed on this host, its bootloader untouched).
set -euo pipefail

need_apt=()
for pkg in fio qemu-system-x86 busybox-static; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need_apt+=("$pkg")
done
if [ ${#need_apt[@]} -gt 0 ]; then
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${need_apt[@]}"
fi

# Without the guest kernel only the lab's tests skip (with this reason), so a failure here is a warning.
"$(dirname "$0")/lab" --setup || echo "setup: warning: the lab guest is not ready (see above); its tests will skip" >&2

if ! command -v cargo >/dev/null 2>&1; then
  [ -x "$HOME/.cargo/bin/cargo" ] || { echo "setup: cargo not found; install Rust with rustup first" >&2; exit 1; }
  export PATH="$HOME/.cargo/bin:$PATH"
fi
if command -v rustup >/dev/null 2>&1; then
  rustup component add rustfmt clippy >/dev/null 2>&1 || true
fi
