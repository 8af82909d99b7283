#!/usr/bin/env bash
# Runs every test of the workspace, after installing what a fresh machine
# lacks (fuse3 for the mount tests). The tests read the repository's own
# DwarFS-made images (crates/testdata/images) and, when it sits beside the
# checkout, the full set in ../shared with DwarFS's own tools. The Python
# package is built, installed and tested with pytest after the Rust tests. Every test
# binary runs even when one fails; at the end, a count of the tests and of
# what they skipped, each with what was missing (../shared, a tool, root).
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

# The Python package: a wheel built with the dev profile (sharing the
# workspace's build above), installed, and its pytest suite.
if maturin build --locked --profile dev -m crates/python/Cargo.toml --out "$work/wheels" 2>&1 | tail -n 3 &&
  PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install -q --force-reinstall --no-deps "$work"/wheels/hoard-*.whl; then
  # The tests that mount an image use the binary built above.
  HOARD_BIN="$(cargo metadata --no-deps --format-version 1 |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')/debug/hoard" \
    python3 -m pytest -q -p no:cacheprovider crates/python/tests 2>&1 | tee "$work/pytest" || status=1
  # pytest's summary in cargo's form, for the count below.
  sed -nE 's/^=* *([0-9]+) passed(, ([0-9]+) failed)?.*/test result: \1 passed; \2 failed/p;
           s/^=* *([0-9]+) failed, ([0-9]+) passed.*/test result: \2 passed; \1 failed/p' "$work/pytest" >> "$work/log"
else
  echo "building the Python package failed"
  status=1
fi

echo
if [ -s "$HOARD_SKIP_LOG" ]; then
  # Lines are `TEST: what was missing`; where ../shared was, the
  # repository's own images ran instead.
  echo "skipped in $(cut -d: -f1 "$HOARD_SKIP_LOG" | sort -u | wc -l) tests (test: what was missing):"
  sort -u "$HOARD_SKIP_LOG" | sed 's/^/  /'
else
  echo "no test skipped anything"
fi
awk '/^test result:/ { for (i = 1; i < NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
     END { printf "total: %d passed, %d failed\n", p, f }' "$work/log"
exit "$status"
