#!/usr/bin/env bash
# The main job, end to end: build hoard; pack a directory tree into an
# image; mount it, read the whole mounted tree and compare it with the
# source tree (`hoard diff`); unmount; extract it and compare again. Then
# mount a DwarFS-made image and compare it with the manifest DwarFS's own
# mount gave; and, when DwarFS's tools are beside the checkout
# (../shared), have DwarFS check and extract hoard's image.
#
#   scripts/demo.sh [TREE] [DWARFS_IMAGE]
set -euo pipefail
cd "$(dirname "$0")/.."
tree=${1:-/usr/share/doc}
image=${2:-crates/testdata/images/upstream/default.dwarfs}
dwarfs_bin=../shared/anchors/dwarfs-0.15.3/bin

scripts/install-deps.sh
cargo build --release --locked -p hoard-cli
hoard=${CARGO_TARGET_DIR:-target}/release/hoard
work=$(mktemp -d)
cleanup() {
  fusermount3 -u "$work/mnt" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
mkdir "$work/mnt"

# Without root, extraction cannot give files their owners.
owners=()
[ "$(id -u)" = 0 ] || owners=(--ignore uid,gid)

echo "== pack $tree"
time $hoard create -i "$tree" -o "$work/tree.dwarfs" --time-resolution=ns --no-progress
$hoard check --full "$work/tree.dwarfs"

echo "== mount, read everything, compare, unmount"
time $hoard mount "$work/tree.dwarfs" "$work/mnt"
time tar cf - -C "$work/mnt" . | wc -c
$hoard diff "$tree" "$work/mnt"
$hoard umount "$work/mnt"

echo "== extract, compare"
time $hoard extract "$work/tree.dwarfs" -o "$work/extracted"
$hoard diff "${owners[@]}" "$tree" "$work/extracted"

echo "== a DwarFS-made image: $image"
$hoard info "$image" > "$work/info"
head -12 "$work/info"
$hoard check --full "$image"
$hoard mount "$image" "$work/mnt"
$hoard diff "${image%.dwarfs}.manifest" "$work/mnt"
$hoard umount "$work/mnt"

if [ -x "$dwarfs_bin/dwarfsck" ]; then
  echo "== DwarFS 0.15.3 reads hoard's image"
  bash "$dwarfs_bin/../setup.sh" >/dev/null
  "$dwarfs_bin/dwarfsck" -i "$work/tree.dwarfs" --check-integrity >/dev/null
  echo "dwarfsck --check-integrity: ok"
  mkdir "$work/by-dwarfs"
  "$dwarfs_bin/dwarfsextract" -i "$work/tree.dwarfs" -o "$work/by-dwarfs"
  # dwarfsextract leaves the time of the directory it extracts into as it
  # is (for DwarFS's own images too): give it the source root's.
  touch -r "$tree" "$work/by-dwarfs"
  $hoard diff "${owners[@]}" "$tree" "$work/by-dwarfs"
else
  echo "== DwarFS's tools: skipped ($dwarfs_bin not found: they come with ../shared)"
fi
echo "demo: every comparison matched"
