#!/usr/bin/env bash
# Installs what ioshare needs on a fresh Debian machine (idempotent): the Rust toolchain's
# components, and the Debian packages the tests and benchmarks use (fio for the engine's calibration;
# clang, libelf-dev, zlib1g-dev and pkg-config to build observe's BPF programs and libbpf).
set -euo pipefail

need_apt=()
for pkg in fio clang libelf-dev zlib1g-dev pkg-config; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need_apt+=("$pkg")
done
if [ ${#need_apt[@]} -gt 0 ]; then
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${need_apt[@]}"
fi

# Debian's Prometheus server, for observe's acceptance test (the test starts its own on a free
# localhost port with a temporary config and data dir). Without recommends: no node exporter.
if ! dpkg -s prometheus >/dev/null 2>&1; then
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends prometheus
fi

if ! command -v cargo >/dev/null 2>&1; then
  [ -x "$HOME/.cargo/bin/cargo" ] || { echo "setup: cargo not found; install Rust with rustup first" >&2; exit 1; }
  export PATH="$HOME/.cargo/bin:$PATH"
fi
if command -v rustup >/dev/null 2>&1; then
  rustup component add rustfmt clippy >/dev/null 2>&1 || true
fi
