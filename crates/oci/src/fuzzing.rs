//! Bodies of the fuzz targets (`fuzz/`), kept here so that they build
//! with the crate.

use crate::spec;

/// Parses `data` as a manifest and as an index (under each media type),
/// and as a config; every result must be an error or a value, never a
/// panic. The first byte picks the media type.
pub fn parse_documents(data: &[u8]) {
    let Some((&pick, body)) = data.split_first() else {
        return;
    };
    let types = [
        spec::OCI_MANIFEST,
        spec::OCI_INDEX,
        spec::DOCKER_MANIFEST,
        spec::DOCKER_INDEX,
        spec::OCI_CONFIG,
    ];
    let media_type = types[usize::from(pick) % types.len()];
    if let Ok(spec::Parsed::Index(index)) = spec::parse_manifest(media_type, body) {
        for d in &index.manifests {
            let _ = d.ref_name();
            let _ = d
                .platform
                .as_ref()
                .map(|p| p.matches(&spec::Platform::current()));
        }
    }
    let _ = spec::parse_config(body);
    if let Ok(text) = std::str::from_utf8(body) {
        let _ = spec::Platform::parse(text);
    }
    let _ = crate::tar_index::index(&mut std::io::Cursor::new(body));
}
