//! Dates shown by the command line (parsing times given to it is
//! hoard-writer's [`parse`](hoard_writer::parse)).

/// The civil date (proleptic Gregorian) `days` after 1970-01-01: the
/// inverse of the date parsing in `hoard_writer::parse`.
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

#[cfg(test)]
mod tests {
    use super::*;
    use hoard_writer::parse::parse_time;

    #[test]
    fn utc_times_format_and_parse_back() {
        assert_eq!(format_utc(0), "1970-01-01 00:00:00");
        assert_eq!(format_utc(1_700_000_000), "2023-11-14 22:13:20");
        assert_eq!(format_utc(-1), "1969-12-31 23:59:59");
        for secs in [951_782_400, 4_107_542_399, 1_234_567_890] {
            assert_eq!(parse_time(&format_utc(secs), 0).unwrap(), secs);
        }
    }
}
