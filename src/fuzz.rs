//! Fuzzing for the readers of files a user hands a3g (checkpoints, game logs): seeded
//! random damage to a valid file, and a loop that reads each damaged copy and insists
//! on an answer, Ok or a one-line reason, never a panic, a hang or an abort. Seeded, so
//! a failure names a case that replays; no fuzzing crate, so it runs in every
//! `cargo test` within its time bound.

use std::ops::Range;

use crate::env::rng::Rng;

/// Seeded random damage to `file`: 1 to 4 of bit flips, byte and integer
/// overwrites, truncations, insertions, deletions and repeated chunks (a run of
/// opcodes, say), half of them in the `hot` ranges where the file's structure is.
/// Returns the damaged bytes and what was done, for a failure message.
pub fn mutate(rng: &mut Rng, file: &[u8], hot: &[Range<usize>]) -> (Vec<u8>, String) {
    let mut bytes = file.to_vec();
    let mut done = Vec::new();
    let below = |rng: &mut Rng, bound: usize| (rng.next_u64() % bound.max(1) as u64) as usize;
    for _ in 0..rng.integer(1, 4) {
        let length = bytes.len();
        let range = match hot.get(below(rng, 2 * hot.len())) {
            Some(range) if range.start < length => range.start..range.end.min(length),
            _ => 0..length,
        };
        let at = range.start + below(rng, range.len());
        match rng.integer(0, 6) {
            0 if at < length => {
                let bit = rng.integer(0, 7);
                bytes[at] ^= 1 << bit;
                done.push(format!("flip bit {bit} at {at}"));
            }
            1 if at < length => {
                let value = rng.integer(0, 255) as u8;
                bytes[at] = value;
                done.push(format!("write {value:#04x} at {at}"));
            }
            2 => {
                // Integers that overflow, or size things past the file.
                let value = [
                    0,
                    1,
                    0x7f,
                    0xff,
                    0x7fff_ffff,
                    0xffff_ffff,
                    1 << 40,
                    i64::MAX as u64,
                    u64::MAX,
                    rng.next_u64(),
                ][below(rng, 10)];
                let width = [1, 2, 4, 8][below(rng, 4)];
                let end = (at + width).min(length);
                bytes[at..end].copy_from_slice(&value.to_le_bytes()[..end - at]);
                done.push(format!("write {value:#x} as {width} bytes at {at}"));
            }
            3 => {
                bytes.truncate(at);
                done.push(format!("truncate at {at}"));
            }
            4 => {
                let inserted: Vec<u8> =
                    (0..rng.integer(1, 16)).map(|_| rng.integer(0, 255) as u8).collect();
                done.push(format!("insert {inserted:?} at {at}"));
                bytes.splice(at..at, inserted);
            }
            5 => {
                let end = (at + rng.integer(1, 64) as usize).min(length);
                bytes.drain(at..end);
                done.push(format!("delete {at}..{end}"));
            }
            _ => {
                let from = below(rng, length);
                let end = (from + rng.integer(1, 32) as usize).min(length);
                let times = rng.integer(1, 300) as usize;
                bytes.splice(at..at, bytes[from..end].repeat(times));
                done.push(format!("insert {from}..{end} {times} times at {at}"));
            }
        }
    }
    (bytes, done.join(", "))
}

/// Reads `count` seeded mutations of `file` with `read`, which must return (Ok or
/// Err with a one-line reason) without panicking, each within two seconds; returns
/// how many read.
pub fn fuzz<T>(
    name: &str,
    seed: u64,
    count: usize,
    file: &[u8],
    hot: &[Range<usize>],
    mut read: impl FnMut(&[u8]) -> Result<T, String>,
) -> usize {
    let mut rng = Rng::new(seed);
    let mut read_well = 0;
    let started = std::time::Instant::now();
    let mut slowest = std::time::Duration::ZERO;
    for case in 0..count {
        let (bytes, damage) = mutate(&mut rng, file, hot);
        let case_started = std::time::Instant::now();
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| read(&bytes)));
        let elapsed = case_started.elapsed();
        let Ok(result) = result else { panic!("{name} case {case} panicked: {damage}") };
        assert!(elapsed.as_secs_f64() < 2.0, "{name} case {case} took {elapsed:?}: {damage}");
        if let Err(reason) = &result {
            assert!(
                !reason.contains('\n') && reason.len() < 500,
                "{name} case {case} gave a long reason: {reason}"
            );
        }
        slowest = slowest.max(elapsed);
        read_well += usize::from(result.is_ok());
    }
    eprintln!(
        "{name}: {count} mutations in {:.2} s (slowest {:.1} ms), {read_well} read",
        started.elapsed().as_secs_f64(),
        slowest.as_secs_f64() * 1e3,
    );
    read_well
}
