//! FSST tables we write decode with an independent implementation, the
//! `dwarfs` crate's decoder, to the original strings.

use hoard_format::write::fsst::Encoder;

fn check(strings: &[Vec<u8>]) {
    let enc = Encoder::learn(&strings.iter().collect());
    let dec = dwarfs::fsst::Decoder::parse(&enc.serialize()).unwrap();
    for s in strings {
        let back = dec.decode(&enc.encode(s)).unwrap();
        assert_eq!(back.as_slice(), s.as_slice());
    }
}

#[test]
fn file_names_decode_with_the_dwarfs_crate() {
    let mut names: Vec<Vec<u8>> = [
        "hello.txt",
        "emptydir",
        "partial.bin",
        "ünïcødé ☃.txt",
        "with space",
        "new\nline",
        "libc.so.6",
        "README.md",
        "Makefile",
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect();
    names.extend((0..20_000).map(|i| format!("f{i:05}").into_bytes()));
    names.extend(
        (0..300).map(|i| format!("python3.{}/site-packages/mod{i}.py", i % 12).into_bytes()),
    );
    check(&names);
}

#[test]
fn binary_strings_decode_with_the_dwarfs_crate() {
    let mut s = 99u64;
    let strings: Vec<Vec<u8>> = (0..500)
        .map(|i| {
            (0..1 + i % 30)
                .map(|_| {
                    s = s
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    // No NUL bytes: the dwarfs crate reads symbol lengths
                    // from the last non-zero byte.
                    ((s >> 56) as u8).max(1)
                })
                .collect()
        })
        .collect();
    check(&strings);
}
