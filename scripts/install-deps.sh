#!/usr/bin/env bash
# Installs the Debian packages hoard's build and tests need when they are
# missing (as root; otherwise names them and fails). Called by the other
# scripts, so each works on a fresh Debian 12 machine with Rust.
set -euo pipefail

need=()
command -v python3 >/dev/null || need+=(python3)
command -v cc >/dev/null || need+=(build-essential)
command -v pkg-config >/dev/null || need+=(pkg-config)
# libflac-sys builds libFLAC from source with cmake.
command -v cmake >/dev/null || need+=(cmake)
command -v fusermount3 >/dev/null || need+=(fuse3)
# The extended-attribute tests set and read attributes, ACLs and capabilities.
command -v setfattr >/dev/null || need+=(attr)
command -v setfacl >/dev/null || need+=(acl)
command -v setcap >/dev/null || need+=(libcap2-bin)
# The archive tests unpack hoard's archives with the usual tools.
command -v cpio >/dev/null || need+=(cpio)
command -v unzip >/dev/null || need+=(unzip)
command -v bsdtar >/dev/null || need+=(libarchive-tools)
# Archive input goes through the distribution's libarchive (libarchive13;
# its headers and pkg-config file to build), and the archive tests make
# archives with each format's own tool.
[ -e /usr/include/archive.h ] || need+=(libarchive-dev)
command -v 7z >/dev/null || need+=(p7zip-full)
command -v genisoimage >/dev/null || need+=(genisoimage)
command -v xorriso >/dev/null || need+=(xorriso)
command -v lzop >/dev/null || need+=(lzop)
command -v lzip >/dev/null || need+=(lzip)
command -v compress >/dev/null || need+=(ncompress)
command -v lz4 >/dev/null || need+=(lz4)
command -v bzip2 >/dev/null || need+=(bzip2)
command -v gcab >/dev/null || need+=(gcab)
command -v lha >/dev/null || need+=(jlha-utils)
command -v zip >/dev/null || need+=(zip)
command -v zstd >/dev/null || need+=(zstd)
command -v xz >/dev/null || need+=(xz-utils)
# The signing tests sign with OpenSSH keys, as ssh-keygen makes them.
command -v ssh-keygen >/dev/null || need+=(openssh-client)
# The encryption tests make keys with age-keygen and open the wrapped key
# with age.
command -v age-keygen >/dev/null || need+=(age)
# The container and registry tests run the CNCF distribution registry and
# make and copy OCI images with umoci and skopeo.
[ -x /usr/bin/docker-registry ] || need+=(docker-registry)
command -v skopeo >/dev/null || need+=(skopeo)
command -v umoci >/dev/null || need+=(umoci)
# From PyPI when missing (Debian's python3 needs pip and, being externally
# managed, the override): the Python package's build and tests
# (crates/python): maturin, pytest, fsspec, pandas; the remote-image tests
# serve an image from moto's S3 server.
py_need=()
for module in maturin pytest fsspec pandas; do
  python3 -c "import $module" 2>/dev/null || py_need+=("$module")
done
python3 -c 'import moto.server, boto3' 2>/dev/null || py_need+=('moto[server]' boto3)
# hoard.distributed's tests run a dask.distributed LocalCluster.
python3 -c 'import dask.distributed' 2>/dev/null || py_need+=('dask[distributed]')
[ ${#py_need[@]} -gt 0 ] && { python3 -m pip --version >/dev/null 2>&1 || need+=(python3-pip); }
if [ ${#need[@]} -eq 0 ] && [ ${#py_need[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "missing: ${need[*]} ${py_need[*]} (run as root to install them)" >&2
  exit 1
fi
if [ ${#need[@]} -gt 0 ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}"
fi
if [ ${#py_need[@]} -gt 0 ]; then
  PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install -q "${py_need[@]}"
fi
