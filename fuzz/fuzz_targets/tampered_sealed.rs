//! Any bytes as an encrypted image, tampered without the data key: opened
//! with the fuzzing identity (checksums recomputed, seals as they are),
//! and every read that succeeds must answer what a genuine seed image
//! answers.
#![no_main]

use hoard_reader::fuzzing::tampered::{sealed_guard, Genuine};
use std::sync::OnceLock;

static GENUINE: OnceLock<Genuine> = OnceLock::new();

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let genuine = GENUINE.get_or_init(|| {
        Genuine::new(
            sealed_guard(),
            &[
                include_bytes!("../seeds/tampered_sealed/a.dwarfs"),
                include_bytes!("../seeds/tampered_sealed/b.dwarfs"),
            ],
        )
    });
    genuine.check(data);
});
