//! The QR code of a verification page, as the UI draws it: the side in modules and one SVG path
//! of the dark modules (one rectangle per run of dark modules in a row). The UI adds the quiet
//! zone and draws it black on white in either theme, so any phone camera reads it; it never
//! needs `{@html}`.

use qrcode::{Color, EcLevel, QrCode};
use serde::Serialize;
use ts_rs::TS;

/// A QR code for the UI.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, TS)]
pub struct QrView {
    /// Modules per side (no quiet zone).
    pub size: u32,
    /// SVG path data of the dark modules, in module units.
    pub path: String,
}

impl QrView {
    /// The QR code of `text` (medium error correction, as Feishu's own tool prints), or `None`
    /// when it is too long for any QR code.
    pub fn of(text: &str) -> Option<QrView> {
        let code = QrCode::with_error_correction_level(text.as_bytes(), EcLevel::M).ok()?;
        let width = code.width();
        let colors = code.to_colors();
        let mut path = String::new();
        for (y, row) in colors.chunks(width).enumerate() {
            let mut x = 0;
            while x < width {
                if row[x] != Color::Dark {
                    x += 1;
                    continue;
                }
                let start = x;
                while x < width && row[x] == Color::Dark {
                    x += 1;
                }
                path.push_str(&format!("M{start} {y}h{}v1h-{}z", x - start, x - start));
            }
        }
        Some(QrView {
            size: u32::try_from(width).ok()?,
            path,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads the path back into a module grid, to compare with the encoder's own.
    fn grid(view: &QrView) -> Vec<bool> {
        let size = view.size as usize;
        let mut cells = vec![false; size * size];
        for rect in view.path.split('z').filter(|r| !r.is_empty()) {
            let rect = rect.trim_start_matches('M');
            let (xy, rest) = rect.split_once('h').unwrap_or_else(|| panic!("{rect}"));
            let (x, y) = xy.split_once(' ').unwrap_or_else(|| panic!("{xy}"));
            let len: usize = rest
                .split('v')
                .next()
                .and_then(|l| l.parse().ok())
                .unwrap_or(0);
            let (x, y): (usize, usize) = (x.parse().unwrap_or(0), y.parse().unwrap_or(0));
            for i in 0..len {
                cells[y * size + x + i] = true;
            }
        }
        cells
    }

    #[test]
    fn the_path_draws_exactly_the_codes_dark_modules() {
        let url = "https://open.feishu.cn/page/cli?user_code=ABCD-EFGH";
        let view = QrView::of(url).unwrap_or_else(|| panic!("no code"));
        let code = QrCode::with_error_correction_level(url.as_bytes(), EcLevel::M)
            .unwrap_or_else(|e| panic!("{e}"));
        let expected: Vec<bool> = code.to_colors().iter().map(|c| *c == Color::Dark).collect();
        assert_eq!(view.size as usize, code.width());
        assert_eq!(grid(&view), expected);
        // The three finder patterns make the top-left module dark.
        assert!(view.path.starts_with("M0 0h7"));
    }

    #[test]
    fn text_too_long_for_a_qr_code_gives_none() {
        assert!(QrView::of(&"x".repeat(5000)).is_none());
    }
}
