//! `hoard manifest` and `hoard diff`: equal trees compare equal, a changed
//! entry is reported, and bad input is a one-line error naming it.

mod common;

use common::*;

#[test]
fn diff_reports_changes_and_bad_input_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    for t in [&a, &b] {
        std::fs::create_dir(t).unwrap();
        std::fs::write(t.join("f"), b"same").unwrap();
    }
    let same = run(&[
        "diff",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--ignore",
        "mtime,mtime_ns",
    ]);
    assert_eq!(
        same.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&same.stderr)
    );
    assert!(same.stdout.is_empty());

    std::fs::write(b.join("f"), b"other!").unwrap();
    let changed = run(&["diff", a.to_str().unwrap(), b.to_str().unwrap(), "-q"]);
    assert_eq!(changed.status.code(), Some(1));
    let out = String::from_utf8_lossy(&changed.stdout);
    assert!(
        out.starts_with("differs: f:") && out.contains("size 4 -> 6"),
        "{out}"
    );

    let missing = dir.path().join("missing");
    let err = run(&["diff", a.to_str().unwrap(), missing.to_str().unwrap()]);
    assert_eq!(err.status.code(), Some(1));
    let text = String::from_utf8_lossy(&err.stderr);
    assert_eq!(text.trim_end().lines().count(), 1, "{text}");
    assert!(text.contains("missing"), "{text}");

    let bogus = run(&[
        "diff",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--ignore",
        "colour",
    ]);
    assert_eq!(bogus.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&bogus.stderr).contains("unknown field 'colour'"));

    let bad_manifest = dir.path().join("bad.manifest");
    std::fs::write(&bad_manifest, "{\"path\": 3}\n").unwrap();
    let bad = run(&["manifest", bad_manifest.to_str().unwrap()]);
    assert_eq!(bad.status.code(), Some(1));
    let text = String::from_utf8_lossy(&bad.stderr);
    assert!(
        text.contains("bad.manifest") && text.contains("line 1"),
        "{text}"
    );
}
