#!/usr/bin/env bash
# Installs what ioshare needs on a fresh Debian machine (idempotent): the Rust toolchain's
# components, and the Debian packages the tests and benchmarks use (fio for the engine's calibration,
# e2fsprogs for the profile test that mounts a filesystem).
set -euo pipefail

need_apt=()
for pkg in fio e2fsprogs; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need_apt+=("$pkg")
done
if [ ${#need_apt[@]} -gt 0 ]; then
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${need_apt[@]}"
fi

if ! command -v cargo >/dev/null 2>&1; then
  [ -x "$HOME/.cargo/bin/cargo" ] || { echo "setup: cargo not found; install Rust with rustup first" >&2; exit 1; }
  export PATH="$HOME/.cargo/bin:$PATH"
fi
if command -v rustup >/dev/null 2>&1; then
  rustup component add rustfmt clippy >/dev/null 2>&1 || true
fi
