//! A C program built with the system compiler against `hoard.h` and
//! libhoard, shared and static (found through `hoard.pc`), walks each
//! DwarFS-made test image, reads every file and prints what it found; that
//! must be the image's manifest (the two builds take turns over the
//! images). `examples/c/hoardcat.c` is built and run
//! too.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Where cargo put libhoard.so and libhoard.a for this test run: beside
/// the test binary (`cargo test` leaves them in `deps/`, and copies them
/// up to the profile's directory only for `cargo build`).
fn lib_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().to_path_buf()
}

/// An installed-like tree in `dir/prefix`: include/hoard.h,
/// lib/libhoard.{so,a}, lib/pkgconfig/hoard.pc.
fn install(dir: &Path) {
    let root = dir.join("prefix");
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    std::fs::create_dir_all(root.join("include")).unwrap();
    std::fs::create_dir_all(root.join("lib/pkgconfig")).unwrap();
    std::fs::copy(
        crate_dir.join("include/hoard.h"),
        root.join("include/hoard.h"),
    )
    .unwrap();
    std::fs::copy(
        crate_dir.join("hoard.pc"),
        root.join("lib/pkgconfig/hoard.pc"),
    )
    .unwrap();
    for lib in ["libhoard.so", "libhoard.a"] {
        std::fs::copy(lib_dir().join(lib), root.join("lib").join(lib))
            .unwrap_or_else(|e| panic!("{lib} in {}: {e}", lib_dir().display()));
    }
}

/// Flags from `pkg-config` for the tree at `root`.
fn pkg_config(root: &Path, args: &[&str]) -> Vec<String> {
    let out = Command::new("pkg-config")
        .arg(format!("--define-variable=prefix={}", root.display()))
        .args(args)
        .arg("hoard")
        .env("PKG_CONFIG_PATH", root.join("lib/pkgconfig"))
        .output()
        .expect("pkg-config");
    assert!(
        out.status.success(),
        "pkg-config: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .split_whitespace()
        .map(String::from)
        .collect()
}

/// Compiles `source` (a path relative to this crate) into `dir/name`
/// against the library [`install`]ed in `dir`, linked shared
/// (`static_link` false) or static; returns the program's path.
fn compile(dir: &Path, source: &str, name: &str, static_link: bool) -> PathBuf {
    let root = &dir.join("prefix");
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join(source);
    let output = dir.join(name);
    let mut cmd = Command::new("cc");
    cmd.args(["-O2", "-Wall", "-Werror", "-o"])
        .arg(&output)
        .arg(&source);
    cmd.args(pkg_config(root, &["--cflags"]));
    if static_link {
        for flag in pkg_config(root, &["--static", "--libs"]) {
            if flag == "-lhoard" {
                cmd.arg(root.join("lib/libhoard.a"));
            } else if !flag.starts_with("-L") {
                cmd.arg(flag);
            }
        }
    } else {
        cmd.args(pkg_config(root, &["--libs"]));
        cmd.arg(format!("-Wl,-rpath,{}", root.join("lib").display()));
    }
    let out = cmd.output().expect("cc");
    assert!(
        out.status.success(),
        "cc {}: {}",
        source.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    output
}

fn escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('\n', "\\n")
        .replace('\t', "\\t")
}

/// The manifest as the lines the C program prints, without the mtime of
/// hard links whose manifest shows several (see `mixed_groups`).
fn expected_lines(manifest: &str) -> Vec<String> {
    let entries: Vec<serde_json::Value> = manifest
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let mixed = mixed_groups(&entries);
    let text = |v: &serde_json::Value| match v {
        serde_json::Value::Null => "-".to_string(),
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    entries
        .iter()
        .map(|e| {
            let kind = e["type"].as_str().unwrap();
            let keep_time = !e["link"].as_str().is_some_and(|l| mixed.contains(l));
            let rdev = match e["rdev"].as_array() {
                Some(r) => format!("{},{}", r[0], r[1]),
                None => "-".into(),
            };
            [
                escape(e["path"].as_str().unwrap()),
                kind.to_string(),
                text(&e["mode"]),
                text(&e["uid"]),
                text(&e["gid"]),
                if matches!(kind, "f" | "l") {
                    text(&e["size"])
                } else {
                    "-".into()
                },
                if keep_time {
                    text(&e["mtime"])
                } else {
                    "*".into()
                },
                if keep_time {
                    text(&e["mtime_ns"])
                } else {
                    "*".into()
                },
                if kind == "f" {
                    text(&e["nlink"])
                } else {
                    "-".into()
                },
                rdev,
                e["target"].as_str().map_or("-".into(), escape),
                text(e.get("sha256").unwrap_or(&serde_json::Value::Null)),
            ]
            .join("\t")
        })
        .collect()
}

/// Hard-link groups whose links the manifest shows with different
/// mtimes (format 2.2 and older give each link its own inode data).
fn mixed_groups(entries: &[serde_json::Value]) -> HashSet<String> {
    let mut times: HashMap<&str, HashSet<i64>> = HashMap::new();
    for e in entries {
        if let Some(link) = e["link"].as_str() {
            times
                .entry(link)
                .or_default()
                .insert(e["mtime"].as_i64().unwrap());
        }
    }
    times
        .into_iter()
        .filter(|(_, t)| t.len() > 1)
        .map(|(l, _)| l.to_string())
        .collect()
}

/// The C program's lines, with the mtime of the same links blanked.
fn actual_lines(output: &str, manifest: &str) -> Vec<String> {
    let entries: Vec<serde_json::Value> = manifest
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let mixed = mixed_groups(&entries);
    let blanked: HashSet<String> = entries
        .iter()
        .filter(|e| e["link"].as_str().is_some_and(|l| mixed.contains(l)))
        .map(|e| escape(e["path"].as_str().unwrap()))
        .collect();
    output
        .lines()
        .map(|l| {
            let mut fields: Vec<&str> = l.split('\t').collect();
            if blanked.contains(fields[0]) {
                fields[6] = "*";
                fields[7] = "*";
            }
            fields.join("\t")
        })
        .collect()
}

fn differences(mut expected: Vec<String>, mut actual: Vec<String>) -> String {
    expected.sort();
    actual.sort();
    let e: HashSet<&String> = expected.iter().collect();
    let a: HashSet<&String> = actual.iter().collect();
    let mut report = String::new();
    for l in expected.iter().filter(|l| !a.contains(l)).take(5) {
        report += &format!("  expected: {l}\n");
    }
    for l in actual.iter().filter(|l| !e.contains(l)).take(5) {
        report += &format!("  got:      {l}\n");
    }
    report
}

#[test]
fn c_program_reads_every_image_like_its_manifest() {
    let dir = tempfile::tempdir().unwrap();
    install(dir.path());
    let programs = [("shared", false), ("static", true)].map(|(name, static_link)| {
        let exe = format!("manifest-{name}");
        (
            name,
            compile(dir.path(), "tests/c/manifest.c", &exe, static_link),
        )
    });
    let mut images = Vec::new();
    for group in ["compat", "upstream", "misc"] {
        images.extend(hoard_testdata::images_with_manifest(group));
    }
    assert!(images.len() >= 15, "{} images", images.len());
    let mut failures = Vec::new();
    // Both builds read the first image; then they take turns (each reads
    // every kind of image, in half the time).
    for (i, (image, manifest)) in images.iter().enumerate() {
        let manifest = std::fs::read_to_string(manifest).unwrap();
        let turn = if i == 0 {
            &programs[..]
        } else {
            &programs[i % 2..i % 2 + 1]
        };
        for (name, exe) in turn {
            let out = Command::new(exe).arg(image).output().unwrap();
            let label = format!("{} ({name})", image.display());
            if !out.status.success() {
                failures.push(format!("{label}: {}", String::from_utf8_lossy(&out.stderr)));
                continue;
            }
            let report = differences(
                expected_lines(&manifest),
                actual_lines(&String::from_utf8_lossy(&out.stdout), &manifest),
            );
            if !report.is_empty() {
                failures.push(format!("{label}:\n{report}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn hoardcat_example_prints_a_file() {
    let dir = tempfile::tempdir().unwrap();
    install(dir.path());
    let exe = compile(dir.path(), "../../examples/c/hoardcat.c", "hoardcat", false);
    let image = hoard_testdata::image("compat", "compat-v0.9.10.dwarfs").unwrap();
    let manifest = std::fs::read_to_string(image.with_extension("manifest")).unwrap();
    let file: serde_json::Value = manifest
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|e| e["type"] == "f" && e["size"].as_u64() > Some(1000))
        .expect("a file in the manifest");
    let path = file["path"].as_str().unwrap();
    let out = Command::new(&exe).arg(&image).arg(path).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.stdout.len() as u64, file["size"].as_u64().unwrap());
    let missing = Command::new(&exe)
        .arg(&image)
        .arg("no/such/file")
        .output()
        .unwrap();
    assert_eq!(missing.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("no/such/file"));
}

/// Builds the image `output` of `input`, a delta layer on `bases` when
/// there are any.
fn build(input: &Path, output: &Path, bases: &[PathBuf]) {
    let level = hoard_writer::level::Level::get(3).unwrap();
    let mut o = hoard_writer::CreateOptions::at_level(input.to_path_buf(), output.into(), level);
    o.delta = (!bases.is_empty()).then(|| hoard_writer::delta::DeltaOptions {
        bases: bases.to_vec(),
        trust_mtime: false,
        opaque_dirs: false,
        force_stack: false,
        metacopy: false,
        refer_to_base: true,
    });
    hoard_writer::create(&o, &Default::default(), Default::default()).unwrap();
}

/// Path, kind, size, target and SHA-256 of each entry below `root`, as
/// the C program prints them (its columns 1, 2, 6, 11 and 12).
fn tree_lines(root: &Path) -> Vec<String> {
    use sha2::Digest;
    let mut lines = vec![".\td\t-\t-\t-".to_string()];
    let mut todo = vec![root.to_path_buf()];
    while let Some(dir) = todo.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let rel = path
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            lines.push(if meta.is_dir() {
                todo.push(path);
                format!("{rel}\td\t-\t-\t-")
            } else if meta.is_symlink() {
                let target = std::fs::read_link(&path).unwrap();
                format!("{rel}\tl\t{}\t{}\t-", meta.len(), target.display())
            } else {
                let hash = sha2::Sha256::digest(std::fs::read(&path).unwrap());
                let hex: String = hash.iter().map(|b| format!("{b:02x}")).collect();
                format!("{rel}\tf\t{}\t-\t{hex}", meta.len())
            });
        }
    }
    lines.sort();
    lines
}

#[test]
fn c_program_reads_a_delta_stack_and_refuses_a_wrong_base() {
    let dir = tempfile::tempdir().unwrap();
    install(dir.path());
    let exe = compile(dir.path(), "tests/c/manifest.c", "manifest", false);
    let (old, new) = (dir.path().join("old"), dir.path().join("new"));
    for tree in [&old, &new] {
        std::fs::create_dir_all(tree.join("sub")).unwrap();
        let text: String = (0..4000).map(|i| format!("line {i}\n")).collect();
        std::fs::write(tree.join("sub/text"), text).unwrap();
        std::os::unix::fs::symlink("sub/text", tree.join("link")).unwrap();
    }
    std::fs::write(new.join("sub/text"), "a changed first line\n").unwrap();
    std::fs::write(new.join("added"), "new").unwrap();
    let [base, layer, other] = ["base", "layer", "other"].map(|n| dir.path().join(n));
    build(&old, &base, &[]);
    build(&new, &layer, std::slice::from_ref(&base));
    build(&new, &other, &[]);

    let out = Command::new(&exe).arg(&base).arg(&layer).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut lines: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            [f[0], f[1], f[5], f[10], f[11]].join("\t")
        })
        .collect();
    lines.sort();
    assert_eq!(lines, tree_lines(&new));

    let wrong = Command::new(&exe).arg(&other).arg(&layer).output().unwrap();
    let message = String::from_utf8_lossy(&wrong.stderr);
    assert!(!wrong.status.success());
    assert!(
        message.contains("delta layer") && message.contains("another image"),
        "{message}"
    );
}
