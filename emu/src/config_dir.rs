//! libibverbs' provider configuration directory, seen through the emulator.
//!
//! libibverbs loads the providers `RDMAV_DRIVERS` names, then every `driver <name>` line of
//! the files in its compiled-in `/etc/libibverbs.d`, each from its compiled-in provider
//! directory. A program that runs another rdma-core release than the one installed (its
//! libraries unpacked elsewhere, reached through `LD_LIBRARY_PATH` or a loader's
//! `--library-path`) therefore also loads the installed release's providers: two releases'
//! `libmlx5` in one process. With `DVCQ_EMU_IBV_CONFIG_DIR` set when the library loads,
//! `opendir("/etc/libibverbs.d")` opens that directory instead (an empty one: only the
//! providers `RDMAV_DRIVERS` names load). Unset, nothing changes.

use std::ffi::{CStr, CString};
use std::sync::OnceLock;

/// The environment variable naming the directory libibverbs reads instead.
pub const ENV: &str = "DVCQ_EMU_IBV_CONFIG_DIR";

/// The directory libibverbs (every release) reads its provider list from.
pub const IBV_CONFIG_DIR: &[u8] = b"/etc/libibverbs.d";

static REPLACEMENT: OnceLock<Option<CString>> = OnceLock::new();

/// Reads [`ENV`] once, when the library loads (later changes to the environment are not
/// seen: libibverbs reads its configuration once too).
pub fn init() {
    REPLACEMENT.get_or_init(|| from_env(std::env::var_os(ENV)));
}

/// The replacement directory a value of [`ENV`] names: none for an unset or empty value
/// or one with a NUL byte.
fn from_env(value: Option<std::ffi::OsString>) -> Option<CString> {
    use std::os::unix::ffi::OsStringExt;
    value.filter(|v| !v.is_empty()).and_then(|v| CString::new(v.into_vec()).ok())
}

/// The directory to open for `path`: the replacement when `path` is libibverbs'
/// configuration directory (with or without a trailing `/`) and one is set.
pub fn redirect(path: &CStr) -> Option<&'static CStr> {
    redirect_with(REPLACEMENT.get()?.as_deref(), path)
}

fn redirect_with<'a>(replacement: Option<&'a CStr>, path: &CStr) -> Option<&'a CStr> {
    let p = path.to_bytes();
    let p = p.strip_suffix(b"/").unwrap_or(p);
    if p == IBV_CONFIG_DIR {
        replacement
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_libibverbs_config_directory_is_redirected_and_only_when_set() {
        let to = CString::new("/tmp/empty").unwrap();
        assert_eq!(redirect_with(Some(&to), c"/etc/libibverbs.d"), Some(to.as_c_str()));
        assert_eq!(redirect_with(Some(&to), c"/etc/libibverbs.d/"), Some(to.as_c_str()));
        assert_eq!(redirect_with(Some(&to), c"/etc/libibverbs.d/mlx5.driver"), None);
        assert_eq!(redirect_with(Some(&to), c"/etc"), None);
        assert_eq!(redirect_with(None, c"/etc/libibverbs.d"), None);
    }

    #[test]
    fn an_empty_or_unusable_value_sets_nothing() {
        assert_eq!(from_env(None), None);
        assert_eq!(from_env(Some("".into())), None);
        assert_eq!(from_env(Some("/x".into())).as_deref(), Some(c"/x"));
        use std::os::unix::ffi::OsStringExt;
        assert_eq!(from_env(Some(std::ffi::OsString::from_vec(b"/a\0b".to_vec()))), None);
    }
}
