//! Ring images across vendors: parse the container once, hand it to the backend it names.

use crate::provider::image::{format_decode, parse_image, ImageError, ImageVendor};

/// Decodes a ring image's text (mlx5 or irdma) into the canonical lines of
/// shared/ring-image.md.
///
/// # Errors
///
/// [`ImageError`] with the line of the first problem.
pub fn decode_text(text: &str) -> Result<String, ImageError> {
    let raw = parse_image(text)?;
    let (items, end) = match raw.vendor {
        ImageVendor::Mlx5 => {
            let img = crate::mlx5::image::from_raw(&raw)?;
            crate::mlx5::image::decode_image(&img)?
        }
        ImageVendor::Irdma => {
            let img = dvcq_e810_dv::image::from_raw(&raw)?;
            dvcq_e810_dv::image::decode_image(&img, dvcq_e810_dv::Compat::Current)?
        }
    };
    Ok(format_decode(&items, &end))
}
