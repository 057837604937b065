#!/usr/bin/env bash
# The project's test command: set-up, formatting, lints, then every test (release build: the
# simulator's scenarios run many virtual seconds).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
export PATH="$HOME/.cargo/bin:$PATH"
cargo fmt --all -- --check
./scripts/check-import-cycles
cargo clippy --workspace --all-targets --release -- -D warnings
cargo test --workspace --release --no-fail-fast
