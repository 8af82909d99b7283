//! Checksums of the contents of files in an image (holes read as zeros).

use crate::args::ChecksumAlgo;
use anyhow::Result;
use hoard_reader::{ContentPiece, Filesystem};
use sha2::Digest;

/// A running checksum of one of the supported kinds.
enum Hasher {
    Sha256(sha2::Sha256),
    Sha512(sha2::Sha512),
    Xxh3(Box<xxhash_rust::xxh3::Xxh3>),
}

impl Hasher {
    fn update(&mut self, data: &[u8]) {
        match self {
            Hasher::Sha256(h) => h.update(data),
            Hasher::Sha512(h) => h.update(data),
            Hasher::Xxh3(h) => h.update(data),
        }
    }

    fn hex(self) -> String {
        let bytes: Vec<u8> = match self {
            Hasher::Sha256(h) => h.finalize().to_vec(),
            Hasher::Sha512(h) => h.finalize().to_vec(),
            Hasher::Xxh3(h) => h.digest128().to_be_bytes().to_vec(),
        };
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// The `algo` checksum of the contents of regular file `ino`, in hex.
pub fn file_checksum(fs: &Filesystem, ino: u32, algo: ChecksumAlgo) -> Result<String> {
    let mut hasher = match algo {
        ChecksumAlgo::Sha256 => Hasher::Sha256(sha2::Sha256::new()),
        ChecksumAlgo::Sha512 => Hasher::Sha512(sha2::Sha512::new()),
        ChecksumAlgo::Xxh3 => Hasher::Xxh3(Box::default()),
    };
    let zeros = [0u8; 65536];
    fs.read_all(ino, |piece| {
        match piece {
            ContentPiece::Data(d) => hasher.update(d),
            ContentPiece::Hole(mut n) => {
                while n > 0 {
                    let k = n.min(zeros.len() as u64) as usize;
                    hasher.update(&zeros[..k]);
                    n -= k as u64;
                }
            }
        }
        Ok(())
    })?;
    Ok(hasher.hex())
}
