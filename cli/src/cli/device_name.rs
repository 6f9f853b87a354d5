//! The `-d/--device` option every subcommand that takes a device shares: its default, the
//! models' short names, and "did you mean ...?" for a mistyped name.

use super::CliError;
use crate::device::MODEL_NAMES;
use crate::Context;

/// What `-d/--device` is when not given, on every subcommand that takes a device.
pub(crate) const DEFAULT_DEVICE: &str = "model-mlx5";

/// The help of `-d/--device` on a subcommand that opens any device.
pub(crate) const DEVICE_HELP: &str =
    "The device: a name `dvcq devices` lists (rxe0, mlx5_0, ...) or a model (model-mlx5, model-e810)";

/// The help of `-d/--device` on a subcommand that runs on the models only.
pub(crate) const MODEL_HELP: &str = "The model: model-mlx5 (or mlx5) or model-e810 (or e810, irdma)";

/// Short names a user may type for a model, and the model each means.
const SHORT_NAMES: [(&str, Model); 3] = [("mlx5", Model::Mlx5), ("e810", Model::E810), ("irdma", Model::E810)];

/// One of the built-in hardware models, for the subcommands that run on the models only.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Model {
    /// model-mlx5: a ConnectX.
    Mlx5,
    /// model-e810: an Intel E810 (irdma).
    E810,
}

impl Model {
    /// The device name: `model-mlx5` or `model-e810`.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Model::Mlx5 => MODEL_NAMES[0],
            Model::E810 => MODEL_NAMES[1],
        }
    }

    /// Parses a model's device name or short name (`model-mlx5`, `mlx5`, `model-e810`,
    /// `e810`, `irdma`; any case); clap's value parser for a model-only `-d`.
    ///
    /// # Errors
    ///
    /// Any other name: the models, and the closest of them when the name looks mistyped.
    pub(crate) fn parse(s: &str) -> Result<Model, String> {
        let lower = s.to_ascii_lowercase();
        if let Some(m) = [Model::Mlx5, Model::E810].into_iter().find(|m| m.name() == lower) {
            return Ok(m);
        }
        if let Some((_, m)) = SHORT_NAMES.iter().find(|(n, _)| *n == lower) {
            return Ok(*m);
        }
        let hint = suggestion(s, &[]).map_or_else(String::new, |n| format!("did you mean {n}? "));
        Err(format!("{hint}this runs on the models only: model-mlx5 (mlx5) or model-e810 (e810, irdma)"))
    }
}

/// The name closest to `name` among the models, their short names and `devices` (for a
/// short name, the model it means), when it is close enough to be a typo: at most one
/// edit for every three characters (transpositions count one), and at least one; a short
/// name only one edit away and no longer than it (so that `mlx5_1` or `irdma0`, a NIC's
/// name, is not taken for `mlx5` or `irdma`).
pub(crate) fn suggestion(name: &str, devices: &[String]) -> Option<String> {
    let lower = name.to_ascii_lowercase();
    let limit = (lower.chars().count() / 3).max(1);
    let candidates = devices
        .iter()
        .map(|d| (d.as_str(), d.as_str(), limit))
        .chain(MODEL_NAMES.iter().map(|m| (*m, *m, limit)))
        .chain(SHORT_NAMES.iter().map(|(n, m)| (*n, m.name(), usize::from(lower.len() <= n.len()))));
    candidates
        .filter(|&(_, means, _)| means != name)
        .map(|(typed, means, most)| (strsim::damerau_levenshtein(&lower, &typed.to_ascii_lowercase()), means, most))
        .filter(|&(d, _, most)| d <= most)
        .map(|(d, means, _)| (d, means))
        .min_by_key(|&(d, _)| d)
        .map(|(_, means)| means.to_owned())
}

/// An error for a name that is not a device here but looks like a mistyped one, with the
/// name it probably meant; `None` for a device that exists or a name like none of them.
fn mistyped(name: &str) -> Option<CliError> {
    let devices = crate::device::names();
    if devices.iter().any(|d| d == name) {
        return None;
    }
    let meant = suggestion(name, &devices)?;
    Some(CliError(format!("no device named {name:?}: did you mean {meant}? (devices here: {})", devices.join(", "))))
}

/// Opens `name`, saying which device was meant when the name looks mistyped (before any
/// other advice, such as what a build without rdma-core would need).
///
/// # Errors
///
/// A mistyped name, or whatever [`Context::open`] refuses.
pub(crate) fn open(name: &str) -> Result<Context, CliError> {
    if let Some(e) = mistyped(name) {
        return Err(e);
    }
    Context::open(name).map_err(|e| CliError(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_typo_suggests_the_name_it_is_closest_to() {
        let here = vec!["mlx5_0".to_string(), "rxe0".to_string()];
        for (typed, meant) in [
            ("model-mlx", "model-mlx5"),
            ("modle-e810", "model-e810"),
            ("model-e81O", "model-e810"),
            ("Model-MLX", "model-mlx5"),
            ("mlx5_1", "mlx5_0"),
            ("rxe1", "rxe0"),
            ("mlx", "model-mlx5"),
            ("e801", "model-e810"),
            ("irmda", "model-e810"),
            ("mlx5", "model-mlx5"),
        ] {
            assert_eq!(suggestion(typed, &here).as_deref(), Some(meant), "{typed}");
        }
        for far in ["siw0", "bnxt_re0", "x", "model-cx7-and-more"] {
            assert_eq!(suggestion(far, &here), None, "{far}");
        }
        // A NIC's name is not a model's short name mistyped.
        for nic in ["mlx5_0", "mlx5_9", "irdma0", "irdma12"] {
            assert_eq!(suggestion(nic, &[]), None, "{nic}");
        }
        assert_eq!(suggestion("mlx5_9", &here).as_deref(), Some("mlx5_0"));
    }

    #[test]
    fn the_models_parse_by_their_names_and_short_names() {
        for (s, m) in [
            ("model-mlx5", Model::Mlx5),
            ("mlx5", Model::Mlx5),
            ("MLX5", Model::Mlx5),
            ("model-e810", Model::E810),
            ("e810", Model::E810),
            ("irdma", Model::E810),
        ] {
            assert_eq!(Model::parse(s), Ok(m), "{s}");
        }
        let e = Model::parse("model-mlx").unwrap_err();
        assert!(e.starts_with("did you mean model-mlx5? "), "{e}");
        let e = Model::parse("rxe0").unwrap_err();
        assert!(e.starts_with("this runs on the models only"), "{e}");
    }
}
