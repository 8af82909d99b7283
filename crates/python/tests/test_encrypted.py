"""Encrypted images: ``create(..., encrypt_to=[...])`` and
``Image(..., identity=[...])``, with a key made by ``age-keygen``."""

import subprocess

import pytest

import hoard


def age_identity(tmp_path, name):
    """An age identity file made by age-keygen: (file, recipient)."""
    path = tmp_path / name
    made = subprocess.run(["age-keygen", "-o", str(path)], check=True,
                          capture_output=True, text=True)
    return path, made.stderr.strip().removeprefix("Public key: ")


def test_encrypted_image_opens_with_its_identity_only(tree, tmp_path):
    identity, recipient = age_identity(tmp_path, "id")
    wrong, _ = age_identity(tmp_path, "wrong")
    image = tmp_path / "enc.dwarfs"
    hoard.create(tree, image, level=1, encrypt_to=[recipient])
    with hoard.Image(image, identity=[identity]) as img:
        with img.open("readme.txt") as f:
            assert f.read() == (tree / "readme.txt").read_bytes()
    with pytest.raises(hoard.ImageError, match="no identity given opens"):
        hoard.Image(image, identity=[wrong])
    with pytest.raises(hoard.ImageError, match="encrypted"):
        hoard.Image(image)
