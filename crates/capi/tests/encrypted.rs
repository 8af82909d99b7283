//! `hoard_open_encrypted`: an encrypted image opens with its identity
//! (or passphrase) and reads the bytes packed; a wrong identity is
//! refused with a message.

use hoard::{hoard_close, hoard_last_error, hoard_open_encrypted, hoard_read};
use std::ffi::{CStr, CString};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

fn c(path: &Path) -> CString {
    CString::new(path.as_os_str().as_bytes()).unwrap()
}

/// Opens `image` with identity file `identity` and reads `/f`: its
/// bytes, or the error message.
fn read(image: &Path, identity: &Path) -> Result<Vec<u8>, String> {
    let id = c(identity);
    let ids = [id.as_ptr()];
    // SAFETY: NUL-terminated strings that outlive the calls.
    unsafe {
        let img = hoard_open_encrypted(c(image).as_ptr(), ids.as_ptr(), 1, std::ptr::null(), 0);
        if img.is_null() {
            return Err(CStr::from_ptr(hoard_last_error())
                .to_string_lossy()
                .into_owned());
        }
        let mut buf = vec![0u8; 64];
        let path = CString::new("/f").unwrap();
        let n = hoard_read(img, path.as_ptr(), buf.as_mut_ptr().cast(), buf.len(), 0);
        hoard_close(img);
        buf.truncate(n.max(0) as usize);
        Ok(buf)
    }
}

/// An age identity file in `dir` named `name`, made by `age-keygen`,
/// and its recipient.
fn identity(dir: &Path, name: &str) -> (std::path::PathBuf, String) {
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
    let tree = dir.path().join("tree");
    std::fs::create_dir(&tree).unwrap();
    std::fs::write(tree.join("f"), b"encrypted bytes").unwrap();
    let (id, recipient) = identity(dir.path(), "id");
    let (wrong, _) = identity(dir.path(), "wrong");
    let image = dir.path().join("enc.dwarfs");
    let level = hoard_writer::level::Level::get(3).unwrap();
    let mut o = hoard_writer::CreateOptions::at_level(tree, image.clone(), level);
    o.encrypt = Some(std::sync::Arc::new(
        hoard_trust::encrypt::Recipients::parse(&[recipient]).unwrap(),
    ));
    hoard_writer::create(&o, &Default::default(), Default::default()).unwrap();

    assert_eq!(read(&image, &id).unwrap(), b"encrypted bytes");
    let refused = read(&image, &wrong).unwrap_err();
    assert!(refused.contains("no identity given opens"), "{refused}");
}
