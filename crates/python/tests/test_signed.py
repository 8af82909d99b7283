"""Signed images: ``Image(..., trust=[...])`` opens an image signed by a
trusted key (``create(..., sign=KEY)``) and refuses others."""

import subprocess

import pytest

import hoard


def ssh_key(tmp_path, name):
    """An OpenSSH ed25519 key pair made by ssh-keygen: (secret, public)."""
    key = tmp_path / name
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "t", "-f", str(key)],
                   check=True)
    return key, tmp_path / f"{name}.pub"


def test_signed_image_opens_with_its_key_only(tree, tmp_path):
    key, public = ssh_key(tmp_path, "signer")
    _, other = ssh_key(tmp_path, "other")
    signed = tmp_path / "signed.dwarfs"
    hoard.create(tree, signed, level=1, sign=key)
    with hoard.Image(signed, trust=[public]) as img:
        with img.open("readme.txt") as f:
            assert f.read() == (tree / "readme.txt").read_bytes()
    with pytest.raises(hoard.ImageError, match="not trusted"):
        hoard.Image(signed, trust=[other])
    plain = tmp_path / "plain.dwarfs"
    hoard.create(tree, plain, level=1)
    with pytest.raises(hoard.ImageError, match="not signed"):
        hoard.Image(plain, trust=[public])
