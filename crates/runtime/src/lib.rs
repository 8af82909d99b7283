//! The runtime of self-running bundles (`hoard bundle`): the program at
//! the start of a bundle file, followed by a note ([`note`]) and a DwarFS
//! image. Run, it finds the image behind itself, mounts it privately with
//! FUSE (`fusermount3 -o auto_unmount`, `hoard_fuse::fusermount`) or, where FUSE is
//! missing or the mount fails, extracts it to a temporary directory, and
//! replaces itself with the image's entry ([`launch`]). Detached
//! guardian processes ([`guardian`]) unmount or remove the copy once the
//! entry has exited.
//!
//! The binary (`hoard-runtime`, built with the `hoard` binary) calls
//! [`launch::run`]; `hoard bundle` writes the note with [`note::Note`].
//! It needs only the C library and `fusermount3`: the codecs' C code is
//! linked in.
//!
//! The same small set of crates makes `hoard-mount` ([`mount`]), the
//! driver alone for mounts that start apps; it and `hoard mount` detach
//! the same way ([`detach`]).

pub mod detach;
pub mod guardian;
pub mod launch;
pub mod mount;
pub mod note;
