//! The synthetic cameras' test pattern and its PNG encoding.
//!
//! A frame is a pure function of (camera, frame number, capture time, size): a tinted gradient, a vertical
//! bar that sweeps right one step per frame, a box that bounces, and two rows of seven-segment digits drawn
//! from rectangles: `camera frame` and the capture time of day (UTC, `HH:MM:SS.mmm`). Motion shows at a glance
//! whether a monitor gets live frames; the digits say exactly which frame it got. Being a pure function, a
//! test can redraw the frame a reply claims to be and compare it pixel by pixel.
use std::io::Cursor;

/// An RGB image, 8 bits per channel, rows top to bottom.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Image {
    pub width: u32,
    pub height: u32,
    pub rgb: Vec<u8>,
}

impl Image {
    pub fn new(width: u32, height: u32) -> Self {
        Image { width, height, rgb: vec![0; width as usize * height as usize * 3] }
    }

    pub fn pixel(&self, x: u32, y: u32) -> [u8; 3] {
        let i = (y as usize * self.width as usize + x as usize) * 3;
        [self.rgb[i], self.rgb[i + 1], self.rgb[i + 2]]
    }

    /// Fills the rectangle, clipped to the image.
    pub fn fill(&mut self, x: i64, y: i64, w: i64, h: i64, color: [u8; 3]) {
        let (x0, y0) = (x.max(0), y.max(0));
        let (x1, y1) = ((x + w).min(self.width as i64), (y + h).min(self.height as i64));
        for yy in y0..y1 {
            let row = yy as usize * self.width as usize;
            for xx in x0..x1 {
                let i = (row + xx as usize) * 3;
                self.rgb[i..i + 3].copy_from_slice(&color);
            }
        }
    }
}

// Segments a b c d e f g as bits 0..6: a top, b upper right, c lower right, d bottom, e lower left,
// f upper left, g middle.
const DIGIT_SEGMENTS: [u8; 10] = [0x3f, 0x06, 0x5b, 0x4f, 0x66, 0x6d, 0x7d, 0x07, 0x7f, 0x6f];

/// Glyph metrics for a digit height: (digit width, stroke, advance).
fn metrics(height: i64) -> (i64, i64, i64) {
    let t = (height / 7).max(1);
    let w = (height / 2 + t).max(3);
    (w, t, w + 2 * t)
}

/// Draws `text` (digits, ':', '.', ' ') with its top-left corner at (x, y); returns the width it took.
pub fn draw_text(img: &mut Image, x: i64, y: i64, height: i64, text: &str, color: [u8; 3]) -> i64 {
    let (w, t, advance) = metrics(height);
    let half = height / 2;
    let mut cx = x;
    for ch in text.chars() {
        match ch {
            '0'..='9' => {
                let s = DIGIT_SEGMENTS[ch as usize - '0' as usize];
                let seg = |bit: u8| s & (1 << bit) != 0;
                if seg(0) {
                    img.fill(cx, y, w, t, color);
                }
                if seg(1) {
                    img.fill(cx + w - t, y, t, half + t / 2 + 1, color);
                }
                if seg(2) {
                    img.fill(cx + w - t, y + half, t, height - half, color);
                }
                if seg(3) {
                    img.fill(cx, y + height - t, w, t, color);
                }
                if seg(4) {
                    img.fill(cx, y + half, t, height - half, color);
                }
                if seg(5) {
                    img.fill(cx, y, t, half + t / 2 + 1, color);
                }
                if seg(6) {
                    img.fill(cx, y + half - t / 2, w, t, color);
                }
                cx += advance;
            }
            ':' => {
                img.fill(cx, y + height / 4, t, t, color);
                img.fill(cx, y + 3 * height / 4 - t, t, t, color);
                cx += 3 * t;
            }
            '.' => {
                img.fill(cx, y + height - t, t, t, color);
                cx += 3 * t;
            }
            _ => cx += advance,
        }
    }
    cx - x
}

fn text_width(height: i64, text: &str) -> i64 {
    let (_, t, advance) = metrics(height);
    text.chars().map(|c| if c == ':' || c == '.' { 3 * t } else { advance }).sum()
}

/// `HH:MM:SS.mmm` of a wall-clock time in ns since the Unix epoch (UTC).
pub fn time_of_day(ns: i64) -> String {
    let ms = ns.div_euclid(1_000_000).rem_euclid(86_400_000);
    format!("{:02}:{:02}:{:02}.{:03}", ms / 3_600_000, ms / 60_000 % 60, ms / 1000 % 60, ms % 1000)
}

/// Draws camera `camera`'s frame number `frame`, captured at `captured_ns`.
pub fn render(camera: u32, frame: u64, captured_ns: i64, width: u32, height: u32) -> Image {
    let mut img = Image::new(width, height);
    let (w, h) = (width as i64, height as i64);
    let tint = [40u8, 90, 140, 190][camera as usize % 4];
    for y in 0..height {
        for x in 0..width {
            let i = (y as usize * width as usize + x as usize) * 3;
            img.rgb[i] = (24 + x as i64 * 100 / w.max(1)) as u8;
            img.rgb[i + 1] = (24 + y as i64 * 100 / h.max(1)) as u8;
            img.rgb[i + 2] = tint;
        }
    }
    // The sweeping bar: one step per frame, wrapping at the right edge.
    let step = (w / 50).max(1);
    let bar = (w / 16).max(2);
    let bx = (frame as i64).wrapping_mul(step).rem_euclid(w.max(1));
    img.fill(bx, 0, bar, h, [240, 240, 240]);
    // The bouncing box: a triangle wave in x and, at another speed, in y.
    let side = (h.min(w) / 5).max(2);
    let tri = |n: i64, span: i64| -> i64 {
        if span <= 0 {
            return 0;
        }
        let p = n.rem_euclid(2 * span);
        if p < span {
            p
        } else {
            2 * span - p
        }
    };
    let n = frame as i64;
    img.fill(tri(n * 3, w - side), tri(n * 2, h - side), side, side, [220, 40, 40]);
    // Two rows of digits on a dark plate, scaled down to fit the width (7 px high at least).
    let line1 = format!("{camera} {frame}");
    let line2 = time_of_day(captured_ns);
    let mut dh = (h / 10).max(7);
    while dh > 7 && text_width(dh, &line2).max(text_width(dh, &line1)) + 4 > w {
        dh -= 1;
    }
    let margin = (dh / 4).max(2);
    let plate_w = text_width(dh, &line1).max(text_width(dh, &line2)) + 2 * margin;
    img.fill(0, 0, plate_w, 2 * dh + 3 * margin, [0, 0, 0]);
    draw_text(&mut img, margin, margin, dh, &line1, [255, 220, 0]);
    draw_text(&mut img, margin, dh + 2 * margin, dh, &line2, [255, 220, 0]);
    img
}

#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    #[error("PNG encoding failed: {0}")]
    Encode(#[from] png::EncodingError),
    #[error("PNG decoding failed: {0}")]
    Decode(#[from] png::DecodingError),
    #[error("the PNG is not 8-bit RGB ({0:?}, {1:?})")]
    Format(png::ColorType, png::BitDepth),
}

/// Encodes as an 8-bit RGB PNG with fast compression (the recorder encodes every frame it records).
pub fn encode_png(img: &Image) -> Result<Vec<u8>, ImageError> {
    let mut out = Vec::with_capacity(img.rgb.len() / 8 + 1024);
    {
        let mut enc = png::Encoder::new(&mut out, img.width, img.height);
        enc.set_color(png::ColorType::Rgb);
        enc.set_depth(png::BitDepth::Eight);
        enc.set_compression(png::Compression::Fast);
        let mut w = enc.write_header()?;
        w.write_image_data(&img.rgb)?;
        w.finish()?;
    }
    Ok(out)
}

/// Decodes an 8-bit RGB PNG.
pub fn decode_png(bytes: &[u8]) -> Result<Image, ImageError> {
    let dec = png::Decoder::new(Cursor::new(bytes));
    let mut reader = dec.read_info()?;
    let size = reader.output_buffer_size().unwrap_or(0);
    let mut buf = vec![0; size];
    let info = reader.next_frame(&mut buf)?;
    if info.color_type != png::ColorType::Rgb || info.bit_depth != png::BitDepth::Eight {
        return Err(ImageError::Format(info.color_type, info.bit_depth));
    }
    buf.truncate(info.buffer_size());
    Ok(Image { width: info.width, height: info.height, rgb: buf })
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: i64 = 1_700_000_000_123_456_789;

    #[test]
    fn frames_differ_over_time_and_between_cameras() {
        let a = render(0, 10, T0, 160, 120);
        let b = render(0, 11, T0 + 40_000_000, 160, 120);
        let c = render(1, 10, T0, 160, 120);
        assert_ne!(a, b, "consecutive frames must differ");
        assert_ne!(a, c, "two cameras must differ");
        assert_eq!(a, render(0, 10, T0, 160, 120), "a frame is a function of its inputs");
        // Only the time differs: the digits of the second row must change something.
        assert_ne!(a, render(0, 10, T0 + 1_000_000, 160, 120));
    }

    #[test]
    fn the_bar_moves_one_step_per_frame() {
        let (w, h) = (200u32, 100u32);
        // Row h-1 is below the digits and, at frame 0, below the box's reach only at the bar: find white.
        let white_at = |frame: u64| -> Vec<u32> {
            let img = render(0, frame, T0, w, h);
            (0..w).filter(|&x| img.pixel(x, h - 1) == [240, 240, 240]).collect()
        };
        let step = (w / 50).max(1);
        assert_eq!(white_at(0).first(), Some(&0));
        assert_eq!(white_at(5).first(), Some(&(5 * step)));
    }

    #[test]
    fn png_round_trips_at_the_right_size() {
        for (w, h) in [(64u32, 48u32), (320, 240), (33, 7)] {
            let img = render(2, 123_456, T0, w, h);
            let png = encode_png(&img).unwrap();
            assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
            let back = decode_png(&png).unwrap();
            assert_eq!((back.width, back.height), (w, h));
            assert_eq!(back, img);
        }
    }

    #[test]
    fn digits_are_seven_segments() {
        let mut img = Image::new(40, 20);
        draw_text(&mut img, 0, 0, 14, "8", [255, 255, 255]);
        let lit8 = img.rgb.iter().filter(|&&v| v == 255).count();
        let mut one = Image::new(40, 20);
        draw_text(&mut one, 0, 0, 14, "1", [255, 255, 255]);
        let lit1 = one.rgb.iter().filter(|&&v| v == 255).count();
        assert!(lit1 > 0 && lit8 > 2 * lit1, "8 lights all segments, 1 two: {lit8} vs {lit1}");
        assert_eq!(time_of_day(3_723_004_000_000), "01:02:03.004");
    }
}
