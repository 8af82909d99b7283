//! Keys named on the command line: `--trust PUB` (and `HOARD_TRUST`) and
//! `--identity FILE` (and `HOARD_IDENTITY`) for reading, loaded in one
//! place ([`ReadKeys::load`]), `--sign KEY` and
//! `--encrypt-to RECIPIENT` for writing, `--passphrase-file FILE` for
//! either (see the hoard-trust crate); what a signature claims
//! (`--sign-name`, `--sign-version`, `--sign-expires`) and what a reader
//! expects of it (`--expect-name`, `--min-version`).

use anyhow::{Context, Result};
use hoard_reader::OpenOptions;
use hoard_trust::encrypt::{Identities, Recipients};
use hoard_trust::{Claims, Expectations, SecretKey, TrustedKeys};
use hoard_writer::output::OutputOptions;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use hoard_reader::open::{IDENTITY_ENV, TRUST_ENV};

/// Key files named for reading images: `--trust`, `--identity` and
/// `--passphrase-file` (or `--input-passphrase-file`; mount's `trust=`,
/// `identity=` and `passphrase_file=`), with those `HOARD_TRUST` and
/// `HOARD_IDENTITY` name, and what the signatures must claim
/// (`--expect-name`, `--min-version`; mount's `expect_name=`,
/// `min_version=`).
#[derive(Debug, Clone, Default)]
pub struct ReadKeys {
    /// Public key files whose keys are trusted.
    pub trust: Vec<PathBuf>,
    /// Identity files that open encrypted images.
    pub identity: Vec<PathBuf>,
    /// A file holding the passphrase of encrypted images.
    pub passphrase_file: Option<PathBuf>,
    /// What the signatures of images opened with trusted keys must claim.
    pub expect: Expectations,
}

impl ReadKeys {
    /// The reader's options with these keys loaded: the one place keys
    /// for reading images are loaded.
    pub fn load(&self) -> Result<OpenOptions> {
        Ok(OpenOptions {
            trust: trusted_keys(&self.trust)?,
            identities: identities(&self.identity, self.passphrase_file.as_deref())?,
            expect: self.expect.clone(),
            ..OpenOptions::default()
        })
    }
}

/// The keys in the files `--trust` names and in those of `HOARD_TRUST`;
/// `None` when neither names any (images are then read unverified).
fn trusted_keys(args: &[PathBuf]) -> Result<Option<TrustedKeys>> {
    let mut files = args.to_vec();
    if let Some(list) = std::env::var_os(TRUST_ENV) {
        files.extend(std::env::split_paths(&list).filter(|p| !p.as_os_str().is_empty()));
    }
    if files.is_empty() {
        return Ok(None);
    }
    Ok(Some(TrustedKeys::load(&files)?))
}

/// The secret key in `path`, if given (this process then writes no core
/// dump: see [`no_core_dumps`]).
pub fn signing_key(path: Option<&Path>) -> Result<Option<Arc<SecretKey>>> {
    let Some(path) = path else {
        return Ok(None);
    };
    no_core_dumps();
    let key = SecretKey::load(path).context("cannot sign")?;
    Ok(Some(Arc::new(key)))
}

/// Keeps a secret key held by this process out of core dumps (and from
/// other processes of the user attaching to read it): the process is made
/// non-dumpable before any key is read.
pub fn no_core_dumps() {
    // SAFETY: prctl with PR_SET_DUMPABLE takes a plain integer.
    unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) };
}

/// The identities in the files `--identity` names and in those of
/// `HOARD_IDENTITY`, and the passphrase in `passphrase` (a file); `None`
/// when none is given (an encrypted image then opens only as far as
/// `hoard info` needs). This process then writes no core dump.
fn identities(files: &[PathBuf], passphrase: Option<&Path>) -> Result<Option<Arc<Identities>>> {
    let mut files = files.to_vec();
    if let Some(list) = std::env::var_os(IDENTITY_ENV) {
        files.extend(std::env::split_paths(&list).filter(|p| !p.as_os_str().is_empty()));
    }
    if files.is_empty() && passphrase.is_none() {
        return Ok(None);
    }
    no_core_dumps();
    Ok(Identities::given(&files, passphrase)?.map(Arc::new))
}

/// Who an image is to be encrypted to: the recipients `--encrypt-to`
/// names, or the passphrase in `passphrase` (a file); `None` for a plain
/// image.
pub fn recipients(to: &[String], passphrase: Option<&Path>) -> Result<Option<Arc<Recipients>>> {
    let recipients = match (to.is_empty(), passphrase) {
        (true, None) => return Ok(None),
        (false, None) => Recipients::parse(to)?,
        (true, Some(path)) => {
            no_core_dumps();
            Recipients::passphrase(path)?
        }
        (false, Some(_)) => {
            anyhow::bail!("--encrypt-to and --passphrase-file cannot be used together")
        }
    };
    Ok(Some(Arc::new(recipients)))
}

/// What is added to the image a command writes (`create`, `rewrite`,
/// `merge`): recovery data, a signature, encryption, a header.
#[derive(Debug, Clone, clap::Args)]
pub struct OutputArgs {
    /// Add Reed-Solomon recovery data of PERCENT of the image (1-100), so
    /// that `hoard repair` can undo damage up to about that size.
    #[arg(long, value_name = "PERCENT", value_parser = clap::value_parser!(u32).range(1..=100))]
    pub recovery: Option<u32>,
    /// Sign the image with this secret key (`hoard keygen`, or an
    /// OpenSSH ed25519 key); `hoard verify --trust` checks it.
    #[arg(long, value_name = "KEY")]
    pub sign: Option<PathBuf>,
    #[command(flatten)]
    pub claims: ClaimArgs,
    /// Encrypt the image to RECIPIENT: an age public key (`age1…`), an
    /// OpenSSH public key (`ssh-ed25519 …`, `ssh-rsa …`) or a file of
    /// them, one a line (repeatable). Readers need `--identity`.
    #[arg(long = "encrypt-to", value_name = "RECIPIENT")]
    pub encrypt_to: Vec<String>,
    /// Encrypt the image with the passphrase in the first line of FILE
    /// (age's scrypt); readers need `--passphrase-file`.
    #[arg(long, value_name = "FILE", conflicts_with = "encrypt_to")]
    pub passphrase_file: Option<PathBuf>,
    /// File to put before the image (e.g. a shell script).
    #[arg(long)]
    pub header: Option<PathBuf>,
}

impl OutputArgs {
    /// The writer's options for the image at `path` (overwritten if
    /// `force`, flushed to disk if `fsync`): these arguments' header,
    /// recovery data, signing key and recipients, read and loaded.
    pub fn options(&self, path: &Path, force: bool, fsync: bool) -> Result<OutputOptions> {
        let header = self
            .header
            .as_ref()
            .map(|h| {
                std::fs::read(h)
                    .with_context(|| format!("cannot read header file '{}'", h.display()))
            })
            .transpose()?;
        Ok(OutputOptions {
            path: path.to_path_buf(),
            force,
            fsync,
            header,
            recovery: self.recovery,
            sign: signing_key(self.sign.as_deref())?,
            claims: self.claims.claims()?,
            encrypt: recipients(&self.encrypt_to, self.passphrase_file.as_deref())?,
        })
    }
}

/// What a signature claims of the image it signs (with `--sign`, or in
/// `hoard sign`).
#[derive(Debug, Clone, clap::Args)]
pub struct ClaimArgs {
    /// Sign NAME as the image's name: readers given `--expect-name`
    /// refuse it under any other.
    #[arg(long, value_name = "NAME")]
    pub sign_name: Option<String>,
    /// Sign N (an unsigned integer) as the image's version: readers
    /// given `--min-version` refuse older ones.
    #[arg(long, value_name = "N")]
    pub sign_version: Option<u64>,
    /// The signature expires at DATE (RFC 3339: 2027-01-31, the start of
    /// that day in UTC, or 2027-01-31T12:00:00Z); from then on readers
    /// that trust the key refuse the image.
    #[arg(long, value_name = "DATE", value_parser = parse_expiry)]
    pub sign_expires: Option<i64>,
}

/// `--sign-expires`'s date, in seconds since 1970-01-01 UTC.
fn parse_expiry(s: &str) -> std::result::Result<i64, String> {
    hoard_trust::claims::parse_time(s).map_err(|e| e.to_string())
}

impl ClaimArgs {
    /// The claims given (none when no option is).
    pub fn claims(&self) -> Result<Claims> {
        Ok(Claims::new(
            self.sign_name.clone(),
            self.sign_version,
            self.sign_expires,
        )?)
    }
}

/// What a reader requires of the signature of an image it opens with
/// trusted keys (which also refuse an expired one).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ExpectArgs {
    /// Read the image only if its signature names it NAME (with --trust;
    /// `hoard sign --sign-name`).
    #[arg(long, value_name = "NAME")]
    pub expect_name: Option<String>,
    /// Read the image only if its signature gives it version N or a
    /// later one (with --trust; `hoard sign --sign-version`).
    #[arg(long, value_name = "N")]
    pub min_version: Option<u64>,
}

impl ExpectArgs {
    /// The reader's expectations.
    pub fn expectations(&self) -> Expectations {
        Expectations {
            name: self.expect_name.clone(),
            min_version: self.min_version,
        }
    }
}

/// A signature's claims as JSON: `name`, `version` and `expires` (an
/// RFC 3339 date or time), each `null` when not claimed.
pub fn claims_json(claims: &Claims) -> serde_json::Value {
    serde_json::json!({
        "name": claims.name,
        "version": claims.version,
        "expires": claims.expires.map(hoard_trust::claims::format_time),
    })
}

/// A signature's claims as a line of text shows them after the signer:
/// ` (CLAIMS)`, or nothing when there are none.
pub fn claims_suffix(claims: &Claims) -> String {
    if claims.is_empty() {
        String::new()
    } else {
        format!(" ({claims})")
    }
}

/// The keys for the images a command reads to write another (`create
/// --base`, `rewrite`, `merge`): the keys trusted to have signed them,
/// and those that open encrypted ones.
#[derive(Debug, Clone, clap::Args)]
pub struct InputKeyArgs {
    /// Read images (inputs, --base layers) only if signed by a key in
    /// this public key file (repeatable; also HOARD_TRUST, files
    /// separated by `:`), checking every block against the signature
    /// before use.
    #[arg(long = "trust", value_name = "PUB")]
    pub trust: Vec<PathBuf>,
    /// Open encrypted images read (inputs, --base layers) with this
    /// identity file: an age identity (`age-keygen`) or an OpenSSH
    /// private key (repeatable; also HOARD_IDENTITY, files separated by
    /// `:`).
    #[arg(long = "identity", value_name = "FILE")]
    pub identity: Vec<PathBuf>,
    /// Open images read that are encrypted with a passphrase, read from
    /// the first line of FILE.
    #[arg(long, value_name = "FILE")]
    pub input_passphrase_file: Option<PathBuf>,
    /// Write a plain image (one DwarFS reads) though images read are
    /// encrypted.
    #[arg(long, conflicts_with_all = ["encrypt_to", "passphrase_file"])]
    pub decrypt: bool,
}

impl InputKeyArgs {
    /// The reader's options with the keys named loaded.
    pub fn load(&self) -> Result<OpenOptions> {
        ReadKeys {
            trust: self.trust.clone(),
            identity: self.identity.clone(),
            passphrase_file: self.input_passphrase_file.clone(),
            expect: Default::default(),
        }
        .load()
    }

    /// Sets the keys and `--decrypt` on a build's options.
    pub fn apply(&self, o: &mut hoard_writer::CreateOptions) -> Result<()> {
        let keys = self.load()?;
        o.trust = keys.trust;
        o.identities = keys.identities;
        o.decrypt = self.decrypt;
        Ok(())
    }
}
