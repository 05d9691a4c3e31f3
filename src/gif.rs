//! Animated GIFs of played games, written frame by frame as the game goes, so a
//! headless server can show what the agent did.
//!
//! Each frame carries its own palette (Atari screens use at most 128 of the
//! console's colours, so they are stored exactly), and only the rectangle that
//! changed since the previous frame is written; an unchanged frame lengthens the
//! previous one's display time instead. The `gif` crate encodes each image.
//!
//! A recording is written under a temporary name and renamed into place once whole,
//! so a full disk or an error mid-game never leaves a truncated GIF under its name.

use std::borrow::Cow;
use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use ::gif::{DisposalMethod, Encoder, EncodingError, Repeat};

use crate::env::Frame;
use crate::error::{Error, Result};

/// Writes one animated GIF.
pub struct GifWriter {
    path: PathBuf,
    /// Where the frames go until [`GifWriter::finish`] renames it to `path`.
    unfinished: Unfinished,
    encoder: Encoder<BufWriter<File>>,
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
        let mut name = path.as_os_str().to_owned();
        name.push(format!(".tmp{}", std::process::id()));
        let unfinished = Unfinished { path: PathBuf::from(name), placed: false };
        let file = File::create(&unfinished.path).map_err(|source| Error::Io {
            action: "create the recording",
            path: unfinished.path.clone(),
            cause: source,
        })?;
        // Each frame has its own palette, so the global one is empty (gif 0.11 pads it
        // to two unused black entries).
        let encoder = Encoder::new(BufWriter::new(file), width, height, &[])
            .and_then(|mut encoder| encoder.set_repeat(Repeat::Infinite).map(|()| encoder))
            .map_err(|err| write_error(path, err))?;
        Ok(GifWriter {
            path: path.to_path_buf(),
            unfinished,
            encoder,
            width: usize::from(width),
            height: usize::from(height),
            frame_seconds,
            canvas: Vec::new(),
            pending: None,
            elapsed: 0.0,
            written_centiseconds: 0,
        })
    }

    /// The width and height every frame of this recording has.
    pub fn size(&self) -> (u16, u16) {
        (self.width as u16, self.height as u16)
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

    /// Writes the last frame and the trailer, and puts the file in place; returns
    /// where it is.
    pub fn finish(mut self) -> Result<PathBuf> {
        self.flush_pending()?;
        let GifWriter { path, encoder, mut unfinished, .. } = self;
        let written = encoder.into_inner().and_then(|mut out| out.flush());
        if let Err(source) = written {
            return Err(Error::Io { action: "write the recording", path, cause: source });
        }
        fs::rename(&unfinished.path, &path).map_err(|source| Error::Io {
            action: "rename into place",
            path: path.clone(),
            cause: source,
        })?;
        unfinished.placed = true;
        Ok(path)
    }

    fn flush_pending(&mut self) -> Result<()> {
        let Some(pending) = self.pending.take() else { return Ok(()) };
        // Delays are rounded on the running total, so a 15 Hz game keeps its pace
        // (7, 6, 7, ... hundredths) instead of drifting.
        let shown_until = (self.elapsed * 100.0).round() as u64;
        let delay = (shown_until - self.written_centiseconds).min(u64::from(u16::MAX)) as u16;
        self.written_centiseconds = shown_until;
        let image = ::gif::Frame {
            delay,
            // Kept under the next frame, which covers only what changed.
            dispose: DisposalMethod::Keep,
            left: pending.left as u16,
            top: pending.top as u16,
            width: pending.width as u16,
            height: pending.height as u16,
            palette: Some(pending.palette.concat()),
            buffer: Cow::Owned(pending.pixels),
            ..::gif::Frame::default()
        };
        self.encoder.write_frame(&image).map_err(|err| write_error(&self.path, err))
    }
}

/// Removes the unfinished recordings (`<name>.gif.tmp<PID>`) that an evaluation killed
/// outright left in `dir`; returns how many. A recording whose process still runs is
/// another evaluation's, writing into the same folder, and is kept (a reused PID at
/// worst leaves a stale file for a later sweep).
pub fn remove_stale_recordings(dir: &Path) -> usize {
    let Ok(entries) = fs::read_dir(dir) else { return 0 };
    let mut removed = 0;
    for entry in entries.filter_map(|entry| entry.ok()) {
        let name = entry.file_name();
        let Some((_, pid)) = name.to_str().and_then(|name| name.rsplit_once(".gif.tmp")) else {
            continue;
        };
        let Ok(pid) = pid.parse::<u32>() else { continue };
        let running = pid == std::process::id() || Path::new(&format!("/proc/{pid}")).exists();
        if !running && fs::remove_file(entry.path()).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// A recording's file while it is being written: removed if dropped before
/// [`GifWriter::finish`] puts it in place (a failed write, an error mid-game).
struct Unfinished {
    path: PathBuf,
    placed: bool,
}

impl Drop for Unfinished {
    fn drop(&mut self) {
        if !self.placed {
            let _ = fs::remove_file(&self.path);
        }
    }
}

/// The encoder's failure as ours. Its format errors (over 256 colours, no palette)
/// cannot happen here, but are reported as bad data rather than unwrapped.
fn write_error(path: &Path, err: EncodingError) -> Error {
    let source = match err {
        EncodingError::Io(source) => source,
        EncodingError::Format(format) => io::Error::new(io::ErrorKind::InvalidData, format),
    };
    Error::Io { action: "write the recording", path: path.to_path_buf(), cause: source }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A killed evaluation's unfinished recording is removed; a running one's (PID 1
    /// always runs), this process's own and finished recordings are kept.
    #[test]
    fn stale_recordings_are_removed() {
        let dir = std::env::temp_dir().join(format!("a3g-unit-stale-gifs-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        let dead = dir.join("Pong_game0001.gif.tmp4000000000");
        let running = dir.join("Pong_game0002.gif.tmp1");
        let own = dir.join(format!("Pong_game0003.gif.tmp{}", std::process::id()));
        let finished = dir.join("Pong_game0004.gif");
        for path in [&dead, &running, &own, &finished] {
            fs::write(path, b"GIF").unwrap();
        }
        assert_eq!(remove_stale_recordings(&dir), 1);
        assert!(!dead.exists() && running.exists() && own.exists() && finished.exists());
        fs::remove_dir_all(&dir).unwrap();
    }

    fn frame(pixels: Vec<u8>) -> Frame {
        Frame { width: 4, height: 3, palette: vec![[0, 0, 0], [255, 0, 0], [0, 0, 255]], pixels }
    }

    /// The frames the `gif` crate's decoder finds in a file, with the file's bytes.
    fn decode(path: &Path) -> (Vec<u8>, Vec<::gif::Frame<'static>>) {
        let bytes = std::fs::read(path).unwrap();
        std::fs::remove_file(path).unwrap();
        let mut decoder = ::gif::Decoder::new(bytes.as_slice()).unwrap();
        let mut frames = Vec::new();
        while let Some(frame) = decoder.read_next_frame().unwrap() {
            frames.push(frame.clone());
        }
        (bytes, frames)
    }

    fn temp_gif(name: &str) -> PathBuf {
        std::env::temp_dir().join(format!("a3g-unit-{name}-{}.gif", std::process::id()))
    }

    /// The file is a looping GIF89a with one image per changed frame, cut to the
    /// changed box, kept under the next one, with delays that add up to the game's time.
    #[test]
    fn frames_are_written_as_changed_boxes() {
        let path = temp_gif("boxes");
        let mut writer = GifWriter::create(&path, 4, 3, 1.0 / 15.0).unwrap();
        let first = frame(vec![0; 12]);
        let mut second = first.pixels.clone();
        second[4 + 1] = 1; // (1, 1)
        second[8 + 2] = 2; // (2, 2)
        for pixels in [first.pixels.clone(), first.pixels.clone(), second.clone(), second] {
            writer.add(&frame(pixels)).unwrap();
        }
        assert_eq!(writer.finish().unwrap(), path);
        let (bytes, images) = decode(&path);
        assert_eq!(&bytes[..10], b"GIF89a\x04\x00\x03\x00");
        // Netscape's application extension: loop forever.
        let looping = b"NETSCAPE2.0\x03\x01\x00\x00";
        assert!(bytes.windows(looping.len()).any(|at| at == looping), "loops");
        assert_eq!(bytes.last(), Some(&0x3b));
        assert_eq!(images.len(), 2, "the repeated frames merge into their predecessors");
        let delays: Vec<u16> = images.iter().map(|image| image.delay).collect();
        assert_eq!(delays, [13, 14], "2/15 s each, rounded on the running total");
        let boxes: Vec<[u16; 4]> =
            images.iter().map(|image| [image.left, image.top, image.width, image.height]).collect();
        assert_eq!(boxes, [[0, 0, 4, 3], [1, 1, 2, 2]]);
        assert!(images.iter().all(|image| image.dispose == DisposalMethod::Keep));
        assert_eq!(&images[0].palette.as_deref().unwrap()[..9], [0, 0, 0, 255, 0, 0, 0, 0, 255]);
        assert_eq!(images[0].buffer.as_ref(), [0; 12]);
        assert_eq!(images[1].buffer.as_ref(), [1, 0, 0, 2]);
    }

    /// A recording that is not finished (a full disk or an error mid-game drops its
    /// writer) leaves no file, neither under its name nor a temporary; a finished one
    /// leaves just itself.
    #[test]
    fn unfinished_recording_leaves_no_file() {
        let path = temp_gif("unfinished");
        let dir = path.parent().unwrap();
        let temporaries = || {
            let stem = path.file_name().unwrap().to_string_lossy().into_owned();
            std::fs::read_dir(dir)
                .unwrap()
                .filter_map(|entry| entry.ok())
                .filter(|entry| entry.file_name().to_string_lossy().starts_with(&stem))
                .count()
        };
        let mut writer = GifWriter::create(&path, 4, 3, 0.1).unwrap();
        writer.add(&frame(vec![0; 12])).unwrap();
        writer.add(&frame(vec![1; 12])).unwrap();
        drop(writer);
        assert!(!path.exists(), "a truncated recording was left in place");
        assert_eq!(temporaries(), 0, "the temporary was left behind");

        let mut writer = GifWriter::create(&path, 4, 3, 0.1).unwrap();
        writer.add(&frame(vec![0; 12])).unwrap();
        writer.finish().unwrap();
        assert_eq!(temporaries(), 1);
        let (bytes, _) = decode(&path);
        assert_eq!(bytes.last(), Some(&0x3b), "whole, with its trailer");
    }

    /// Full-screen noise in 128 colours (enough to fill the LZW table several times)
    /// decodes to the indices written, and a one-colour frame to itself.
    #[test]
    fn large_frames_round_trip() {
        let (width, height) = (300u16, 200u16);
        let mut state = 12345u32;
        let noisy: Vec<u8> = (0..usize::from(width) * usize::from(height))
            .map(|_| {
                state = state.wrapping_mul(1_103_515_245).wrapping_add(12345);
                ((state >> 16) % 128) as u8
            })
            .collect();
        let palette: Vec<[u8; 3]> =
            (0..128).map(|index| [index as u8, 2 * index as u8, 7]).collect();
        let path = temp_gif("noise");
        let mut writer = GifWriter::create(&path, width, height, 0.05).unwrap();
        writer
            .add(&Frame { width, height, palette: palette.clone(), pixels: noisy.clone() })
            .unwrap();
        let blank = vec![0; noisy.len()];
        writer
            .add(&Frame { width, height, palette: vec![[9, 9, 9]], pixels: blank.clone() })
            .unwrap();
        writer.finish().unwrap();
        let (_, images) = decode(&path);
        assert_eq!(images.len(), 2);
        assert_eq!(images[0].buffer.as_ref(), noisy.as_slice());
        assert_eq!(images[1].buffer.as_ref(), blank.as_slice());
        assert_eq!(&images[1].palette.as_deref().unwrap()[..3], [9, 9, 9]);
    }
}
