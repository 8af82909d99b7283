//! The history part of `hoard info`: every write and rewrite of the image.

use hoard_format::history::{decode_history, HistoryEntry};
use hoard_format::section::SectionType;
use hoard_reader::Filesystem;
use serde_json::{json, Value};

fn entry_json(h: &HistoryEntry) -> Value {
    let v = &h.version;
    json!({
        "version": v.to_string(),
        "tool_version": {
            "major": v.major,
            "minor": v.minor,
            "patch": v.patch,
            "is_release": v.is_release,
            "git_rev": v.git_rev,
            "git_branch": v.git_branch,
            "git_desc": v.git_desc,
        },
        "system": h.system_id,
        "compiler": h.compiler_id,
        "arguments": h.arguments,
        "timestamp": h.timestamp,
        "libraries": h.library_versions,
    })
}

/// The image's history entries as JSON, or null when it has none (or an
/// unreadable one).
pub fn history(fs: &Filesystem) -> Value {
    let image = fs.image();
    image
        .find(SectionType::HISTORY)
        .and_then(|s| image.load(s, 1 << 24).ok())
        .and_then(|p| decode_history(&p).ok())
        .map_or(Value::Null, |entries| {
            entries.iter().map(entry_json).collect::<Vec<_>>().into()
        })
}

/// Prints the entries of [`history`] one or two lines each, as
/// `dwarfsck` does (times in UTC).
pub fn print_text(history: &Value) {
    let Value::Array(entries) = history else {
        return;
    };
    println!("history:");
    let width = entries.len().to_string().len();
    for (i, e) in entries.iter().enumerate() {
        let mut head = format!("  {:>width$}:", i + 1);
        if let Some(t) = e["timestamp"].as_i64() {
            head.push_str(&format!(" [{} UTC]", super::time::format_utc(t)));
        }
        head.push_str(&format!(" {}", e["version"].as_str().unwrap_or_default()));
        let v = &e["tool_version"];
        if v["is_release"] == Value::Bool(false) {
            if let Some(branch) = v["git_branch"].as_str() {
                head.push_str(&format!(" ({branch})"));
            }
        }
        println!(
            "{head} on {}, {}",
            e["system"].as_str().unwrap_or_default(),
            e["compiler"].as_str().unwrap_or_default()
        );
        if let Some(args) = e["arguments"].as_array().filter(|a| !a.is_empty()) {
            let args: Vec<&str> = args.iter().filter_map(Value::as_str).collect();
            println!("  {:width$}  args: {}", "", args.join(" "));
        }
    }
}
