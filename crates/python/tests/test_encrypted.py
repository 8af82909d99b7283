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


def test_rewrite_encrypts_a_plain_image(tree, tmp_path):
    identity, recipient = age_identity(tmp_path, "id")
    plain = tmp_path / "plain.dwarfs"
    hoard.create(tree, plain, level=1)
    image = tmp_path / "enc.dwarfs"
    hoard.rewrite(plain, image, level=1, encrypt_to=[recipient])
    with pytest.raises(hoard.ImageError, match="encrypted"):
        hoard.Image(image)
    with hoard.Image(image, identity=[identity]) as img:
        with img.open("readme.txt") as f:
            assert f.read() == (tree / "readme.txt").read_bytes()


def test_encrypted_images_are_read_to_write_others_with_their_identity(
        tree, tmp_path):
    identity, recipient = age_identity(tmp_path, "id")
    base = tmp_path / "base.dwarfs"
    hoard.create(tree, base, level=1, encrypt_to=[recipient])
    changed = tmp_path / "changed"
    changed.mkdir()
    (changed / "readme.txt").write_bytes(b"new\n")
    layer = tmp_path / "layer.dwarfs"
    with pytest.raises(hoard.ImageError, match="encrypted"):
        hoard.create(changed, layer, level=1, base=base)
    hoard.create(changed, layer, level=1, base=base, identity=[identity],
                 encrypt_to=[recipient])
    with hoard.Image([base, layer], identity=[identity]) as img:
        with img.open("readme.txt") as f:
            assert f.read() == b"new\n"
    plain = tmp_path / "plain.dwarfs"
    hoard.rewrite(base, plain, level=1, identity=[identity], decrypt=True)
    with hoard.Image(plain) as img:
        with img.open("readme.txt") as f:
            assert f.read() == (tree / "readme.txt").read_bytes()


def test_merge_of_encrypted_parts_is_encrypted_and_signed(tree, tmp_path):
    identity, recipient = age_identity(tmp_path, "id")
    key = tmp_path / "signer"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "t",
                    "-f", str(key)], check=True)
    a, b = tmp_path / "a.dwarfs", tmp_path / "b.dwarfs"
    for part in (a, b):
        hoard.create(tree, part, level=1, encrypt_to=[recipient])
    out = tmp_path / "ab.dwarfs"
    with pytest.raises(hoard.ImageError, match="encrypted"):
        hoard.merge([a, b], out)
    with pytest.raises(TypeError, match="unknown options: colour"):
        hoard.merge([a, b], out, colour=True)
    hoard.merge([a, b], out, identity=[identity], encrypt_to=[recipient],
                sign=key)
    with hoard.Image(out, identity=[identity],
                     trust=[tmp_path / "signer.pub"]) as img:
        with img.open("b/readme.txt") as f:
            assert f.read() == (tree / "readme.txt").read_bytes()
