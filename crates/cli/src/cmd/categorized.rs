//! Options that take `VALUE` for every category or `CATEGORY::VALUE` for
//! one (`-C pcmaudio/waveform::flac:level=8`), as DwarFS's do.

use anyhow::{bail, Result};
use std::collections::BTreeMap;

/// The values of one such option, split by category.
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
    parse: impl Fn(&str) -> Result<T>,
) -> Result<Categorized<T>> {
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
                    bail!("{option} given twice for category '{category}'");
                }
            }
            None => {
                if out.general.replace(parse(v)?).is_some() {
                    bail!("{option} given twice without a category");
                }
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
