//! Any bytes as what a registry client parses besides JSON: a
//! `WWW-Authenticate` header and a `docker://` reference. A reference
//! that parses prints as one that parses to the same.
#![no_main]

use hoard_oci::registry::{auth::Challenge, ImageRef};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let _ = Challenge::parse(&text);
    for name in [text.to_string(), format!("docker://{text}")] {
        if let Ok(parsed) = ImageRef::parse(&name) {
            let again = ImageRef::parse(&parsed.to_string()).expect("a printed reference parses");
            assert_eq!(again, parsed);
            let _ = parsed.is_loopback();
        }
    }
});
