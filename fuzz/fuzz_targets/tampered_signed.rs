//! Any bytes as a signed image, tampered without the key: opened trusting
//! the seeds' key (checksums recomputed, signature as it is), and every
//! read that succeeds must answer what a genuine seed image answers.
#![no_main]

use hoard_reader::fuzzing::tampered::{signed_guard, Genuine};
use std::sync::OnceLock;

static GENUINE: OnceLock<Genuine> = OnceLock::new();

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let genuine = GENUINE.get_or_init(|| {
        Genuine::new(
            signed_guard(),
            &[
                include_bytes!("../seeds/tampered_signed/a.dwarfs"),
                include_bytes!("../seeds/tampered_signed/b.dwarfs"),
            ],
        )
    });
    genuine.check(data);
});
