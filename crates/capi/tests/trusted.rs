//! `hoard_open_trusted`: a signed image opens with its key trusted, and
//! is refused unsigned or with another key, or when it does not claim
//! the name and version expected.

use hoard::{hoard_close, hoard_last_error, hoard_open_trusted, hoard_read};
use std::ffi::{CStr, CString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

fn c(path: &Path) -> CString {
    CString::new(path.as_os_str().as_bytes()).unwrap()
}

/// Opens `image` trusting `public`: Ok, or the error message.
fn open(image: &Path, public: &Path) -> Result<Vec<u8>, String> {
    let key = c(public);
    let keys = [key.as_ptr()];
    // SAFETY: NUL-terminated strings that outlive the calls.
    unsafe {
        let img = hoard_open_trusted(c(image).as_ptr(), keys.as_ptr(), keys.len(), 0);
        if img.is_null() {
            return Err(CStr::from_ptr(hoard_last_error())
                .to_string_lossy()
                .into_owned());
        }
        let mut buf = vec![0u8; 64];
        let path = CString::new("/bench.sh").unwrap();
        let n = hoard_read(img, path.as_ptr(), buf.as_mut_ptr().cast(), buf.len(), 0);
        hoard_close(img);
        buf.truncate(n.max(0) as usize);
        Ok(buf)
    }
}

/// The repository's compat image, and a copy of it in `dir` signed with a
/// new key (written as `dir/name.key`, `dir/name.pub`) claiming `claims`:
/// the image, the copy and the public key file.
fn signed_copy(dir: &Path, name: &str, claims: hoard_trust::Claims) -> (PathBuf, PathBuf, PathBuf) {
    let image = hoard_testdata::repo_images().join("compat/compat-v0.9.10.dwarfs");
    let key = hoard_trust::SecretKey::generate().unwrap();
    let (_, public) = key.write_pair(&dir.join(name), "", false).unwrap();
    let signed = dir.join(format!("{name}-signed.dwarfs"));
    hoard_writer::sign::sign_image(&image, &signed, &key, claims, false).unwrap();
    (image, signed, public)
}

#[test]
fn signed_images_open_with_their_key_only() {
    let dir = tempfile::tempdir().unwrap();
    let (image, signed, public) = signed_copy(dir.path(), "k", Default::default());
    let (_, _, other_public) = signed_copy(dir.path(), "other", Default::default());

    let unsigned = open(&image, &public).unwrap_err();
    assert!(unsigned.contains("not signed"), "{unsigned}");
    let untrusted = open(&signed, &other_public).unwrap_err();
    assert!(untrusted.contains("not trusted"), "{untrusted}");
    let plain = hoard_reader::Filesystem::open(&image, &Default::default()).unwrap();
    let ino = plain.lookup_path("bench.sh").unwrap();
    let mut want = vec![0u8; 64];
    let n = plain.read(ino, 0, &mut want).unwrap();
    want.truncate(n);
    assert_eq!(open(&signed, &public).unwrap(), want);
}

#[test]
fn a_stack_opened_trusted_needs_a_key() {
    let image = c(&hoard_testdata::repo_images().join("compat/compat-v0.9.10.dwarfs"));
    let paths = [image.as_ptr()];
    // SAFETY: NUL-terminated strings that outlive the call; no key list.
    let error = unsafe {
        let img = hoard::hoard_open_stack_trusted(paths.as_ptr(), 1, std::ptr::null(), 0, 0);
        assert!(img.is_null(), "opened trusting no key");
        CStr::from_ptr(hoard_last_error())
            .to_string_lossy()
            .into_owned()
    };
    assert_eq!(error, "no trusted key files given");
}

#[test]
fn expected_names_and_versions_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let claims = hoard_trust::Claims::new(Some("app".into()), Some(3), None).unwrap();
    let (_, signed, public) = signed_copy(dir.path(), "k", claims);
    let (public, signed) = (c(&public), c(&signed));
    let keys = [public.as_ptr()];
    let paths = [signed.as_ptr()];
    // Opens with `name` (or none) and `min_version` expected: Ok, or the error.
    let open = |name: Option<&str>, min_version: u64| {
        let name = name.map(|n| CString::new(n).unwrap());
        let options = hoard::HoardOpenOptions {
            trust: keys.as_ptr(),
            n_trust: keys.len(),
            expect_name: name.as_ref().map_or(std::ptr::null(), |n| n.as_ptr()),
            min_version,
            ..hoard::HoardOpenOptions::default()
        };
        // SAFETY: NUL-terminated strings and lists that outlive the call.
        unsafe {
            let img = hoard::hoard_open_layers(paths.as_ptr(), paths.len(), &options);
            if img.is_null() {
                return Err(CStr::from_ptr(hoard_last_error())
                    .to_string_lossy()
                    .into_owned());
            }
            hoard_close(img);
            Ok(())
        }
    };
    open(Some("app"), 3).unwrap();
    let err = open(Some("other"), 0).unwrap_err();
    assert!(err.contains("expected name 'other'"), "{err}");
    let err = open(None, 4).unwrap_err();
    assert!(err.contains("older than"), "{err}");
}
