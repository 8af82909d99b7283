//! Mount options, as given with `-o a,b=c`: DwarFS's driver options plus the
//! generic ones `mount(8)` passes for `/etc/fstab` entries. Unknown options
//! are errors.

use hoard_reader::ImageOffset;

/// What to do about locking the driver's memory.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Mlock {
    /// Do not lock.
    #[default]
    None,
    /// Try to lock; warn if it fails.
    Try,
    /// Lock or refuse to mount.
    Must,
}

/// How the block cache is tidied besides evicting when full.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Tidy {
    /// Never.
    #[default]
    None,
    /// Drop blocks unused for `tidy_max_age`.
    Time,
    /// Drop blocks the kernel has partly swapped out.
    Swap,
}

/// Which blocks are decompressed into the cache as the image mounts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Preload {
    /// None.
    #[default]
    None,
    /// Every block (`preload_all`).
    All,
    /// The blocks of one category (`preload_category=NAME`), which wins
    /// over `preload_all` as in DwarFS.
    Category(String),
}

/// Parses a duration: an integer with `ms`, `s`, `m` or `h` (seconds if
/// none).
fn parse_duration(key: &str, v: &str) -> Result<std::time::Duration, String> {
    let split = v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len());
    let (num, unit) = v.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("mount option '{key}': invalid time '{v}'"))?;
    let ms = match unit {
        "ms" => 1,
        "" | "s" => 1000,
        "m" => 60_000,
        "h" => 3_600_000,
        _ => {
            return Err(format!(
                "mount option '{key}': unknown unit in '{v}' (ms, s, m, h)"
            ))
        }
    };
    n.checked_mul(ms)
        .map(std::time::Duration::from_millis)
        .ok_or_else(|| format!("mount option '{key}': '{v}' is too long"))
}

/// Parsed mount options.
#[derive(Debug, Clone, PartialEq)]
pub struct MountOptions {
    /// Bytes of decompressed blocks to cache.
    pub cache_size: usize,
    /// Fraction of a block past which a read decompresses all of it
    /// (`0.0..=1.0`); below it, blocks are decompressed as far as reads go.
    pub decratio: f64,
    /// Threads serving FUSE requests.
    pub workers: usize,
    /// Bytes to decompress ahead of a sequential reader.
    pub readahead: u64,
    /// `st_blksize` reported for files.
    pub block_size: u32,
    /// Where the image starts in its file.
    pub offset: ImageOffset,
    /// Bytes the image takes from its offset on (default: to the end).
    pub image_size: Option<u64>,
    /// Cache tidying strategy.
    pub tidy: Tidy,
    /// How often the cache is tidied.
    pub tidy_interval: std::time::Duration,
    /// With `Tidy::Time`: how long an unused block stays.
    pub tidy_max_age: std::time::Duration,
    /// Owner reported for every entry, instead of the stored one.
    pub uid: Option<u32>,
    /// Group reported for every entry.
    pub gid: Option<u32>,
    /// Let other users access the mount.
    pub allow_other: bool,
    /// Let root access the mount.
    pub allow_root: bool,
    /// Let the kernel check permissions.
    pub default_permissions: bool,
    /// Look names up ignoring ASCII case.
    pub case_insensitive: bool,
    /// Lock the driver's memory.
    pub mlock: Mlock,
    /// Blocks decompressed into the cache at mount time, as far as the
    /// cache holds them.
    pub preload: Preload,
    /// Where to write the paths of the files opened (`analysis_file`).
    pub analysis_file: Option<std::path::PathBuf>,
    /// Log level: 0 error … 4 trace.
    pub debug_level: u8,
    /// Latency monitoring: `+`-separated components (`fuse`, `reader`),
    /// empty for none.
    pub perfmon: String,
    /// Generic options passed on to the kernel (`dev`, `nosuid`, …).
    pub kernel: Vec<String>,
    /// With a set of images (`--each`): how long an image stays open
    /// unused (`idle`).
    pub image_idle: std::time::Duration,
    /// With `--each DIR`: follow the images added to and removed from it
    /// (`watch`).
    pub watch: bool,
}

impl Default for MountOptions {
    fn default() -> Self {
        MountOptions {
            cache_size: 512 << 20,
            decratio: hoard_reader::cache::DEFAULT_DECRATIO,
            workers: 2,
            readahead: 0,
            block_size: 512 << 10,
            offset: ImageOffset::Auto,
            image_size: None,
            tidy: Tidy::None,
            tidy_interval: std::time::Duration::from_secs(5 * 60),
            tidy_max_age: std::time::Duration::from_secs(10 * 60),
            uid: None,
            gid: None,
            allow_other: false,
            allow_root: false,
            default_permissions: false,
            case_insensitive: false,
            mlock: Mlock::None,
            preload: Preload::None,
            analysis_file: None,
            debug_level: 1,
            perfmon: String::new(),
            kernel: Vec::new(),
            image_idle: std::time::Duration::from_secs(60),
            watch: false,
        }
    }
}

/// Generic mount options accepted and passed to the kernel as they are.
const KERNEL_OPTIONS: &[&str] = &[
    "dev",
    "nodev",
    "suid",
    "nosuid",
    "exec",
    "noexec",
    "atime",
    "noatime",
    "relatime",
    "diratime",
    "nodiratime",
    "sync",
    "async",
    "dirsync",
];

/// Options `mount(8)` may pass that mean nothing to a FUSE driver.
const IGNORED_OPTIONS: &[&str] = &[
    "ro", "defaults", "auto", "noauto", "user", "nouser", "users", "_netdev", "nofail",
];

/// Parses a byte count with an optional k/m/g/t suffix (powers of 1024).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim().to_ascii_lowercase();
    let (num, shift) = match t.char_indices().last() {
        Some((i, c)) if "kmgt".contains(c) => {
            (&t[..i], 10 * (1 + "kmgt".find(c).unwrap_or(0) as u32))
        }
        _ => (t.as_str(), 0),
    };
    let n: u64 = num.parse().map_err(|_| format!("invalid size '{s}'"))?;
    n.checked_mul(1u64 << shift)
        .ok_or_else(|| format!("size '{s}' is too large"))
}

impl MountOptions {
    /// The reader's options these give.
    pub fn fs_options(&self) -> hoard_reader::FsOptions {
        hoard_reader::FsOptions {
            open: hoard_reader::OpenOptions {
                offset: self.offset,
                no_mmap: false,
                image_size: self.image_size,
                trust: None,
                expect: Default::default(),
                identities: None,
            },
            cache_size: self.cache_size,
            decratio: self.decratio,
        }
    }

    /// Parses a comma-separated option list (several `-o` lists may be
    /// joined with commas).
    pub fn parse(list: &str) -> Result<Self, String> {
        let mut o = MountOptions::default();
        for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            o.apply(item)?;
        }
        Ok(o)
    }

    fn apply(&mut self, item: &str) -> Result<(), String> {
        let (key, value) = match item.split_once('=') {
            Some((k, v)) => (k, Some(v)),
            None => (item, None),
        };
        let need = || value.ok_or_else(|| format!("mount option '{key}' needs a value"));
        let named = || {
            need().and_then(|v| match v {
                "" => Err(format!("mount option '{key}' needs a value")),
                v => Ok(v),
            })
        };
        let number = || -> Result<u64, String> {
            let v = need()?;
            v.parse()
                .map_err(|_| format!("mount option '{key}': invalid number '{v}'"))
        };
        let flag = |v: Option<&str>| match v {
            None => Ok(true),
            Some(v) => Err(format!("mount option '{key}' takes no value (got '{v}')")),
        };
        match key {
            "cachesize" => {
                self.cache_size =
                    usize::try_from(parse_size(need()?)?).map_err(|e| e.to_string())?
            }
            "decratio" => {
                let v = need()?;
                let r: f64 = v
                    .parse()
                    .map_err(|_| format!("mount option 'decratio': invalid number '{v}'"))?;
                if !(0.0..=1.0).contains(&r) {
                    return Err(format!(
                        "mount option 'decratio': {v} is not between 0.0 and 1.0"
                    ));
                }
                self.decratio = r;
            }
            "workers" => {
                self.workers = number()?.clamp(1, 256) as usize;
            }
            "readahead" => self.readahead = parse_size(need()?)?,
            "blocksize" => {
                let b = parse_size(need()?)?;
                self.block_size = u32::try_from(b)
                    .ok()
                    .filter(|b| b.is_power_of_two())
                    .ok_or_else(|| {
                        format!("mount option 'blocksize': {b} is not a power of two up to 2 GiB")
                    })?;
            }
            "offset" => self.offset = need()?.parse()?,
            "uid" => {
                self.uid = Some(
                    number()?
                        .try_into()
                        .map_err(|_| "uid out of range".to_string())?,
                )
            }
            "gid" => {
                self.gid = Some(
                    number()?
                        .try_into()
                        .map_err(|_| "gid out of range".to_string())?,
                )
            }
            "allow_other" => self.allow_other = flag(value)?,
            "allow_root" => self.allow_root = flag(value)?,
            "default_permissions" => self.default_permissions = flag(value)?,
            "case_insensitive" => self.case_insensitive = flag(value)?,
            "preload_all" => {
                flag(value)?;
                if self.preload == Preload::None {
                    self.preload = Preload::All;
                }
            }
            "preload_category" => self.preload = Preload::Category(named()?.to_string()),
            "analysis_file" => self.analysis_file = Some(named()?.into()),
            "mlock" => {
                self.mlock = match need()? {
                    "none" => Mlock::None,
                    "try" => Mlock::Try,
                    "must" => Mlock::Must,
                    v => {
                        return Err(format!(
                            "mount option 'mlock': expected none, try or must, got '{v}'"
                        ))
                    }
                }
            }
            "debuglevel" => {
                self.debug_level = match need()? {
                    "error" => 0,
                    "warn" => 1,
                    "info" => 2,
                    "verbose" | "debug" => 3,
                    "trace" => 4,
                    v => return Err(format!("mount option 'debuglevel': unknown level '{v}'")),
                }
            }
            "imagesize" => self.image_size = Some(parse_size(need()?)?),
            "tidy_strategy" => {
                self.tidy = match need()? {
                    "none" => Tidy::None,
                    "time" => Tidy::Time,
                    "swap" => Tidy::Swap,
                    v => {
                        return Err(format!(
                            "mount option 'tidy_strategy': expected none, time or swap, got '{v}'"
                        ))
                    }
                }
            }
            "tidy_interval" => {
                self.tidy_interval = parse_duration(key, need()?)?;
                if self.tidy_interval.is_zero() {
                    return Err("mount option 'tidy_interval' must be above zero".into());
                }
            }
            "tidy_max_age" => self.tidy_max_age = parse_duration(key, need()?)?,
            "perfmon" => {
                let v = need()?;
                crate::perfmon::PerfMon::parse(v)?;
                self.perfmon = v.to_string();
            }
            "idle" => {
                self.image_idle = parse_duration(key, need()?)?;
            }
            "watch" => self.watch = flag(value)?,
            "rw" => return Err("the file system is read-only: option 'rw' is not possible".into()),
            k if KERNEL_OPTIONS.contains(&k) && value.is_none() => self.kernel.push(k.to_string()),
            k if IGNORED_OPTIONS.contains(&k) && value.is_none() => {}
            _ => return Err(format!("unknown mount option '{item}'")),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_dwarfs_options() {
        let o = MountOptions::parse(
            "cachesize=1g,workers=4,offset=auto,uid=7,allow_other,mlock=try,ro,nodev",
        )
        .unwrap();
        assert_eq!(o.cache_size, 1 << 30);
        assert_eq!(o.workers, 4);
        assert_eq!(o.offset, ImageOffset::Auto);
        assert_eq!(o.uid, Some(7));
        assert!(o.allow_other);
        assert_eq!(o.mlock, Mlock::Try);
        assert_eq!(o.kernel, vec!["nodev".to_string()]);
        assert_eq!(
            MountOptions::parse("offset=4096").unwrap().offset,
            ImageOffset::At(4096)
        );
    }

    #[test]
    fn refuses_unknown_and_malformed_options() {
        assert!(MountOptions::parse("frobnicate")
            .unwrap_err()
            .contains("frobnicate"));
        assert!(MountOptions::parse("cachesize").is_err());
        assert!(MountOptions::parse("cachesize=lots").is_err());
        assert!(MountOptions::parse("allow_other=1").is_err());
        assert!(MountOptions::parse("rw").is_err());
        let t = MountOptions::parse(
            "tidy_strategy=time,tidy_interval=500ms,tidy_max_age=2m,imagesize=1k",
        )
        .unwrap();
        assert_eq!(t.tidy, Tidy::Time);
        assert_eq!(t.tidy_interval, std::time::Duration::from_millis(500));
        assert_eq!(t.tidy_max_age, std::time::Duration::from_secs(120));
        assert_eq!(t.image_size, Some(1024));
        assert!(MountOptions::parse("tidy_strategy=lru").is_err());
        assert!(MountOptions::parse("tidy_interval=5x").is_err());
        assert!(MountOptions::parse("tidy_interval=0").is_err());
        assert!(MountOptions::parse("mlock=maybe").is_err());
        assert!(MountOptions::parse("blocksize=1000").is_err());
        let each = MountOptions::parse("idle=2s,watch").unwrap();
        assert_eq!(each.image_idle, std::time::Duration::from_secs(2));
        assert!(each.watch);
        assert!(MountOptions::parse("watch=1").is_err());
    }

    #[test]
    fn preload_and_analysis_options() {
        assert_eq!(MountOptions::default().preload, Preload::None);
        assert_eq!(
            MountOptions::parse("preload_all").unwrap().preload,
            Preload::All
        );
        let hot = Preload::Category("hotness".into());
        for list in [
            "preload_category=hotness",
            "preload_all,preload_category=hotness",
            "preload_category=hotness,preload_all",
        ] {
            assert_eq!(MountOptions::parse(list).unwrap().preload, hot, "{list}");
        }
        assert!(MountOptions::parse("preload_all=1").is_err());
        assert!(MountOptions::parse("preload_category").is_err());
        assert!(MountOptions::parse("preload_category=").is_err());
        let a = MountOptions::parse("analysis_file=/tmp/x.prof").unwrap();
        assert_eq!(a.analysis_file, Some("/tmp/x.prof".into()));
        assert!(MountOptions::parse("analysis_file").is_err());
        assert!(MountOptions::parse("analysis_file=").is_err());
    }

    #[test]
    fn decratio_is_a_fraction() {
        assert_eq!(MountOptions::default().decratio, 0.8);
        assert_eq!(MountOptions::parse("decratio=0.5").unwrap().decratio, 0.5);
        assert_eq!(MountOptions::parse("decratio=0").unwrap().decratio, 0.0);
        assert_eq!(MountOptions::parse("decratio=1").unwrap().decratio, 1.0);
        for bad in [
            "decratio",
            "decratio=1.5",
            "decratio=-0.1",
            "decratio=NaN",
            "decratio=x",
        ] {
            let e = MountOptions::parse(bad).unwrap_err();
            assert!(e.contains("decratio"), "{bad}: {e}");
        }
    }
}
