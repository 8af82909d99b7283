//! The names of container images as `hoard create -i` and `hoard mount`
//! take them, skopeo's way: `oci:LAYOUT[:TAG]`,
//! `docker-archive:FILE[:REF]` and `docker://HOST[:PORT]/REPO[:TAG|@DIGEST]`.
//! A path ends at the first `:` after the prefix, so it cannot hold one.

use crate::digest::Digest;
use crate::docker_archive::DockerArchive;
use crate::error::Result;
use crate::layout::Layout;
use crate::registry::{self, Registry};
use crate::store::Store;
use std::path::PathBuf;

/// Where a container image is read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// An OCI image layout directory, and the tag (or digest) of the
    /// image in it; `None`: its only image.
    Layout {
        /// The directory.
        dir: PathBuf,
        /// The tag or digest.
        tag: Option<String>,
    },
    /// A `docker save` archive, and the tag (or digest) of the image in
    /// it; `None`: its only image.
    DockerArchive {
        /// The archive.
        file: PathBuf,
        /// The tag or digest.
        reference: Option<String>,
    },
    /// An image in a registry (`docker://…`), reached with the
    /// [`registry::Options`] given to [`Source::open`] (by default plain
    /// HTTP only for loopback hosts).
    Registry {
        /// The whole `docker://` name.
        url: String,
    },
}

/// A store opened, and the reference of the image in it.
pub struct Opened {
    /// The store.
    pub store: Box<dyn Store + Send + Sync>,
    /// The image's tag or digest in it.
    pub reference: String,
}

impl Source {
    /// The source `name` names, or `None` when it is no container image's
    /// name (a plain path).
    pub fn parse(name: &str) -> Option<Source> {
        let split = |rest: &str| -> (PathBuf, Option<String>) {
            match rest.split_once(':') {
                Some((path, r)) if !r.is_empty() => (path.into(), Some(r.to_string())),
                Some((path, _)) => (path.into(), None),
                None => (rest.into(), None),
            }
        };
        if let Some(rest) = name.strip_prefix("oci:") {
            let (dir, tag) = split(rest);
            return Some(Source::Layout { dir, tag });
        }
        if let Some(rest) = name.strip_prefix("docker-archive:") {
            let (file, reference) = split(rest);
            return Some(Source::DockerArchive { file, reference });
        }
        if name.starts_with("docker://") {
            return Some(Source::Registry {
                url: name.to_string(),
            });
        }
        None
    }

    /// The name of the image `reference` (a tag or digest) names in the
    /// same layout or archive.
    pub fn name_with(&self, reference: &str) -> String {
        match self {
            Source::Layout { dir, .. } => format!("oci:{}:{reference}", dir.display()),
            Source::DockerArchive { file, .. } => {
                format!("docker-archive:{}:{reference}", file.display())
            }
            Source::Registry { url } => match registry::ImageRef::parse(url) {
                Ok(mut image) => {
                    image.target = match Digest::parse(reference) {
                        Ok(digest) => registry::Target::Digest(digest),
                        Err(_) => registry::Target::Tag(reference.to_string()),
                    };
                    image.to_string()
                }
                Err(_) => url.clone(),
            },
        }
    }

    /// Opens the store and finds the image's reference; a registry is
    /// reached with `registry` (how it is reached: TLS, timeouts,
    /// credentials).
    pub fn open(&self, registry: &registry::Options) -> Result<Opened> {
        match self {
            Source::Layout { dir, tag } => {
                let layout = Layout::open(dir)?;
                let reference = match tag {
                    Some(t) => t.clone(),
                    None => layout.only_reference()?,
                };
                Ok(Opened {
                    store: Box::new(layout),
                    reference,
                })
            }
            Source::DockerArchive { file, reference } => {
                let archive = DockerArchive::open(file)?;
                let reference = match reference {
                    Some(r) => r.clone(),
                    None => archive.only_reference()?,
                };
                Ok(Opened {
                    store: Box::new(archive),
                    reference,
                })
            }
            Source::Registry { url } => {
                let store = Registry::open(url, registry)?;
                let reference = store.reference();
                Ok(Opened {
                    store: Box::new(store),
                    reference,
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(Source::parse("/tmp/x"), None);
        assert_eq!(
            Source::parse("oci:/l:v1"),
            Some(Source::Layout {
                dir: "/l".into(),
                tag: Some("v1".into())
            })
        );
        assert_eq!(
            Source::parse("docker-archive:a.tar:busybox:1"),
            Some(Source::DockerArchive {
                file: "a.tar".into(),
                reference: Some("busybox:1".into())
            })
        );
        assert_eq!(
            Source::parse("oci:l"),
            Some(Source::Layout {
                dir: "l".into(),
                tag: None
            })
        );
    }
}
