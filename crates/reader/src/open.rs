//! Opening images: the one way in. What to open is one value, a
//! [`Target`]: the images (bottom first: files, URLs, archives), what
//! they are opened as ([`Form`]), how (offset, size, trusted keys,
//! identities, cache: [`FsOptions`]) and how archives become images
//! ([`ArchiveImages`]). [`open`] opens it.
//!
//! Every front end (the CLI, the Python and C APIs, the writer reading
//! the images a build starts from) opens through here, so a trusted key
//! given reaches every image read: each is checked against its
//! signature before any of its bytes is used ([`crate::signed`]), and an
//! archive, which carries no signature, is refused. Errors name the
//! image that failed: `cannot open image 'X': ...`.
//!
//! ```no_run
//! use hoard_reader::open::{open, Target};
//! let stack = open(&Target::new(vec!["image.dwarfs".into()]))?.into_stack()?;
//! # Ok::<(), hoard_reader::Error>(())
//! ```

use crate::cache::BlockCache;
use crate::error::{Error, Result};
use crate::{Filesystem, FsOptions, Image, Set, Stack, View};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Public key files trusted by every command, separated by `:`. A
/// front end that cannot apply them refuses to open with them set.
pub const TRUST_ENV: &str = "HOARD_TRUST";

/// Identity files used by every command, separated by `:`.
pub const IDENTITY_ENV: &str = "HOARD_IDENTITY";

/// How archive files named as images become images: the writer's
/// `ArchiveCache` packs each into an image kept in a cache. The reader
/// reads no archive itself.
pub trait ArchiveImages: Send + Sync {
    /// Whether the file at `path` is an archive rather than an image.
    fn is_archive(&self, path: &Path) -> bool;

    /// The image to open for `path`: for an archive, its image (packed
    /// first when need be); `None` for anything else. Errors name the
    /// archive.
    fn image_for(&self, path: &Path) -> Result<Option<PathBuf>>;
}

/// What the images of a [`Target`] are opened as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// One tree: the images stacked, the last on top (one image is a
    /// stack of one, read as it is). A layer that records other base
    /// images than the ones below it is refused unless `force`.
    Stack {
        /// Stack layers made on other images too.
        force: bool,
    },
    /// One image's file system, not stacked (a delta layer loads without
    /// its bases, to tell what it is); its sections only
    /// ([`Opened::Sections`]) when it is encrypted and no identity given
    /// opens it, for tools that tell what they can of it.
    Image,
    /// One image's sections, its file system not loaded: for checks of
    /// images whose metadata may not load.
    Sections,
    /// The images side by side, each a directory of the root named
    /// after it, opened on demand (see [`crate::set`]); one directory
    /// given: its `*.dwarfs` images, followed as it changes if `watch`.
    /// Archives are not packed for a set.
    Set {
        /// Follow the directory ([`View::refresh`]).
        watch: bool,
    },
}

/// What to open, and how: the one value every front end builds. Made
/// with [`Target::new`], then its fields set (more may come, such as
/// what the signed claims of the images must say).
#[non_exhaustive]
pub struct Target {
    /// The images, bottom first: files, URLs (see
    /// [`crate::source::set_opener`]) and archives (see `archives`).
    pub images: Vec<PathBuf>,
    /// What they are opened as.
    pub form: Form,
    /// How each is opened (offset, image size, mapping, trusted keys,
    /// identities) and the block cache they share.
    pub options: FsOptions,
    /// A block cache to share with images opened before (the parts a
    /// merge reads, say); `None` makes one as `options` say.
    pub cache: Option<BlockCache>,
    /// How archives named in `images` become images; `None` opens every
    /// file as an image.
    pub archives: Option<Arc<dyn ArchiveImages>>,
}

impl Clone for Target {
    /// The same target; a shared cache stays shared.
    fn clone(&self) -> Target {
        Target {
            images: self.images.clone(),
            form: self.form,
            options: self.options.clone(),
            cache: self.cache.as_ref().map(BlockCache::for_another_image),
            archives: self.archives.clone(),
        }
    }
}

impl Target {
    /// A stack of `images`, bottom first, with the default options: no
    /// key, archives not packed, layers made on other images refused.
    pub fn new(images: Vec<PathBuf>) -> Target {
        Target {
            images,
            form: Form::Stack { force: false },
            options: FsOptions::default(),
            cache: None,
            archives: None,
        }
    }
}

/// What [`open`] gives, as the target's [`Form`] asks.
#[derive(Debug)]
pub enum Opened {
    /// The stack ([`Form::Stack`]).
    Stack(Stack),
    /// The file system ([`Form::Image`] of an image that can be read).
    Image(Box<Filesystem>),
    /// The set ([`Form::Set`]).
    Set(Set),
    /// One image's sections ([`Form::Sections`], and [`Form::Image`] of
    /// an encrypted image no identity opens).
    Sections(Box<Image>),
}

impl Opened {
    /// The stack opened; an error for a set or sections only (the
    /// latter says why the image is not readable).
    pub fn into_stack(self) -> Result<Stack> {
        match self {
            Opened::Stack(stack) => Ok(stack),
            Opened::Sections(image) => Err(not_loaded(&image)),
            _ => Err(Error::Unsupported(
                "the images were not opened as a stack".into(),
            )),
        }
    }

    /// The file system opened; an error for anything else (for sections
    /// only, it says why the image is not readable).
    pub fn into_image(self) -> Result<Filesystem> {
        match self {
            Opened::Image(fs) => Ok(*fs),
            Opened::Sections(image) => Err(not_loaded(&image)),
            _ => Err(Error::Unsupported("the image was not opened alone".into())),
        }
    }

    /// The stack or set opened, as one view.
    pub fn into_view(self) -> Result<Arc<dyn View>> {
        match self {
            Opened::Stack(stack) => Ok(Arc::new(stack)),
            Opened::Set(set) => Ok(Arc::new(set)),
            Opened::Sections(image) => Err(not_loaded(&image)),
            Opened::Image(_) => Err(Error::Unsupported(
                "the image was opened alone, not as a view".into(),
            )),
        }
    }

    /// The image whose sections were opened; an error for a view.
    pub fn into_sections(self) -> Result<Image> {
        match self {
            Opened::Sections(image) => Ok(*image),
            _ => Err(Error::Unsupported(
                "the image was not opened as its sections".into(),
            )),
        }
    }
}

/// Why an image opened as sections only has no file system.
fn not_loaded(image: &Image) -> Error {
    match image.encryption().filter(|e| !e.is_unlocked()) {
        Some(e) => Error::Unsupported(format!(
            "the image is encrypted ({}) and no identity given opens it",
            e.wrapping()
        )),
        None => Error::Unsupported("only the image's sections were opened".into()),
    }
}

/// Opens `target`, as its [`Form`] says. Every image is opened with the
/// target's options (checked against its signature when keys are
/// trusted, unlocked by its identities); errors name the image.
pub fn open(target: &Target) -> Result<Opened> {
    if target.images.is_empty() {
        return Err(Error::Unsupported("no image given".into()));
    }
    match target.form {
        Form::Stack { force } => open_stack(target, force).map(Opened::Stack),
        Form::Set { watch } => open_set(target, watch).map(Opened::Set),
        Form::Sections => {
            let name = only(target)?;
            let image = open_image(target, name)?;
            Ok(Opened::Sections(Box::new(image)))
        }
        Form::Image => {
            let name = only(target)?;
            let image = open_image(target, name)?;
            if image.encryption().is_some_and(|e| !e.is_unlocked()) {
                return Ok(Opened::Sections(Box::new(image)));
            }
            let fs = load(image, name, &cache(target)?)?;
            Ok(Opened::Image(Box::new(fs)))
        }
    }
}

/// The one image of a target whose form takes one.
fn only(target: &Target) -> Result<&Path> {
    match target.images.as_slice() {
        [one] => Ok(one),
        more => Err(Error::Unsupported(format!(
            "{} images given where one is read",
            more.len()
        ))),
    }
}

/// The block cache the target's images share.
fn cache(target: &Target) -> Result<BlockCache> {
    match &target.cache {
        Some(cache) => Ok(cache.for_another_image()),
        None => Filesystem::check_options(&target.options),
    }
}

/// `e` prefixed with the name of the image it is about.
fn named(e: Error, name: &Path) -> Error {
    e.context(&format!("cannot open image '{}'", name.display()))
}

/// The file to open for image `name`: for an archive, its image; with
/// trusted keys an archive is refused, for it carries no signature.
fn resolve(target: &Target, name: &Path) -> Result<PathBuf> {
    let Some(archives) = &target.archives else {
        return Ok(name.to_path_buf());
    };
    if target.options.open.trust.is_none() {
        return Ok(archives
            .image_for(name)?
            .unwrap_or_else(|| name.to_path_buf()));
    }
    if archives.is_archive(name) {
        return Err(named(
            Error::Unsupported(
                "it is an archive, which carries no signature; trusted keys need signed images"
                    .into(),
            ),
            name,
        ));
    }
    Ok(name.to_path_buf())
}

/// Opens image `name`'s sections.
fn open_image(target: &Target, name: &Path) -> Result<Image> {
    let path = resolve(target, name)?;
    Image::open(&path, &target.options.open).map_err(|e| named(e, name))
}

/// Loads the file system of `image` (named `name`), its blocks kept in
/// the store of `cache`.
fn load(image: Image, name: &Path, cache: &BlockCache) -> Result<Filesystem> {
    Filesystem::from_image_with_cache(image, cache.for_another_image()).map_err(|e| named(e, name))
}

fn open_stack(target: &Target, force: bool) -> Result<Stack> {
    if target.images.len() > crate::stack::MAX_LAYERS {
        return Err(Error::Unsupported(format!(
            "{} layers: a stack may have at most {}",
            target.images.len(),
            crate::stack::MAX_LAYERS
        )));
    }
    let cache = cache(target)?;
    let layers = target
        .images
        .iter()
        .map(|name| load(open_image(target, name)?, name, &cache).map(Arc::new))
        .collect::<Result<Vec<_>>>()?;
    stack(target, layers, force)
}

/// The stack of `layers` (the target's images, opened), checked to lie
/// on each other unless `force`.
fn stack(target: &Target, layers: Vec<Arc<Filesystem>>, force: bool) -> Result<Stack> {
    let stack = Stack::from_layers(layers).map_err(|e| match target.images.as_slice() {
        [one] => named(e, one),
        _ => e.context("cannot stack the images"),
    })?;
    if let (Err((i, why)), false) = (stack.check_bases(), force) {
        return Err(Error::Unsupported(format!(
            "cannot stack '{}': it {why} (a forced stack takes it anyway)",
            target.images[i].display()
        )));
    }
    Ok(stack)
}

fn open_set(target: &Target, watch: bool) -> Result<Set> {
    match target.images.as_slice() {
        [dir] if dir.is_dir() => Set::of_dir(dir, &target.options, watch)
            .map_err(|e| e.context(&format!("cannot read '{}'", dir.display()))),
        _ if watch => Err(Error::Unsupported(
            "a set follows only one directory of images".into(),
        )),
        images => {
            let paths: Vec<&Path> = images.iter().map(PathBuf::as_path).collect();
            Set::new(&paths, &target.options)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Archives as the writer's cache tells them: every file named
    /// `*.zip`, packed into `packed`.
    struct Zips {
        packed: PathBuf,
    }

    impl ArchiveImages for Zips {
        fn is_archive(&self, path: &Path) -> bool {
            path.extension().is_some_and(|e| e == "zip")
        }
        fn image_for(&self, path: &Path) -> Result<Option<PathBuf>> {
            Ok(self.is_archive(path).then(|| self.packed.clone()))
        }
    }

    fn target(image: &str) -> Target {
        let mut t = Target::new(vec![PathBuf::from(image)]);
        t.archives = Some(Arc::new(Zips {
            packed: PathBuf::from("/nonexistent/packed.dwarfs"),
        }));
        t
    }

    #[test]
    fn an_archive_is_opened_as_its_image() {
        let e = open(&target("x.zip")).unwrap_err().to_string();
        // The packed image is opened (and here missing), named as the archive.
        assert!(e.starts_with("cannot open image 'x.zip': "), "{e}");
    }

    #[test]
    fn trusted_keys_refuse_an_archive_in_one_line() {
        let mut t = target("x.zip");
        t.options.open.trust = Some(hoard_trust::TrustedKeys::default());
        let e = open(&t).unwrap_err().to_string();
        assert_eq!(
            e,
            "cannot open image 'x.zip': it is an archive, which carries no signature; trusted keys need signed images"
        );
    }

    #[test]
    fn forms_of_one_image_refuse_more() {
        let mut t = Target::new(vec!["a".into(), "b".into()]);
        t.form = Form::Sections;
        let e = open(&t).unwrap_err().to_string();
        assert_eq!(e, "2 images given where one is read");
        t.images.clear();
        assert_eq!(open(&t).unwrap_err().to_string(), "no image given");
    }
}
