#!/usr/bin/env bash
# Runs every test of the workspace, after installing what a fresh machine
# lacks (fuse3 for the mount tests). The tests read the repository's own
# DwarFS-made images (crates/testdata/images) and, when it sits beside the
# checkout, the full set in ../shared with DwarFS's own tools. Every test
# binary runs even when one fails; at the end, a count of the tests and of
# what was skipped for want of ../shared.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
dwarfs_setup=../shared/anchors/dwarfs-0.15.3/setup.sh
if [ -x "$dwarfs_setup" ] || [ -f "$dwarfs_setup" ]; then
  bash "$dwarfs_setup" >/dev/null
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export HOARD_SKIP_LOG="$work/skipped"
: > "$HOARD_SKIP_LOG"
status=0
cargo test --workspace --locked --no-fail-fast "$@" 2>&1 | tee "$work/log" || status=$?

echo
if [ -s "$HOARD_SKIP_LOG" ]; then
  echo "skipped for want of ../shared (in $(cut -d: -f1 "$HOARD_SKIP_LOG" | sort -u | wc -l) tests; the repository's own images ran):"
  sort -u "$HOARD_SKIP_LOG" | sed 's/^/  /'
else
  echo "no test skipped anything"
fi
awk '/^test result:/ { for (i = 1; i < NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
     END { printf "total: %d passed, %d failed\n", p, f }' "$work/log"
exit "$status"
