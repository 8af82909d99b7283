//! Time values on the command line: `--set-time` and `--time-resolution`.

use anyhow::{anyhow, bail, Result};

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

/// The civil date (proleptic Gregorian) `days` after 1970-01-01: the
/// inverse of [`days_from_civil`].
pub(crate) fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// Seconds since the epoch as `YYYY-MM-DD HH:MM:SS` (UTC).
pub fn format_utc(secs: i64) -> String {
    let (y, m, d) = civil_from_days(secs.div_euclid(86_400));
    let t = secs.rem_euclid(86_400);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
        t / 3600,
        t / 60 % 60,
        t % 60
    )
}

/// Parses `now`, seconds since the epoch, or an ISO 8601 date and time
/// (UTC; `T` or a space between date and time; seconds or the whole time
/// may be left out).
pub fn parse_time(s: &str, now: i64) -> Result<i64> {
    let bad = || {
        anyhow!(
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
        let n = |i: usize, max: i64| -> Result<i64> {
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
pub fn parse_resolution(s: &str) -> Result<u64> {
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: u64 = if num.is_empty() {
        1
    } else {
        num.parse()
            .map_err(|_| anyhow!("--time-resolution '{s}': invalid number"))?
    };
    let unit_ns: u64 = match unit {
        "ns" => 1,
        "us" => 1_000,
        "ms" => 1_000_000,
        "" | "s" | "sec" => 1_000_000_000,
        "m" | "min" => 60_000_000_000,
        "h" | "hour" => 3_600_000_000_000,
        "d" | "day" => 86_400_000_000_000,
        _ => bail!("--time-resolution '{s}': unknown unit '{unit}' (ns, us, ms, s, min, h, d)"),
    };
    let ns = n
        .checked_mul(unit_ns)
        .filter(|&v| v > 0)
        .ok_or_else(|| anyhow!("--time-resolution '{s}': out of range"))?;
    if ns < 1_000_000_000 && 1_000_000_000 % ns != 0 {
        bail!("--time-resolution '{s}': a resolution below one second must divide it");
    }
    if ns > 1_000_000_000 && ns % 1_000_000_000 != 0 {
        bail!("--time-resolution '{s}': a resolution above one second must be whole seconds");
    }
    Ok(ns)
}

#[cfg(test)]
mod tests {
    #[test]
    fn utc_times_format_and_parse_back() {
        assert_eq!(format_utc(0), "1970-01-01 00:00:00");
        assert_eq!(format_utc(1_700_000_000), "2023-11-14 22:13:20");
        assert_eq!(format_utc(-1), "1969-12-31 23:59:59");
        for secs in [951_782_400, 4_107_542_399, 1_234_567_890] {
            assert_eq!(parse_time(&format_utc(secs), 0).unwrap(), secs);
        }
    }

    use super::*;

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
