#!/usr/bin/env bash
# Runs every test of the workspace, after installing what a fresh machine
# lacks (fuse3 for the mount tests). The integration tests read the DwarFS
# images in ../shared (beside this checkout) in place.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
exec cargo test --workspace --locked "$@"
