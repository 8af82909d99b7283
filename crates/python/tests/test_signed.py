"""Signed images: ``Image(..., trust=[...])`` opens an image signed by a
trusted key (``create(..., sign=KEY)``) and refuses others."""

import os
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
    with hoard.Image(named, trust=[public], expect_name="app", min_version=3) as img:
        assert img.exists("readme.txt")
    with pytest.raises(hoard.ImageError, match="expected name 'other'"):
        hoard.Image(named, trust=[public], expect_name="other")
    with pytest.raises(hoard.ImageError, match="older than"):
        hoard.Image(named, trust=[public], min_version=4)
    expired = tmp_path / "expired.dwarfs"
    hoard.rewrite(named, expired, level=1, sign=key, sign_expires="2020-01-01T00:00:00Z")
    with pytest.raises(hoard.ImageError, match="expired on 2020-01-01"):
        hoard.Image(expired, trust=[public])
    with pytest.raises(ValueError, match="RFC 3339"):
        hoard.create(tree, tmp_path / "bad.dwarfs", sign=key, sign_expires="soon")
    with pytest.raises(Exception, match="needs a key"):
        hoard.create(tree, tmp_path / "nokey.dwarfs", sign_name="app")


def blocks(image):
    """The (offset, end) of each BLOCK section of the v2 image at ``image``:
    64-byte headers, the payload's length in their last 8 bytes."""
    data = image.read_bytes()
    found, at = [], 0
    while at + 64 <= len(data) and data[at:at + 6] == b"DWARFS":
        end = at + 64 + int.from_bytes(data[at + 56:at + 64], "little")
        if int.from_bytes(data[at + 52:at + 54], "little") == 0:
            found.append((at, end))
        at = end
    return found


def test_builds_refuse_a_tampered_input_with_trust(tmp_path):
    """A block of a signed image swapped for another image's (its own
    hashes right, so only the signature tells): rewrite and merge with
    ``trust`` refuse it and write nothing."""
    key, public = ssh_key(tmp_path, "signer")
    made = []
    for name in ("signed", "other"):
        src = tmp_path / name
        src.mkdir()
        (src / "f").write_bytes(os.urandom(100_000))
        os.utime(src / "f", (1_000_000_000, 1_000_000_000))
        os.utime(src, (1_000_000_000, 1_000_000_000))
        image = tmp_path / f"{name}.dwarfs"
        hoard.create(src, image, level=1, compression="null", sign=key,
                     no_history=True, no_create_timestamp=True)
        made.append(image)
    signed, other = made
    (start, end), = blocks(signed)
    assert blocks(other) == [(start, end)]
    bad = tmp_path / "bad.dwarfs"
    data = bytearray(signed.read_bytes())
    data[start:end] = other.read_bytes()[start:end]
    bad.write_bytes(data)
    out = tmp_path / "out.dwarfs"
    for build in (lambda i: hoard.rewrite(i, out, level=1, trust=[public]),
                  lambda i: hoard.merge([i], out, trust=[public])):
        with pytest.raises(Exception, match="does not match the image signature"):
            build(bad)
        assert not out.exists()
        build(signed)
        out.unlink()
