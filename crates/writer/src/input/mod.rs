//! Stage 1: what a build reads ([`Input`]), told apart in one place
//! (`Kind::of`) and read into the [`Tree`](crate::tree::Tree) the later
//! stages work on ([`scan`]):
//!
//! * a directory: [`crate::scan`] walks it;
//! * an archive file, an archive on standard input (`-`), or one remote
//!   file (`http(s)://`, `s3://bucket/key`), streamed: [`crate::archive`]
//!   reads it;
//! * the objects under an `s3://bucket/prefix/`: [`crate::objects`]
//!   fetches them;
//! * a container image (`oci:LAYOUT[:TAG]`, `docker-archive:FILE[:REF]`,
//!   `docker://HOST/REPO[:TAG|@DIGEST]`): [`crate::oci`] applies its
//!   layers;
//! * a stack of images: `stack` reads their merged tree;
//! * images to merge: `parts` reads their trees side by side.
//!
//! [`images`] opens the images a build reads (those, and the bases of a
//! layer).

pub mod images;
pub(crate) mod parts;
pub(crate) mod stack;

use crate::archive::scan_archive;
use crate::objects::{is_objects, remote_archive, scan_objects};
use crate::options::{CreateOptions, Input, Parts};
use crate::scan::{ScanOptions, ScanProgress, Scanned};
use crate::{Error, Result};
use hoard_archive::ArchiveReader;
use std::path::{Path, PathBuf};

/// The kinds of input, each read its own way.
enum Kind<'a> {
    /// A directory to walk.
    Directory(&'a Path),
    /// An archive file.
    ArchiveFile(&'a Path),
    /// An archive on standard input.
    Stdin,
    /// The URL of one remote file, an archive to stream.
    RemoteArchive(&'a str),
    /// Objects in S3, under a prefix.
    Objects(&'a Path),
    /// A container image.
    Container(hoard_oci::Source),
    /// A stack of images, bottom first.
    Stack(&'a [PathBuf]),
    /// Images to merge.
    Parts(&'a Parts),
}

impl<'a> Kind<'a> {
    /// What `input` is. A path is told by its form, then by what is
    /// there: a container image's name (`oci:`, `docker-archive:`, `docker://`), a URL of one remote file is an archive (an `s3://` key is
    /// asked for), any other `s3://` URL names objects, `-` is standard
    /// input, and anything but a directory is an archive file.
    fn of(input: &'a Input) -> Self {
        let path = match input {
            Input::Stack(paths) => return Kind::Stack(paths),
            Input::Parts(parts) => return Kind::Parts(parts),
            Input::Path(path) => path,
        };
        if let Some(source) = path.to_str().and_then(hoard_oci::Source::parse) {
            Kind::Container(source)
        } else if let Some(url) = remote_archive(path) {
            Kind::RemoteArchive(url)
        } else if is_objects(path) {
            Kind::Objects(path)
        } else if path.as_os_str() == "-" {
            Kind::Stdin
        } else if std::fs::metadata(path).is_ok_and(|m| !m.is_dir()) {
            Kind::ArchiveFile(path)
        } else {
            Kind::Directory(path)
        }
    }
}

/// Reads `options.input` into a tree, as `scan` says and `options.filter`
/// chooses.
pub fn scan(
    options: &CreateOptions,
    scan: &ScanOptions,
    progress: &ScanProgress,
) -> Result<Scanned> {
    let filter = options.filter.as_ref();
    let archive_error = |e: hoard_archive::Error| Error::Input(e.to_string());
    match Kind::of(&options.input) {
        Kind::Directory(path) => crate::scan::scan(path, scan, filter, progress),
        Kind::ArchiveFile(path) => {
            let reader = ArchiveReader::open_file(path).map_err(archive_error)?;
            scan_archive(reader, scan, filter, progress)
        }
        Kind::Stdin => {
            let stdin = Box::new(std::io::stdin());
            let reader =
                ArchiveReader::open_stream(stdin, "standard input").map_err(archive_error)?;
            scan_archive(reader, scan, filter, progress)
        }
        Kind::RemoteArchive(url) => {
            let remote = hoard_remote::Options::from_env().map_err(Error::Input)?;
            let stream = hoard_remote::stream::open_stream(url, &remote).map_err(Error::Input)?;
            let reader =
                ArchiveReader::open_stream(Box::new(stream), url).map_err(archive_error)?;
            scan_archive(reader, scan, filter, progress)
        }
        Kind::Objects(path) => scan_objects(path, scan, filter, progress),
        Kind::Container(source) => crate::oci::scan_source(
            &source,
            options.platform.as_ref(),
            options.container_layers,
            &options.registry,
            scan,
            filter,
            progress,
        ),
        Kind::Stack(paths) => stack::scan_stack(paths, options, scan, progress),
        Kind::Parts(parts) => parts::scan_parts(parts, options, scan, progress),
    }
}
