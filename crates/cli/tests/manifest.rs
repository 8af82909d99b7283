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
    let same = hoard_ok(&["diff", s(&a), s(&b), "--ignore", "mtime,mtime_ns"]);
    assert!(same.is_empty(), "{same}");

    // Times are left out: the two roots' times differ whenever a clock
    // tick fell between their writes.
    std::fs::write(b.join("f"), b"other!").unwrap();
    let changed = run(&["diff", s(&a), s(&b), "-q", "--ignore", "mtime,mtime_ns"]);
    assert_eq!(changed.status.code(), Some(1));
    let out = String::from_utf8_lossy(&changed.stdout);
    assert!(
        out.starts_with("differs: f:") && out.contains("size 4 -> 6"),
        "{out}"
    );

    let missing = dir.path().join("missing");
    // Trouble is 2, as with diff(1): 1 would say "different".
    let err = run(&["diff", a.to_str().unwrap(), missing.to_str().unwrap()]);
    assert_eq!(err.status.code(), Some(2));
    let text = String::from_utf8_lossy(&err.stderr);
    assert_eq!(text.trim_end().lines().count(), 1, "{text}");
    assert!(text.contains("missing"), "{text}");

    let bogus = run(&["diff", s(&a), s(&b), "--ignore", "colour"]);
    assert_eq!(bogus.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bogus.stderr).contains("unknown field 'colour'"));
    assert_eq!(run(&["diff", a.to_str().unwrap()]).status.code(), Some(2));

    let bad_manifest = dir.path().join("bad.manifest");
    std::fs::write(&bad_manifest, "{\"path\": 3}\n").unwrap();
    let bad = run(&["manifest", bad_manifest.to_str().unwrap()]);
    assert_eq!(bad.status.code(), Some(1));
    let text = String::from_utf8_lossy(&bad.stderr);
    assert!(
        text.contains("bad.manifest") && text.contains("line 1"),
        "{text}"
    );
    let bad = run(&["diff", bad_manifest.to_str().unwrap(), a.to_str().unwrap()]);
    assert_eq!(bad.status.code(), Some(2));
    let text = String::from_utf8_lossy(&bad.stderr);
    assert!(
        text.trim_end().lines().count() == 1 && text.contains("bad.manifest"),
        "{text}"
    );
}

#[test]
fn diff_of_an_image_and_a_tree_names_every_kind_of_difference() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir(&src).unwrap();
    sh(
        &src,
        "mkdir sub && echo hello > sub/file && echo keep > kept && ln -s kept link \
         && setfattr -n user.note -v yes kept \
         && find . -exec touch -h -d 2024-05-06T07:08:09 {} +",
    );
    let image = dir.path().join("src.dwarfs");
    create_image(&src, &image, &[]);
    let diff = |tree: &std::path::Path| {
        let o = run(&[
            "diff",
            image.to_str().unwrap(),
            tree.to_str().unwrap(),
            "-q",
        ]);
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stdout).into_owned(),
        )
    };
    assert_eq!(diff(&src), (Some(0), String::new()), "the exact tree");

    // Each change on a copy of the tree, and the line `hoard diff` prints.
    let mut changes = vec![
        ("rm sub/file", "only in first: sub/file"),
        ("echo new > extra", "only in second: extra"),
        (
            "echo hullo > sub/file && touch -d 2024-05-06T07:08:09 sub/file",
            "differs: sub/file: sha256",
        ),
        ("chmod 600 kept", "differs: kept: mode \"0644\" -> \"0600\""),
        ("touch -d 2020-01-01 kept", "differs: kept: mtime"),
        (
            "ln -sfn sub link && touch -h -d 2024-05-06T07:08:09 link",
            "differs: link: size 4 -> 3, target \"kept\" -> \"sub\"",
        ),
        (
            "setfattr -n user.note -v no kept",
            "differs: kept: xattrs {\"user.note\":\"yes\"} -> {\"user.note\":\"no\"}",
        ),
        (
            "setfattr -x user.note kept",
            "differs: kept: xattrs {\"user.note\":\"yes\"} -> (none)",
        ),
    ];
    if is_root() {
        changes.push((
            "chown 12:34 kept",
            "differs: kept: uid 0 -> 12, gid 0 -> 34",
        ));
    }
    for (i, (script, expected)) in changes.iter().enumerate() {
        let copy = dir.path().join(format!("copy{i}"));
        sh(
            dir.path(),
            &format!("cp -a src {}", copy.file_name().unwrap().to_str().unwrap()),
        );
        sh(&copy, script);
        let (code, out) = diff(&copy);
        // Adding or removing an entry changes its directory's time; that
        // is not the difference under test.
        let lines: Vec<_> = out
            .lines()
            .filter(|l| {
                !l.starts_with("differs: .: mtime") && !l.starts_with("differs: sub: mtime")
            })
            .collect();
        assert_eq!(code, Some(1), "{script}: {out}");
        assert!(
            lines.len() == 1 && lines[0].starts_with(expected),
            "{script}: expected {expected:?}, got:\n{out}"
        );
    }
}
