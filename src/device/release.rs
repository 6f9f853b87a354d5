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
        let name = path.file_name()?.to_str()?;
        let rest = name.strip_prefix("libibverbs.so.")?;
        let parts: Vec<u32> = rest.split('.').map(|p| p.parse().ok()).collect::<Option<_>>()?;
        match parts.as_slice() {
            [_so, _abi, major, minor] => Some(Release { major: *major, minor: *minor }),
            _ => None,
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
    fn providers_are_named_by_their_library() {
        assert_eq!(provider_name(Path::new("/x/libibverbs/librxe-rdmav34.so")).as_deref(), Some("rxe"));
        assert_eq!(provider_name(Path::new("libmlx5.so.1.24.44.0")).as_deref(), Some("mlx5"));
        assert_eq!(provider_name(Path::new("libirdma-rdmav34.so")).as_deref(), Some("irdma"));
        assert_eq!(provider_name(Path::new("lib.so")), None);
        assert_eq!(provider_name(Path::new("rxe.so")), None);
    }
}
