//! What the device reports, checked before a check sizes itself by it: a device (or an
//! emulated kernel) may answer `ibv_query_device` with zeros or nonsense, and a check must
//! then fail saying so, naming the device and the value, rather than panic or ask for
//! billions of entries.

use crate::{Context, Cq};
use dvcq::Error;

/// The error for a reported value that cannot be used.
pub(super) fn reported(ctx: &Context, what: &'static str, value: impl ToString, why: impl Into<String>) -> Error {
    Error::DeviceReport { device: ctx.name().to_string(), what, value: value.to_string(), why: why.into() }
}

/// The device's `max_cqe`, at least 1: a device that can make no CQ cannot be validated.
pub(super) fn max_cqe(ctx: &Context) -> Result<u32, Error> {
    match ctx.info()?.max_cqe {
        0 => Err(reported(ctx, "max_cqe", 0, "so no CQ can be made (a CQ holds 1 entry or more)")),
        max => Ok(max),
    }
}

/// The depth of a CQ just made for `asked` entries, checked: at least `asked` (a CQ that
/// holds fewer overflows where the check counts on it not to) and at most `most` (a check
/// that fills the CQ posts as many work requests as it holds).
pub(super) fn cq_depth(ctx: &Context, cq: &Cq, asked: u32, most: u32) -> Result<u32, Error> {
    let depth = cq.depth();
    if depth < asked {
        return Err(reported(ctx, "ibv_cq.cqe", depth, format!("less than the {asked} entries the CQ was made for")));
    }
    if depth > most {
        return Err(reported(
            ctx,
            "ibv_cq.cqe",
            depth,
            format!("for a CQ made for {asked} entries: more than the {most} this check can fill"),
        ));
    }
    Ok(depth)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model_device::{DeviceAttrs, ModelDevice, ModelVendor};

    #[test]
    fn a_zero_max_cqe_is_an_error_naming_the_device_and_the_value() {
        for vendor in [ModelVendor::Mlx5, ModelVendor::Irdma] {
            let ctx = Context::from_model(ModelDevice::with_attrs(
                vendor,
                DeviceAttrs { max_cqe: 0, ..DeviceAttrs::of(vendor) },
            ));
            let e = max_cqe(&ctx).unwrap_err().to_string();
            assert!(e.starts_with(vendor.device_name()) && e.contains("max_cqe = 0"), "{e}");
            let ok = Context::from_model(ModelDevice::new(vendor));
            assert_eq!(max_cqe(&ok).unwrap(), DeviceAttrs::of(vendor).max_cqe);
        }
    }

    #[test]
    fn a_cq_depth_outside_what_was_asked_is_an_error() {
        let ctx = Context::open("model-mlx5").unwrap();
        let cq = ctx.create_cq(crate::CqOptions::new(8)).unwrap();
        let d = cq.depth();
        assert_eq!(cq_depth(&ctx, &cq, 8, d).unwrap(), d);
        let e = cq_depth(&ctx, &cq, d + 1, u32::MAX).unwrap_err().to_string();
        assert!(e.contains(&format!("ibv_cq.cqe = {d}")) && e.contains("less than"), "{e}");
        let e = cq_depth(&ctx, &cq, 8, d - 1).unwrap_err().to_string();
        assert!(e.starts_with("model-mlx5") && e.contains("more than"), "{e}");
    }
}
