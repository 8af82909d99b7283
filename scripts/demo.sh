#!/usr/bin/env bash
# The main job, end to end: build hoard, inspect and verify a DwarFS image,
# extract it, and compare the extracted tree with the image's manifest.
# (It will pack and mount its own tree once `hoard create` and `hoard mount`
# exist.)
set -euo pipefail
cd "$(dirname "$0")/.."
image=${1:-../shared/dwarfs-images/upstream/default.dwarfs}
manifest=${image%.dwarfs}.manifest

cargo build --release --locked -p hoard-cli
hoard=target/release/hoard
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

$hoard info "$image"
$hoard check --full "$image"
time $hoard extract "$image" -o "$work/tree"
if [ -f "$manifest" ]; then
  python3 ../shared/tools/manifest.py "$work/tree" > "$work/extracted.manifest"
  if diff -q "$manifest" "$work/extracted.manifest" >/dev/null; then
    echo "extracted tree matches $manifest"
  else
    diff "$manifest" "$work/extracted.manifest" | head -20
    echo "extracted tree differs from $manifest" >&2
    exit 1
  fi
fi
