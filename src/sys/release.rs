//! Which rdma-core release and provider are loaded, read from the real file names of the
//! libraries (rdma-core names `libibverbs.so.1.<abi>.<release>` and its providers
//! `lib<name>-rdmav<abi>.so` or `lib<name>.so.1.<abi>.<release>`), never from the build
//! machine.

use std::fmt;
use std::path::Path;

/// An rdma-core release (`v44.0` is major 44, minor 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Release {
    /// The release number (`44` for rdma-core v44.x).
    pub major: u32,
    /// The point release.
    pub minor: u32,
}

impl fmt::Display for Release {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "v{}.{}", self.major, self.minor)
    }
}

impl Release {
    /// The release a libibverbs file name carries: the two numbers after the soname and ABI
    /// (`libibverbs.so.1.14.44.0` → v44.0). `None` for a name without them (an unversioned
    /// symlink, or a library that is not libibverbs).
    pub fn from_libibverbs_file(path: &Path) -> Option<Release> {
        Release::from_library_file(path, "libibverbs")
    }

    /// The release a provider library's real file name carries, as libibverbs' does
    /// (`libmlx5.so.1.24.44.0` → v44.0). `None` for a name without it: rdma-core installs
    /// most providers as plain `lib<name>-rdmav<abi>.so` files, whose release is
    /// libibverbs' (they are built and shipped together); mlx5, mlx4, efa and mana, which
    /// have public direct-verbs libraries, are links to a versioned file.
    pub fn from_provider_file(path: &Path) -> Option<Release> {
        let name = path.file_name()?.to_str()?;
        let stem = &name[..name.find(".so.")?];
        Release::from_library_file(path, stem)
    }

    /// `<stem>.so.<soname>.<abi>.<major>.<minor>`.
    fn from_library_file(path: &Path, stem: &str) -> Option<Release> {
        let name = path.file_name()?.to_str()?;
        let rest = name.strip_prefix(stem)?.strip_prefix(".so.")?;
        let parts: Vec<u32> = rest.split('.').map(|p| p.parse().ok()).collect::<Option<_>>()?;
        match parts.as_slice() {
            [_so, _abi, major, minor] => Some(Release { major: *major, minor: *minor }),
            _ => None,
        }
    }
}

/// The release whose private layouts a direct backend reads: the provider library's own
/// when its file name carries one (the structs are the provider's, built with its
/// release's headers), else libibverbs'. A provider of another release than libibverbs is
/// refused: rdma-core ships them together, so it is a mixed install whose layouts were
/// never read together.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChosenRelease {
    /// The release the layout row is picked for.
    pub release: Release,
    /// Where it was read: the file name that carried it.
    pub from: String,
}

/// Why [`ChosenRelease::pick`] found no release to read the private layouts with.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReleaseError {
    /// The loaded libibverbs' file name carries no release.
    #[error("the rdma-core release could not be read from the loaded libibverbs' file name")]
    Unreadable,
    /// The provider library is of another release than libibverbs: a mixed install.
    #[error(
        "the provider library {provider_file} is rdma-core {provider} but libibverbs ({verbs_file}) is {verbs}: a \
         mixed install"
    )]
    Mixed {
        /// The provider library's file name.
        provider_file: String,
        /// Its release.
        provider: Release,
        /// libibverbs' file name.
        verbs_file: String,
        /// Its release.
        verbs: Release,
    },
}

impl ChosenRelease {
    /// Picks the release from libibverbs' (`verbs`, with its file) and the provider's
    /// library file.
    ///
    /// # Errors
    ///
    /// [`ReleaseError`]: why there is none.
    pub fn pick(verbs: Option<(Release, &Path)>, provider: Option<&Path>) -> Result<ChosenRelease, ReleaseError> {
        let file = |p: &Path| p.file_name().map_or_else(|| p.display().to_string(), |n| n.to_string_lossy().into());
        let Some((verbs, verbs_file)) = verbs else {
            return Err(ReleaseError::Unreadable);
        };
        match provider.and_then(|p| Release::from_provider_file(p).map(|r| (r, file(p)))) {
            Some((r, f)) if r != verbs => {
                Err(ReleaseError::Mixed { provider_file: f, provider: r, verbs_file: file(verbs_file), verbs })
            }
            Some((r, f)) => Ok(ChosenRelease { release: r, from: format!("{f}, as libibverbs") }),
            None => Ok(ChosenRelease {
                release: verbs,
                from: format!(
                    "{} (the provider library {} carries no release)",
                    file(verbs_file),
                    provider.map_or_else(|| "not found".to_string(), file)
                ),
            }),
        }
    }
}

/// The provider's short name from its library file (`librxe-rdmav34.so` → `rxe`,
/// `libmlx5.so.1.24.44.0` → `mlx5`).
pub fn provider_name(path: &Path) -> Option<String> {
    let name = path.file_name()?.to_str()?;
    let rest = name.strip_prefix("lib")?;
    let end = rest.find(['-', '.']).unwrap_or(rest.len());
    (end > 0).then(|| rest[..end].to_string())
}

/// The rdma-core release of the libibverbs this process loaded (none where rdma-core
/// cannot be loaded).
pub fn rdma_core_release() -> Option<Release> {
    Release::from_libibverbs_file(&super::device::libibverbs_file()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_release_is_read_from_the_real_file_name() {
        let r = Release::from_libibverbs_file(Path::new("/usr/lib/x86_64-linux-gnu/libibverbs.so.1.14.44.0"));
        assert_eq!(r, Some(Release { major: 44, minor: 0 }));
        assert_eq!(r.unwrap().to_string(), "v44.0");
        let r = Release::from_libibverbs_file(Path::new("libibverbs.so.1.15.64.2"));
        assert_eq!(r, Some(Release { major: 64, minor: 2 }));
        assert_eq!(Release::from_libibverbs_file(Path::new("libibverbs.so.1")), None);
        assert_eq!(Release::from_libibverbs_file(Path::new("libibverbs.so.1.x.44.0")), None);
        assert_eq!(Release::from_libibverbs_file(Path::new("libmlx5.so.1.24.44.0")), None);
    }

    #[test]
    fn the_layout_release_is_the_provider_s_and_must_be_libibverbs_own() {
        let verbs = Path::new("/usr/lib/libibverbs.so.1.14.44.0");
        let v44 = Release { major: 44, minor: 0 };
        assert_eq!(Release::from_provider_file(Path::new("/usr/lib/libmlx5.so.1.24.44.0")), Some(v44));
        assert_eq!(Release::from_provider_file(Path::new("/x/libirdma-rdmav34.so")), None);
        let c = ChosenRelease::pick(Some((v44, verbs)), Some(Path::new("/usr/lib/libmlx5.so.1.24.44.0"))).unwrap();
        assert_eq!(c.release, v44);
        assert_eq!(c.from, "libmlx5.so.1.24.44.0, as libibverbs");
        let e = ChosenRelease::pick(Some((v44, verbs)), Some(Path::new("/opt/libmlx5.so.1.25.56.0"))).unwrap_err();
        assert!(matches!(&e, ReleaseError::Mixed { provider, verbs, .. } if provider.major == 56 && *verbs == v44));
        assert_eq!(
            e.to_string(),
            "the provider library libmlx5.so.1.25.56.0 is rdma-core v56.0 but libibverbs (libibverbs.so.1.14.44.0) \
             is v44.0: a mixed install"
        );
        let c = ChosenRelease::pick(Some((v44, verbs)), Some(Path::new("/x/libirdma-rdmav34.so"))).unwrap();
        assert_eq!(c.release, v44);
        assert!(c.from.contains("libibverbs.so.1.14.44.0 (the provider library libirdma-rdmav34.so"), "{}", c.from);
        let e = ChosenRelease::pick(None, None).unwrap_err();
        assert_eq!(e, ReleaseError::Unreadable);
        assert!(e.to_string().contains("could not be read"), "{e}");
    }

    #[test]
    fn providers_are_named_by_their_library() {
        assert_eq!(provider_name(Path::new("/x/libibverbs/librxe-rdmav34.so")).as_deref(), Some("rxe"));
        assert_eq!(provider_name(Path::new("libmlx5.so.1.24.44.0")).as_deref(), Some("mlx5"));
        assert_eq!(provider_name(Path::new("libirdma-rdmav34.so")).as_deref(), Some("irdma"));
        assert_eq!(provider_name(Path::new("lib.so")), None);
        assert_eq!(provider_name(Path::new("rxe.so")), None);
    }
}
