//! Stage 1 for objects in S3 (`hoard create -i s3://bucket/prefix/`): the
//! objects under the prefix become the tree, their keys (less the prefix)
//! the paths, as an archive's members do: each is fetched into a spool
//! beside the output, several at once, in pieces of bounded size
//! (`hoard_remote::objects`). Size and time come from the listing; owner,
//! mode and time from the metadata s3fs, rclone and goofys write, where an
//! object has it: `x-amz-meta-mode` (st_mode in decimal, the file type
//! included; s3fs stores a symlink as an object of mode `S_IFLNK` holding
//! its target), `-uid`, `-gid`, and `-mtime` (seconds, a fraction
//! allowed). A key ending in `/` (a directory marker), or an empty
//! object other keys lie below, is a directory (of mode 0755 and the
//! listing's time: object_store cannot ask for such a key's metadata).

use crate::archive::{Builder, Member, MemberKind, Spool};
use crate::filter::Filter;
use crate::scan::{ScanOptions, ScanProgress, Scanned};
use crate::tree::{Attrs, Time};
use crate::{Error, Result};
use hoard_format::object_attrs::ObjectAttrs;
use hoard_remote::objects::{Bucket, Object};
use hoard_remote::upload::Upload;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

/// Whether `input` names objects in S3 (`s3://bucket/prefix`).
pub fn is_objects(input: &Path) -> bool {
    input.to_str().is_some_and(|s| s.starts_with("s3://"))
}

/// The URL of `input` when it names one remote file, an archive to
/// stream: any `http://` or `https://` URL, and an `s3://bucket/key` not
/// ending in `/` where that object exists (else it is a prefix).
pub fn remote_archive(input: &Path) -> Option<&str> {
    let url = input.to_str()?;
    if url.starts_with("http://") || url.starts_with("https://") {
        return Some(url);
    }
    let (bucket, key) = url.strip_prefix("s3://")?.split_once('/')?;
    if key.is_empty() || key.ends_with('/') {
        return None;
    }
    let remote = hoard_remote::Options::from_env().ok()?;
    let exists = Bucket::new(bucket, &remote).is_ok_and(|b| b.exists(key));
    exists.then_some(url)
}

/// The bucket and prefix (empty, or ending in `/`) of `s3://bucket/prefix`.
fn split_url(url: &str) -> Result<(&str, String)> {
    let rest = url.strip_prefix("s3://").unwrap_or(url);
    let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    if bucket.is_empty() {
        return Err(Error::Input(format!(
            "'{url}' is not of the form s3://bucket/prefix/"
        )));
    }
    let prefix = prefix.trim_matches('/');
    Ok((
        bucket,
        if prefix.is_empty() {
            String::new()
        } else {
            format!("{prefix}/")
        },
    ))
}

/// The bucket and key of `output` when it is an `s3://bucket/key` URL.
pub fn s3_output(output: &Path) -> Option<(&str, &str)> {
    let (bucket, key) = output.to_str()?.strip_prefix("s3://")?.split_once('/')?;
    (!bucket.is_empty() && !key.is_empty() && !key.ends_with('/')).then_some((bucket, key))
}

/// Refuses `s3://bucket/key` as an output when that object exists:
/// asked before a build, so no work is done for an output refused.
pub fn refuse_existing(bucket: &str, key: &str) -> Result<()> {
    let remote = hoard_remote::Options::from_env().map_err(Error::Input)?;
    let store = Bucket::new(bucket, &remote).map_err(Error::Input)?;
    refuse_existing_in(&store, bucket, key)
}

/// [`refuse_existing`] in an open bucket.
fn refuse_existing_in(store: &Bucket, bucket: &str, key: &str) -> Result<()> {
    if store.exists(key) {
        return Err(Error::Input(format!(
            "s3://{bucket}/{key}: already exists (use -f to overwrite)"
        )));
    }
    Ok(())
}

/// Starts uploading `s3://bucket/key` (refused if that object exists,
/// unless `force`; asked again when it completes, as it may appear
/// during the build).
pub fn start_upload(bucket_name: &str, key: &str, force: bool) -> Result<Upload> {
    let remote = hoard_remote::Options::from_env().map_err(Error::Input)?;
    let bucket = Bucket::new(bucket_name, &remote).map_err(Error::Input)?;
    if !force {
        refuse_existing_in(&bucket, bucket_name, key)?;
    }
    Upload::start(bucket, key).map_err(Error::Input)
}

/// What a fetched object left: its spooled contents and user metadata
/// (None: a directory marker).
type Fetched = (PathBuf, Option<Vec<(String, String)>>);

/// The bucket of `url` (`s3://bucket/prefix/`), its prefix and every
/// object under it (an empty prefix is an error).
fn listing(url: &Path) -> Result<(Bucket, String, Vec<Object>)> {
    let text = url.to_string_lossy();
    let (bucket_name, prefix) = split_url(&text)?;
    let remote = hoard_remote::Options::from_env().map_err(Error::Input)?;
    let bucket = Bucket::new(bucket_name, &remote).map_err(Error::Input)?;
    let objects = bucket.list(&prefix).map_err(Error::Input)?;
    if objects.is_empty() {
        return Err(Error::Input(format!(
            "{text}: no objects under this prefix"
        )));
    }
    Ok((bucket, prefix, objects))
}

/// The path below the prefix of each object under `url`
/// (`s3://bucket/prefix/`) and its size, in key order: what
/// `hoard.distributed` plans the shards of a build from.
pub fn list_objects(url: &Path) -> Result<Vec<(String, u64)>> {
    let (_, prefix, objects) = listing(url)?;
    Ok(objects
        .into_iter()
        .map(|o| (o.key[prefix.len()..].trim_matches('/').to_string(), o.size))
        .filter(|(path, _)| !path.is_empty())
        .collect())
}

/// A test hook: a file (a FIFO) read to its end between the listing
/// and the first fetch, where this variable names one, so that a test
/// changes objects there, as during a build, without depending on
/// timing (crates/cli/tests/remote.rs).
const AFTER_LISTING: &str = "HOARD_TEST_AFTER_LISTING";

/// Reads the objects under `url` into a tree (only those of
/// `options.only`, when given: only those are fetched).
pub fn scan_objects(
    url: &Path,
    options: &ScanOptions,
    filter: Option<&Filter>,
    progress: &ScanProgress,
) -> Result<Scanned> {
    let (bucket, prefix, mut objects) = listing(url)?;
    // Whether each object has others below it (a directory), asked of
    // the whole listing before the input list leaves some out.
    let mut below: Vec<bool> = objects
        .iter()
        .map(|o| has_children(&objects, &o.key))
        .collect();
    if let Some(only) = &options.only {
        let wanted = |o: &Object| only.contains(o.key[prefix.len()..].trim_matches('/').as_bytes());
        let keep: Vec<bool> = objects.iter().map(wanted).collect();
        let mut flags = keep.iter();
        objects.retain(|_| *flags.next().unwrap_or(&false));
        let mut flags = keep.iter();
        below.retain(|_| *flags.next().unwrap_or(&false));
    }
    if let Some(fifo) = std::env::var_os(AFTER_LISTING) {
        let _ = std::fs::read(fifo);
    }
    let remote = hoard_remote::Options::from_env().map_err(Error::Input)?;
    let mut spool = Spool::new(options.spool_dir.as_deref())?;
    let fetched = fetch_all(&bucket, &objects, spool.dir()?, remote.connections.max(1))?;
    let mut builder = Builder::new(options, filter, progress, spool);
    for ((object, (source, metadata)), below) in objects.iter().zip(fetched).zip(below) {
        let rel = &object.key[prefix.len()..];
        if rel.trim_matches('/').is_empty() {
            continue;
        }
        let marker = metadata.is_none() || below;
        let attrs = attributes(object, metadata.as_deref().unwrap_or_default(), marker);
        let kind = match attrs.mode & libc::S_IFMT {
            _ if marker => MemberKind::Dir,
            libc::S_IFDIR => MemberKind::Dir,
            libc::S_IFLNK => {
                MemberKind::Symlink(std::fs::read(&source).map_err(|e| Error::io(&source, e))?)
            }
            _ => MemberKind::File {
                source,
                size: object.size,
            },
        };
        let mode_type = match kind {
            MemberKind::Dir => libc::S_IFDIR,
            MemberKind::Symlink(_) => libc::S_IFLNK,
            _ => libc::S_IFREG,
        };
        builder.add(Member {
            path: rel.trim_end_matches('/').as_bytes().to_vec(),
            kind,
            attrs: Attrs {
                mode: mode_type | (attrs.mode & 0o7777),
                ..attrs
            },
            xattrs: Vec::new(),
        })?;
    }
    Ok(builder.finish())
}

/// Whether another key of `objects` (sorted) lies below `key`.
fn has_children(objects: &[Object], key: &str) -> bool {
    let below = format!("{key}/");
    let at = objects.partition_point(|o| o.key.as_str() < below.as_str());
    objects.get(at).is_some_and(|o| o.key.starts_with(&below))
}

/// Fetches every object into a file of `dir`, `workers` at a time; the
/// first failure stops the others and is the error.
fn fetch_all(
    bucket: &Bucket,
    objects: &[Object],
    dir: &Path,
    workers: usize,
) -> Result<Vec<Fetched>> {
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let results: Mutex<Vec<Option<Fetched>>> = Mutex::new(vec![None; objects.len()]);
    let failure: Mutex<Option<Error>> = Mutex::new(None);
    std::thread::scope(|scope| {
        for _ in 0..workers.min(objects.len()) {
            scope.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(object) = objects.get(i) else {
                        return;
                    };
                    match fetch_one(bucket, object, &dir.join(format!("object-{i}"))) {
                        Ok(f) => results.lock().unwrap_or_else(|p| p.into_inner())[i] = Some(f),
                        Err(e) => {
                            stop.store(true, Ordering::Relaxed);
                            failure
                                .lock()
                                .unwrap_or_else(|p| p.into_inner())
                                .get_or_insert(e);
                        }
                    }
                }
            });
        }
    });
    if let Some(e) = failure.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(e);
    }
    results
        .into_inner()
        .unwrap_or_else(|p| p.into_inner())
        .into_iter()
        .map(|f| f.ok_or_else(|| Error::Input("an object was not fetched".into())))
        .collect()
}

/// Fetches `object` into the file `path`.
fn fetch_one(bucket: &Bucket, object: &Object, path: &Path) -> Result<Fetched> {
    let mut file = std::fs::File::create(path).map_err(|e| Error::io(path, e))?;
    let metadata = bucket
        .fetch(object, &mut |bytes| file.write_all(bytes))
        .map_err(Error::Input)?;
    Ok((path.to_path_buf(), metadata))
}

/// The attributes of `object` (a directory when `dir`): from its
/// s3fs/rclone/goofys metadata where it has them, else mode 0644 (0755
/// for a directory), owner 0 and the listing's time.
fn attributes(object: &Object, metadata: &[(String, String)], dir: bool) -> Attrs {
    let given = ObjectAttrs::parse(metadata);
    let default_mode = if dir {
        libc::S_IFDIR | 0o755
    } else {
        libc::S_IFREG | 0o644
    };
    let mode = given.mode.map_or(default_mode, |m| {
        if m & libc::S_IFMT == 0 {
            (default_mode & libc::S_IFMT) | (m & 0o7777)
        } else {
            m
        }
    });
    let (sec, nsec) = given.mtime.unwrap_or(object.modified);
    let mtime = Time { sec, nsec };
    Attrs {
        mode,
        uid: given.uid.unwrap_or(0),
        gid: given.gid.unwrap_or(0),
        atime: mtime,
        mtime,
        ctime: mtime,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(key: &str) -> Object {
        Object {
            key: key.into(),
            size: 1,
            modified: (1_700_000_000, 5),
            etag: None,
        }
    }

    #[test]
    fn urls_split_into_bucket_and_prefix() {
        assert_eq!(split_url("s3://b/a/b/").unwrap(), ("b", "a/b/".into()));
        assert_eq!(split_url("s3://b/a").unwrap(), ("b", "a/".into()));
        assert_eq!(split_url("s3://b").unwrap(), ("b", String::new()));
        assert!(split_url("s3:///x").is_err());
    }

    #[test]
    fn s3fs_metadata_gives_mode_owner_and_time() {
        let meta = vec![
            ("mode".to_string(), "33261".to_string()),
            ("uid".to_string(), "1000".to_string()),
            ("gid".to_string(), "100".to_string()),
            ("mtime".to_string(), "1600000000.5".to_string()),
        ];
        let a = attributes(&object("x"), &meta, false);
        assert_eq!(a.mode, libc::S_IFREG | 0o755);
        assert_eq!((a.uid, a.gid), (1000, 100));
        assert_eq!(
            ({ a.mtime.sec }, { a.mtime.nsec }),
            (1_600_000_000, 500_000_000)
        );
        let plain = attributes(&object("d"), &[], true);
        assert_eq!(plain.mode, libc::S_IFDIR | 0o755);
        assert_eq!({ plain.mtime.sec }, 1_700_000_000);
    }
}
