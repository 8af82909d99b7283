//! Byte counts as options give them: `512`, `4k`, `64m`, `1g`.

/// Parses a byte count with an optional k/m/g suffix (powers of 1024).
pub fn parse_size(s: &str) -> Result<usize, String> {
    let t = s.trim().to_ascii_lowercase();
    let (num, shift) = match t.strip_suffix(['k', 'm', 'g', 't']) {
        Some(n) => (
            n,
            10 * (1 + "kmgt".find(t.chars().last().unwrap_or('k')).unwrap_or(0)),
        ),
        None => (t.as_str(), 0),
    };
    let n: usize = num.parse().map_err(|_| format!("invalid size '{s}'"))?;
    n.checked_shl(shift as u32)
        .filter(|v| v >> shift == n)
        .ok_or_else(|| format!("size '{s}' is too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_suffixes() {
        assert_eq!(parse_size("512"), Ok(512));
        assert_eq!(parse_size("4k"), Ok(4096));
        assert_eq!(parse_size("2M"), Ok(2 << 20));
        assert_eq!(parse_size("1g"), Ok(1 << 30));
        assert!(parse_size("x").is_err());
    }
}
