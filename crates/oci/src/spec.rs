//! The JSON documents of an OCI image: manifests, indexes and configs
//! (and Docker's schema 2 equivalents), parsed with their media types
//! checked and their sizes bounded. Only the fields hoard uses are read;
//! others are ignored, as the specification asks.

use crate::digest::Digest;
use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Largest manifest or index read (the distribution registry's limit).
pub const MAX_MANIFEST: u64 = 4 << 20;
/// Largest image config read.
pub const MAX_CONFIG: u64 = 8 << 20;
/// Most layers a manifest may list.
pub const MAX_LAYERS: usize = 1000;
/// Most manifests an index may list.
pub const MAX_MANIFESTS: usize = 10_000;

/// OCI image manifest.
pub const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
/// OCI image index.
pub const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
/// OCI image config.
pub const OCI_CONFIG: &str = "application/vnd.oci.image.config.v1+json";
/// Docker schema 2 manifest.
pub const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";
/// Docker schema 2 manifest list.
pub const DOCKER_INDEX: &str = "application/vnd.docker.distribution.manifest.list.v2+json";
/// Docker schema 2 image config.
pub const DOCKER_CONFIG: &str = "application/vnd.docker.container.image.v1+json";
/// OCI uncompressed layer.
pub const OCI_LAYER_TAR: &str = "application/vnd.oci.image.layer.v1.tar";

/// How a layer's tar is compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    /// A plain tar.
    None,
    /// gzip.
    Gzip,
    /// zstd.
    Zstd,
}

/// The compression of a layer of media type `media_type`; `None` for a
/// media type that is not a container image layer.
pub fn layer_compression(media_type: &str) -> Option<Compression> {
    let base = media_type
        .strip_prefix("application/vnd.oci.image.layer.nondistributable.v1.tar")
        .or_else(|| media_type.strip_prefix("application/vnd.oci.image.layer.v1.tar"));
    match base {
        Some("") => return Some(Compression::None),
        Some("+gzip") => return Some(Compression::Gzip),
        Some("+zstd") => return Some(Compression::Zstd),
        Some(_) => return None,
        None => {}
    }
    match media_type {
        "application/vnd.docker.image.rootfs.diff.tar.gzip"
        | "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip" => Some(Compression::Gzip),
        "application/vnd.docker.image.rootfs.diff.tar.zstd" => Some(Compression::Zstd),
        _ => None,
    }
}

/// A reference to content: its media type, digest and size.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    /// What the content is.
    pub media_type: String,
    /// Its digest, as written (see [`Descriptor::digest`]).
    #[serde(rename = "digest")]
    pub digest_text: String,
    /// Its size in bytes.
    pub size: u64,
    /// The platform an image of an index runs on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub platform: Option<Platform>,
    /// Annotations (a layout's index names tags by
    /// `org.opencontainers.image.ref.name`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// The annotation a layout's index names a tag by.
pub const REF_NAME: &str = "org.opencontainers.image.ref.name";

impl Descriptor {
    /// The digest, checked.
    pub fn digest(&self) -> Result<Digest> {
        Digest::parse(&self.digest_text)
    }

    /// The tag a layout's index gives this image, if any.
    pub fn ref_name(&self) -> Option<&str> {
        self.annotations.get(REF_NAME).map(String::as_str)
    }
}

/// The platform an image runs on: `os/architecture[/variant]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Platform {
    /// The operating system (`linux`).
    pub os: String,
    /// The CPU architecture, as Go names it (`amd64`, `arm64`).
    pub architecture: String,
    /// The CPU variant (`v7`, `v8`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
}

impl Platform {
    /// Parses `os/arch[/variant]`.
    pub fn parse(text: &str) -> Result<Platform> {
        let bad = || Error::Invalid {
            what: "platform",
            why: format!("'{text}' is not os/arch[/variant]"),
        };
        let mut parts = text.split('/');
        let (Some(os), Some(arch)) = (parts.next(), parts.next()) else {
            return Err(bad());
        };
        let variant = parts.next().map(String::from);
        if os.is_empty()
            || arch.is_empty()
            || variant.as_deref() == Some("")
            || parts.next().is_some()
        {
            return Err(bad());
        }
        Ok(Platform {
            os: os.into(),
            architecture: arch.into(),
            variant,
        })
    }

    /// The platform of this machine, as OCI names it.
    pub fn current() -> Platform {
        let (architecture, variant) = match std::env::consts::ARCH {
            "x86_64" => ("amd64", None),
            "x86" => ("386", None),
            "aarch64" => ("arm64", None),
            "arm" => ("arm", Some("v7")),
            "powerpc64" if cfg!(target_endian = "little") => ("ppc64le", None),
            "loongarch64" => ("loong64", None),
            other => (other, None),
        };
        Platform {
            os: std::env::consts::OS.into(),
            architecture: architecture.into(),
            variant: variant.map(String::from),
        }
    }

    /// Whether an image for `other` runs here: the same os and
    /// architecture, and the same variant when this one names one (arm64's
    /// `v8` is its only variant, so none and `v8` match).
    pub fn matches(&self, other: &Platform) -> bool {
        let variant = |p: &Platform| match (p.architecture.as_str(), p.variant.as_deref()) {
            ("arm64", Some("v8")) => None,
            (_, v) => v.map(String::from),
        };
        self.os == other.os
            && self.architecture == other.architecture
            && (self.variant.is_none() || variant(self) == variant(other))
    }
}

impl std::fmt::Display for Platform {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.os, self.architecture)?;
        if let Some(v) = &self.variant {
            write!(f, "/{v}")?;
        }
        Ok(())
    }
}

/// An image manifest: the config and the layers, bottom first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    /// Always 2.
    pub schema_version: u32,
    /// The manifest's own media type, when it says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
    /// The image config.
    pub config: Descriptor,
    /// The layers, bottom first.
    pub layers: Vec<Descriptor>,
}

/// An image index: manifests for several platforms (or, in a layout,
/// the tagged images).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Index {
    /// Always 2.
    pub schema_version: u32,
    /// The index's own media type, when it says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
    /// The manifests (or indexes) it lists.
    pub manifests: Vec<Descriptor>,
}

/// A manifest or an index, told apart by media type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Parsed {
    /// An image manifest.
    Manifest(Manifest),
    /// An index of manifests.
    Index(Index),
}

fn invalid(what: &'static str, why: impl Into<String>) -> Error {
    Error::Invalid {
        what,
        why: why.into(),
    }
}

fn json<'a, T: Deserialize<'a>>(what: &'static str, bytes: &'a [u8], max: u64) -> Result<T> {
    if bytes.len() as u64 > max {
        return Err(invalid(
            what,
            format!("{} bytes, more than {max}", bytes.len()),
        ));
    }
    serde_json::from_slice(bytes).map_err(|e| invalid(what, e.to_string()))
}

fn check_descriptors(what: &'static str, list: &[Descriptor], max: usize) -> Result<()> {
    if list.len() > max {
        return Err(invalid(
            what,
            format!("{} entries, more than {max}", list.len()),
        ));
    }
    for d in list {
        d.digest()?;
    }
    Ok(())
}

/// Parses a manifest or an index served with media type `media_type`:
/// the media type must be one of an image manifest or index, and the
/// document's own `mediaType`, when present, must agree with it.
pub fn parse_manifest(media_type: &str, bytes: &[u8]) -> Result<Parsed> {
    let is_index = match media_type {
        OCI_MANIFEST | DOCKER_MANIFEST => false,
        OCI_INDEX | DOCKER_INDEX => true,
        other => {
            return Err(invalid(
                "manifest",
                format!(
                    "media type '{}' is not an image manifest or index",
                    other.chars().take(200).collect::<String>()
                ),
            ))
        }
    };
    let own_type = |own: &Option<String>| match own {
        Some(t) if t != media_type => Err(invalid(
            "manifest",
            format!(
                "it says media type '{}', it was given as '{media_type}'",
                t.chars().take(200).collect::<String>()
            ),
        )),
        _ => Ok(()),
    };
    if is_index {
        let index: Index = json("index", bytes, MAX_MANIFEST)?;
        if index.schema_version != 2 {
            return Err(invalid("index", "schemaVersion is not 2"));
        }
        own_type(&index.media_type)?;
        check_descriptors("index", &index.manifests, MAX_MANIFESTS)?;
        Ok(Parsed::Index(index))
    } else {
        let manifest: Manifest = json("manifest", bytes, MAX_MANIFEST)?;
        if manifest.schema_version != 2 {
            return Err(invalid("manifest", "schemaVersion is not 2"));
        }
        own_type(&manifest.media_type)?;
        match manifest.config.media_type.as_str() {
            OCI_CONFIG | DOCKER_CONFIG => {}
            other => {
                return Err(invalid(
                    "manifest",
                    format!(
                        "config media type '{}' is not a container image's",
                        other.chars().take(200).collect::<String>()
                    ),
                ))
            }
        }
        if manifest.config.size > MAX_CONFIG {
            return Err(invalid("manifest", "the config is too large"));
        }
        manifest.config.digest()?;
        check_descriptors("manifest", &manifest.layers, MAX_LAYERS)?;
        for layer in &manifest.layers {
            if layer_compression(&layer.media_type).is_none() {
                return Err(invalid(
                    "manifest",
                    format!(
                        "layer media type '{}' is not a tar layer",
                        layer.media_type.chars().take(200).collect::<String>()
                    ),
                ));
            }
        }
        Ok(Parsed::Manifest(manifest))
    }
}

/// Whether `media_type` is that of an image manifest or an index.
pub fn is_manifest_type(media_type: &str) -> bool {
    matches!(
        media_type,
        OCI_MANIFEST | DOCKER_MANIFEST | OCI_INDEX | DOCKER_INDEX
    )
}

/// An image config: the platform, how the container runs, and the
/// digests of the uncompressed layers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct Config {
    /// The CPU architecture.
    #[serde(default)]
    pub architecture: String,
    /// The operating system.
    #[serde(default)]
    pub os: String,
    /// How a container of the image runs.
    #[serde(default)]
    pub config: Option<RunConfig>,
    /// The uncompressed layers.
    #[serde(default)]
    pub rootfs: Option<RootFs>,
}

/// How a container runs (the config's `config` object).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct RunConfig {
    /// The user (`name`, `uid`, `uid:gid`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// Environment, `NAME=value` each.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<Vec<String>>,
    /// The program and its first arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entrypoint: Option<Vec<String>>,
    /// The default arguments (or program).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cmd: Option<Vec<String>>,
    /// The working directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub working_dir: Option<String>,
    /// Labels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,
    /// The signal that stops the container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_signal: Option<String>,
}

/// The config's `rootfs` object.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct RootFs {
    /// Always `layers`.
    #[serde(rename = "type", default)]
    pub kind: String,
    /// The digest of each uncompressed layer, bottom first.
    #[serde(default)]
    pub diff_ids: Vec<String>,
}

/// Parses an image config.
pub fn parse_config(bytes: &[u8]) -> Result<Config> {
    let config: Config = json("config", bytes, MAX_CONFIG)?;
    if let Some(rootfs) = &config.rootfs {
        if rootfs.diff_ids.len() > MAX_LAYERS {
            return Err(invalid("config", "too many layers"));
        }
        for d in &rootfs.diff_ids {
            Digest::parse(d)?;
        }
    }
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: &str = "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

    fn manifest(config_type: &str, layer_type: &str) -> Vec<u8> {
        format!(
            r#"{{"schemaVersion":2,"mediaType":"{OCI_MANIFEST}",
            "config":{{"mediaType":"{config_type}","digest":"{D}","size":2}},
            "layers":[{{"mediaType":"{layer_type}","digest":"{D}","size":0}}]}}"#
        )
        .into_bytes()
    }

    #[test]
    fn manifests_are_checked() {
        let good = manifest(OCI_CONFIG, "application/vnd.oci.image.layer.v1.tar+gzip");
        assert!(matches!(
            parse_manifest(OCI_MANIFEST, &good),
            Ok(Parsed::Manifest(_))
        ));
        assert!(parse_manifest(OCI_INDEX, &good).is_err());
        assert!(parse_manifest("application/json", &good).is_err());
        let artifact = manifest("application/vnd.example+json", OCI_LAYER_TAR);
        assert!(parse_manifest(OCI_MANIFEST, &artifact).is_err());
        let blob = manifest(OCI_CONFIG, "application/octet-stream");
        assert!(parse_manifest(OCI_MANIFEST, &blob).is_err());
    }

    #[test]
    fn platforms() {
        let p = Platform::parse("linux/arm64/v8").unwrap();
        assert_eq!(p.to_string(), "linux/arm64/v8");
        assert!(p.matches(&Platform::parse("linux/arm64").unwrap()));
        assert!(!p.matches(&Platform::parse("linux/amd64").unwrap()));
        for bad in ["linux", "linux/", "/amd64", "a/b/c/d", "a/b/"] {
            assert!(Platform::parse(bad).is_err(), "{bad}");
        }
    }
}
