//! POSIX ACLs written as text (`SCHILY.acl.access` / `SCHILY.acl.default`,
//! what GNU tar `--acls` and star store) turned into the binary
//! `system.posix_acl_access` / `system.posix_acl_default` attribute values
//! Linux keeps, so an image made from such an archive holds what one made
//! from the unpacked tree holds.
//!
//! The text is one entry per line or comma: `TAG:QUALIFIER:PERMS`, with
//! `TAG` `user`, `group`, `mask` or `other` (or `u`, `g`, `m`, `o`), the
//! qualifier a name or a number (star adds the number as a fourth field),
//! `#` starting a comment. Names are looked up on this machine, as GNU tar
//! does when it unpacks.

use std::ffi::CString;

/// The binary form's version (`POSIX_ACL_XATTR_VERSION`).
const VERSION: u32 = 2;
/// Entry tags of the binary form.
const USER_OBJ: u16 = 0x01;
const USER: u16 = 0x02;
const GROUP_OBJ: u16 = 0x04;
const GROUP: u16 = 0x08;
const MASK: u16 = 0x10;
const OTHER: u16 = 0x20;
/// The id of entries that name no user or group.
const NO_ID: u32 = u32::MAX;

/// The attribute value for the ACL `text`, or `None` when no attribute is
/// needed: an empty ACL, or an access ACL of the three entries the mode
/// bits already hold. An entry that cannot be read, or a name unknown here,
/// is an error naming it.
pub fn to_xattr(text: &[u8], default: bool) -> Result<Option<Vec<u8>>, String> {
    let text = std::str::from_utf8(text).map_err(|_| "ACL text is not UTF-8".to_string())?;
    let mut entries = Vec::new();
    for raw in text.split(['\n', ',']) {
        let entry = raw.split('#').next().unwrap_or_default().trim();
        if entry.is_empty() {
            continue;
        }
        entries.push(parse_entry(entry)?);
    }
    if entries.is_empty() {
        return Ok(None);
    }
    let minimal = entries
        .iter()
        .all(|&(tag, _, _)| matches!(tag, USER_OBJ | GROUP_OBJ | OTHER));
    if minimal && !default {
        return Ok(None);
    }
    entries.sort_by_key(|&(tag, id, _)| (tag, id));
    let mut value = VERSION.to_le_bytes().to_vec();
    for (tag, id, perms) in entries {
        value.extend_from_slice(&tag.to_le_bytes());
        value.extend_from_slice(&perms.to_le_bytes());
        value.extend_from_slice(&id.to_le_bytes());
    }
    Ok(Some(value))
}

/// The permission bits of the mask entry of the attribute `value` made by
/// [`to_xattr`], if it has one.
pub fn mask_of(value: &[u8]) -> Option<u16> {
    value.get(4..)?.chunks_exact(8).find_map(|e| {
        (u16::from_le_bytes([e[0], e[1]]) == MASK).then(|| u16::from_le_bytes([e[2], e[3]]))
    })
}

/// One entry: its tag, id and permission bits.
fn parse_entry(entry: &str) -> Result<(u16, u32, u16), String> {
    let bad = || format!("ACL entry '{entry}' cannot be read");
    let fields: Vec<&str> = entry.split(':').collect();
    if !(3..=4).contains(&fields.len()) {
        return Err(bad());
    }
    let (tag, qualifier, perms) = (fields[0], fields[1], fields[2]);
    let numeric = fields.get(3).copied();
    let named = !qualifier.is_empty();
    let (tag, id) = match (tag, named) {
        ("user" | "u", false) => (USER_OBJ, NO_ID),
        ("group" | "g", false) => (GROUP_OBJ, NO_ID),
        ("mask" | "m", false) => (MASK, NO_ID),
        ("other" | "o", false) => (OTHER, NO_ID),
        ("user" | "u", true) => (USER, id_of(qualifier, numeric, false)?),
        ("group" | "g", true) => (GROUP, id_of(qualifier, numeric, true)?),
        _ => return Err(bad()),
    };
    let mut bits = 0u16;
    for (i, c) in perms.chars().enumerate() {
        bits |= match (i, c) {
            (_, '-') => 0,
            (0, 'r') => 4,
            (1, 'w') => 2,
            (2, 'x') => 1,
            _ => return Err(bad()),
        };
    }
    if perms.len() != 3 {
        return Err(bad());
    }
    Ok((tag, id, bits))
}

/// The id a qualifier names: star's number, a number, or a user or group
/// name known here.
fn id_of(qualifier: &str, numeric: Option<&str>, group: bool) -> Result<u32, String> {
    if let Some(id) = numeric.and_then(|n| n.parse().ok()) {
        return Ok(id);
    }
    if let Ok(id) = qualifier.parse() {
        return Ok(id);
    }
    let what = if group { "group" } else { "user" };
    lookup(qualifier, group).ok_or_else(|| format!("unknown {what} '{qualifier}'"))
}

/// The id of the user or group named `name` on this machine.
fn lookup(name: &str, group: bool) -> Option<u32> {
    let cname = CString::new(name).ok()?;
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    // SAFETY: every pointer is valid for the call, `buf` is as long as
    // said, and the result is read only when the call found an entry.
    unsafe {
        if group {
            let mut grp: libc::group = std::mem::zeroed();
            let mut found = std::ptr::null_mut();
            let rc = libc::getgrnam_r(
                cname.as_ptr(),
                &mut grp,
                buf.as_mut_ptr(),
                buf.len(),
                &mut found,
            );
            (rc == 0 && !found.is_null()).then_some(grp.gr_gid)
        } else {
            let mut pwd: libc::passwd = std::mem::zeroed();
            let mut found = std::ptr::null_mut();
            let rc = libc::getpwnam_r(
                cname.as_ptr(),
                &mut pwd,
                buf.as_mut_ptr(),
                buf.len(),
                &mut found,
            );
            (rc == 0 && !found.is_null()).then_some(pwd.pw_uid)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(value: &[u8]) -> Vec<(u16, u16, u32)> {
        assert_eq!(value[..4], VERSION.to_le_bytes());
        value[4..]
            .chunks(8)
            .map(|c| {
                (
                    u16::from_le_bytes([c[0], c[1]]),
                    u16::from_le_bytes([c[2], c[3]]),
                    u32::from_le_bytes([c[4], c[5], c[6], c[7]]),
                )
            })
            .collect()
    }

    #[test]
    fn named_entries_are_sorted_into_the_binary_form() {
        let text = b"user::rw-\nuser:1234:r--\ngroup::r--\ngroup:root:rw-\nmask::rwx\nother::r--\nuser:7:--x\n";
        let v = to_xattr(text, false).unwrap().unwrap();
        assert_eq!(
            entries(&v),
            [
                (USER_OBJ, 6, NO_ID),
                (USER, 1, 7),
                (USER, 4, 1234),
                (GROUP_OBJ, 4, NO_ID),
                (GROUP, 6, 0),
                (MASK, 7, NO_ID),
                (OTHER, 4, NO_ID),
            ]
        );
    }

    #[test]
    fn star_numbers_commas_and_comments_are_read() {
        let v = to_xattr(
            b"u::rwx,u:nosuchuser:r-x:1001 # c,g::---,m::r-x,o::---",
            false,
        )
        .unwrap()
        .unwrap();
        assert_eq!(entries(&v)[1], (USER, 5, 1001));
    }

    #[test]
    fn minimal_access_acls_need_no_attribute_but_default_ones_do() {
        let minimal = b"user::rwx\ngroup::r-x\nother::r-x\n";
        assert_eq!(to_xattr(minimal, false).unwrap(), None);
        assert!(to_xattr(minimal, true).unwrap().is_some());
        assert_eq!(to_xattr(b"", true).unwrap(), None);
    }

    #[test]
    fn bad_entries_and_unknown_names_are_errors() {
        for text in [
            &b"user::rwz"[..],
            b"bogus::rwx",
            b"user::rw",
            b"mask:x:rwx",
            b"user:no-such-user-here:r--",
        ] {
            assert!(to_xattr(text, false).is_err(), "{text:?}");
        }
    }
}
