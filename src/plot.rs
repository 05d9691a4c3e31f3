//! `a3g plot`: learning curves from game logs. Each log is read into [`Curve`]s, plain
//! data on one clock (the parsing is tested on hand-written log text below), then all
//! of them are drawn into one PNG: test-game score against wall time above, and
//! against agent steps below.

use std::collections::VecDeque;
use std::path::Path;

use crate::error::{Error, Result};
use crate::train::MEAN_WINDOW;

/// The separator `a3g train` writes before a fresh run's lines in a log that has some.
const NEW_RUN: &str = "--- a3g train started a new run here ---";
/// The start of the separator before a resumed (`--load`) run's lines.
const RESUMED_AT: &str = "--- a3g train resumed here, at ";

/// A game log read for plotting.
#[derive(Clone, Debug, PartialEq)]
pub struct PlotLog {
    /// The environment id its first `env:` argument line names.
    pub env: Option<String>,
    /// One curve per fresh run that played a test game, in the log's order.
    pub curves: Vec<Curve>,
    /// Whether any status line gave agent steps; eval logs, the Python reference's
    /// and those of older a3g versions have none.
    pub has_status_lines: bool,
}

/// One learning curve: a fresh run and every part that resumed it with `--load`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Curve {
    /// The test games in the order they were played.
    pub games: Vec<Game>,
    /// Where each resumed part begins.
    pub resumes: Vec<Resume>,
}

/// One test game.
#[derive(Clone, Debug, PartialEq)]
pub struct Game {
    /// Seconds since the run started. Each resumed part's clock restarts at 0, so it
    /// is shifted by the time of the parts before it to keep the clock running on.
    pub seconds: f64,
    /// Agent steps when the game ended, interpolated between the status lines around
    /// it; `None` where its part has too few status lines to tell.
    pub agent_steps: Option<f64>,
    /// The game's score.
    pub reward: f64,
    /// The mean score of this game and up to 99 before it in the curve. The log's own
    /// `reward mean` restarts with each resumed part, so it is computed afresh.
    pub mean: f64,
}

/// The point where a resumed part of a run begins.
#[derive(Clone, Debug, PartialEq)]
pub struct Resume {
    /// Seconds since the run started, on the curve's clock.
    pub seconds: f64,
    /// Agent steps of the checkpoint it resumed, as its separator line says.
    pub agent_steps: u64,
}

/// The lines one `a3g train` process wrote, on its own clock.
#[derive(Default)]
struct Part {
    /// Agent steps at the start of the part, whose clock reads 0 there: 0 for a fresh
    /// run, the separator's count for a resumed one, unknown for a resumed run whose
    /// log has no separator (its log was new, or its folder changed).
    start_steps: Option<u64>,
    /// Whether a resume separator began this part.
    resumed: bool,
    /// (clock seconds, reward) of each test game.
    games: Vec<(f64, f64)>,
    /// (clock seconds, agent steps) of each status line.
    status: Vec<(f64, f64)>,
}

impl Part {
    fn fresh() -> Self {
        Part { start_steps: Some(0), ..Part::default() }
    }

    fn resumed(agent_steps: u64) -> Self {
        Part { start_steps: Some(agent_steps), resumed: true, ..Part::default() }
    }

    fn is_empty(&self) -> bool {
        self.games.is_empty() && self.status.is_empty()
    }

    fn push_game(&mut self, mut seconds: f64, reward: f64) {
        // The Python reference prints its clock with strftime("%H"), which wraps after
        // a day; a3g's clock never runs backwards within a part.
        if let Some(&(last, _)) = self.games.last() {
            while seconds < last {
                seconds += 86_400.0;
            }
        }
        self.games.push((seconds, reward));
    }

    /// The last clock reading of the part: where a part resuming it begins.
    fn end(&self) -> f64 {
        let last = |points: &[(f64, f64)]| points.last().map_or(0.0, |&(seconds, _)| seconds);
        last(&self.games).max(last(&self.status))
    }

    /// The known (clock seconds, agent steps) points of the part, in time order.
    fn step_points(&self) -> Vec<(f64, f64)> {
        let start = self.start_steps.map(|steps| (0.0, steps as f64));
        start.into_iter().chain(self.status.iter().copied()).collect()
    }
}

/// Reads the log text into curves. Lines it does not know (arguments, notes, a line
/// cut short by a killed run) are skipped.
pub fn parse(text: &str) -> PlotLog {
    let mut env = None;
    let mut has_status_lines = false;
    let mut runs: Vec<Vec<Part>> = Vec::new();
    let mut run: Vec<Part> = Vec::new();
    let mut part = Part::fresh();
    for line in text.lines() {
        let line = line.trim_end();
        if line == NEW_RUN {
            run.push(std::mem::replace(&mut part, Part::fresh()));
            runs.push(std::mem::take(&mut run));
        } else if let Some(agent_steps) = resumed_at(line) {
            run.push(std::mem::replace(&mut part, Part::resumed(agent_steps)));
        } else if let Some((seconds, reward)) = game_line(line) {
            part.push_game(seconds, reward);
        } else if let Some((seconds, agent_steps)) = status_line(line) {
            has_status_lines = true;
            part.status.push((seconds, agent_steps));
        } else if let Some(value) = argument(line, "env") {
            env.get_or_insert(value);
        } else if argument(line, "load").as_deref() == Some("true")
            && !part.resumed
            && part.is_empty()
        {
            part.start_steps = None;
        }
    }
    run.push(part);
    runs.push(run);
    let curves = runs.iter().map(|parts| curve(parts)).filter(|c| !c.games.is_empty()).collect();
    PlotLog { env, curves, has_status_lines }
}

/// Joins the parts of one run into a curve on one clock.
fn curve(parts: &[Part]) -> Curve {
    let mut curve = Curve::default();
    let mut recent: VecDeque<f64> = VecDeque::with_capacity(MEAN_WINDOW);
    let mut offset = 0.0;
    for part in parts {
        if part.resumed {
            curve.resumes.push(Resume {
                seconds: offset,
                agent_steps: part.start_steps.unwrap_or_default(),
            });
        }
        let step_points = part.step_points();
        for &(seconds, reward) in &part.games {
            if recent.len() == MEAN_WINDOW {
                recent.pop_front();
            }
            recent.push_back(reward);
            curve.games.push(Game {
                seconds: offset + seconds,
                agent_steps: steps_at(&step_points, seconds),
                reward,
                mean: recent.iter().sum::<f64>() / recent.len() as f64,
            });
        }
        offset += part.end();
    }
    curve
}

/// Agent steps at clock `seconds`, on the line through the two known points around it,
/// or through the nearest two where it lies outside them (a game after the last status
/// line of a part, which comes a few seconds before it ends).
fn steps_at(points: &[(f64, f64)], seconds: f64) -> Option<f64> {
    if points.len() < 2 {
        return None;
    }
    let after = points.partition_point(|&(time, _)| time <= seconds).clamp(1, points.len() - 1);
    let ((t0, s0), (t1, s1)) = (points[after - 1], points[after]);
    if t1 <= t0 {
        return Some(s1);
    }
    Some((s0 + (s1 - s0) * (seconds - t0) / (t1 - t0)).max(0.0))
}

/// `--- a3g train resumed here, at N agent steps ---` gives N.
fn resumed_at(line: &str) -> Option<u64> {
    line.strip_prefix(RESUMED_AT)?.strip_suffix(" agent steps ---")?.parse().ok()
}

/// `Time 00h 01m 23s, episode reward R, ...` gives (seconds, R). Anything may come
/// before `Time`: the Python reference's logger puts a date there.
fn game_line(line: &str) -> Option<(f64, f64)> {
    let (_, rest) = line.split_once("Time ")?;
    let (clock, rest) = rest.split_once(", episode reward ")?;
    let reward: f64 = rest.split(',').next()?.trim().parse().ok()?;
    // A line cut short by a killed run has no length after the reward.
    if !rest.contains(", episode length ") || !reward.is_finite() {
        return None;
    }
    Some((clock_seconds(clock)?, reward))
}

/// `[00h 00m 05s] agent steps 1234, ...` gives (seconds, 1234).
fn status_line(line: &str) -> Option<(f64, f64)> {
    let (clock, rest) = line.strip_prefix('[')?.split_once("] agent steps ")?;
    let agent_steps: u64 = rest.split(',').next()?.parse().ok()?;
    Some((clock_seconds(clock)?, agent_steps as f64))
}

/// `00h 01m 23s` in seconds.
fn clock_seconds(clock: &str) -> Option<f64> {
    let mut fields = clock.split_whitespace();
    let mut field = |unit: char| fields.next()?.strip_suffix(unit)?.parse::<u64>().ok();
    let (hours, minutes, seconds) = (field('h')?, field('m')?, field('s')?);
    Some((hours * 3600 + minutes * 60 + seconds) as f64)
}

/// The value of an argument line `key: value`, a JSON value in a3g's logs and plain
/// text after the logger's `date : ` in the Python reference's.
fn argument(line: &str, key: &str) -> Option<String> {
    let prefix = format!("{key}: ");
    let value = line
        .strip_prefix(&prefix)
        .or_else(|| line.split_once(" : ").and_then(|(_, rest)| rest.strip_prefix(&prefix)))?;
    Some(serde_json::from_str::<String>(value).unwrap_or_else(|_| value.trim().to_string()))
}

/// Reads and parses the log at `path`; one without a test game is an error.
pub fn read(path: &Path) -> Result<PlotLog> {
    let bytes = std::fs::read(path).map_err(|cause| Error::Io {
        action: "read the log",
        path: path.to_path_buf(),
        cause,
    })?;
    let log = parse(&String::from_utf8_lossy(&bytes));
    if log.curves.is_empty() {
        return Err(Error::NoGames { path: path.to_path_buf() });
    }
    Ok(log)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A log of two runs: a fresh one with arguments and status lines, a resumed part
    /// whose clock restarts at 0, then a new run. (Hand-worked numbers in the test.)
    const TWO_RUNS: &str = "\
env: \"PongDeterministic-v4\"
load: false
[00h 00m 10s] agent steps 1000, emulator frames 4000, 100 steps/s
Time 00h 00m 15s, episode reward -21, episode length 812, reward mean -21.0000
[00h 00m 20s] agent steps 3000, emulator frames 12000, 200 steps/s
Time 00h 00m 25s, episode reward -19, episode length 900, reward mean -20.0000
--- a3g train resumed here, at 2500 agent steps ---
env: \"PongDeterministic-v4\"
load: true
[00h 00m 10s] agent steps 3500, emulator frames 14000, 100 steps/s
Time 00h 00m 05s, episode reward -15, episode length 1000, reward mean -15.0000
--- a3g train started a new run here ---
env: \"PongDeterministic-v4\"
load: false
Time 00h 00m 03s, episode reward -20, episode length 700, reward mean -20.0000
[00h 00m 05s] agent steps 500, emulator frames 2000, 100 steps/s
Time 00h 00m 07s, episode reward -21, episode len";

    fn seconds_steps_means(curve: &Curve) -> Vec<(f64, Option<f64>, f64)> {
        curve.games.iter().map(|g| (g.seconds, g.agent_steps, g.mean)).collect()
    }

    /// A resumed part continues its run's curve: its clock is offset by the last time
    /// the part before it logged (a game at 25 s), agent steps are interpolated from
    /// the separator's count at its start, and the mean runs on across the parts.
    #[test]
    fn resumed_part_continues_the_curve() {
        let log = parse(TWO_RUNS);
        assert_eq!(log.env.as_deref(), Some("PongDeterministic-v4"));
        assert!(log.has_status_lines);
        assert_eq!(log.curves.len(), 2);
        let first = &log.curves[0];
        assert_eq!(
            seconds_steps_means(first),
            [
                // Between the status lines at 10 s (1000) and 20 s (3000).
                (15.0, Some(2000.0), -21.0),
                // After the last status line: on the line through the last two.
                (25.0, Some(4000.0), -20.0),
                // 25 s + 5 s, between the start (2500) and 10 s (3500).
                (30.0, Some(3000.0), -55.0 / 3.0),
            ]
        );
        assert_eq!(first.resumes, [Resume { seconds: 25.0, agent_steps: 2500 }]);
    }

    /// A new run starts a curve of its own at 0 s with its own mean; a game line cut
    /// short (the run was killed while writing it) is left out.
    #[test]
    fn new_run_starts_its_own_curve() {
        let second = &parse(TWO_RUNS).curves[1];
        assert_eq!(seconds_steps_means(second), [(3.0, Some(300.0), -20.0)]);
        assert!(second.resumes.is_empty());
    }

    /// The Python reference's lines carry a date before `Time` and its clock wraps
    /// after 24 hours; with no status lines there are no agent steps.
    #[test]
    fn reference_log_reads_with_prefix_and_day_wrap() {
        let log = parse(
            "2018-03-01 10:00:00,001 : env: PongDeterministic-v4\n\
             2018-03-01 10:00:21,002 : Time 00h 00m 21s, episode reward 500.0, episode length 500, reward mean 500.0000\n\
             2018-03-02 09:59:59,003 : Time 23h 59m 59s, episode reward 400.0, episode length 400, reward mean 450.0000\n\
             2018-03-02 10:00:21,004 : Time 00h 00m 21s, episode reward 300.0, episode length 300, reward mean 400.0000\n",
        );
        assert_eq!(log.env.as_deref(), Some("PongDeterministic-v4"));
        assert!(!log.has_status_lines);
        assert_eq!(
            seconds_steps_means(&log.curves[0]),
            [(21.0, None, 500.0), (86_399.0, None, 450.0), (86_421.0, None, 400.0)]
        );
    }

    /// A resumed run in a log of its own (no separator, `load: true`) has unknown
    /// steps at its start: games before its first status line are extrapolated back
    /// from the first two status lines, and there is no resume marker.
    #[test]
    fn resumed_run_without_separator_extrapolates() {
        let log = parse(
            "load: true\n\
             Time 00h 00m 05s, episode reward 1, episode length 10, reward mean 1.0000\n\
             [00h 00m 10s] agent steps 9000, emulator frames 36000, 100 steps/s\n\
             [00h 00m 20s] agent steps 10000, emulator frames 40000, 100 steps/s\n",
        );
        assert_eq!(seconds_steps_means(&log.curves[0]), [(5.0, Some(8500.0), 1.0)]);
        assert!(log.curves[0].resumes.is_empty());
    }

    /// The mean covers the last 100 games, as the test agent's does.
    #[test]
    fn mean_covers_the_last_hundred_games() {
        let text: String = (0..150)
            .map(|i| {
                format!(
                    "Time 00h 00m {:02}s, episode reward {i}, episode length 1, reward mean 0\n",
                    i % 60
                )
            })
            .collect();
        let games = &parse(&text).curves[0].games;
        assert_eq!(games[99].mean, 49.5);
        assert_eq!(games[149].mean, 99.5);
    }

    /// A log with arguments only has no curve.
    #[test]
    fn log_without_games_has_no_curve() {
        let log = parse("env: \"CartPole-v1\"\n[00h 00m 05s] agent steps 10, emulator frames 10\n");
        assert!(log.curves.is_empty());
    }
}
