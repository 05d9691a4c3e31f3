//! Image observations of an environment from outside a3g (height x width x channels
//! of bytes, or height x width) made into the screens a3g's convolutional networks
//! read: one grey channel, square, scaled into [0, 1]. The universe network's screen
//! takes the mean of the colour channels at 42x42 (84x84 for `--model universe84`), as
//! its Atari screens do; the reference network's takes luminance at 80x80. All average
//! the pixels each output pixel covers (box filtering), whatever the image's size and
//! aspect, but `--model universe-max`'s, which takes their brightest.

use crate::env::Screen;

/// An image's layout, as its observation space gives it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ImageLayout {
    pub height: usize,
    pub width: usize,
    pub channels: usize,
}

impl ImageLayout {
    /// The layout of a Box of bytes shaped `shape`, if it is an image: height x width,
    /// or height x width x 1, 3 or 4 channels (a fourth, alpha, is ignored).
    pub fn of(shape: &[i64]) -> Option<ImageLayout> {
        let size = |side: i64| usize::try_from(side).ok().filter(|side| *side >= 1);
        match *shape {
            [height, width] => {
                Some(ImageLayout { height: size(height)?, width: size(width)?, channels: 1 })
            }
            [height, width, channels] if [1, 3, 4].contains(&channels) => Some(ImageLayout {
                height: size(height)?,
                width: size(width)?,
                channels: channels as usize,
            }),
            _ => None,
        }
    }

    /// Bytes in one image.
    pub fn len(&self) -> usize {
        self.height * self.width * self.channels
    }
}

/// `image` (laid out as `layout`) as a `side` x `side` grey screen for `screen`.
pub fn to_screen(image: &[u8], layout: ImageLayout, screen: Screen) -> Vec<f32> {
    let ImageLayout { height, width, channels } = layout;
    let grey = |pixel: &[u8]| -> f32 {
        match (channels, screen) {
            (1, _) => f32::from(pixel[0]),
            (_, Screen::Mean42 | Screen::Mean84 | Screen::Max42) => {
                (f32::from(pixel[0]) + f32::from(pixel[1]) + f32::from(pixel[2])) / 3.0
            }
            (_, Screen::Gray80) => {
                0.299 * f32::from(pixel[0])
                    + 0.587 * f32::from(pixel[1])
                    + 0.114 * f32::from(pixel[2])
            }
        }
    };
    let side = screen.side();
    let span = |index: usize, from: usize| {
        let start = index * from / side;
        (start, ((index + 1) * from / side).max(start + 1).min(from))
    };
    let mut out = Vec::with_capacity(side * side);
    for row in 0..side {
        let (top, bottom) = span(row, height);
        for column in 0..side {
            let (left, right) = span(column, width);
            let (mut sum, mut brightest) = (0.0f32, 0.0f32);
            for y in top..bottom {
                for x in left..right {
                    let at = (y * width + x) * channels;
                    let value = grey(&image[at..at + channels]);
                    sum += value;
                    brightest = brightest.max(value);
                }
            }
            let value = match screen {
                Screen::Max42 => brightest,
                _ => sum / ((bottom - top) * (right - left)) as f32,
            };
            out.push(value / 255.0);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Images are height x width, with 1, 3 or 4 channels; nothing else is one.
    #[test]
    fn image_layouts_are_recognised() {
        assert_eq!(
            ImageLayout::of(&[64, 48, 3]),
            Some(ImageLayout { height: 64, width: 48, channels: 3 })
        );
        assert_eq!(ImageLayout::of(&[10, 12]).map(|layout| layout.channels), Some(1));
        assert_eq!(ImageLayout::of(&[10, 12, 2]), None);
        assert_eq!(ImageLayout::of(&[10]), None);
    }

    /// A white left half over black becomes a 42x42 screen white on the left and black
    /// on the right, averaged where a column straddles the edge; values lie in [0, 1].
    #[test]
    fn a_half_white_image_keeps_its_halves() {
        let (height, width) = (84, 84);
        let image: Vec<u8> = (0..height * width * 3)
            .map(|at| if (at / 3) % width < width / 2 { 255 } else { 0 })
            .collect();
        let layout = ImageLayout { height, width, channels: 3 };
        let screen = to_screen(&image, layout, Screen::Mean42);
        assert_eq!(screen.len(), 42 * 42);
        assert_eq!(screen[0], 1.0);
        assert_eq!(screen[41], 0.0);
        assert!(screen.iter().all(|value| (0.0..=1.0).contains(value)));
        let reference = to_screen(&image, layout, Screen::Gray80);
        assert_eq!(reference.len(), 80 * 80);
        assert!((reference[0] - 1.0).abs() < 1e-5 && reference[79] == 0.0);
    }

    /// The block-maximum screen keeps a lone bright pixel at full brightness, where
    /// the averaged one spreads it over its cell.
    #[test]
    fn the_maximum_screen_keeps_a_lone_pixel() {
        let (height, width) = (168, 168);
        let mut image = vec![0u8; height * width];
        image[5 * width + 9] = 255;
        let layout = ImageLayout { height, width, channels: 1 };
        let pooled = to_screen(&image, layout, Screen::Max42);
        let averaged = to_screen(&image, layout, Screen::Mean42);
        assert_eq!(pooled.len(), 42 * 42);
        assert_eq!(pooled[42 + 2], 1.0);
        assert_eq!(pooled.iter().filter(|&&value| value > 0.0).count(), 1);
        assert_eq!(averaged[42 + 2], 1.0 / 16.0);
    }

    /// A smaller image than the screen is spread over it, each pixel to whole cells.
    #[test]
    fn a_small_image_is_enlarged() {
        let layout = ImageLayout { height: 2, width: 2, channels: 1 };
        let screen = to_screen(&[0, 255, 255, 0], layout, Screen::Mean42);
        assert_eq!((screen[0], screen[41], screen[41 * 42]), (0.0, 1.0, 1.0));
    }
}
