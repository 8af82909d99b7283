//! `hoard_open_encrypted`: an encrypted image opens with its identity
//! (or passphrase) and reads the bytes packed; a wrong identity is
//! refused with a message. `hoard_open_layers`: a stack of signed and
//! encrypted layers opens with a trusted key and an identity.

use hoard::{
    hoard_close, hoard_last_error, hoard_open_encrypted, hoard_open_layers, hoard_read, HoardImage,
    HoardOpenOptions,
};
use std::ffi::{CStr, CString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn c(path: &Path) -> CString {
    CString::new(path.as_os_str().as_bytes()).unwrap()
}

/// Opens `image` with identity file `identity` and reads `/f`: its
/// bytes, or the error message.
fn read(image: &Path, identity: &Path) -> Result<Vec<u8>, String> {
    let id = c(identity);
    let ids = [id.as_ptr()];
    // SAFETY: NUL-terminated strings that outlive the call.
    let img =
        unsafe { hoard_open_encrypted(c(image).as_ptr(), ids.as_ptr(), 1, std::ptr::null(), 0) };
    read_and_close(img, "/f")
}

/// Reads `path` of the image `img` opened (and closes it): its bytes, or
/// the error message of the open.
fn read_and_close(img: *mut HoardImage, path: &str) -> Result<Vec<u8>, String> {
    // SAFETY: `img` is NULL or a handle just opened; the strings outlive
    // the calls.
    unsafe {
        if img.is_null() {
            return Err(CStr::from_ptr(hoard_last_error())
                .to_string_lossy()
                .into_owned());
        }
        let mut buf = vec![0u8; 64];
        let path = CString::new(path).unwrap();
        let n = hoard_read(img, path.as_ptr(), buf.as_mut_ptr().cast(), buf.len(), 0);
        hoard_close(img);
        assert!(n >= 0, "read: {n}");
        buf.truncate(n as usize);
        Ok(buf)
    }
}

/// Builds `tree` into `image` encrypted to `recipient` (at level 3),
/// signed with `key` if given, as a layer on `base` if given.
fn build(
    tree: &Path,
    image: &Path,
    recipient: &str,
    key: Option<&Arc<hoard_trust::SecretKey>>,
    base: Option<(&Path, &Path)>,
) {
    let level = hoard_writer::level::Level::get(3).unwrap();
    let mut o = hoard_writer::CreateOptions::at_level(tree.to_path_buf(), image.into(), level);
    o.output.encrypt = Some(Arc::new(
        hoard_trust::encrypt::Recipients::parse(&[recipient.to_string()]).unwrap(),
    ));
    o.output.sign = key.cloned();
    if let Some((base, identity)) = base {
        let identities = hoard_trust::encrypt::Identities::load(&[identity.into()]).unwrap();
        o.identities = Some(Arc::new(identities));
        o.delta = Some(hoard_writer::delta::DeltaOptions {
            bases: vec![base.into()],
            ..Default::default()
        });
    }
    hoard_writer::create(&o, &Default::default(), Default::default()).unwrap();
}

/// An age identity file in `dir` named `name`, made by `age-keygen`,
/// and its recipient.
fn identity(dir: &Path, name: &str) -> (PathBuf, String) {
    let path = dir.join(name);
    let made = std::process::Command::new("age-keygen")
        .arg("-o")
        .arg(&path)
        .output()
        .expect("age-keygen (scripts/install-deps.sh installs age)");
    assert!(made.status.success());
    let said = String::from_utf8(made.stderr).unwrap();
    let recipient = said
        .trim()
        .strip_prefix("Public key: ")
        .unwrap()
        .to_string();
    (path, recipient)
}

#[test]
fn encrypted_images_open_with_their_identity_only() {
    let dir = tempfile::tempdir().unwrap();
    let tree = hoard_testdata::tree_with(dir.path(), "tree", &[("f", b"encrypted bytes")]);
    let (id, recipient) = identity(dir.path(), "id");
    let (wrong, _) = identity(dir.path(), "wrong");
    let image = dir.path().join("enc.dwarfs");
    build(&tree, &image, &recipient, None, None);

    assert_eq!(read(&image, &id).unwrap(), b"encrypted bytes");
    let refused = read(&image, &wrong).unwrap_err();
    assert!(refused.contains("no identity given opens"), "{refused}");
}

#[test]
fn signed_and_encrypted_layers_open_with_a_trusted_key_and_an_identity() {
    let dir = tempfile::tempdir().unwrap();
    let (id, recipient) = identity(dir.path(), "id");
    let key = Arc::new(hoard_trust::SecretKey::generate().unwrap());
    let (_, public) = key.write_pair(&dir.path().join("k"), "", false).unwrap();
    let lower =
        hoard_testdata::tree_with(dir.path(), "lower", &[("f", b"lower f"), ("g", b"lower g")]);
    let base = dir.path().join("base.dwarfs");
    build(&lower, &base, &recipient, Some(&key), None);
    std::fs::write(lower.join("f"), b"upper f").unwrap();
    let layer = dir.path().join("layer.dwarfs");
    build(&lower, &layer, &recipient, Some(&key), Some((&base, &id)));

    let (id, public) = (c(&id), c(&public));
    let (ids, keys) = ([id.as_ptr()], [public.as_ptr()]);
    let (base, layer) = (c(&base), c(&layer));
    let paths = [base.as_ptr(), layer.as_ptr()];
    let options = HoardOpenOptions {
        trust: keys.as_ptr(),
        n_trust: 1,
        identity: ids.as_ptr(),
        n_identity: 1,
        ..HoardOpenOptions::default()
    };
    // SAFETY: NUL-terminated strings and options that outlive the calls.
    let open = |options: *const HoardOpenOptions| unsafe {
        hoard_open_layers(paths.as_ptr(), paths.len(), options)
    };
    assert_eq!(read_and_close(open(&options), "/f").unwrap(), b"upper f");
    assert_eq!(read_and_close(open(&options), "/g").unwrap(), b"lower g");
    let locked = read_and_close(open(std::ptr::null()), "/f").unwrap_err();
    assert!(locked.contains("encrypted"), "{locked}");
    let other = hoard_trust::SecretKey::generate().unwrap();
    let (_, other) = other.write_pair(&dir.path().join("o"), "", false).unwrap();
    let (other, missing) = (c(&other), c(&dir.path().join("missing.txt")));
    let (others, missing) = ([other.as_ptr()], [missing.as_ptr()]);
    let refusals = [
        (
            HoardOpenOptions {
                trust: others.as_ptr(),
                ..options
            },
            "not trusted",
        ),
        (
            HoardOpenOptions {
                identity: std::ptr::null(),
                ..options
            },
            "a list of paths is NULL",
        ),
        (
            HoardOpenOptions {
                identity: missing.as_ptr(),
                ..options
            },
            "missing.txt",
        ),
    ];
    for (bad, why) in refusals {
        let refused = read_and_close(open(&bad), "/f").unwrap_err();
        assert!(refused.contains(why), "{refused}");
    }
}
