//! Content digests (`sha256:…`, `sha512:…`) and a reader that checks them.

use std::fmt;
use std::io::{self, Read};

use sha2::{Digest as _, Sha256, Sha512};

use crate::error::{Error, Result};

/// A content digest as OCI writes it: an algorithm and the lowercase hex of
/// the hash. Only `sha256` and `sha512` are accepted.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct Digest {
    algorithm: Algorithm,
    hex: String,
}

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Algorithm {
    Sha256,
    Sha512,
}

impl Algorithm {
    fn name(self) -> &'static str {
        match self {
            Algorithm::Sha256 => "sha256",
            Algorithm::Sha512 => "sha512",
        }
    }

    fn hex_len(self) -> usize {
        match self {
            Algorithm::Sha256 => 64,
            Algorithm::Sha512 => 128,
        }
    }
}

impl Digest {
    /// Parses `ALGORITHM:HEX`, checking the algorithm and the hex's length
    /// and alphabet (lowercase only, as the OCI image spec requires).
    pub fn parse(text: &str) -> Result<Digest> {
        let bad = || Error::BadDigest(text.chars().take(200).collect());
        let (name, hex) = text.split_once(':').ok_or_else(bad)?;
        let algorithm = match name {
            "sha256" => Algorithm::Sha256,
            "sha512" => Algorithm::Sha512,
            _ => return Err(bad()),
        };
        let lower_hex = |c: char| c.is_ascii_digit() || ('a'..='f').contains(&c);
        if hex.len() != algorithm.hex_len() || !hex.chars().all(lower_hex) {
            return Err(bad());
        }
        Ok(Digest {
            algorithm,
            hex: hex.to_string(),
        })
    }

    /// The sha256 digest of `bytes`.
    pub fn sha256_of(bytes: &[u8]) -> Digest {
        Digest {
            algorithm: Algorithm::Sha256,
            hex: hex_of(&Sha256::digest(bytes)),
        }
    }

    /// The hex part, without the algorithm: a safe file name, since it
    /// holds only `0-9a-f`.
    pub fn hex(&self) -> &str {
        &self.hex
    }

    /// The algorithm's name: `sha256` or `sha512`.
    pub fn algorithm(&self) -> &'static str {
        self.algorithm.name()
    }

    /// Checks that `bytes` hash to this digest.
    pub fn verify(&self, bytes: &[u8]) -> Result<()> {
        let mut hasher = Hasher::new(self.algorithm);
        hasher.update(bytes);
        self.check(hasher.finish())
    }

    fn check(&self, actual_hex: String) -> Result<()> {
        if actual_hex == self.hex {
            Ok(())
        } else {
            Err(Error::DigestMismatch {
                expected: self.to_string(),
                actual: format!("{}:{actual_hex}", self.algorithm.name()),
            })
        }
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.algorithm.name(), self.hex)
    }
}

enum Hasher {
    Sha256(Sha256),
    Sha512(Sha512),
}

impl Hasher {
    fn new(algorithm: Algorithm) -> Hasher {
        match algorithm {
            Algorithm::Sha256 => Hasher::Sha256(Sha256::new()),
            Algorithm::Sha512 => Hasher::Sha512(Sha512::new()),
        }
    }

    fn update(&mut self, bytes: &[u8]) {
        match self {
            Hasher::Sha256(h) => h.update(bytes),
            Hasher::Sha512(h) => h.update(bytes),
        }
    }

    fn finish(self) -> String {
        match self {
            Hasher::Sha256(h) => hex_of(&h.finalize()),
            Hasher::Sha512(h) => hex_of(&h.finalize()),
        }
    }
}

fn hex_of(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Streams content while hashing it. It fails with an error of kind
/// `InvalidData` as soon as more than `size` bytes arrive, and at the end
/// of the stream when the size or the digest differ, so a consumer that
/// reads to the end never accepts content that failed its check. A
/// consumer must treat what it read as unchecked until it has seen the
/// end of the stream (a read returning 0).
pub struct VerifyingReader<R> {
    inner: R,
    digest: Digest,
    size: u64,
    read: u64,
    hasher: Option<Hasher>,
}

impl<R: Read> VerifyingReader<R> {
    /// Wraps `inner`, which must yield exactly `size` bytes hashing to `digest`.
    pub fn new(inner: R, digest: Digest, size: u64) -> VerifyingReader<R> {
        let hasher = Some(Hasher::new(digest.algorithm));
        VerifyingReader {
            inner,
            digest,
            size,
            read: 0,
            hasher,
        }
    }

    fn invalid(error: Error) -> io::Error {
        io::Error::new(io::ErrorKind::InvalidData, error.to_string())
    }

    fn size_error(&self, actual: u64) -> io::Error {
        Self::invalid(Error::SizeMismatch {
            digest: self.digest.to_string(),
            expected: self.size,
            actual,
        })
    }
}

impl<R: Read> Read for VerifyingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        if n == 0 {
            let Some(hasher) = self.hasher.take() else {
                return Ok(0);
            };
            if self.read != self.size {
                return Err(self.size_error(self.read));
            }
            return match self.digest.check(hasher.finish()) {
                Ok(()) => Ok(0),
                Err(e) => Err(Self::invalid(e)),
            };
        }
        self.read += n as u64;
        if self.read > self.size {
            self.hasher = None;
            return Err(self.size_error(self.read));
        }
        match &mut self.hasher {
            Some(hasher) => hasher.update(&buf[..n]),
            None => return Err(self.size_error(self.read)),
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EMPTY: &str = "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

    #[test]
    fn parses_and_prints() {
        let d = Digest::parse(EMPTY).unwrap();
        assert_eq!(d.to_string(), EMPTY);
        assert_eq!(d, Digest::sha256_of(b""));
        for bad in [
            "sha256:",
            "md5:00",
            "sha256:E3B0",
            "nocolon",
            &EMPTY.replace('e', "g"),
        ] {
            assert!(Digest::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn reader_checks_size_and_hash() {
        let d = Digest::sha256_of(b"hello");
        let read_all = |data: &[u8], size| {
            let mut out = Vec::new();
            VerifyingReader::new(data, d.clone(), size).read_to_end(&mut out)
        };
        assert_eq!(read_all(b"hello", 5).unwrap(), 5);
        assert!(read_all(b"hellO", 5).is_err());
        assert!(read_all(b"hello!", 5).is_err());
        assert!(read_all(b"hell", 4).is_err());
        assert!(read_all(b"hello", 6).is_err());
    }
}
