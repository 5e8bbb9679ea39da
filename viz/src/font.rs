//! The embedded font (DejaVu Sans, viz/assets/): plots need no system font
//! and no fontconfig at run time.

use std::sync::Once;

use plotters::style::{register_font, FontStyle};

static FONT: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");

/// Family name the plots use.
pub const FAMILY: &str = "sans-serif";

/// Register the font for every style under [`FAMILY`] (once).
pub fn register() -> Result<(), String> {
    static ONCE: Once = Once::new();
    let mut result = Ok(());
    ONCE.call_once(|| {
        for style in [
            FontStyle::Normal,
            FontStyle::Bold,
            FontStyle::Italic,
            FontStyle::Oblique,
        ] {
            if register_font(FAMILY, style, FONT).is_err() {
                result = Err("the embedded font is invalid".to_string());
            }
        }
    });
    result
}
