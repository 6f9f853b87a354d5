//! The sysfs tree libibverbs discovers the emulated device in, which `SYSFS_PATH` names.
//! Every value ends in a newline: libibverbs refuses a file that fills its buffer without one.
//!
//! The tree never changes while a process runs and is the same for every process of one
//! emulator build, so it is written once under the user's own directory in the temporary
//! directory (`dvcq-emu-<uid>/sysfs-<hash of its content>`), published with an atomic rename,
//! and shared: nothing is left behind per process, whether a process exits, execs or is
//! killed.

use crate::device;
use std::collections::hash_map::DefaultHasher;
use std::fs;
use std::hash::{Hash, Hasher};
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};

/// One file or link of the tree, relative to its root.
#[derive(Debug, Hash)]
enum Entry {
    File(String, String),
    /// A symbolic link at the first path to the second, both relative to the root.
    Link(String, String),
}

/// Which devices the tree shows: those `DVCQ_EMU_DEVICES` names (comma-separated, as `dvcq
/// emulate -d` sets it), or every device where it is unset or empty. Returns (ConnectX, E810).
fn chosen(list: Option<&str>) -> (bool, bool) {
    match list.map(str::trim).filter(|l| !l.is_empty()) {
        None => (true, true),
        Some(l) => {
            let has = |name: &str| l.split(',').any(|d| d.trim() == name);
            (has(device::IBDEV), has(crate::irdma::IBDEV))
        }
    }
}

/// Everything the tree holds, for the devices `DVCQ_EMU_DEVICES` chooses.
fn entries() -> Vec<Entry> {
    let (mlx5, irdma) = chosen(std::env::var("DVCQ_EMU_DEVICES").ok().as_deref());
    let file = |p: &str, v: &str| Entry::File(p.to_string(), format!("{v}\n"));
    let mut e = vec![file("class/infiniband_verbs/abi_version", "6")];
    if mlx5 {
        e.extend(mlx5_entries());
    }
    if irdma {
        e.extend(irdma_entries());
    }
    e
}

/// The ConnectX's part of the tree: `uverbs0`, `mlx5_0`, its PCI function bound to
/// `mlx5_core`.
fn mlx5_entries() -> Vec<Entry> {
    let file = |p: &str, v: &str| Entry::File(p.to_string(), format!("{v}\n"));
    let verbs = "class/infiniband_verbs";
    let uverbs = format!("{verbs}/{}", device::UVERBS);
    let dev = format!("class/infiniband/{}", device::IBDEV);
    let port = format!("{dev}/ports/1");
    let mut e = vec![
        file(&format!("{uverbs}/ibdev"), device::IBDEV),
        // 1:3 is /dev/null's number: the opened node is a real /dev/null descriptor, so
        // libibverbs' fstat check of st_rdev passes.
        file(&format!("{uverbs}/dev"), "1:3"),
        // MLX5_UVERBS_MIN/MAX_ABI_VERSION.
        file(&format!("{uverbs}/abi_version"), "1"),
        file(&format!("{dev}/node_type"), "1: CA"),
        file(&format!("{dev}/node_guid"), device::NODE_GUID_TEXT),
        file(&format!("{dev}/sys_image_guid"), device::NODE_GUID_TEXT),
        file(&format!("{dev}/board_id"), device::BOARD_ID),
        file(&format!("{dev}/hca_type"), "MT4125"),
        file(&format!("{dev}/hw_rev"), "0x0"),
        file(&format!("{dev}/fw_ver"), "22.36.1010"),
        file(&format!("{dev}/device/modalias"), device::MODALIAS),
        file(&format!("{dev}/device/vendor"), "0x15b3"),
        file(&format!("{dev}/device/device"), "0x101d"),
        // The bus device's driver link, as a PCI function bound to mlx5_core has it.
        file("bus/pci/drivers/mlx5_core/.keep", ""),
        Entry::Link(format!("{dev}/device/driver"), "bus/pci/drivers/mlx5_core".into()),
        file(&format!("{port}/pkeys/0"), "0xffff"),
        file(&format!("{port}/link_layer"), "Ethernet"),
        file(&format!("{port}/state"), "4: ACTIVE"),
        file(&format!("{port}/phys_state"), "5: LinkUp"),
    ];
    for (i, (gid, ty)) in device::GIDS.iter().zip(device::GID_TYPES).enumerate() {
        e.push(file(&format!("{port}/gids/{i}"), gid));
        e.push(file(&format!("{port}/gid_attrs/types/{i}"), ty));
    }
    e
}

/// The E810's part of the tree: `uverbs1`, `irdma0`, its PCI function bound to `ice` (the
/// RDMA driver sits on the ice function's auxiliary device), one RoCE v2 GID.
fn irdma_entries() -> Vec<Entry> {
    use crate::irdma;
    let file = |p: &str, v: &str| Entry::File(p.to_string(), format!("{v}\n"));
    let uverbs = format!("class/infiniband_verbs/{}", irdma::UVERBS);
    let dev = format!("class/infiniband/{}", irdma::IBDEV);
    let port = format!("{dev}/ports/1");
    vec![
        file(&format!("{uverbs}/ibdev"), irdma::IBDEV),
        file(&format!("{uverbs}/dev"), "1:3"),
        // IRDMA_ABI_VER: libirdma accepts 0 to 5.
        file(&format!("{uverbs}/abi_version"), "5"),
        file(&format!("{dev}/node_type"), "1: CA"),
        file(&format!("{dev}/node_guid"), irdma::NODE_GUID_TEXT),
        file(&format!("{dev}/sys_image_guid"), irdma::NODE_GUID_TEXT),
        file(&format!("{dev}/hw_rev"), "0x2"),
        file(&format!("{dev}/fw_ver"), "1.3"),
        file(&format!("{dev}/hca_type"), "E810"),
        file(&format!("{dev}/device/modalias"), irdma::MODALIAS),
        file(&format!("{dev}/device/vendor"), "0x8086"),
        file(&format!("{dev}/device/device"), "0x1592"),
        file("bus/pci/drivers/ice/.keep", ""),
        Entry::Link(format!("{dev}/device/driver"), "bus/pci/drivers/ice".into()),
        file(&format!("{port}/pkeys/0"), "0xffff"),
        file(&format!("{port}/link_layer"), "Ethernet"),
        file(&format!("{port}/state"), "4: ACTIVE"),
        file(&format!("{port}/phys_state"), "5: LinkUp"),
        file(&format!("{port}/gids/0"), irdma::GID),
        file(&format!("{port}/gid_attrs/types/0"), "RoCE v2"),
    ]
}

/// The emulated device's sysfs tree on disk.
#[derive(Debug)]
pub struct SysfsTree {
    root: PathBuf,
}

impl SysfsTree {
    /// The tree under `parent`: found where an earlier process of this build wrote it, or
    /// written now.
    ///
    /// # Errors
    ///
    /// A directory or file could not be created, or the user's directory under `parent` is
    /// not the user's own (another user made it, or it is a link).
    pub fn create(parent: &Path) -> io::Result<SysfsTree> {
        let all = entries();
        let mut h = DefaultHasher::new();
        all.hash(&mut h);
        // SAFETY: getuid cannot fail and takes no arguments.
        let uid = unsafe { libc::getuid() };
        let mine = parent.join(format!("dvcq-emu-{uid}"));
        own_dir(&mine, uid)?;
        let root = mine.join(format!("sysfs-{:016x}", h.finish()));
        if !root.is_dir() {
            let staging = mine.join(format!("staging.{}", std::process::id()));
            let _ = fs::remove_dir_all(&staging);
            write_all(&staging, &all)?;
            // Another process may have published the same tree meanwhile: theirs stays.
            if fs::rename(&staging, &root).is_err() {
                let _ = fs::remove_dir_all(&staging);
                if !root.is_dir() {
                    return Err(io::Error::other(format!("cannot publish {}", root.display())));
                }
            }
        }
        Ok(SysfsTree { root })
    }

    /// The directory to put in `SYSFS_PATH`.
    pub fn root(&self) -> &Path {
        &self.root
    }
}

/// Makes (or checks) `dir`: a real directory owned by `uid`, private to it.
pub(crate) fn own_dir(dir: &Path, uid: u32) -> io::Result<()> {
    match fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    let meta = fs::symlink_metadata(dir)?;
    if !meta.is_dir() || meta.uid() != uid || meta.mode() & 0o022 != 0 {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("{} is not a private directory of user {uid}", dir.display()),
        ));
    }
    Ok(())
}

/// Writes every entry under `root`.
fn write_all(root: &Path, all: &[Entry]) -> io::Result<()> {
    for e in all {
        let (path, target) = match e {
            Entry::File(p, _) | Entry::Link(p, _) => (root.join(p), e),
        };
        if let Some(dir) = path.parent() {
            fs::create_dir_all(dir)?;
        }
        match target {
            Entry::File(_, v) => fs::write(&path, v)?,
            // Relative to the link's own directory, so the tree can move (the rename).
            Entry::Link(p, to) => {
                let depth = Path::new(p).components().count() - 1;
                let up: PathBuf = std::iter::repeat_n("..", depth).collect();
                std::os::unix::fs::symlink(up.join(to), &path)?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `DVCQ_EMU_DEVICES` picks the devices by name; unset or empty shows both, and a
    /// name the emulator does not have shows nothing for it.
    #[test]
    fn the_devices_shown_are_those_named() {
        assert_eq!(chosen(None), (true, true));
        assert_eq!(chosen(Some(" ")), (true, true));
        assert_eq!(chosen(Some("irdma0")), (false, true));
        assert_eq!(chosen(Some("mlx5_0")), (true, false));
        assert_eq!(chosen(Some("mlx5_0, irdma0")), (true, true));
        assert_eq!(chosen(Some("mlx5_9")), (false, false));
    }

    /// A directory of this test's own (the tests run in parallel in one process).
    fn scratch(test: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("dvcq-emu-sysfs-test.{}.{test}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn tree_holds_what_libibverbs_reads_each_ending_in_a_newline() {
        let parent = scratch("tree");
        let tree = SysfsTree::create(&parent).unwrap();
        let read = |p: &str| fs::read_to_string(tree.root().join(p)).unwrap();
        assert_eq!(read("class/infiniband_verbs/abi_version"), "6\n");
        assert_eq!(read("class/infiniband_verbs/uverbs0/ibdev"), "mlx5_0\n");
        assert_eq!(read("class/infiniband_verbs/uverbs0/dev"), "1:3\n");
        assert_eq!(read("class/infiniband_verbs/uverbs0/abi_version"), "1\n");
        assert!(read("class/infiniband/mlx5_0/device/modalias").starts_with("pci:v000015B3d0000101D"));
        assert_eq!(read("class/infiniband/mlx5_0/ports/1/gid_attrs/types/1"), "RoCE v2\n");
        // Every GID has its type file: libibverbs fails a GID query whose type is missing
        // from an existing gid_attrs directory.
        for i in 0..device::GIDS.len() {
            assert!(tree.root().join(format!("class/infiniband/mlx5_0/ports/1/gid_attrs/types/{i}")).exists());
        }
        let driver = tree.root().join("class/infiniband/mlx5_0/device/driver");
        assert!(driver.is_dir(), "the driver link resolves");
        assert_eq!(fs::canonicalize(&driver).unwrap().file_name().unwrap(), "mlx5_core");
        // The E810 beside it, matched by libirdma's PCI table.
        assert_eq!(read("class/infiniband_verbs/uverbs1/ibdev"), "irdma0\n");
        assert_eq!(read("class/infiniband_verbs/uverbs1/abi_version"), "5\n");
        assert!(read("class/infiniband/irdma0/device/modalias").starts_with("pci:v00008086d00001592"));
        assert_eq!(read("class/infiniband/irdma0/ports/1/gid_attrs/types/0"), "RoCE v2\n");
        fs::remove_dir_all(parent).unwrap();
    }

    #[test]
    fn processes_share_one_tree_and_leave_no_staging_behind() {
        let parent = scratch("share");
        let a = SysfsTree::create(&parent).unwrap();
        let b = SysfsTree::create(&parent).unwrap();
        assert_eq!(a.root(), b.root());
        let mine = a.root().parent().unwrap();
        let names: Vec<_> = fs::read_dir(mine).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names.len(), 1, "{names:?}");
        assert_eq!(fs::metadata(mine).unwrap().mode() & 0o777, 0o700);
        fs::remove_dir_all(parent).unwrap();
    }

    #[test]
    fn a_user_directory_others_can_write_is_refused() {
        let parent = scratch("refuse");
        // SAFETY: getuid takes no arguments.
        let uid = unsafe { libc::getuid() };
        let mine = parent.join(format!("dvcq-emu-{uid}"));
        fs::create_dir(&mine).unwrap();
        fs::set_permissions(&mine, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
        let e = SysfsTree::create(&parent).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{e}");
        fs::remove_dir_all(parent).unwrap();
    }
}
