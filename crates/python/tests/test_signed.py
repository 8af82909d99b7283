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


def test_signed_claims_and_expiry(tree, tmp_path):
    key, public = ssh_key(tmp_path, "signer")
    named = tmp_path / "app.dwarfs"
    hoard.create(tree, named, level=1, sign=key, sign_name="app", sign_version=3,
                 sign_expires="2099-01-31")
    with hoard.Image(named, trust=[public]) as img:
        assert img.exists("readme.txt")
    expired = tmp_path / "expired.dwarfs"
    hoard.rewrite(named, expired, level=1, sign=key, sign_expires="2020-01-01T00:00:00Z")
    with pytest.raises(hoard.ImageError, match="expired on 2020-01-01"):
        hoard.Image(expired, trust=[public])
    with pytest.raises(ValueError, match="RFC 3339"):
        hoard.create(tree, tmp_path / "bad.dwarfs", sign=key, sign_expires="soon")
    with pytest.raises(Exception, match="needs a key"):
        hoard.create(tree, tmp_path / "nokey.dwarfs", sign_name="app")
