//! `ViewExt::resolve_path` follows symlinks inside the image; the
//! upstream test tree has relative, directory, absolute and dangling ones.

use hoard_reader::{Error, Filesystem, FsOptions, Stack, ViewExt};
use std::sync::Arc;

#[test]
fn symlinks_resolve_inside_the_image() {
    let image = hoard_testdata::image("upstream", "default.dwarfs").unwrap();
    let fs = Arc::new(Filesystem::open(&image, &FsOptions::default()).unwrap());
    let view = Stack::from_layers(vec![fs.clone()]).unwrap();
    let h1 = u64::from(fs.lookup_path("links/h1").unwrap());
    let rel = u64::from(fs.lookup_path("links/rel").unwrap());
    assert_eq!(view.resolve_path(b"links/rel", true).unwrap(), h1);
    assert_eq!(view.resolve_path(b"links/rel", false).unwrap(), rel);
    assert_eq!(
        view.resolve_path(b"/links/dirlink/h3", false).unwrap(),
        u64::from(fs.lookup_path("links/sub/h3").unwrap())
    );
    assert_eq!(view.resolve_path(b"links/sub/../h1", true).unwrap(), h1);
    assert!(matches!(
        view.resolve_path(b"links/dangling", true),
        Err(Error::NotFound(_))
    ));
    assert!(view.resolve_path(b"links/dangling", false).is_ok());
    assert_eq!(
        fs.lookup_path_bytes(b"links/h1").unwrap(),
        fs.lookup_path("links/h1").unwrap()
    );
}
