#!/usr/bin/env bash
# Runs every test of the workspace. The integration tests read the DwarFS
# images in ../shared (beside this checkout) in place.
set -euo pipefail
cd "$(dirname "$0")/.."
exec cargo test --workspace --locked "$@"
