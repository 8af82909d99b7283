//! The command line itself: help, version, generated man pages and shell
//! completions, and error messages that name the file and the operation.

mod common;

use common::{create_image, hoard_fails, hoard_ok, s, tree_with};
use std::path::Path;
use std::process::Command;

/// The commands `hoard --help` lists.
const COMMANDS: [&str; 9] = [
    "create", "rewrite", "check", "ls", "cat", "info", "extract", "mount", "umount",
];

/// The names hoard answers to besides its own, each with its man page.
const PERSONALITIES: [&str; 4] = ["mkdwarfs", "dwarfs", "dwarfsck", "dwarfsextract"];

#[test]
fn help_lists_every_command_with_one_line() {
    let help = hoard_ok(&["--help"]);
    assert!(help.contains("DwarFS"), "{help}");
    assert!(!help.contains("check, ls, cat, info, extract"), "{help}");
    let commands = help
        .split("Commands:")
        .nth(1)
        .expect("a Commands section")
        .split("\n\n")
        .next()
        .unwrap();
    for name in COMMANDS {
        let line = commands
            .lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("{name} missing from:\n{help}"));
        assert!(
            line.split_whitespace().count() > 2,
            "no description: {line}"
        );
    }
}

/// The commit the checkout is at, when the crate is built from one.
fn git_commit() -> Option<String> {
    let git = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .ok()
            .filter(|o| o.status.success() && !o.stdout.is_empty())
            .map(|o| String::from_utf8(o.stdout).unwrap().trim().to_string())
    };
    git(&["ls-files", "build.rs"])?;
    git(&["rev-parse", "--short", "HEAD"])
}

#[test]
fn version_names_the_commit() {
    let expected = match git_commit() {
        Some(commit) => format!("hoard {} ({commit})\n", env!("CARGO_PKG_VERSION")),
        None => {
            eprintln!("note: not built from a git checkout, no commit to expect");
            format!("hoard {}\n", env!("CARGO_PKG_VERSION"))
        }
    };
    assert_eq!(hoard_ok(&["--version"]), expected);
    // The personalities say the same under their own names.
    let dir = tempfile::tempdir().unwrap();
    let mkdwarfs = dir.path().join("mkdwarfs");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_hoard"), &mkdwarfs).unwrap();
    let out = Command::new(&mkdwarfs).arg("--version").output().unwrap();
    let version = String::from_utf8(out.stdout).unwrap();
    assert_eq!(version, expected.replacen("hoard", "mkdwarfs", 1));
}

#[test]
fn man_pages_for_every_command_and_personality() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("man/man1");
    hoard_ok(&["--generate", "man", "--out", out.to_str().unwrap()]);
    let mut pages: Vec<String> = vec!["hoard".into()];
    pages.extend(COMMANDS.iter().map(|c| format!("hoard-{c}")));
    pages.extend(PERSONALITIES.iter().map(|p| p.to_string()));
    for name in &pages {
        let page = std::fs::read_to_string(out.join(format!("{name}.1")))
            .unwrap_or_else(|e| panic!("{name}.1: {e}"));
        assert!(page.starts_with(".ie "), "{name}.1 is not roff");
        let title = page
            .lines()
            .find(|l| l.starts_with(".TH "))
            .unwrap_or_default();
        assert!(
            title.starts_with(&format!(".TH {name} 1 ")) && title.ends_with(" hoard"),
            "{name}.1: title {title}"
        );
        assert!(page.contains(".SH NAME") && page.contains(".SH SYNOPSIS"));
        render(&out.join(format!("{name}.1")), name);
    }
    let hoard = std::fs::read_to_string(out.join("hoard.1")).unwrap();
    assert!(hoard.contains("hoard\\-extract(1)"), "{hoard}");
    let mkdwarfs = std::fs::read_to_string(out.join("mkdwarfs.1")).unwrap();
    assert!(mkdwarfs.contains("\\-\\-categorize"), "{mkdwarfs}");
}

/// Renders a man page with `man -l` where `man` is installed.
fn render(page: &Path, name: &str) {
    let Ok(out) = Command::new("man")
        .arg("-l")
        .arg(page)
        .env("MANWIDTH", "80")
        .env("MAN_KEEP_FORMATTING", "0")
        .output()
    else {
        common::skipped("man missing: pages not rendered");
        return;
    };
    assert!(
        out.status.success(),
        "man -l {name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Without a terminal, man makes bold text by overstriking: `S\x08S`.
    let mut text = String::new();
    for c in String::from_utf8_lossy(&out.stdout).chars() {
        if c == '\x08' {
            text.pop();
        } else {
            text.push(c);
        }
    }
    assert!(text.contains("SYNOPSIS") && text.contains(name), "{text}");
}

#[test]
fn generate_man_needs_a_directory() {
    let err = hoard_fails(&["--generate", "man"]);
    assert!(err.contains("--out DIR"), "{err}");
}

#[test]
fn completion_scripts_name_every_command() {
    let bash = hoard_ok(&["--generate", "complete-bash"]);
    assert!(bash.contains("complete -F _hoard"), "{bash}");
    let zsh = hoard_ok(&["--generate", "complete-zsh"]);
    assert!(zsh.starts_with("#compdef hoard"), "{zsh}");
    let fish = hoard_ok(&["--generate", "complete-fish"]);
    assert!(fish.contains("complete -c hoard"), "{fish}");
    for script in [&bash, &zsh, &fish] {
        for name in COMMANDS {
            assert!(script.contains(name), "{name}");
        }
    }
}

/// What bash completes `line` (a command and a partial word) to with the
/// completion `script` loaded; None (recorded) without bash.
fn bash_completes(script: &Path, line: &str) -> Option<String> {
    let command = line.split(' ').next().unwrap();
    // What bash does on `LINE<TAB>`.
    let Ok(out) = Command::new("bash")
        .arg("--norc")
        .arg("-c")
        .arg(r#"source "$1"; read -ra COMP_WORDS <<<"$2"; COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); COMP_LINE="$2"; COMP_POINT=${#2}; "_$3" "$3" "${COMP_WORDS[-1]}" "${COMP_WORDS[-2]}"; printf '%s\n' "${COMPREPLY[@]}""#)
        .arg("bash")
        .arg(script)
        .arg(line)
        .arg(command)
        .output()
    else {
        common::skipped("bash missing");
        return None;
    };
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

#[test]
fn bash_completes_a_command_name() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("hoard.bash");
    std::fs::write(&script, hoard_ok(&["--generate", "complete-bash"])).unwrap();
    if let Some(words) = bash_completes(&script, "hoard ex") {
        assert_eq!(words, "extract");
    }
}

#[test]
fn completions_are_written_for_every_name() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("completions");
    for (what, file) in [
        ("complete-bash", "{}"),
        ("complete-zsh", "_{}"),
        ("complete-fish", "{}.fish"),
    ] {
        let dir = out.join(what);
        hoard_ok(&["--generate", what, "--out", dir.to_str().unwrap()]);
        let mut written: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        written.sort();
        let mut expected: Vec<String> = ["hoard"]
            .iter()
            .chain(&PERSONALITIES)
            .map(|name| file.replace("{}", name))
            .collect();
        expected.sort();
        assert_eq!(written, expected, "{what}");
    }
    let zsh = std::fs::read_to_string(out.join("complete-zsh/_dwarfsck")).unwrap();
    assert!(zsh.starts_with("#compdef dwarfsck"), "{zsh}");
    let fish = std::fs::read_to_string(out.join("complete-fish/mkdwarfs.fish")).unwrap();
    assert!(fish.contains("complete -c mkdwarfs"), "{fish}");
    // Each name completes its own options.
    let bash = out.join("complete-bash");
    for (name, line, word) in [
        ("hoard", "hoard ex", "extract"),
        ("mkdwarfs", "mkdwarfs --compress-l", "--compress-level"),
        ("dwarfs", "dwarfs --foregr", "--foreground"),
        ("dwarfsck", "dwarfsck --check-i", "--check-integrity"),
        (
            "dwarfsextract",
            "dwarfsextract --num-d",
            "--num-disk-writers",
        ),
    ] {
        if let Some(words) = bash_completes(&bash.join(name), line) {
            assert_eq!(words, word, "{line}");
        }
    }
}

#[test]
fn a_missing_image_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let image = dir.path().join("missing.dwarfs");
    let image = image.to_str().unwrap();
    let expected = format!("hoard: cannot open image '{image}': No such file or directory\n");
    let out_dir = dir.path().join("out");
    let out_dir = out_dir.to_str().unwrap();
    for args in [
        vec!["info", image],
        vec!["ls", image],
        vec!["cat", image, "a"],
        vec!["check", image],
        vec!["extract", image, "-o", out_dir],
        vec!["mount", image, dir.path().to_str().unwrap()],
    ] {
        assert_eq!(hoard_fails(&args), expected, "{args:?}");
    }
}

#[test]
fn errors_name_the_path_and_the_operation() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("file");
    std::fs::write(&file, b"x").unwrap();
    let under_file = file.join("sub");
    let under_file = under_file.to_str().unwrap();
    let err = hoard_fails(&["mount", file.to_str().unwrap(), under_file]);
    assert_eq!(
        err,
        format!("hoard: cannot mount on '{under_file}': Not a directory\n")
    );
    let err = hoard_fails(&["create", "-i", under_file, "-o", "x.dwarfs"]);
    assert!(
        err.starts_with("hoard: cannot create image: ") && err.contains(under_file),
        "{err}"
    );
    let err = hoard_fails(&["--generate", "man", "--out", under_file]);
    assert_eq!(
        err,
        format!("hoard: cannot create directory '{under_file}': Not a directory\n")
    );
}

#[test]
fn extract_names_the_output_directory() {
    let dir = tempfile::tempdir().unwrap();
    let src = tree_with(dir.path(), "src", &[("a", b"hello")]);
    let image = create_image(&src, &dir.path().join("x.dwarfs"), &["-l", "1"]);
    let image = s(&image);
    let file = dir.path().join("file");
    std::fs::write(&file, b"x").unwrap();
    let output = file.join("out");
    let output = output.to_str().unwrap();
    let err = hoard_fails(&["extract", image, "-o", output]);
    assert_eq!(
        err,
        format!("hoard: cannot create output directory '{output}': Not a directory\n")
    );
    // A file where a directory of the image belongs.
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    std::fs::create_dir(out.join("a")).unwrap();
    let err = hoard_fails(&["extract", image, "-o", out.to_str().unwrap()]);
    assert_eq!(
        err,
        format!(
            "hoard: cannot write file '{}': exists and is a directory\n",
            out.join("a").display()
        )
    );
}
