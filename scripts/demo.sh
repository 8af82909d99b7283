#!/usr/bin/env bash
# The main job, end to end: build hoard; pack a directory tree into an
# image; mount it, read the whole mounted tree and compare it with the
# source tree (manifest.py); unmount; extract it and compare again. Then
# the same mount-and-compare for a DwarFS-made image from ../shared.
#
#   scripts/demo.sh [TREE] [DWARFS_IMAGE]
set -euo pipefail
cd "$(dirname "$0")/.."
tree=${1:-/usr/share/doc}
image=${2:-../shared/dwarfs-images/upstream/default.dwarfs}
manifest_py=../shared/tools/manifest.py

scripts/install-deps.sh
cargo build --release --locked -p hoard-cli
hoard=target/release/hoard
work=$(mktemp -d)
cleanup() {
  fusermount3 -u "$work/mnt" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
mkdir "$work/mnt"

# Compares the manifest of tree $1 with manifest file $2.
compare() {
  python3 "$manifest_py" "$1" > "$work/got.manifest"
  if diff -q "$2" "$work/got.manifest" >/dev/null; then
    echo "$3: matches"
  else
    diff "$2" "$work/got.manifest" | head -20
    echo "$3: differs" >&2
    exit 1
  fi
}

echo "== pack $tree"
python3 "$manifest_py" "$tree" > "$work/source.manifest"
time $hoard create -i "$tree" -o "$work/tree.dwarfs" --time-resolution=ns
$hoard check --full "$work/tree.dwarfs"

echo "== mount, read everything, unmount"
time $hoard mount "$work/tree.dwarfs" "$work/mnt"
time tar cf - -C "$work/mnt" . | wc -c
compare "$work/mnt" "$work/source.manifest" "mounted tree vs $tree"
$hoard umount "$work/mnt"

echo "== extract"
time $hoard extract "$work/tree.dwarfs" -o "$work/extracted"
compare "$work/extracted" "$work/source.manifest" "extracted tree vs $tree"

echo "== a DwarFS image: $image"
$hoard info "$image" | head -12
$hoard check --full "$image"
$hoard mount "$image" "$work/mnt"
compare "$work/mnt" "${image%.dwarfs}.manifest" "mounted $image vs its manifest"
$hoard umount "$work/mnt"
