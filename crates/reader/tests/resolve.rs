//! `Filesystem::resolve_path` follows symlinks inside the image; the
//! upstream test tree has relative, directory, absolute and dangling ones.

use hoard_reader::{Error, Filesystem, FsOptions};

#[test]
fn symlinks_resolve_inside_the_image() {
    let image = hoard_testdata::image("upstream", "default.dwarfs").unwrap();
    let fs = Filesystem::open(&image, &FsOptions::default()).unwrap();
    let h1 = fs.lookup_path("links/h1").unwrap();
    let rel = fs.lookup_path("links/rel").unwrap();
    assert_eq!(fs.resolve_path(b"links/rel", true).unwrap(), h1);
    assert_eq!(fs.resolve_path(b"links/rel", false).unwrap(), rel);
    assert_eq!(
        fs.resolve_path(b"/links/dirlink/h3", false).unwrap(),
        fs.lookup_path("links/sub/h3").unwrap()
    );
    assert_eq!(fs.resolve_path(b"links/sub/../h1", true).unwrap(), h1);
    assert!(matches!(
        fs.resolve_path(b"links/dangling", true),
        Err(Error::NotFound(_))
    ));
    assert!(fs.resolve_path(b"links/dangling", false).is_ok());
    assert_eq!(
        fs.lookup_path_bytes(b"links/h1").unwrap(),
        fs.lookup_path("links/h1").unwrap()
    );
}
