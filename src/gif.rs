//! Animated GIFs of played games, written frame by frame as the game goes, so a
//! headless server can show what the agent did.
//!
//! Each frame carries its own palette (Atari screens use at most 128 of the
//! console's colours, so they are stored exactly), and only the rectangle that
//! changed since the previous frame is written; an unchanged frame lengthens the
//! previous one's display time instead.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::env::Frame;
use crate::error::{Error, Result};

/// Writes one animated GIF.
pub struct GifWriter {
    path: PathBuf,
    out: BufWriter<File>,
    width: usize,
    height: usize,
    /// Seconds each added frame stands for.
    frame_seconds: f64,
    /// What a viewer shows after the frames written so far (and the pending one).
    canvas: Vec<[u8; 3]>,
    /// The last changed frame, held until we know how long it stays on screen.
    pending: Option<Pending>,
    /// Time of all frames added so far, in seconds.
    elapsed: f64,
    /// Display time already written, in GIF's hundredths of a second.
    written_centiseconds: u64,
}

struct Pending {
    left: usize,
    top: usize,
    width: usize,
    height: usize,
    palette: Vec<[u8; 3]>,
    pixels: Vec<u8>,
}

impl GifWriter {
    /// Starts a looping GIF of `width` x `height` whose frames each last `frame_seconds`.
    pub fn create(path: &Path, width: u16, height: u16, frame_seconds: f64) -> Result<Self> {
        let file = File::create(path).map_err(|source| Error::Io {
            action: "create the recording",
            path: path.to_path_buf(),
            cause: source,
        })?;
        let mut writer = GifWriter {
            path: path.to_path_buf(),
            out: BufWriter::new(file),
            width: usize::from(width),
            height: usize::from(height),
            frame_seconds,
            canvas: Vec::new(),
            pending: None,
            elapsed: 0.0,
            written_centiseconds: 0,
        };
        let mut header = Vec::with_capacity(32);
        header.extend_from_slice(b"GIF89a");
        header.extend_from_slice(&width.to_le_bytes());
        header.extend_from_slice(&height.to_le_bytes());
        // No global colour table (each frame has its own); background 0; square pixels.
        header.extend_from_slice(&[0x00, 0, 0]);
        // Netscape's application extension: loop forever.
        header.extend_from_slice(b"\x21\xff\x0bNETSCAPE2.0\x03\x01\x00\x00\x00");
        writer.write(&header)?;
        Ok(writer)
    }

    /// Adds the next frame; it must have the size given to [`GifWriter::create`].
    pub fn add(&mut self, frame: &Frame) -> Result<()> {
        assert_eq!(
            (usize::from(frame.width), usize::from(frame.height)),
            (self.width, self.height),
            "every frame of a recording has its size"
        );
        assert!(frame.palette.len() <= 256, "a GIF frame has at most 256 colours");
        let colors: Vec<[u8; 3]> =
            frame.pixels.iter().map(|&index| frame.palette[usize::from(index)]).collect();
        let changed = if self.canvas.is_empty() {
            Some((0, 0, self.width - 1, self.height - 1))
        } else {
            changed_box(&self.canvas, &colors, self.width)
        };
        if let Some((left, top, right, bottom)) = changed {
            self.flush_pending()?;
            let (width, height) = (right - left + 1, bottom - top + 1);
            let mut pixels = Vec::with_capacity(width * height);
            for row in top..=bottom {
                pixels.extend_from_slice(
                    &frame.pixels[row * self.width + left..=row * self.width + right],
                );
            }
            self.pending =
                Some(Pending { left, top, width, height, palette: frame.palette.clone(), pixels });
            self.canvas = colors;
        }
        self.elapsed += self.frame_seconds;
        Ok(())
    }

    /// Writes the last frame and the trailer; returns where the file is.
    pub fn finish(mut self) -> Result<PathBuf> {
        self.flush_pending()?;
        self.write(&[0x3b])?;
        self.out.flush().map_err(|source| Error::Io {
            action: "write the recording",
            path: self.path.clone(),
            cause: source,
        })?;
        Ok(self.path)
    }

    fn flush_pending(&mut self) -> Result<()> {
        let Some(frame) = self.pending.take() else { return Ok(()) };
        // Delays are rounded on the running total, so a 15 Hz game keeps its pace
        // (7, 6, 7, ... hundredths) instead of drifting.
        let shown_until = (self.elapsed * 100.0).round() as u64;
        let delay = (shown_until - self.written_centiseconds).min(u64::from(u16::MAX)) as u16;
        self.written_centiseconds = shown_until;
        let table_bits = (usize::BITS - (frame.palette.len().max(2) - 1).leading_zeros()) as u8;
        let mut bytes = Vec::with_capacity(frame.pixels.len() / 2 + 1024);
        // Graphic control: keep the frame under the next one (disposal 1), its delay.
        bytes.extend_from_slice(&[0x21, 0xf9, 0x04, 0x04]);
        bytes.extend_from_slice(&delay.to_le_bytes());
        bytes.extend_from_slice(&[0x00, 0x00]);
        bytes.push(0x2c);
        for value in [frame.left, frame.top, frame.width, frame.height] {
            bytes.extend_from_slice(&(value as u16).to_le_bytes());
        }
        bytes.push(0x80 | (table_bits - 1));
        for index in 0..1usize << table_bits {
            bytes.extend_from_slice(frame.palette.get(index).unwrap_or(&[0, 0, 0]));
        }
        let min_code_size = table_bits.max(2);
        bytes.push(min_code_size);
        for block in lzw_encode(&frame.pixels, min_code_size).chunks(255) {
            bytes.push(block.len() as u8);
            bytes.extend_from_slice(block);
        }
        bytes.push(0);
        self.write(&bytes)
    }

    fn write(&mut self, bytes: &[u8]) -> Result<()> {
        self.out.write_all(bytes).map_err(|source| Error::Io {
            action: "write the recording",
            path: self.path.clone(),
            cause: source,
        })
    }
}

/// The smallest box (left, top, right, bottom, inclusive) holding every pixel that
/// differs between two images of `width` columns; `None` if none does.
fn changed_box(
    before: &[[u8; 3]],
    after: &[[u8; 3]],
    width: usize,
) -> Option<(usize, usize, usize, usize)> {
    let mut changed: Option<(usize, usize, usize, usize)> = None;
    for (index, (old, new)) in before.iter().zip(after).enumerate() {
        if old != new {
            let (x, y) = (index % width, index / width);
            changed = Some(match changed {
                None => (x, y, x, y),
                Some((left, top, right, bottom)) => {
                    (left.min(x), top.min(y), right.max(x), bottom.max(y))
                }
            });
        }
    }
    changed
}

/// GIF's variable-width LZW: codes start at `min_code_size + 1` bits and grow to 12,
/// after which the table is cleared and starts again.
fn lzw_encode(indices: &[u8], min_code_size: u8) -> Vec<u8> {
    let clear = 1u16 << min_code_size;
    let end = clear + 1;
    let mut bits = BitWriter::default();
    let mut code_size = min_code_size + 1;
    let mut next_code = end + 1;
    let mut table: HashMap<(u16, u8), u16> = HashMap::new();
    bits.push(clear, code_size);
    let Some((&first, rest)) = indices.split_first() else {
        bits.push(end, code_size);
        return bits.finish();
    };
    let mut prefix = u16::from(first);
    for &index in rest {
        if let Some(&code) = table.get(&(prefix, index)) {
            prefix = code;
            continue;
        }
        bits.push(prefix, code_size);
        if next_code < 4096 {
            table.insert((prefix, index), next_code);
            next_code += 1;
            // The decoder adds its entries one code behind us, so it widens its
            // codes once the table holds one more entry than the width can name.
            if next_code > 1 << code_size && code_size < 12 {
                code_size += 1;
            }
        } else {
            bits.push(clear, code_size);
            table.clear();
            next_code = end + 1;
            code_size = min_code_size + 1;
        }
        prefix = u16::from(index);
    }
    bits.push(prefix, code_size);
    bits.push(end, code_size);
    bits.finish()
}

/// Packs codes least significant bit first, as GIF stores them.
#[derive(Default)]
struct BitWriter {
    bytes: Vec<u8>,
    buffer: u32,
    count: u8,
}

impl BitWriter {
    fn push(&mut self, code: u16, size: u8) {
        self.buffer |= u32::from(code) << self.count;
        self.count += size;
        while self.count >= 8 {
            self.bytes.push(self.buffer as u8);
            self.buffer >>= 8;
            self.count -= 8;
        }
    }

    fn finish(mut self) -> Vec<u8> {
        if self.count > 0 {
            self.bytes.push(self.buffer as u8);
        }
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A decoder written from the GIF89a specification, to check the encoder against.
    fn lzw_decode(data: &[u8], min_code_size: u8) -> Vec<u8> {
        let clear = 1usize << min_code_size;
        let end = clear + 1;
        let mut table: Vec<Vec<u8>> = Vec::new();
        let reset = |table: &mut Vec<Vec<u8>>| {
            table.clear();
            table.extend((0..clear).map(|index| vec![index as u8]));
            table.push(Vec::new());
            table.push(Vec::new());
        };
        reset(&mut table);
        let (mut position, mut code_size) = (0usize, min_code_size as usize + 1);
        let mut previous: Option<usize> = None;
        let mut output = Vec::new();
        loop {
            let mut code = 0usize;
            for bit in 0..code_size {
                let byte = data[(position + bit) / 8];
                code |= usize::from((byte >> ((position + bit) % 8)) & 1) << bit;
            }
            position += code_size;
            if code == clear {
                reset(&mut table);
                code_size = min_code_size as usize + 1;
                previous = None;
                continue;
            }
            if code == end {
                return output;
            }
            let entry = match (code < table.len(), previous) {
                (true, _) => table[code].clone(),
                (false, Some(previous)) => {
                    let mut entry = table[previous].clone();
                    entry.push(table[previous][0]);
                    entry
                }
                (false, None) => panic!("code {code} before any entry"),
            };
            if let Some(previous) = previous {
                if table.len() < 4096 {
                    let mut added = table[previous].clone();
                    added.push(entry[0]);
                    table.push(added);
                    if table.len() == 1 << code_size && code_size < 12 {
                        code_size += 1;
                    }
                }
            }
            output.extend_from_slice(&entry);
            previous = Some(code);
        }
    }

    /// Encoded pixels decode to themselves, through code widening and table
    /// clears (60 000 noisy pixels fill the 4096-entry table several times).
    #[test]
    fn lzw_round_trips() {
        let mut state = 12345u32;
        let noisy: Vec<u8> = (0..60_000)
            .map(|_| {
                state = state.wrapping_mul(1_103_515_245).wrapping_add(12345);
                ((state >> 16) % 128) as u8
            })
            .collect();
        let runs: Vec<u8> = (0..20_000).map(|index| ((index / 37) % 3) as u8).collect();
        for (pixels, min_code_size) in [(noisy, 7), (runs, 2), (vec![1], 2), (Vec::new(), 2)] {
            let encoded = lzw_encode(&pixels, min_code_size);
            assert_eq!(lzw_decode(&encoded, min_code_size), pixels);
        }
    }

    fn frame(pixels: Vec<u8>) -> Frame {
        Frame { width: 4, height: 3, palette: vec![[0, 0, 0], [255, 0, 0], [0, 0, 255]], pixels }
    }

    /// The file has GIF89a's header, one image per changed frame cut to the changed
    /// box, delays that add up to the game's time, and the trailer.
    #[test]
    fn frames_are_written_as_changed_boxes() {
        let path = std::env::temp_dir().join(format!("a3g-unit-gif-{}.gif", std::process::id()));
        let mut writer = GifWriter::create(&path, 4, 3, 1.0 / 15.0).unwrap();
        let first = frame(vec![0; 12]);
        let mut second = first.pixels.clone();
        second[4 + 1] = 1; // (1, 1)
        second[8 + 2] = 2; // (2, 2)
        for pixels in [first.pixels.clone(), first.pixels.clone(), second.clone(), second] {
            writer.add(&frame(pixels)).unwrap();
        }
        assert_eq!(writer.finish().unwrap(), path);
        let bytes = std::fs::read(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(&bytes[..6], b"GIF89a");
        assert_eq!(&bytes[6..10], &[4, 0, 3, 0]);
        assert_eq!(bytes.last(), Some(&0x3b));
        let images: Vec<usize> = (0..bytes.len() - 9)
            .filter(|&at| bytes[at..at + 4] == [0x21, 0xf9, 0x04, 0x04] && bytes[at + 8] == 0x2c)
            .collect();
        assert_eq!(images.len(), 2, "the repeated frames merge into their predecessors");
        let delays: Vec<u16> =
            images.iter().map(|&at| u16::from_le_bytes([bytes[at + 4], bytes[at + 5]])).collect();
        assert_eq!(delays, [13, 14], "2/15 s each, rounded on the running total");
        let descriptor = |at: usize| -> Vec<u16> {
            (0..4)
                .map(|field| {
                    u16::from_le_bytes([bytes[at + 9 + 2 * field], bytes[at + 10 + 2 * field]])
                })
                .collect()
        };
        assert_eq!(descriptor(images[0]), [0, 0, 4, 3]);
        assert_eq!(descriptor(images[1]), [1, 1, 2, 2]);
    }
}
