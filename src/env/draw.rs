//! Pictures of the classic-control and Box2D tasks for recorded games: a few shapes drawn
//! in a fixed palette, enough to see what the agent does.

use super::Frame;

/// The colours of every drawn scene.
pub const PALETTE: [[u8; 3]; 19] = [
    [255, 255, 255], // background
    [0, 0, 0],       // cart, track, links
    [202, 152, 101], // pole
    [129, 132, 203], // axles and joints
    [204, 77, 77],   // pendulum rod
    [204, 204, 0],   // goal flag
    [128, 102, 230], // lander
    [77, 77, 128],   // lander's outline
    [255, 140, 40],  // engine flame
    [215, 215, 255], // walker's sky
    [102, 153, 76],  // walker's ground
    [76, 230, 76],   // grass line
    [127, 51, 229],  // walker's hull
    [76, 76, 127],   // walker's outlines
    [255, 0, 0],     // lidar rays
    [153, 153, 153], // obstacles' outline
    [230, 51, 0],    // start pennant
    [178, 101, 152], // left leg
    [128, 51, 102],  // right leg
];

pub const BACKGROUND: u8 = 0;
pub const INK: u8 = 1;
pub const POLE: u8 = 2;
pub const JOINT: u8 = 3;
pub const ROD: u8 = 4;
pub const FLAG: u8 = 5;
pub const LANDER: u8 = 6;
pub const LANDER_EDGE: u8 = 7;
pub const FLAME: u8 = 8;
pub const SKY: u8 = 9;
pub const GROUND: u8 = 10;
pub const GRASS: u8 = 11;
pub const HULL: u8 = 12;
pub const HULL_EDGE: u8 = 13;
pub const LIDAR: u8 = 14;
pub const OBSTACLE_EDGE: u8 = 15;
pub const PENNANT: u8 = 16;
pub const WALKER_LEFT_LEG: u8 = 17;
pub const WALKER_RIGHT_LEG: u8 = 18;

/// A picture under construction; coordinates are pixels, y pointing down.
pub struct Canvas {
    width: usize,
    height: usize,
    pixels: Vec<u8>,
}

impl Canvas {
    pub fn new(width: usize, height: usize) -> Self {
        Canvas { width, height, pixels: vec![BACKGROUND; width * height] }
    }

    pub fn width(&self) -> f64 {
        self.width as f64
    }

    pub fn height(&self) -> f64 {
        self.height as f64
    }

    /// Colours every pixel whose centre `inside` accepts, within the given box.
    fn fill(
        &mut self,
        (x0, y0, x1, y1): (f64, f64, f64, f64),
        color: u8,
        inside: impl Fn(f64, f64) -> bool,
    ) {
        let clamp_x = |x: f64| x.clamp(0.0, self.width as f64) as usize;
        let clamp_y = |y: f64| y.clamp(0.0, self.height as f64) as usize;
        for y in clamp_y(y0.floor())..clamp_y(y1.ceil()) {
            for x in clamp_x(x0.floor())..clamp_x(x1.ceil()) {
                if inside(x as f64 + 0.5, y as f64 + 0.5) {
                    self.pixels[y * self.width + x] = color;
                }
            }
        }
    }

    /// A filled axis-aligned rectangle.
    pub fn rect(&mut self, (x0, y0): (f64, f64), (x1, y1): (f64, f64), color: u8) {
        let (left, right, top, bottom) = (x0.min(x1), x0.max(x1), y0.min(y1), y0.max(y1));
        self.fill((left, top, right, bottom), color, |_, _| true);
    }

    /// A segment `width` pixels thick with round ends.
    pub fn line(&mut self, a: (f64, f64), b: (f64, f64), width: f64, color: u8) {
        let radius = width / 2.0;
        let bounds = (
            a.0.min(b.0) - radius,
            a.1.min(b.1) - radius,
            a.0.max(b.0) + radius,
            a.1.max(b.1) + radius,
        );
        let (dx, dy) = (b.0 - a.0, b.1 - a.1);
        let length_squared = (dx * dx + dy * dy).max(f64::EPSILON);
        self.fill(bounds, color, |x, y| {
            let along = (((x - a.0) * dx + (y - a.1) * dy) / length_squared).clamp(0.0, 1.0);
            let (nearest_x, nearest_y) = (a.0 + along * dx, a.1 + along * dy);
            (x - nearest_x).powi(2) + (y - nearest_y).powi(2) <= radius * radius
        });
    }

    /// A filled polygon (even-odd rule, so any simple polygon, convex or not).
    pub fn polygon(&mut self, points: &[(f64, f64)], color: u8) {
        let Some(bounds) = bounding_box(points) else { return };
        self.fill(bounds, color, |x, y| {
            let mut inside = false;
            let mut previous = points[points.len() - 1];
            for &current in points {
                if (current.1 > y) != (previous.1 > y) {
                    let crossing = previous.0
                        + (y - previous.1) / (current.1 - previous.1) * (current.0 - previous.0);
                    if x < crossing {
                        inside = !inside;
                    }
                }
                previous = current;
            }
            inside
        });
    }

    /// A polygon's closed outline, one pixel wide.
    pub fn outline(&mut self, points: &[(f64, f64)], color: u8) {
        for (index, &point) in points.iter().enumerate() {
            self.line(point, points[(index + 1) % points.len()], 1.0, color);
        }
    }

    /// A filled circle.
    pub fn disc(&mut self, center: (f64, f64), radius: f64, color: u8) {
        self.line(center, center, 2.0 * radius, color);
    }

    pub fn into_frame(self) -> Frame {
        Frame {
            width: self.width as u16,
            height: self.height as u16,
            palette: PALETTE.to_vec(),
            pixels: self.pixels,
        }
    }
}

fn bounding_box(points: &[(f64, f64)]) -> Option<(f64, f64, f64, f64)> {
    let first = *points.first()?;
    Some(points.iter().fold((first.0, first.1, first.0, first.1), |(x0, y0, x1, y1), &(x, y)| {
        (x0.min(x), y0.min(y), x1.max(x), y1.max(y))
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Shapes colour the pixels they cover and no others; shapes reaching past the
    /// edge are cut, not wrapped.
    #[test]
    fn shapes_cover_their_pixels() {
        let mut canvas = Canvas::new(10, 8);
        canvas.rect((1.0, 1.0), (3.0, 2.0), INK);
        canvas.line((5.5, 4.5), (20.0, 4.5), 1.0, ROD);
        canvas.disc((0.0, 8.0), 2.0, FLAG);
        let frame = canvas.into_frame();
        let at = |x: usize, y: usize| frame.pixels[y * 10 + x];
        assert_eq!((at(1, 1), at(2, 1), at(3, 1), at(1, 2)), (INK, INK, BACKGROUND, BACKGROUND));
        assert!((5..10).all(|x| at(x, 4) == ROD));
        assert_eq!((at(4, 4), at(7, 3), at(7, 5)), (BACKGROUND, BACKGROUND, BACKGROUND));
        assert_eq!((at(0, 7), at(1, 7), at(0, 6), at(1, 6)), (FLAG, FLAG, FLAG, BACKGROUND));
        let colored = frame.pixels.iter().filter(|&&p| p != BACKGROUND).count();
        assert_eq!(colored, 2 + 5 + 3, "rect, line, the disc's visible corner");
    }

    /// A concave polygon leaves its notch empty.
    #[test]
    fn polygons_fill_their_inside_only() {
        let mut canvas = Canvas::new(6, 6);
        // A U shape: the notch is x 2..4, y 0..3.
        let u_shape = [
            (0.0, 0.0),
            (2.0, 0.0),
            (2.0, 3.0),
            (4.0, 3.0),
            (4.0, 0.0),
            (6.0, 0.0),
            (6.0, 6.0),
            (0.0, 6.0),
        ];
        canvas.polygon(&u_shape, LANDER);
        let frame = canvas.into_frame();
        let at = |x: usize, y: usize| frame.pixels[y * 6 + x];
        assert_eq!((at(0, 0), at(5, 0), at(3, 4), at(3, 5)), (LANDER, LANDER, LANDER, LANDER));
        assert_eq!((at(2, 0), at(3, 2)), (BACKGROUND, BACKGROUND));
        assert_eq!(frame.pixels.iter().filter(|&&p| p == BACKGROUND).count(), 6);
    }
}
