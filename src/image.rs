//! Ring images across vendors: parse the container once, hand it to the backend it names.
//!
//! Layer: the top, beside `event`; it reads the vendor crates only and imports nothing of the
//! crate (`Cq::ring_image`, which writes the images, is in `cq/image.rs`).

use crate::irdma::Compat;
use crate::provider::image::{format_decode_as, parse_image, ImageError, ImageVendor, LineStyle, RawImage};

/// Decodes a ring image's text (mlx5 or irdma) into the canonical lines of
/// docs/ring-image.md; an irdma ring as current rdma-core polls it.
///
/// # Errors
///
/// [`ImageError`] with the line of the first problem.
pub fn decode_text(text: &str) -> Result<String, ImageError> {
    decode_raw(&parse_image(text)?, Compat::Current)
}

/// Decodes a parsed image; an irdma ring as the rdma-core releases of `irdma` poll it (mlx5
/// rings do not depend on the release).
///
/// # Errors
///
/// [`ImageError`] for invalid vendor words, or a GEN3 ring with a release before v64.
pub fn decode_raw(raw: &RawImage, irdma: Compat) -> Result<String, ImageError> {
    decode_raw_as(raw, irdma, LineStyle::Canonical)
}

/// [`decode_raw`] with the `wc` lines in `style`.
///
/// # Errors
///
/// As [`decode_raw`].
pub fn decode_raw_as(raw: &RawImage, irdma: Compat, style: LineStyle) -> Result<String, ImageError> {
    let (items, end) = match raw.vendor {
        ImageVendor::Mlx5 => {
            let img = crate::mlx5::image::from_raw(raw)?;
            crate::mlx5::image::decode_image(&img)?
        }
        ImageVendor::Irdma => {
            let img = dvcq_e810_dv::image::from_raw(raw)?;
            // Its one refusal (a GEN3 ring with an older release) is about the ring line.
            dvcq_e810_dv::image::decode_image(&img, irdma).map_err(|e| ImageError::new(raw.ring_line, e.msg))?
        }
    };
    Ok(format_decode_as(&items, &end, style))
}
