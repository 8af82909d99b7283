//! Option values given as text, parsed the same way for the command line
//! and the bindings: times and time resolutions, and the per-stream
//! options that take `VALUE` for every category or `CATEGORY::VALUE` for
//! one (`pcmaudio/waveform::flac:level=8`), as DwarFS's do. Errors are one
//! line naming the option as the caller calls it (`-C` or `compression`).

use crate::options::CreateOptions;
use crate::order::OrderChoice;
use std::collections::BTreeMap;

/// The values of one per-stream option, split by category.
#[derive(Debug, Default)]
pub struct Categorized<T> {
    /// The value given without a category.
    pub general: Option<T>,
    /// Values given for one category.
    pub per_category: BTreeMap<String, T>,
}

/// Splits the occurrences of `option` and parses each value; giving one
/// category (or none) twice is an error.
pub fn split<T>(
    option: &str,
    values: &[String],
    parse: impl Fn(&str) -> Result<T, String>,
) -> Result<Categorized<T>, String> {
    let mut out = Categorized {
        general: None,
        per_category: BTreeMap::new(),
    };
    for v in values {
        match v.split_once("::") {
            Some((category, value)) => {
                if out
                    .per_category
                    .insert(category.to_string(), parse(value)?)
                    .is_some()
                {
                    return Err(format!("{option} given twice for category '{category}'"));
                }
            }
            None => {
                if out.general.replace(parse(v)?).is_some() {
                    return Err(format!("{option} given twice without a category"));
                }
            }
        }
    }
    Ok(out)
}

/// One per-stream option as given: its name (for errors) and its values.
#[derive(Debug, Clone, Copy)]
pub struct Given<'a> {
    /// The option's name as the caller spells it.
    pub option: &'a str,
    /// Each `VALUE` or `CATEGORY::VALUE`.
    pub values: &'a [String],
}

/// The per-stream options of a build, as given.
#[derive(Debug, Clone, Copy)]
pub struct StreamOptions<'a> {
    /// Block compression.
    pub compression: Given<'a>,
    /// Segmenter window size (bits; 0 turns segmenting off).
    pub window_size: Given<'a>,
    /// Segmenter window step (a right shift of the window size).
    pub window_step: Given<'a>,
    /// Finished blocks searched for repeated data.
    pub lookback: Given<'a>,
    /// File order.
    pub order: Given<'a>,
}

impl StreamOptions<'_> {
    /// Parses the options and sets them in `o`: values without a category
    /// as the general settings, the others over `o.per_category` (so call
    /// this after setting up categorizing, which fills in its defaults).
    pub fn apply(&self, o: &mut CreateOptions) -> Result<(), String> {
        let compression = split(self.compression.option, self.compression.values, |s| {
            Ok(s.to_string())
        })?;
        let window_size = split(self.window_size.option, self.window_size.values, |v| {
            let w: u32 = v
                .parse()
                .map_err(|_| format!("window size '{v}' is not a number"))?;
            if w != 0 && !(8..=30).contains(&w) {
                return Err(format!("window size bits {w} out of range (0, or 8 to 30)"));
            }
            Ok(w)
        })?;
        let window_step = split(self.window_step.option, self.window_step.values, |v| {
            let w: u32 = v
                .parse()
                .map_err(|_| format!("window step '{v}' is not a number"))?;
            if w > 8 {
                return Err(format!("window step {w} out of range (0 to 8)"));
            }
            Ok(w)
        })?;
        let lookback = split(self.lookback.option, self.lookback.values, |v| {
            v.parse::<usize>()
                .map_err(|_| format!("lookback '{v}' is not a number of blocks"))
        })?;
        let order = split(self.order.option, self.order.values, OrderChoice::parse)?;
        if let Some(c) = compression.general {
            o.data_compression = c;
        }
        if let Some(w) = window_size.general {
            o.window_bits = w;
        }
        if let Some(w) = window_step.general {
            o.window_step_shift = w;
        }
        if let Some(b) = lookback.general {
            o.lookback = b;
        }
        match order.general {
            Some(OrderChoice::Order(order)) => o.order = order,
            Some(OrderChoice::Explicit(list)) => o.explicit_order = Some(list),
            None => {}
        }
        let per_category = &mut o.per_category;
        for (name, v) in compression.per_category {
            per_category.entry(name).or_default().compression = Some(v);
        }
        for (name, v) in window_size.per_category {
            per_category.entry(name).or_default().window_bits = Some(v);
        }
        for (name, v) in window_step.per_category {
            per_category.entry(name).or_default().window_step_shift = Some(v);
        }
        for (name, v) in lookback.per_category {
            per_category.entry(name).or_default().lookback = Some(v);
        }
        for (name, v) in order.per_category {
            let s = per_category.entry(name).or_default();
            match v {
                OrderChoice::Order(order) => {
                    s.order = Some(order);
                    s.explicit_order = None;
                }
                OrderChoice::Explicit(list) => s.explicit_order = Some(list),
            }
        }
        Ok(())
    }
}

/// Days from 1970-01-01 to the given civil date (proleptic Gregorian).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = i64::from((m + 9) % 12);
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Parses `now`, seconds since the epoch, or an ISO 8601 date and time
/// (UTC; `T` or a space between date and time; seconds or the whole time
/// may be left out).
pub fn parse_time(s: &str, now: i64) -> Result<i64, String> {
    let bad = || {
        format!(
            "--set-time '{s}': expected now, seconds since the epoch, or YYYY-MM-DD[ HH:MM[:SS]]"
        )
    };
    if s == "now" {
        return Ok(now);
    }
    if let Ok(secs) = s.parse::<i64>() {
        return Ok(secs);
    }
    let (date, time) = match s.split_once(['T', ' ']) {
        Some((d, t)) => (d, Some(t)),
        None => (s, None),
    };
    let parts: Vec<&str> = date.split('-').collect();
    let [y, m, d] = parts.as_slice() else {
        return Err(bad());
    };
    let (y, m, d): (i64, u32, u32) = (
        y.parse().map_err(|_| bad())?,
        m.parse().map_err(|_| bad())?,
        d.parse().map_err(|_| bad())?,
    );
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) {
        return Err(bad());
    }
    let mut secs = days_from_civil(y, m, d) * 86_400;
    if let Some(t) = time {
        let f: Vec<&str> = t.trim_end_matches('Z').split(':').collect();
        let n = |i: usize, max: i64| -> Result<i64, String> {
            let v: i64 = f.get(i).map_or(Ok(0), |x| x.parse()).map_err(|_| bad())?;
            if (0..max).contains(&v) {
                Ok(v)
            } else {
                Err(bad())
            }
        };
        if !(2..=3).contains(&f.len()) {
            return Err(bad());
        }
        secs += n(0, 24)? * 3600 + n(1, 60)? * 60 + n(2, 61)?;
    }
    Ok(secs)
}

/// Parses a time resolution into nanoseconds: `1s`, `15min`, `ms`, `100ns`, …
pub fn parse_resolution(s: &str) -> Result<u64, String> {
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: u64 = if num.is_empty() {
        1
    } else {
        num.parse()
            .map_err(|_| format!("--time-resolution '{s}': invalid number"))?
    };
    let unit_ns: u64 = match unit {
        "ns" => 1,
        "us" => 1_000,
        "ms" => 1_000_000,
        "" | "s" | "sec" => 1_000_000_000,
        "m" | "min" => 60_000_000_000,
        "h" | "hour" => 3_600_000_000_000,
        "d" | "day" => 86_400_000_000_000,
        _ => {
            return Err(format!(
                "--time-resolution '{s}': unknown unit '{unit}' (ns, us, ms, s, min, h, d)"
            ))
        }
    };
    let ns = n
        .checked_mul(unit_ns)
        .filter(|&v| v > 0)
        .ok_or_else(|| format!("--time-resolution '{s}': out of range"))?;
    if ns < 1_000_000_000 && 1_000_000_000 % ns != 0 {
        return Err(format!(
            "--time-resolution '{s}': a resolution below one second must divide it"
        ));
    }
    if ns > 1_000_000_000 && ns % 1_000_000_000 != 0 {
        return Err(format!(
            "--time-resolution '{s}': a resolution above one second must be whole seconds"
        ));
    }
    Ok(ns)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn values_split_by_category() {
        let c = split(
            "-C",
            &[
                "zstd:level=9".into(),
                "pcmaudio/waveform::flac:level=8".into(),
            ],
            |s| Ok(s.to_string()),
        )
        .unwrap();
        assert_eq!(c.general.as_deref(), Some("zstd:level=9"));
        assert_eq!(c.per_category["pcmaudio/waveform"], "flac:level=8");
        assert!(split("-C", &["a".into(), "b".into()], |s| Ok(s.to_string())).is_err());
        assert!(split("-W", &["x::1".into(), "x::2".into()], |s| Ok(s.to_string())).is_err());
    }

    #[test]
    fn stream_options_set_general_and_per_category_values() {
        let mut o = CreateOptions::at_level(
            PathBuf::from("in"),
            "out".into(),
            crate::level::Level::get(5).unwrap(),
        );
        let given = |option, values| Given { option, values };
        let c = ["lz4".to_string(), "incompressible::null".to_string()];
        let w = ["pcmaudio/waveform::0".to_string()];
        let none: [String; 0] = [];
        let s = StreamOptions {
            compression: given("compression", &c),
            window_size: given("window_size", &w),
            window_step: given("window_step", &none),
            lookback: given("max_lookback_blocks", &none),
            order: given("order", &none),
        };
        s.apply(&mut o).unwrap();
        assert_eq!(o.data_compression, "lz4");
        assert_eq!(
            o.per_category["incompressible"].compression.as_deref(),
            Some("null")
        );
        assert_eq!(o.per_category["pcmaudio/waveform"].window_bits, Some(0));
        let bad = ["7".to_string()];
        let s = StreamOptions {
            window_size: given("window_size", &bad),
            ..s
        };
        assert_eq!(
            s.apply(&mut o).unwrap_err(),
            "window size bits 7 out of range (0, or 8 to 30)"
        );
    }

    #[test]
    fn times() {
        assert_eq!(parse_time("now", 42).unwrap(), 42);
        assert_eq!(parse_time("1700000000", 0).unwrap(), 1_700_000_000);
        assert_eq!(parse_time("1970-01-02", 0).unwrap(), 86_400);
        assert_eq!(parse_time("2023-11-14T22:13:20", 0).unwrap(), 1_700_000_000);
        assert_eq!(parse_time("2023-11-14 22:13", 0).unwrap(), 1_699_999_980);
        for bad in ["yesterday", "2023-13-01", "2023-01-01T25:00", "2023-01"] {
            assert!(parse_time(bad, 0).is_err(), "{bad}");
        }
    }

    #[test]
    fn resolutions() {
        assert_eq!(parse_resolution("s").unwrap(), 1_000_000_000);
        assert_eq!(parse_resolution("15min").unwrap(), 900_000_000_000);
        assert_eq!(parse_resolution("ms").unwrap(), 1_000_000);
        assert_eq!(parse_resolution("1ns").unwrap(), 1);
        assert!(parse_resolution("7ns").is_err());
        assert!(parse_resolution("1500ms").is_err());
        assert!(parse_resolution("0s").is_err());
        assert!(parse_resolution("3parsecs").is_err());
    }
}
