//! The 906 malformed images of DwarFS's fuzzing corpus: a full check of each
//! fails with a clear error, and no command ever panics, aborts, hangs or
//! uses more than 1 GiB on them.

mod common;

use common::*;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

const TIME_LIMIT: Duration = Duration::from_secs(5);
const MEMORY_LIMIT: u64 = 1 << 30;

struct Outcome {
    code: Option<i32>,
    stderr: String,
    elapsed: Duration,
}

/// Runs hoard with a 1 GiB address-space limit and a 5 s time limit.
fn run_limited(args: &[&str]) -> Outcome {
    let mut cmd = hoard();
    cmd.args(args).stdout(Stdio::null()).stderr(Stdio::piped());
    // SAFETY: setrlimit is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            let lim = libc::rlimit {
                rlim_cur: MEMORY_LIMIT,
                rlim_max: MEMORY_LIMIT,
            };
            libc::setrlimit(libc::RLIMIT_AS, &lim);
            Ok(())
        });
    }
    let start = Instant::now();
    let mut child = cmd.spawn().expect("spawn hoard");
    let mut stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut stderr, &mut s).ok();
        s
    });
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if start.elapsed() > TIME_LIMIT {
            child.kill().ok();
            child.wait().ok();
            break None;
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    let elapsed = start.elapsed();
    Outcome {
        code: status.and_then(|s| s.code()),
        stderr: reader.join().unwrap(),
        elapsed,
    }
}

fn badfs_images() -> Vec<PathBuf> {
    images("badfs")
}

/// Problems with one image, as lines of a report.
fn examine(image: &Path, scratch: &Path) -> Vec<String> {
    let name = image.file_name().unwrap().to_string_lossy().to_string();
    let img = image.to_str().unwrap();
    let out_dir = scratch.join(&name);
    let mut problems = Vec::new();
    let runs: [(&str, Vec<&str>); 4] = [
        ("check --full", vec!["check", "--full", img]),
        ("info", vec!["info", img]),
        ("ls -R", vec!["ls", "-lR", img]),
        (
            "extract",
            vec!["extract", img, "-o", out_dir.to_str().unwrap()],
        ),
    ];
    for (what, args) in runs {
        let o = run_limited(&args);
        let crashed = o.stderr.contains("panicked") || o.stderr.contains("RUST_BACKTRACE");
        match o.code {
            None => problems.push(format!(
                "{name}: {what}: killed or timed out after {:?}",
                o.elapsed
            )),
            Some(c) if c > 2 || crashed => {
                problems.push(format!("{name}: {what}: exit {c}: {}", o.stderr.trim()))
            }
            Some(0) if what == "check --full" => {
                problems.push(format!("{name}: check --full passed"))
            }
            Some(c) if c != 0 && o.stderr.trim().is_empty() => {
                problems.push(format!("{name}: {what}: exit {c} without a message"))
            }
            Some(_) => {}
        }
        if what == "check --full"
            && o.stderr
                .lines()
                .any(|l| !l.starts_with(img) && !l.starts_with("hoard: "))
        {
            problems.push(format!(
                "{name}: check output is not one line per problem: {}",
                o.stderr
            ));
        }
    }
    std::fs::remove_dir_all(&out_dir).ok();
    problems
}

#[test]
fn malformed_images_are_refused_without_crashing() {
    let images = badfs_images();
    if images.is_empty() {
        return;
    }
    let scratch = tempfile::tempdir().unwrap();
    let problems =
        hoard_testdata::problems_in_parallel(&images, |_, img| examine(img, scratch.path()));
    hoard_testdata::assert_no_problems(
        &problems,
        &format!("problems with {} images", images.len()),
    );
}
