//! `DVCQ_EMU_IBV_CONFIG_DIR`: libibverbs reads its provider list from the directory it names
//! instead of `/etc/libibverbs.d`, so a program running another rdma-core release than the
//! installed one loads only the providers `RDMAV_DRIVERS` names (tests/emu/run relies on it).

#[path = "support/preload.rs"]
mod preload;
#[path = "../../tests/support/skip.rs"]
mod skip;

use preload::{emulated, preload};
use std::path::PathBuf;

/// The installed libmlx5 provider, as `RDMAV_DRIVERS` names one by path (without its
/// `-rdmav<N>.so` suffix); a skip (a failure in CI) when rdma-core's providers are missing.
fn installed_mlx5_provider() -> Option<String> {
    let found = std::fs::read_dir("/usr/lib/x86_64-linux-gnu/libibverbs").ok().and_then(|d| {
        d.filter_map(Result::ok).map(|e| e.path()).find(|p| {
            p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("libmlx5-rdmav") && n.ends_with(".so"))
        })
    });
    let have_tool = std::process::Command::new("ibv_devices").output().is_ok();
    match found {
        Some(p) if have_tool && std::path::Path::new("/etc/libibverbs.d/mlx5.driver").is_file() => {
            Some(p.parent().unwrap().join("libmlx5").display().to_string())
        }
        _ => {
            skip::skip_check("rdma-core's installed providers and ibv_devices (ibverbs-providers, ibverbs-utils)");
            None
        }
    }
}

fn devices(env: &[(&str, &str)]) -> String {
    let mut c = emulated("ibv_devices", &preload());
    c.env_remove("RDMAV_DRIVERS").env_remove("IBV_DRIVERS").env_remove("DVCQ_EMU_IBV_CONFIG_DIR");
    c.envs(env.iter().copied());
    let out = c.output().unwrap();
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

#[test]
fn an_empty_config_dir_loads_only_the_providers_rdmav_drivers_names() {
    let Some(mlx5) = installed_mlx5_provider() else { return };
    let empty: PathBuf = std::env::temp_dir().join(format!("dvcq-emu-config-test-{}", std::process::id()));
    std::fs::create_dir_all(&empty).unwrap();
    let dir = empty.to_str().unwrap();
    // The installed /etc/libibverbs.d names mlx5: the emulated device is found through it.
    assert!(devices(&[]).contains("mlx5_0"), "{}", devices(&[]));
    // An empty configuration and no RDMAV_DRIVERS: no provider, no device.
    let none = devices(&[("DVCQ_EMU_IBV_CONFIG_DIR", dir)]);
    assert!(!none.contains("mlx5_0"), "libibverbs still read /etc/libibverbs.d:\n{none}");
    // The provider named by path is the one that loads.
    let named = devices(&[("DVCQ_EMU_IBV_CONFIG_DIR", dir), ("RDMAV_DRIVERS", &mlx5)]);
    assert!(named.contains("mlx5_0"), "{named}");
    std::fs::remove_dir(&empty).unwrap();
}
