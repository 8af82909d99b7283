//! Tampering as an attacker would: the fuzzer's bytes are an image that
//! started as one of a few genuine ones (the seeds), its unkeyed section
//! checksums recomputed after each mutation but its signature or seals
//! left as they are. The image is opened as `hoard` opens it, trusting
//! the signing key or holding the age identity, and every read that
//! succeeds must give what the same read gives on one of the genuine
//! images. A read that returns other bytes panics: that is the finding.

use super::{fix_section_hashes, CACHE_SIZE};
use crate::image::{Image, ImageOffset, OpenOptions};
use crate::source::Source;
use crate::{walk, ContentPiece, FileKind, Filesystem, Stat};
use std::collections::BTreeMap;
use std::sync::Arc;

/// How the images are opened: the checks a tampered image must not get
/// past.
#[derive(Clone)]
pub enum Guard {
    /// Signed: opened trusting this key (`--trust`).
    Signed(hoard_trust::PublicKey),
    /// Encrypted: opened with these identities (`--identity`).
    Sealed(Arc<hoard_trust::encrypt::Identities>),
}

impl Guard {
    fn options(&self) -> OpenOptions {
        let mut options = OpenOptions {
            offset: ImageOffset::Auto,
            ..Default::default()
        };
        match self {
            Guard::Signed(key) => {
                options.trust = Some(hoard_trust::TrustedKeys::from_keys(vec![key.clone()]))
            }
            Guard::Sealed(identities) => options.identities = Some(identities.clone()),
        }
        options
    }
}

/// What one read is: the question asked of the file system.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Read {
    Stat(u32),
    Dir(u32),
    Link(u32),
    Xattrs(u32),
    Range(u32, u64),
    Whole(u32),
    Path(Vec<u8>),
}

/// What a read answered.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Answer {
    Stat(Stat),
    Dir(Vec<(Vec<u8>, u32)>),
    Bytes(Vec<u8>),
    Xattrs(Vec<(Vec<u8>, Vec<u8>)>),
    Pieces(Vec<Piece>),
    Ino(u32),
}

/// A piece of a file's contents, as `read_all` gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Data(Vec<u8>),
    Hole(u64),
}

/// Every read that succeeded on an image, and its answer.
#[derive(Debug, Default)]
pub struct Answers(BTreeMap<Read, Answer>);

impl Answers {
    /// Opens `bytes` guarded by `guard` and reads everything; `None`
    /// when the image does not open.
    fn of(bytes: &[u8], guard: &Guard) -> Option<Self> {
        let bytes = bytes.to_vec();
        let image = Image::open_source(|| Ok(Source::Bytes(bytes.clone())), &guard.options());
        let fs = Filesystem::from_image(image.ok()?, CACHE_SIZE).ok()?;
        Some(Self::read(&fs))
    }

    /// Asks `fs` every question there is, keeping the answers given.
    fn read(fs: &Filesystem) -> Self {
        let mut answers = Answers::default();
        for ino in 0..fs.layout().count {
            answers.ask(Read::Xattrs(ino), || {
                let list = fs.xattrs(ino)?;
                Ok(Answer::Xattrs(
                    list.iter().map(|(n, v)| (n.to_vec(), v.to_vec())).collect(),
                ))
            });
            let Ok(stat) = fs.stat(ino) else { continue };
            answers.0.insert(Read::Stat(ino), Answer::Stat(stat));
            match stat.kind {
                FileKind::Directory => answers.ask(Read::Dir(ino), || {
                    let entries = fs.readdir(ino)?;
                    Ok(Answer::Dir(
                        entries.into_iter().map(|e| (e.name, e.ino)).collect(),
                    ))
                }),
                FileKind::Symlink => answers.ask(Read::Link(ino), || {
                    Ok(Answer::Bytes(fs.readlink(ino)?.to_vec()))
                }),
                FileKind::Regular => {
                    for offset in [0, stat.size / 2, stat.size.saturating_sub(100)] {
                        answers.ask(Read::Range(ino, offset), || {
                            let mut buf = vec![0u8; 4096];
                            let n = fs.read(ino, offset, &mut buf)?;
                            buf.truncate(n);
                            Ok(Answer::Bytes(buf))
                        });
                    }
                    answers.ask(Read::Whole(ino), || {
                        let mut pieces = Vec::new();
                        fs.read_all(ino, |piece| {
                            pieces.push(match piece {
                                ContentPiece::Data(d) => Piece::Data(d.to_vec()),
                                ContentPiece::Hole(n) => Piece::Hole(n),
                            });
                            Ok(())
                        })?;
                        Ok(Answer::Pieces(pieces))
                    });
                }
                _ => {}
            }
        }
        for node in walk::walk(fs, fs.root(), b"").unwrap_or_default() {
            answers.ask(Read::Path(node.path.clone()), || {
                Ok(Answer::Ino(fs.lookup_path_bytes(&node.path)?))
            });
        }
        answers
    }

    /// Keeps `answer`'s result for `read` when it succeeded.
    fn ask(&mut self, read: Read, answer: impl FnOnce() -> crate::Result<Answer>) {
        if let Ok(answer) = answer() {
            self.0.insert(read, answer);
        }
    }

    /// The first read whose answer differs from `genuine`'s (a read
    /// the genuine image never answered counts as differing).
    fn first_difference(&self, genuine: &Answers) -> Option<&Read> {
        self.0
            .iter()
            .find(|(read, answer)| genuine.0.get(read) != Some(answer))
            .map(|(read, _)| read)
    }
}

/// The genuine images a target starts from, with everything they answer.
pub struct Genuine {
    guard: Guard,
    answers: Vec<Answers>,
}

impl Genuine {
    /// Reads each of `images` guarded by `guard`. Panics when one does
    /// not open: the seeds are broken, not the reader.
    pub fn new(guard: Guard, images: &[&[u8]]) -> Self {
        let answers = images
            .iter()
            .map(|image| Answers::of(image, &guard).expect("a genuine image opens"))
            .collect();
        Genuine { guard, answers }
    }

    /// Opens `data` (its section checksums recomputed) and reads
    /// everything. Panics when any read answers what none of the genuine
    /// images answers.
    pub fn check(&self, data: &[u8]) {
        let mut bytes = data.to_vec();
        fix_section_hashes(&mut bytes);
        let Some(tampered) = Answers::of(&bytes, &self.guard) else {
            return;
        };
        let differences: Vec<&Read> = self
            .answers
            .iter()
            .map_while(|genuine| tampered.first_difference(genuine))
            .collect();
        if differences.len() == self.answers.len() {
            panic!(
                "a tampered image answered {:?} with what no genuine image holds",
                differences[0]
            );
        }
    }
}

/// The public key of the signed seed images (`seeds/tampered_signed`),
/// made with `hoard keygen`; its secret half was thrown away.
pub const SIGNED_KEY: &str = "hoard-ed25519 4J57CSX5v4fwYNNgCNgnjJWzSsHkmYMixgam+DQDTFY=";

/// The guard of the signed seeds: their key, trusted.
pub fn signed_guard() -> Guard {
    Guard::Signed(hoard_trust::PublicKey::parse_line(SIGNED_KEY).expect("the seed key parses"))
}

/// The guard of the encrypted seeds: the fuzzing identity.
pub fn sealed_guard() -> Guard {
    let mut identities = hoard_trust::encrypt::Identities::default();
    identities
        .add_text(super::FUZZ_IDENTITY)
        .expect("the fuzzing identity parses");
    Guard::Sealed(Arc::new(identities))
}
