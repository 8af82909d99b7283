//! Helpers shared by the integration tests: where the DwarFS-made test
//! images are, how to run the `hoard` binary, and manifest comparison.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

#[allow(unused_imports)]
pub use hoard_testdata::{image, images, images_with_manifest, shared, skipped, tree_with};

pub mod oci;

/// A `hoard` command.
pub fn hoard() -> Command {
    Command::new(env!("CARGO_BIN_EXE_hoard"))
}

/// Runs `hoard` with `args`, returning its output.
pub fn run(args: &[&str]) -> Output {
    hoard().args(args).output().expect("run hoard")
}

/// `hoard diff A B [--ignore FIELDS]`: the differences between two
/// trees or images, empty when none (a failing diff fails the test).
pub fn differences(a: &Path, b: &Path, ignore: &str) -> String {
    let mut args = vec!["diff", a.to_str().unwrap(), b.to_str().unwrap()];
    if !ignore.is_empty() {
        args.extend(["--ignore", ignore]);
    }
    let out = run(&args);
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "hoard diff: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// [`differences`] but for sub-second times (images made at a
/// resolution of seconds keep whole seconds); empty if none.
pub fn same_to_the_second(a: &Path, b: &Path) -> String {
    differences(a, b, "mtime_ns")
}

/// [`differences`] between an image and a tree unpacked from it (or
/// from its archive) but for the root's own attributes, which are the
/// unpacker's business; empty if none.
pub fn differences_below_root(image: &Path, dir: &Path, ignore: &str) -> String {
    differences(image, dir, ignore)
        .lines()
        .filter(|l| !l.starts_with("differs: .: "))
        .map(|l| format!("{l}\n"))
        .collect()
}

/// Whether FUSE mounts can be made here (`/dev/fuse` and `fusermount3`);
/// records the skip when not.
pub fn fuse_available() -> bool {
    let ok = Path::new("/dev/fuse").exists()
        && Command::new("fusermount3")
            .arg("-V")
            .output()
            .is_ok_and(|o| o.status.success());
    if !ok {
        skipped("/dev/fuse or fusermount3 missing: no FUSE mounts");
    }
    ok
}

/// Whether the tests run as root (owners and devices can be restored).
pub fn is_root() -> bool {
    unsafe { libc::geteuid() == 0 }
}

/// Whether `program` is on `PATH` (asking the tool itself does not work
/// for all: `unzip --version` fails).
pub fn has_tool(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
}

/// Runs the shell `script` in `dir`, asserting that it succeeds.
pub fn sh(dir: &Path, script: &str) {
    let o = Command::new("sh")
        .args(["-ec", script])
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{script}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// A command running `program` as user and group `id` (the caller must be
/// root) from inside `dir`: the child enters `dir` while still root and
/// only then drops to `id`, so `program` (`./hoard` after
/// [`hoard_copy_in`]) and the paths given to it, relative to `dir`, need
/// only be reachable from `dir`, not through the checkout, `target/`,
/// `$HOME` or the temporary directory, whatever their modes. `dir` itself
/// must let `id` search it.
pub fn as_user_in(id: u32, dir: &Path, program: &str) -> Command {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::process::CommandExt;
    let dir = std::ffi::CString::new(dir.as_os_str().as_bytes()).unwrap();
    let mut cmd = Command::new(program);
    // SAFETY: chdir, setgroups, setgid and setuid are async-signal-safe;
    // `dir` was allocated before the fork.
    unsafe {
        cmd.pre_exec(move || {
            if libc::chdir(dir.as_ptr()) != 0
                || libc::setgroups(0, std::ptr::null()) != 0
                || libc::setgid(id) != 0
                || libc::setuid(id) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd
}

/// Copies the `hoard` binary into `dir` as `hoard` (mode 0755), for
/// [`as_user_in`] to run as `./hoard`. The copy is written by another
/// process (`install`): written by this one, a child another test thread
/// forks meanwhile could hold the file open for writing until it execs,
/// and running the copy would then fail with "Text file busy".
pub fn hoard_copy_in(dir: &Path) {
    let copy = dir.join("hoard");
    let status = Command::new("install")
        .args(["-m", "0755", env!("CARGO_BIN_EXE_hoard")])
        .arg(&copy)
        .status()
        .expect("run install");
    assert!(status.success(), "install {}: {status}", copy.display());
}

/// The manifest of a tree (or image), made by `hoard manifest`.
pub fn manifest_of(root: &Path) -> String {
    let out = run(&["manifest", root.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "hoard manifest failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn parse(manifest: &str) -> Vec<serde_json::Value> {
    manifest
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// What a comparison may ignore.
///
/// In format 2.2 and older images each hard link of a file carries its own
/// inode data, and DwarFS shows a different mtime per link; one inode has
/// one mtime in a kernel or on a disk, so for hard-link groups where the
/// manifest itself shows several mtimes, mtime is not compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compare {
    /// A mounted tree.
    Mounted,
    /// An extracted tree: also, Linux gives every symlink mode 0777 while
    /// DwarFS shows the stored mode, so symlink modes are not compared.
    Extracted,
}

/// Normalizes manifest lines for comparison: without root, owners and
/// device nodes cannot be restored, so they are left out.
fn comparable(
    manifest: &str,
    how: Compare,
    mixed_groups: &std::collections::HashSet<String>,
) -> Vec<String> {
    let mut entries = parse(manifest);
    for v in &mut entries {
        let o = v.as_object_mut().unwrap();
        if how == Compare::Extracted && o["type"] == "l" {
            o.remove("mode");
        }
        if o["link"].as_str().is_some_and(|l| mixed_groups.contains(l)) {
            o.remove("mtime");
        }
    }
    entries
        .into_iter()
        .filter_map(|mut v| {
            if !is_root() {
                if matches!(v["type"].as_str(), Some("c" | "b")) {
                    return None;
                }
                let o = v.as_object_mut().unwrap();
                o.remove("uid");
                o.remove("gid");
            }
            Some(v.to_string())
        })
        .collect()
}

/// `manifest` with the extended attributes left out: what a tool that
/// does not restore them (DwarFS's) gives.
pub fn without_xattrs(manifest: &str) -> String {
    parse(manifest)
        .into_iter()
        .map(|mut v| {
            v.as_object_mut().unwrap().remove("xattrs");
            format!("{v}\n")
        })
        .collect()
}

/// Differences between two manifests, as a short report (empty if equal).
pub fn manifest_diff(expected: &str, actual: &str, how: Compare) -> String {
    let mut group_mtimes: std::collections::HashMap<String, std::collections::HashSet<i64>> =
        Default::default();
    for v in parse(expected) {
        if let Some(link) = v["link"].as_str() {
            group_mtimes
                .entry(link.to_string())
                .or_default()
                .insert(v["mtime"].as_i64().unwrap());
        }
    }
    let mixed = group_mtimes
        .into_iter()
        .filter(|(_, t)| t.len() > 1)
        .map(|(l, _)| l)
        .collect();
    let (e, a) = (
        comparable(expected, how, &mixed),
        comparable(actual, how, &mixed),
    );
    if e == a {
        return String::new();
    }
    let es: std::collections::BTreeSet<&String> = e.iter().collect();
    let as_: std::collections::BTreeSet<&String> = a.iter().collect();
    let mut report = String::new();
    for l in es.difference(&as_).take(5) {
        report += &format!("  expected: {l}\n");
    }
    for l in as_.difference(&es).take(5) {
        report += &format!("  got:      {l}\n");
    }
    if report.is_empty() {
        report = "  same lines, different order\n".into();
    }
    report
}

/// Pseudo-random bytes (xorshift64), the same for the same `seed`; seeds
/// differing only in the lowest bit give the same bytes.
pub fn noise(n: usize, seed: u64) -> Vec<u8> {
    hoard_testdata::noise(n, seed | 1)
}

/// A zip archive (as a jar is) of `members` deflated members of about 1.6
/// KiB each: some text and mostly noise, so that most of the archive is
/// data no compressor shrinks, as in a real one.
pub fn zip_archive(members: usize, seed: u64) -> Vec<u8> {
    use std::io::Write;
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let deflated = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    for i in 0..members {
        zip.start_file(format!("org/example/pkg{}/Class{i}.java", i % 7), deflated)
            .unwrap();
        let text = format!("/* member {i} */ public class Class{i} {{ }}\n").repeat(40);
        zip.write_all(text.as_bytes()).unwrap();
        zip.write_all(&noise(1500, seed.wrapping_add(i as u64)))
            .unwrap();
    }
    zip.finish().unwrap().into_inner()
}

/// The DwarFS tools' folder, after `setup.sh` when they do not start;
/// None (recorded as a skip of the calling test) when `../shared` or the
/// tools are missing.
pub fn dwarfs_bin() -> Option<PathBuf> {
    static BIN: OnceLock<Result<PathBuf, &'static str>> = OnceLock::new();
    let found = BIN.get_or_init(|| {
        let Some(shared) = shared() else {
            return Err("../shared not found");
        };
        let anchor = shared.join("anchors/dwarfs-0.15.3");
        let bin = anchor.join("bin");
        let starts = || {
            Command::new(bin.join("dwarfsck"))
                .arg("--help")
                .output()
                .is_ok_and(|o| o.status.success())
        };
        if !starts() && anchor.join("setup.sh").exists() {
            let setup = Command::new("sh").arg(anchor.join("setup.sh")).output();
            eprintln!("note: ran setup.sh for the DwarFS tools: {setup:?}");
        }
        if starts() {
            Ok(bin)
        } else {
            Err("DwarFS 0.15.3 tools in ../shared do not start")
        }
    });
    match found {
        Ok(bin) => Some(bin.clone()),
        Err(why) => {
            skipped(why);
            None
        }
    }
}

/// A command running DwarFS tool `name`; only when [`dwarfs_bin`] found
/// them (without `../shared` the caller skips).
pub fn tool(name: &str) -> Command {
    let bin = dwarfs_bin().expect("DwarFS's tools are missing: check dwarfs_bin() first");
    Command::new(bin.join(name))
}

/// Has DwarFS's own tools check `image` (`dwarfsck --check-integrity`)
/// and extract it into `into` (made here), asserting both succeed.
pub fn dwarfs_check_and_extract(image: &Path, into: &Path) {
    for (what, args) in [
        (
            "dwarfsck",
            vec![
                "--check-integrity".as_ref(),
                "-i".as_ref(),
                image.as_os_str(),
            ],
        ),
        (
            "dwarfsextract",
            vec![
                "-i".as_ref(),
                image.as_os_str(),
                "-o".as_ref(),
                into.as_os_str(),
            ],
        ),
    ] {
        if what == "dwarfsextract" {
            std::fs::create_dir_all(into).unwrap();
        }
        let out = tool(what).args(&args).output().unwrap();
        assert!(
            out.status.success(),
            "{what} {}: {}",
            image.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// A copy of `image` at `out` with one byte of the `nth` section of
/// `kind` changed and its header hashes made to match again, as an
/// attacker would (only a signature tells then).
pub fn tampered(
    image: &Path,
    out: &Path,
    kind: hoard_format::section::SectionType,
    nth: usize,
) -> PathBuf {
    let img = hoard_reader::Image::open(image, &Default::default()).unwrap();
    let section = img
        .sections()
        .iter()
        .filter(|s| s.header.kind == kind)
        .nth(nth)
        .unwrap()
        .clone();
    let mut bytes = std::fs::read(image).unwrap();
    tamper_section(&mut bytes[section.offset as usize..section.end() as usize]);
    std::fs::write(out, bytes).unwrap();
    out.to_path_buf()
}

/// Changes one payload byte of the v2 section `bytes` (header and
/// payload) and makes its header hashes match again.
pub fn tamper_section(bytes: &mut [u8]) {
    let mid = (bytes.len() + hoard_format::section::V2_HEADER_SIZE) / 2;
    bytes[mid] ^= 0x01;
    rehash(bytes);
}

/// Makes the header hashes (XXH3-64 and SHA-512/256) of the v2 section
/// `bytes` (header and payload) match its fields and payload again, as
/// an attacker would after changing either.
pub fn rehash(bytes: &mut [u8]) {
    use hoard_format::section::{Compression, SectionType, V2_HEADER_SIZE};
    let (header, payload) = bytes.split_at_mut(V2_HEADER_SIZE);
    let number = u32::from_le_bytes(header[48..52].try_into().unwrap());
    let kind = SectionType(u16::from_le_bytes(header[52..54].try_into().unwrap()));
    let compression = Compression(u16::from_le_bytes(header[54..56].try_into().unwrap()));
    let fixed = hoard_format::section::encode_header_v2(number, kind, compression, payload);
    header[8..].copy_from_slice(&fixed[8..]);
}

/// The tamper toolkit: an image file cut into its sections, to be
/// changed as an attacker would (sections retyped, dropped, reordered,
/// duplicated, spliced in from another image), then written back by
/// [`SectionList::write`] with every section renumbered, its header
/// hashes made to match and the section index rebuilt, so that only a
/// seal or a signature can tell.
#[derive(Clone)]
pub struct SectionList {
    /// The bytes before the first section (`--header`).
    pub prefix: Vec<u8>,
    /// Each section before the section index, header and payload.
    pub sections: Vec<Vec<u8>>,
    /// What follows the section index (signature, recovery data), as it is.
    pub tail: Vec<u8>,
}

impl SectionList {
    /// The sections of the (v2.2+, indexed) image file `image`.
    pub fn read(image: &Path) -> Self {
        use hoard_format::section::SectionType;
        let img = hoard_reader::Image::open(image, &Default::default()).unwrap();
        let bytes = std::fs::read(image).unwrap();
        let listed = img.sections();
        let index = listed
            .iter()
            .position(|s| s.header.kind == SectionType::SECTION_INDEX)
            .expect("a section index");
        let range = |s: &hoard_reader::Section| s.offset as usize..s.end() as usize;
        SectionList {
            prefix: bytes[..img.offset() as usize].to_vec(),
            sections: listed[..index]
                .iter()
                .map(|s| bytes[range(s)].to_vec())
                .collect(),
            tail: bytes[listed[index].end() as usize..].to_vec(),
        }
    }

    /// The type of section `i`.
    pub fn kind(&self, i: usize) -> hoard_format::section::SectionType {
        let h = &self.sections[i];
        hoard_format::section::SectionType(u16::from_le_bytes([h[52], h[53]]))
    }

    /// Where the `nth` section of type `kind` is.
    pub fn nth(&self, kind: hoard_format::section::SectionType, nth: usize) -> usize {
        (0..self.sections.len())
            .filter(|&i| self.kind(i) == kind)
            .nth(nth)
            .expect("so many sections of that type")
    }

    /// Gives section `i` type `kind`.
    pub fn retype(&mut self, i: usize, kind: hoard_format::section::SectionType) {
        self.sections[i][52..54].copy_from_slice(&kind.0.to_le_bytes());
    }

    /// Writes the image to `out`: the prefix, the sections numbered in
    /// order with their hashes made to match, a section index listing
    /// them, then the tail.
    pub fn write(&self, out: &Path) -> PathBuf {
        use hoard_format::section::{encode_index_entry, Compression, IndexEntry, SectionType};
        let mut bytes = self.prefix.clone();
        let mut entries = Vec::new();
        let mut offset = 0u64;
        for (i, section) in self.sections.iter().enumerate() {
            let mut section = section.clone();
            section[48..52].copy_from_slice(&(i as u32).to_le_bytes());
            rehash(&mut section);
            entries.push(IndexEntry {
                kind: self.kind(i),
                offset,
            });
            offset += section.len() as u64;
            bytes.extend_from_slice(&section);
        }
        entries.push(IndexEntry {
            kind: SectionType::SECTION_INDEX,
            offset,
        });
        let payload: Vec<u8> = entries
            .iter()
            .flat_map(|e| encode_index_entry(*e).to_le_bytes())
            .collect();
        let number = self.sections.len() as u32;
        let header = hoard_format::section::encode_header_v2(
            number,
            SectionType::SECTION_INDEX,
            Compression::NONE,
            &payload,
        );
        bytes.extend_from_slice(&header);
        bytes.extend_from_slice(&payload);
        bytes.extend_from_slice(&self.tail);
        std::fs::write(out, bytes).unwrap();
        out.to_path_buf()
    }
}

/// A copy of `image` (which has recovery data) at `out` whose recovery
/// data was built over its bytes as `change` leaves them: recovery data
/// that "repairs" genuine bytes into the changed ones.
pub fn with_recovery_of(image: &Path, out: &Path, change: impl FnOnce(&mut Vec<u8>)) -> PathBuf {
    let bytes = std::fs::read(image).unwrap();
    let recovery = hoard_recovery::Recovery::find(&bytes).expect("recovery data");
    let layout = *recovery.layout();
    let start = layout.section_start() as usize;
    let mut changed = bytes[..start].to_vec();
    change(&mut changed);
    let built = hoard_recovery::build_section(&layout, &changed).unwrap();
    let mut forged = bytes[..start].to_vec();
    forged.extend_from_slice(&built.bytes);
    std::fs::write(out, forged).unwrap();
    out.to_path_buf()
}

/// Reads each of `files` (paths in the image, whose contents are the
/// files of the same path below `tree`) with `hoard cat IMAGE FILE
/// ARGS...`, and fails if any read gives other bytes than the file's,
/// or if every read succeeds (the change went unnoticed). Returns the
/// first error.
pub fn assert_refused_never_wrong(
    image: &Path,
    files: &[String],
    tree: &Path,
    args: &[&str],
) -> String {
    let mut first_error = None;
    for file in files {
        let mut cat = vec!["cat", image.to_str().unwrap(), file.as_str()];
        cat.extend_from_slice(args);
        let out = run(&cat);
        if out.status.success() {
            assert!(
                out.stdout == std::fs::read(tree.join(file)).unwrap(),
                "{}: {file} read as other bytes",
                image.display()
            );
        } else {
            first_error.get_or_insert_with(|| String::from_utf8_lossy(&out.stderr).into_owned());
        }
    }
    first_error.unwrap_or_else(|| panic!("{}: every read succeeded", image.display()))
}

/// Which of `paths` (regular files in `image`) have data in block `block`.
pub fn files_using_block(
    image: &Path,
    paths: &[String],
    block: u32,
) -> std::collections::BTreeSet<String> {
    use hoard_reader::{Extent, Filesystem, FsOptions};
    let fs = Filesystem::open(image, &FsOptions::default()).unwrap();
    paths
        .iter()
        .filter(|path| {
            let ino = fs.lookup_path(path).unwrap();
            fs.extents(ino)
                .unwrap()
                .iter()
                .any(|e| matches!(e, Extent::Data { block: b, .. } if *b == block))
        })
        .cloned()
        .collect()
}

/// Unmounts a FUSE mount (lazily if it is busy) when dropped.
pub struct FuseMount(pub std::path::PathBuf);

impl Drop for FuseMount {
    fn drop(&mut self) {
        let unmounted = Command::new("fusermount3")
            .arg("-u")
            .arg(&self.0)
            .output()
            .is_ok_and(|o| o.status.success());
        if !unmounted {
            let _ = Command::new("fusermount3").arg("-uz").arg(&self.0).output();
        }
    }
}

/// Checks every entry below `src` against the image through the `dwarfs`
/// crate, an independent reader.
pub fn oracle_compare(
    src: &Path,
    rel: &[String],
    index: &dwarfs::ArchiveIndex,
    archive: &mut dwarfs::Archive<std::fs::File>,
) {
    use dwarfs::{AsChunks, InodeKind};
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let m = std::fs::symlink_metadata(src).unwrap();
    let inode = index
        .get_path(rel.iter().map(String::as_str))
        .unwrap_or_else(|| panic!("dwarfs crate: {rel:?} missing"));
    let meta = inode.metadata();
    let what = format!("{rel:?}");
    assert_eq!(
        meta.file_type_mode().mode_bits(),
        m.mode() & 0o7777,
        "{what}: mode"
    );
    assert_eq!(
        (meta.uid(), meta.gid()),
        (m.uid(), m.gid()),
        "{what}: owner"
    );
    assert_eq!(meta.mtime() as i64, m.mtime(), "{what}: mtime");
    match inode.classify() {
        InodeKind::Directory(dir) => {
            let mut names: Vec<String> = std::fs::read_dir(src)
                .unwrap()
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .collect();
            names.sort();
            let listed: Vec<String> = dir.entries().map(|e| e.name().to_string()).collect();
            assert_eq!(listed, names, "{what}: entries");
            for name in names {
                let mut r = rel.to_vec();
                r.push(name.clone());
                oracle_compare(&src.join(&name), &r, index, archive);
            }
        }
        InodeKind::File(f) => {
            let data = f.read_to_vec(archive).unwrap();
            assert!(data == std::fs::read(src).unwrap(), "{what}: contents");
        }
        InodeKind::Symlink(l) => {
            let target = std::fs::read_link(src).unwrap();
            assert_eq!(l.target(), target.to_str().unwrap(), "{what}: target");
        }
        InodeKind::Device(d) => assert_eq!(d.device_id(), m.rdev(), "{what}: rdev"),
        InodeKind::Ipc(_) => assert!(m.file_type().is_fifo() || m.file_type().is_socket()),
        other => panic!("{what}: unexpected kind {other:?}"),
    }
}

/// A ustar header for `name` of type `kind` claiming `size` bytes (sizes
/// past the octal field in base-256).
pub fn ustar_header(name: &str, kind: u8, size: u64) -> Vec<u8> {
    let mut h = vec![0u8; 512];
    h[..name.len()].copy_from_slice(name.as_bytes());
    h[100..108].copy_from_slice(b"0000644\0");
    h[108..116].copy_from_slice(b"0000000\0");
    h[116..124].copy_from_slice(b"0000000\0");
    if size < 0o77777777777 {
        h[124..136].copy_from_slice(format!("{size:011o}\0").as_bytes());
    } else {
        h[124] = 0x80;
        h[128..136].copy_from_slice(&size.to_be_bytes());
    }
    h[136..148].copy_from_slice(b"14510677540\0");
    h[156] = kind;
    h[257..263].copy_from_slice(b"ustar\0");
    h[263..265].copy_from_slice(b"00");
    h[148..156].copy_from_slice(b"        ");
    let sum: u32 = h.iter().map(|&b| u32::from(b)).sum();
    h[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
    h
}

/// Two versions of a tree in `dir`, `old` and `new` (returned in that
/// order): `new` is `old` with a file appended to, one edited in the
/// middle, one removed, and one added made of pieces of two others, so
/// that nearly all of its new bytes are in `old` (delta layers).
pub fn versioned_trees(dir: &Path) -> (PathBuf, PathBuf) {
    let (old, new) = (dir.join("old"), dir.join("new"));
    std::fs::create_dir_all(old.join("sub")).unwrap();
    for i in 0..12u64 {
        let sub = if i % 3 == 0 { "sub" } else { "" };
        let name = old.join(sub).join(format!("f{i:02}"));
        std::fs::write(name, noise(64 << 10, i + 1)).unwrap();
    }
    std::fs::write(old.join("text"), b"line one\nline two\n").unwrap();
    std::fs::create_dir_all(new.join("sub")).unwrap();
    for entry in walkdir(&old) {
        let rel = entry.strip_prefix(&old).unwrap();
        std::fs::copy(&entry, new.join(rel)).unwrap();
    }
    let mut appended = std::fs::read(new.join("f01")).unwrap();
    appended.extend_from_slice(b"a line appended today\n");
    std::fs::write(new.join("f01"), appended).unwrap();
    let mut edited = std::fs::read(new.join("f02")).unwrap();
    edited[30_000..30_010].copy_from_slice(b"0123456789");
    std::fs::write(new.join("f02"), edited).unwrap();
    std::fs::remove_file(new.join("f04")).unwrap();
    let mut added = std::fs::read(old.join("f05")).unwrap()[..40_000].to_vec();
    added.extend_from_slice(&std::fs::read(old.join("f07")).unwrap()[10_000..]);
    std::fs::write(new.join("sub/added"), added).unwrap();
    (old, new)
}

/// The regular files below `root`, recursively, sorted.
pub fn walkdir(root: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let kind = std::fs::symlink_metadata(&path).unwrap().file_type();
            if kind.is_dir() {
                dirs.push(path);
            } else if kind.is_file() {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// Asserts that `actual` holds the same regular files as `expected`, byte
/// for byte.
pub fn assert_same_files(expected: &Path, actual: &Path) {
    let rel = |root: &Path| -> Vec<PathBuf> {
        walkdir(root)
            .iter()
            .map(|p| p.strip_prefix(root).unwrap().to_path_buf())
            .collect()
    };
    let names = rel(expected);
    assert_eq!(names, rel(actual), "file names differ");
    for name in names {
        assert!(
            std::fs::read(expected.join(&name)).unwrap()
                == std::fs::read(actual.join(&name)).unwrap(),
            "{} differs",
            name.display()
        );
    }
}

/// An age identity file `dir/name` made by the real `age-keygen`, and its
/// recipient (`age1…`).
pub fn age_identity(dir: &Path, name: &str) -> (PathBuf, String) {
    let path = dir.join(name);
    let out = Command::new("age-keygen")
        .arg("-o")
        .arg(&path)
        .output()
        .expect("age-keygen (scripts/install-deps.sh installs age)");
    assert!(out.status.success(), "age-keygen failed");
    let said = String::from_utf8(out.stderr).unwrap();
    let recipient = said.trim().strip_prefix("Public key: ").unwrap();
    (path, recipient.to_string())
}

/// An OpenSSH key pair `dir/name` and `dir/name.pub` of `kind` (`ed25519`,
/// `rsa`) made by the real `ssh-keygen`, without a passphrase.
pub fn ssh_key_pair(dir: &Path, name: &str, kind: &str) -> (PathBuf, PathBuf) {
    let key = dir.join(name);
    let out = Command::new("ssh-keygen")
        .args(["-q", "-t", kind, "-N", "", "-C", "tests"])
        // RSA at 2048 bits, quick to make.
        .args(if kind == "rsa" {
            &["-b", "2048"][..]
        } else {
            &[]
        })
        .arg("-f")
        .arg(&key)
        .output()
        .expect("ssh-keygen");
    assert!(out.status.success(), "ssh-keygen failed");
    (key.clone(), dir.join(format!("{name}.pub")))
}

// ---------------------------------------------------------------------
// Running hoard and comparing what it made: every test asserts success
// and compares trees through these.
// ---------------------------------------------------------------------

/// Runs `command`, asserting that it succeeds: a failure shows the
/// command line, its exit status and its output (`hoard diff` reports
/// on standard output). Returns its output.
pub fn output_ok(command: &mut Command) -> Output {
    let out = command
        .output()
        .unwrap_or_else(|e| panic!("{command:?}: {e}"));
    assert!(
        out.status.success(),
        "{command:?}: {}\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// `hoard ARGS`, asserting that it succeeds ([`output_ok`]); returns its
/// standard output as text.
pub fn hoard_ok(args: &[&str]) -> String {
    String::from_utf8_lossy(&output_ok(hoard().args(args)).stdout).into_owned()
}

/// `hoard ARGS`, asserting that it succeeds ([`output_ok`]); returns its
/// standard output as bytes (an archive, a file's contents).
pub fn hoard_bytes(args: &[&str]) -> Vec<u8> {
    output_ok(hoard().args(args)).stdout
}

/// `hoard ARGS`, asserting that it fails with exit status 1 (an error,
/// not a crash); returns its standard error as text.
pub fn hoard_fails(args: &[&str]) -> String {
    let out = run(args);
    assert_eq!(
        out.status.code(),
        Some(1),
        "hoard {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// [`hoard_fails`], also asserting that the error is one line; returns
/// it.
pub fn one_line_error(args: &[&str]) -> String {
    let err = hoard_fails(args);
    assert_eq!(err.trim_end().lines().count(), 1, "hoard {args:?}: {err}");
    err
}

/// The standard output of a command that must succeed (`what` names it
/// when it did not).
pub fn ok(out: &Output, what: &str) -> String {
    assert!(
        out.status.success(),
        "{what} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The one-line error of a command that must fail (exit code 1).
pub fn refused(out: &Output, what: &str) -> String {
    assert_eq!(out.status.code(), Some(1), "{what} did not fail");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(err.trim_end().lines().count(), 1, "{what}: {err}");
    err
}

/// A path as the text an argument list takes.
pub fn s(path: &Path) -> &str {
    path.to_str().expect("a UTF-8 path")
}

/// The arguments of `hoard create` packing `tree` into `image` with
/// `extra` options, without progress.
pub fn create_args<'a>(tree: &'a Path, image: &'a Path, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["create", "-i", s(tree), "-o", s(image), "--no-progress"];
    args.extend_from_slice(extra);
    args
}

/// Packs `tree` into `image` with `hoard create` and `extra` options (no
/// progress), asserting that it succeeds; returns `image`.
pub fn create_image(tree: &Path, image: &Path, extra: &[&str]) -> PathBuf {
    hoard_ok(&create_args(tree, image, extra));
    image.to_path_buf()
}

/// `hoard rewrite INPUTS… -o OUTPUT EXTRA…` (no progress), asserting
/// that it succeeds; returns `output`.
pub fn rewrite_image(inputs: &[&str], output: &Path, extra: &[&str]) -> PathBuf {
    let mut args = vec!["rewrite"];
    args.extend_from_slice(inputs);
    args.extend(["-o", s(output), "--no-progress"]);
    args.extend_from_slice(extra);
    hoard_ok(&args);
    output.to_path_buf()
}

/// `hoard extract IMAGES… -o DIR` (`images` may hold options too),
/// asserting that it succeeds; returns `dir`.
pub fn extract_ok(images: &[&str], dir: &Path) -> PathBuf {
    let mut args = vec!["extract"];
    args.extend_from_slice(images);
    args.extend(["-o", s(dir)]);
    hoard_ok(&args);
    dir.to_path_buf()
}

/// Asserts that the manifests `expected` and `actual` agree as `how`
/// compares them ([`manifest_diff`]).
pub fn assert_same_manifest(expected: &str, actual: &str, how: Compare) {
    let d = manifest_diff(expected, actual, how);
    assert!(d.is_empty(), "manifests differ ({how:?}):\n{d}");
}

/// Extracts `images` (and options) into `dir` ([`extract_ok`]) and
/// asserts that the tree there is `manifest`, as far as an extracted
/// tree can be ([`Compare::Extracted`]).
pub fn assert_extracts_as(images: &[&str], dir: &Path, manifest: &str) {
    extract_ok(images, dir);
    assert_same_manifest(manifest, &manifest_of(dir), Compare::Extracted);
}

/// `hoard mount IMAGES… MNT OPTIONS…` (`mnt` made here), asserting that
/// it succeeds; the guard unmounts.
pub fn mount_ok(images: &[&str], mnt: &Path, options: &[&str]) -> FuseMount {
    std::fs::create_dir_all(mnt).unwrap();
    hoard_ok(&[&["mount"], images, &[s(mnt)], options].concat());
    FuseMount(mnt.to_path_buf())
}

/// Asserts that `actual` (a tree, an image or a mount) holds the tree
/// `expected`: the same entries, attributes and bytes ([`differences`]),
/// but for the fields in `ignore`.
pub fn assert_same_tree(expected: &Path, actual: &Path, ignore: &str) {
    let d = differences(expected, actual, ignore);
    assert!(
        d.is_empty(),
        "{} is not {}:\n{d}",
        actual.display(),
        expected.display()
    );
}

/// Mounts `images` at `mnt` and asserts that the mount holds the tree
/// `expected` ([`assert_same_tree`]); the guard unmounts.
pub fn assert_mounts_as(images: &[&str], mnt: &Path, expected: &Path, ignore: &str) -> FuseMount {
    let mounted = mount_ok(images, mnt, &[]);
    assert_same_tree(expected, mnt, ignore);
    mounted
}

/// Copies the tree `from` to `to` with `cp -a` (times, modes and links
/// kept).
pub fn copy_tree(from: &Path, to: &Path) {
    output_ok(Command::new("cp").arg("-a").arg(from).arg(to));
}

/// Runs `test` on every image of `group` that has a manifest (the image
/// and its manifest's text; `test` returns what failed), and fails
/// listing every image something failed on.
pub fn on_every_image(group: &str, test: impl Fn(&Path, &str) -> Vec<String>) {
    let images = images_with_manifest(group);
    let mut failures = Vec::new();
    for (image, manifest) in &images {
        let name = image.file_name().unwrap().to_string_lossy().to_string();
        let expected = std::fs::read_to_string(manifest).unwrap();
        failures.extend(
            test(image, &expected)
                .iter()
                .map(|f| format!("{name}: {f}")),
        );
    }
    assert!(
        failures.is_empty(),
        "{} failures in {} images:\n{}",
        failures.len(),
        images.len(),
        failures.join("\n")
    );
}

/// A new temporary directory for a test that mounts, or `None` (the
/// skip recorded) where FUSE mounts cannot be made.
pub fn fuse_tempdir() -> Option<tempfile::TempDir> {
    fuse_available().then(|| tempfile::tempdir().unwrap())
}

/// [`fuse_tempdir`] with an empty directory `sub` made in it: both, or
/// `None` where FUSE mounts cannot be made.
pub fn fuse_tempdir_with(sub: &str) -> Option<(tempfile::TempDir, PathBuf)> {
    let dir = fuse_tempdir()?;
    let path = dir.path().join(sub);
    std::fs::create_dir(&path).unwrap();
    Some((dir, path))
}

/// The strings of the JSON array `v` (as `hoard info --json` and
/// `hoard check --json` list them).
pub fn json_strings(v: &serde_json::Value) -> Vec<&str> {
    let items = v.as_array().expect("a JSON array");
    items
        .iter()
        .map(|s| s.as_str().expect("a string"))
        .collect()
}

/// A temporary directory with a tree `tree` in it of `count` files of
/// 40 KiB of noise (seeds 1, 2, ...), file `i` at the path `name(i)` in
/// it (its directory made): with 64 KiB blocks (`-S 16`) every block
/// holds parts of two or three of them.
pub fn noise_tree(count: usize, name: impl Fn(usize) -> String) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("tree");
    std::fs::create_dir(&tree).unwrap();
    for i in 0..count {
        let path = tree.join(name(i));
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, noise(40 << 10, i as u64 + 1)).unwrap();
    }
    (dir, tree)
}

/// Writes a bundle of `tree` running `entry` at `out` with `hoard bundle`
/// (`-l1`) and the runtime built beside `hoard`.
pub fn make_bundle(tree: &Path, entry: &str, out: &Path) -> PathBuf {
    hoard_ok(&[
        "bundle",
        "-i",
        s(tree),
        "--entry",
        entry,
        "-o",
        s(out),
        "-l1",
        "--log-level",
        "error",
        "--runtime",
        env!("CARGO_BIN_EXE_hoard-runtime"),
    ]);
    out.to_path_buf()
}

/// Waits (up to 10 s) until `done` holds, asserting that it does then:
/// for what another process finishes after the one the test waited for.
pub fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !done() {
        assert!(
            std::time::Instant::now() < until,
            "still not so after 10 s: {what}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// The mount points in this process's mount namespace under `dir`.
pub fn mounts_under(dir: &Path) -> Vec<String> {
    let table = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let dir = dir.to_str().unwrap();
    table
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .filter(|m| m.starts_with(dir))
        .map(str::to_string)
        .collect()
}

/// Waits until nothing is mounted under `dir` and `dir` is empty: what a
/// bundle's guardian leaves once its entry has exited.
pub fn assert_cleaned_up(dir: &Path) {
    eventually(&format!("no mount under {}", dir.display()), || {
        mounts_under(dir).is_empty()
    });
    eventually(&format!("{} empty", dir.display()), || {
        std::fs::read_dir(dir).unwrap().next().is_none()
    });
}

// ---------------------------------------------------------------------
// Registries: Debian's docker-registry (the CNCF distribution registry)
// on 127.0.0.1, and a proxy that counts the bytes it serves.
// ---------------------------------------------------------------------

/// A free TCP port on 127.0.0.1 (free when asked: the caller binds it
/// soon after).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// A docker-registry serving a temporary directory on 127.0.0.1, killed
/// when dropped.
pub struct RegistryServer {
    child: std::process::Child,
    /// Its port.
    pub port: u16,
    /// Where it keeps blobs and manifests.
    pub storage: tempfile::TempDir,
}

/// The registry program (the `docker-registry` package).
const REGISTRY_BIN: &str = "/usr/bin/docker-registry";

impl RegistryServer {
    /// Starts a registry, or `None` (the skip recorded) when
    /// docker-registry is not installed.
    pub fn start() -> Option<RegistryServer> {
        RegistryServer::start_with(None)
    }

    /// Starts a registry that wants Basic credentials, those of the
    /// htpasswd line `entry` (`user:bcrypt-hash`).
    pub fn start_with_htpasswd(entry: &str) -> Option<RegistryServer> {
        RegistryServer::start_with(Some(entry))
    }

    /// Starts a registry, with the htpasswd line `htpasswd` if given.
    fn start_with(htpasswd: Option<&str>) -> Option<RegistryServer> {
        if !Path::new(REGISTRY_BIN).exists() {
            skipped("docker-registry is not installed (scripts/install-deps.sh)");
            return None;
        }
        let storage = tempfile::tempdir().unwrap();
        let port = free_port();
        let config = storage.path().join("config.yml");
        let auth = match htpasswd {
            Some(entry) => {
                let file = storage.path().join("htpasswd");
                std::fs::write(&file, format!("{entry}\n")).unwrap();
                format!(
                    "auth:\n  htpasswd:\n    realm: hoard-tests\n    path: {}\n",
                    file.display()
                )
            }
            None => String::new(),
        };
        std::fs::write(
            &config,
            format!(
                "version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\n\
                 storage:\n  filesystem:\n    rootdirectory: {}\n\
                 http:\n  addr: 127.0.0.1:{port}\n{auth}",
                storage.path().join("data").display()
            ),
        )
        .unwrap();
        let child = Command::new(REGISTRY_BIN)
            .arg("serve")
            .arg(&config)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start docker-registry");
        let server = RegistryServer {
            child,
            port,
            storage,
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                std::time::Instant::now() < deadline,
                "docker-registry did not start"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        Some(server)
    }

    /// `docker://127.0.0.1:PORT/NAME`.
    pub fn url(&self, name: &str) -> String {
        format!("docker://127.0.0.1:{}/{name}", self.port)
    }

    /// The file holding the blob `digest` (`sha256:…`) in its storage.
    pub fn blob_file(&self, digest: &str) -> PathBuf {
        let hex = digest.strip_prefix("sha256:").expect("a sha256 digest");
        self.storage
            .path()
            .join("data/docker/registry/v2/blobs/sha256")
            .join(&hex[..2])
            .join(hex)
            .join("data")
    }
}

impl Drop for RegistryServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A TCP proxy on 127.0.0.1 in front of `127.0.0.1:upstream` that counts
/// the bytes the upstream sends back; it runs until the test ends.
pub struct CountingProxy {
    /// Its port.
    pub port: u16,
    served: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl CountingProxy {
    /// Starts forwarding to `upstream`.
    pub fn start(upstream: u16) -> CountingProxy {
        use std::sync::atomic::{AtomicU64, Ordering};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let served = std::sync::Arc::new(AtomicU64::new(0));
        let counter = served.clone();
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let Ok(server) = std::net::TcpStream::connect(("127.0.0.1", upstream)) else {
                    continue;
                };
                let counter = counter.clone();
                let (mut c_read, mut s_write) =
                    (client.try_clone().unwrap(), server.try_clone().unwrap());
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut c_read, &mut s_write);
                    let _ = s_write.shutdown(std::net::Shutdown::Write);
                });
                let (mut s_read, mut c_write) = (server, client);
                std::thread::spawn(move || {
                    use std::io::{Read, Write};
                    let mut buf = vec![0u8; 64 << 10];
                    while let Ok(n) = s_read.read(&mut buf) {
                        if n == 0 || c_write.write_all(&buf[..n]).is_err() {
                            break;
                        }
                        counter.fetch_add(n as u64, Ordering::Relaxed);
                    }
                    let _ = c_write.shutdown(std::net::Shutdown::Write);
                });
            }
        });
        CountingProxy { port, served }
    }

    /// Bytes the upstream sent through the proxy so far.
    pub fn served(&self) -> u64 {
        self.served.load(std::sync::atomic::Ordering::Relaxed)
    }
}
