#!/usr/bin/env bash
# The main job, end to end: build hoard; inspect and verify a DwarFS image;
# mount it, read the whole mounted tree and compare it with the image's
# manifest; unmount; extract it and compare again.
# (It will pack its own tree first once `hoard create` exists.)
set -euo pipefail
cd "$(dirname "$0")/.."
image=${1:-../shared/dwarfs-images/upstream/default.dwarfs}
manifest=${image%.dwarfs}.manifest

scripts/install-deps.sh
cargo build --release --locked -p hoard-cli
hoard=target/release/hoard
work=$(mktemp -d)
cleanup() {
  fusermount3 -u "$work/mnt" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# Compares tree $1 with the manifest, if the image has one.
compare() {
  [ -f "$manifest" ] || return 0
  python3 ../shared/tools/manifest.py "$1" > "$work/got.manifest"
  if diff -q "$manifest" "$work/got.manifest" >/dev/null; then
    echo "$2 tree matches $manifest"
  else
    diff "$manifest" "$work/got.manifest" | head -20
    echo "$2 tree differs from $manifest" >&2
    exit 1
  fi
}

$hoard info "$image"
$hoard check --full "$image"

mkdir "$work/mnt"
time $hoard mount "$image" "$work/mnt"
time tar cf - -C "$work/mnt" . | wc -c
compare "$work/mnt" mounted
$hoard umount "$work/mnt"

time $hoard extract "$image" -o "$work/tree"
compare "$work/tree" extracted
