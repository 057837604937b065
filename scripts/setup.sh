#!/usr/bin/env bash
# Installs what ioshare needs on a fresh Debian machine (idempotent): the Rust toolchain's components;
# the Debian packages the tests and benchmarks use — fio (the engine's calibration, real-process
# tenants), clang, libelf-dev, zlib1g-dev and pkg-config (observe's BPF programs and libbpf), e2fsprogs
# (file-system tests), QEMU and a static busybox (the cgroup-v2 lab guest), and Prometheus (observe's
# acceptance test starts its own server on a free localhost port; installed without recommends, so no
# node exporter runs), Ceph's monitor, manager and OSD (scripts/ceph: a one-node cluster on loopback) — and the lab guest's kernel (extracted into a cache by scripts/lab --setup: not
# installed on this host, its bootloader untouched) — and a Kubernetes control plane for the Kubernetes
# tests (kube-apiserver, kubectl, kubelet and etcd built once from the Go module proxy into
# ~/.cache/ioshare-k8s by scripts/k8s --setup; Go >= 1.24 must be installed) with Debian's containerd and
# runc for its node (scripts/k8s --node).
set -euo pipefail

sudo_cmd=""
[ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
updated=""

# apt_install [apt-get options] -- PACKAGE...: installs the packages that are missing.
apt_install() {
  local opts=() missing=()
  while [ "$1" != "--" ]; do opts+=("$1"); shift; done
  shift
  for pkg in "$@"; do
    dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
  done
  [ ${#missing[@]} -gt 0 ] || return 0
  if [ -z "$updated" ]; then
    $sudo_cmd apt-get update -qq
    updated=1
  fi
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${opts[@]}" "${missing[@]}"
}

apt_install -- fio clang libelf-dev zlib1g-dev pkg-config e2fsprogs qemu-system-x86 busybox-static jq openssl
apt_install --no-install-recommends -- prometheus
# A one-node Ceph cluster for librbd's real QoS (scripts/ceph; fio's rbd engine links librbd already).
apt_install --no-install-recommends -- ceph-mon ceph-mgr ceph-osd ceph-common

# The Kubernetes node's container runtime (scripts/k8s --node runs its own containerd, never the service).
apt_install --no-install-recommends -- containerd runc

# nbdkit and its filter headers for packaging/nbdkit (libioshare's filter), libnbd's clients
# (nbdinfo, nbdcopy) for its tests and `bench --scenario nbd` (fio's nbd engine comes with fio).
apt_install --no-install-recommends -- nbdkit nbdkit-plugin-dev libnbd-bin

# Without the guest kernel only the lab's tests skip (with this reason), so a failure here is a warning.
"$(dirname "$0")/lab" --setup || echo "setup: warning: the lab guest is not ready (see above); its tests will skip" >&2
# Likewise the Kubernetes binaries and the node's images: without them only the Kubernetes tests skip.
# Cold, this builds for minutes (~2 GB of RAM); once cached it returns at once.
"$(dirname "$0")/k8s" --setup ||
  echo "setup: warning: the Kubernetes binaries are not built (see above); the Kubernetes tests will skip" >&2

if ! command -v cargo >/dev/null 2>&1; then
  [ -x "$HOME/.cargo/bin/cargo" ] || { echo "setup: cargo not found; install Rust with rustup first" >&2; exit 1; }
  export PATH="$HOME/.cargo/bin:$PATH"
fi
if command -v rustup >/dev/null 2>&1; then
  rustup component add rustfmt clippy >/dev/null 2>&1 || true
fi
