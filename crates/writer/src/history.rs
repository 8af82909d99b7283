//! The history entry an image records for a run of hoard (the command
//! line, or a call from the bindings), and the clock it is stamped with
//! (`SOURCE_DATE_EPOCH` when set). The build's identity (git commit,
//! branch, compiler) comes from this crate's build script.

use hoard_format::history::{HistoryEntry, ToolVersion};

/// `SOURCE_DATE_EPOCH`, if set: the time reproducible builds stamp instead
/// of now, and the latest time they store.
pub fn source_date_epoch() -> Result<Option<i64>, String> {
    match std::env::var("SOURCE_DATE_EPOCH") {
        Ok(v) => v
            .trim()
            .parse::<i64>()
            .map(Some)
            .map_err(|_| format!("SOURCE_DATE_EPOCH '{v}' is not a number of seconds")),
        Err(_) => Ok(None),
    }
}

/// `SOURCE_DATE_EPOCH` if set, else the current time, in seconds.
pub fn now() -> Result<i64, String> {
    Ok(source_date_epoch()?.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64)
    }))
}

/// The version of this build. Without a git checkout, or on the release
/// tag, it is a release; otherwise DwarFS's tools also print the branch.
fn tool_version() -> ToolVersion {
    let number = |i: usize| {
        env!("CARGO_PKG_VERSION")
            .split(['.', '-'])
            .nth(i)
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    };
    let rev = option_env!("HOARD_GIT_REV");
    let is_release = rev.is_none() || option_env!("HOARD_GIT_RELEASE").is_some();
    let mut desc = format!("hoard v{}", env!("CARGO_PKG_VERSION"));
    if let (false, Some(rev)) = (is_release, rev) {
        desc = format!("{desc}-g{rev}");
    }
    ToolVersion {
        major: number(0),
        minor: number(1),
        patch: number(2),
        is_release,
        git_rev: rev.map(String::from),
        git_branch: option_env!("HOARD_GIT_BRANCH").map(String::from),
        git_desc: Some(desc),
    }
}

/// `Linux [x86_64]`, as DwarFS names the system.
fn system_id() -> String {
    let os = std::env::consts::OS;
    let mut name = os[..1].to_uppercase();
    name.push_str(&os[1..]);
    format!("{name} [{}]", std::env::consts::ARCH)
}

/// The history entry recording a run of hoard: version, system, compiler,
/// `arguments` (the command line, or what stands for it), `timestamp`
/// when given, and the versions of the compression libraries.
pub fn this_run(arguments: Vec<String>, timestamp: Option<u64>) -> HistoryEntry {
    HistoryEntry {
        version: tool_version(),
        system_id: system_id(),
        compiler_id: option_env!("HOARD_COMPILER_ID")
            .unwrap_or("rustc")
            .to_string(),
        arguments: Some(arguments),
        timestamp,
        library_versions: Some(crate::library_versions()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_field_dwarfs_prints_is_present() {
        let e = this_run(vec!["hoard".into(), "create".into()], Some(7));
        let v = &e.version;
        assert!(v.git_desc.as_deref().unwrap().starts_with("hoard v"));
        assert!(v.is_release || v.git_branch.is_some());
        let system = system_id();
        assert!(system.starts_with(char::is_uppercase), "{system}");
        assert!(system.ends_with(&format!(" [{}]", std::env::consts::ARCH)));
        assert!(e.compiler_id.starts_with("rustc"));
        assert_eq!(e.arguments.unwrap(), ["hoard", "create"]);
        assert_eq!(e.timestamp, Some(7));
        assert!(!e.library_versions.unwrap().is_empty());
    }
}
