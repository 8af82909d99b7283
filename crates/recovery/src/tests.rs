//! Round trips over an in-memory file: build, damage, find, repair.

use crate::{build_section, Layout, Recovery};

/// A file of `len` pseudo-random bytes followed by recovery data of
/// `percent`%.
fn file_with_recovery(len: usize, percent: u32) -> Vec<u8> {
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let protected: Vec<u8> = (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    let layout = Layout::plan(len as u64, 7, percent).unwrap();
    let section = build_section(&layout, &protected).unwrap();
    let mut file = protected;
    file.extend_from_slice(&section.bytes);
    assert_eq!(file.len() as u64, layout.file_len);
    file
}

fn repaired(file: &[u8]) -> Vec<u8> {
    let rec = Recovery::search(&file.to_vec()).expect("recovery data found");
    let damage = rec.damage(&file.to_vec()).unwrap();
    let mut out = Vec::new();
    rec.write_repaired(&file.to_vec(), &damage, &mut out)
        .unwrap();
    out
}

#[test]
fn clean_file_has_no_damage_and_repairs_to_itself() {
    let file = file_with_recovery(300_000, 5);
    let rec = Recovery::find(&file).unwrap();
    assert!(rec.damage(&file).unwrap().is_empty());
    assert_eq!(repaired(&file), file);
}

#[test]
fn scattered_bytes_and_a_burst_are_repaired() {
    let original = file_with_recovery(3_000_000, 5);
    let mut file = original.clone();
    for k in 0..32u64 {
        let pos = (k * 2_654_435_761) % file.len() as u64;
        file[pos as usize] ^= 0x5A;
    }
    assert_eq!(repaired(&file), original);
    let mut file = original.clone();
    file[1_000_000..1_100_000]
        .iter_mut()
        .for_each(|b| *b ^= 0xFF);
    let rec = Recovery::search(&file).unwrap();
    let damage = rec.damage(&file).unwrap();
    assert!(damage.repairable());
    assert_eq!(
        damage.ranges(),
        &[std::ops::Range {
            start: 1_000_000,
            end: 1_100_000
        }]
    );
    let mut buf = vec![0u8; 300_000];
    let stripes = rec.read(&file, 900_000, &mut buf).unwrap();
    assert!(!stripes.is_empty());
    assert_eq!(buf, original[900_000..1_200_000]);
    assert_eq!(repaired(&file), original);
}

#[test]
fn damage_beyond_the_budget_is_refused() {
    let original = file_with_recovery(3_000_000, 5);
    let mut file = original.clone();
    file[500_000..800_000].fill(0);
    let rec = Recovery::search(&file).unwrap();
    let damage = rec.damage(&file).unwrap();
    assert!(!damage.repairable());
    assert!(!damage.lost_ranges(rec.layout()).is_empty());
    let mut out = Vec::new();
    assert!(rec.write_repaired(&file, &damage, &mut out).is_err());
    assert!(out.is_empty());
    let mut buf = vec![0u8; 10];
    assert!(rec.read(&file, 600_000, &mut buf).is_err());
}

#[test]
fn damaged_recovery_section_is_rebuilt() {
    let original = file_with_recovery(1_000_000, 5);
    let mut file = original.clone();
    // Its header, first descriptor and a page of the first table.
    file[1_000_000..1_000_000 + 200].fill(0xFF);
    let rec = Recovery::search(&file).unwrap();
    let damage = rec.damage(&file).unwrap();
    assert!(damage.data_shards.is_empty());
    assert_eq!(
        damage.recovery_parts.len(),
        3,
        "{:?}",
        damage.recovery_parts
    );
    assert_eq!(repaired(&file), original);
}
