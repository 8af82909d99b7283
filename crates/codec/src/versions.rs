//! The versions of the compression libraries linked in, named as DwarFS's
//! history entries name theirs (`zstd-1.5.7`, `lzma-5.4.1`, ...).

use std::ffi::CStr;

/// `name-version` of each compression library this build uses, sorted.
pub fn library_versions() -> Vec<String> {
    let mut v = vec![
        format!("zstd-{}", ::zstd::zstd_safe::version_string()),
        format!("lz4-{}", dotted(::lz4::version() as u32, 100)),
        format!("lzma-{}", lzma_version()),
        format!("FLAC-{}", flac_version()),
    ];
    for (name, version) in [
        ("brotli-rs", option_env!("HOARD_VERSION_BROTLI")),
        ("lz4_flex", option_env!("HOARD_VERSION_LZ4_FLEX")),
    ] {
        if let Some(version) = version {
            v.push(format!("{name}-{version}"));
        }
    }
    v.sort();
    v
}

/// `major.minor.patch` of a number `major * scale² + minor * scale + patch`.
fn dotted(n: u32, scale: u32) -> String {
    format!("{}.{}.{}", n / scale / scale, n / scale % scale, n % scale)
}

/// liblzma's number is `major * 10^7 + minor * 10^4 + patch * 10 + stability`.
fn lzma_version() -> String {
    let n = unsafe { liblzma_sys::lzma_version_number() } / 10;
    dotted(n, 1000)
}

fn flac_version() -> String {
    // SAFETY: libFLAC initialises this static to a constant NUL-terminated
    // string and never changes it.
    let p = unsafe { libflac_sys::FLAC__VERSION_STRING };
    if p.is_null() {
        return "unknown".into();
    }
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_linked_library_has_a_version() {
        let v = library_versions();
        for prefix in ["zstd-1.", "lz4-1.", "lzma-5.", "FLAC-1."] {
            assert!(v.iter().any(|l| l.starts_with(prefix)), "{prefix} in {v:?}");
        }
        assert!(v.windows(2).all(|w| w[0] < w[1]));
    }
}
