#!/usr/bin/env bash
# Builds hoard (release) and installs it under PREFIX (default /usr/local):
#   bin/hoard, bin/hoard-runtime (the runtime `hoard bundle` puts in
#   front of a bundle's image, found beside hoard) and bin/hoard-mount (the
#   FUSE driver alone, for mounts that start apps), with bin/mkdwarfs, bin/dwarfs, bin/dwarfsck and
#   bin/dwarfsextract as symlinks to it (each runs as that DwarFS tool);
#   sbin/mount.dwarfs and sbin/mount.hoard, the helpers mount(8) runs for
#   `-t dwarfs` and `-t hoard` (it looks in /sbin, so with a PREFIX other
#   than /usr link them from there);
#   share/man/man1: hoard.1, hoard-COMMAND.1, mkdwarfs.1, dwarfs.1,
#   dwarfsck.1, dwarfsextract.1;
#   bash, zsh and fish completions for hoard, mkdwarfs, dwarfs, dwarfsck and
#   dwarfsextract where those shells look for them.
# DESTDIR, if set, is prepended to every installed path (for packaging).
# Usage: scripts/install.sh [PREFIX]
set -euo pipefail
prefix=${1:-/usr/local}
case $prefix in
  /*) ;;
  *) prefix=$PWD/$prefix ;;
esac
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cargo build --release --locked -p hoard-cli
built=${CARGO_TARGET_DIR:-target}/release/hoard

dest=${DESTDIR:-}$prefix
install -d "$dest/bin" "$dest/sbin" "$dest/share/man/man1" \
  "$dest/share/bash-completion/completions" "$dest/share/zsh/site-functions" \
  "$dest/share/fish/vendor_completions.d"
install -m 755 "$built" "$dest/bin/hoard"
install -m 755 "$built-runtime" "$dest/bin/hoard-runtime"
install -m 755 "$built-mount" "$dest/bin/hoard-mount"
for name in mkdwarfs dwarfs dwarfsck dwarfsextract; do
  ln -sfn hoard "$dest/bin/$name"
done
for name in mount.dwarfs mount.hoard; do
  ln -sfn ../bin/hoard "$dest/sbin/$name"
done
"$dest/bin/hoard" --generate man --out "$dest/share/man/man1"
# Completions for hoard and for each DwarFS name (hoard, mkdwarfs, ... for
# bash; _hoard, ... for zsh; hoard.fish, ... for fish).
"$dest/bin/hoard" --generate complete-bash --out "$dest/share/bash-completion/completions"
"$dest/bin/hoard" --generate complete-zsh --out "$dest/share/zsh/site-functions"
"$dest/bin/hoard" --generate complete-fish --out "$dest/share/fish/vendor_completions.d"
echo "installed $("$dest/bin/hoard" --version) into $dest"
