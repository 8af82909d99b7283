//! The `remote_*` options: `-o remote_connections=8,remote_cache=DIR` on
//! `hoard mount`, the `HOARD_REMOTE` environment variable for every command.

use std::path::PathBuf;
use std::time::Duration;

/// How images are fetched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// Requests in flight at once, at most (`remote_connections`).
    pub connections: usize,
    /// Retries of a failed request before the read fails (`remote_retries`).
    pub retries: u32,
    /// Longest wait for one request: connecting, and between bytes of the
    /// answer (`remote_timeout`).
    pub timeout: Duration,
    /// First pause before a retry; it doubles each time, up to 2 s
    /// (`remote_backoff`).
    pub backoff: Duration,
    /// Directory of the on-disk cache of fetched sections (`remote_cache`).
    pub cache_dir: Option<PathBuf>,
    /// Bytes the on-disk cache may hold, for all images (`remote_cache_size`).
    pub cache_size: u64,
    /// Bytes of fetched data kept in memory (`remote_memory`).
    pub memory: u64,
    /// Most bytes fetched ahead of a sequential reader (`remote_readahead`).
    pub readahead: u64,
    /// Whether a registry (`docker://`) must be reached over HTTPS, unless
    /// it is on a loopback address (`remote_tls_verify`, skopeo's
    /// `--tls-verify`).
    pub tls_verify: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            connections: 8,
            retries: 5,
            timeout: Duration::from_secs(30),
            backoff: Duration::from_millis(100),
            cache_dir: None,
            cache_size: 4 << 30,
            memory: 128 << 20,
            readahead: 16 << 20,
            tls_verify: true,
        }
    }
}

/// Whether `key` (of `key=value`) is one of these options.
pub fn is_remote_option(key: &str) -> bool {
    key.starts_with("remote_")
}

impl Options {
    /// Sets one option; `key` is `remote_...`.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        let bad = |what: &str| format!("option '{key}': invalid {what} '{value}'");
        if value.is_empty() && is_remote_option(key) {
            return Err(format!("option '{key}' needs a value"));
        }
        match key {
            "remote_connections" => {
                self.connections = value
                    .parse()
                    .ok()
                    .filter(|n| (1..=256).contains(n))
                    .ok_or_else(|| bad("count (1 to 256)"))?
            }
            "remote_retries" => {
                self.retries = value
                    .parse()
                    .ok()
                    .filter(|&n| n <= 100)
                    .ok_or_else(|| bad("count (0 to 100)"))?
            }
            "remote_timeout" => self.timeout = parse_duration(value).ok_or_else(|| bad("time"))?,
            "remote_backoff" => self.backoff = parse_duration(value).ok_or_else(|| bad("time"))?,
            "remote_cache" => self.cache_dir = Some(PathBuf::from(value)),
            "remote_cache_size" => {
                self.cache_size = parse_size(value).ok_or_else(|| bad("size"))?
            }
            "remote_memory" => self.memory = parse_size(value).ok_or_else(|| bad("size"))?,
            "remote_readahead" => self.readahead = parse_size(value).ok_or_else(|| bad("size"))?,
            "remote_tls_verify" => {
                self.tls_verify = match value {
                    "true" => true,
                    "false" => false,
                    _ => return Err(bad("boolean (true or false)")),
                }
            }
            _ => return Err(format!("unknown option '{key}'")),
        }
        if self.timeout.is_zero() {
            return Err(format!("option '{key}': the timeout must not be 0"));
        }
        Ok(())
    }

    /// Parses `key=value,key=value` (every key `remote_...`).
    pub fn parse(list: &str) -> Result<Self, String> {
        let mut options = Options::default();
        for item in list.split(',').filter(|i| !i.is_empty()) {
            let (key, value) = item
                .split_once('=')
                .ok_or_else(|| format!("option '{item}' needs a value"))?;
            options.set(key, value)?;
        }
        Ok(options)
    }

    /// The options in `HOARD_REMOTE` (defaults when it is unset).
    pub fn from_env() -> Result<Self, String> {
        match std::env::var("HOARD_REMOTE") {
            Ok(list) => Self::parse(&list).map_err(|e| format!("HOARD_REMOTE: {e}")),
            Err(_) => Ok(Options::default()),
        }
    }
}

/// A size: bytes, or with k, m, g or t (powers of 1024).
fn parse_size(v: &str) -> Option<u64> {
    let lower = v.to_ascii_lowercase();
    let (num, shift) = match lower.strip_suffix(|c: char| "kmgt".contains(c)) {
        Some(num) => (num, 10 * (1 + "kmgt".find(lower.chars().last()?)? as u32)),
        None => (lower.as_str(), 0),
    };
    num.parse::<u64>().ok()?.checked_mul(1u64 << shift)
}

/// A duration: a number with `ms` or `s` (seconds if none).
fn parse_duration(v: &str) -> Option<Duration> {
    if let Some(ms) = v.strip_suffix("ms") {
        return ms.parse().ok().map(Duration::from_millis);
    }
    let secs: f64 = v.strip_suffix('s').unwrap_or(v).parse().ok()?;
    (0.0..1e9)
        .contains(&secs)
        .then(|| Duration::from_secs_f64(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_option() {
        let o = Options::parse(
            "remote_connections=3,remote_retries=2,remote_timeout=1.5,remote_backoff=20ms,\
             remote_cache=/tmp/c,remote_cache_size=2g,remote_memory=16m,remote_readahead=512k,\
             remote_tls_verify=false",
        )
        .unwrap();
        assert_eq!(o.connections, 3);
        assert_eq!(o.retries, 2);
        assert_eq!(o.timeout, Duration::from_millis(1500));
        assert_eq!(o.backoff, Duration::from_millis(20));
        assert_eq!(o.cache_dir, Some(PathBuf::from("/tmp/c")));
        assert_eq!(o.cache_size, 2 << 30);
        assert_eq!(o.memory, 16 << 20);
        assert_eq!(o.readahead, 512 << 10);
        assert!(!o.tls_verify);
    }

    #[test]
    fn rejects_bad_values() {
        for bad in [
            "remote_connections=0",
            "remote_retries=x",
            "remote_timeout=0",
            "remote_cache_size=12q",
            "remote_other=1",
            "remote_cache",
            "remote_tls_verify=no",
        ] {
            assert!(Options::parse(bad).is_err(), "{bad}");
        }
    }
}
