//! `a3g plot`: learning curves from game logs. Each log is read into [`Curve`]s, plain
//! data on one clock (the parsing is tested on hand-written log text below), then all
//! of them are drawn into one PNG: test-game score against wall time above, and
//! against agent steps below.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::cli::PlotArgs;
use crate::console;
use crate::error::{Error, Result};
use crate::game_log::{self, Clock, Record, MEAN_WINDOW};

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
    /// Lines that begin like a game or status line but are not one whole: cut short
    /// by a killed run, or fused with a line another run wrote into the same log.
    pub broken_lines: usize,
    /// a3g game or status lines whose clock reads earlier than the line of their kind
    /// before them in the same part. a3g's clock never runs back, so another run
    /// logging into the same file wrote them; taken in, they would stretch the curve.
    pub out_of_order_lines: usize,
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

    /// Adds a test game, unless its clock runs back (see [`PlotLog::out_of_order_lines`]).
    fn push_game(&mut self, clock: Clock, reward: f64) -> bool {
        let mut seconds = clock.seconds;
        if let Some(&(last, _)) = self.games.last() {
            if seconds < last {
                if !clock.wraps_daily {
                    return false;
                }
                // The Python reference prints its clock with strftime("%H"), which
                // wraps after a day: add the days that bring it past the last game, in
                // one step however far that game's clock reads (rounding aside).
                seconds = (seconds + DAY * ((last - seconds) / DAY).ceil()).max(last);
            }
        }
        self.games.push((seconds, reward));
        true
    }

    /// Adds a status line's reading, unless its clock runs back.
    fn push_status(&mut self, seconds: f64, agent_steps: f64) -> bool {
        if self.status.last().is_some_and(|&(last, _)| seconds < last) {
            return false;
        }
        self.status.push((seconds, agent_steps));
        true
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

/// Reads the log text into curves. Lines it does not know (arguments, notes) are
/// passed over; game and status lines that are not whole, or whose clock runs back,
/// are left out and counted.
pub fn parse(text: &str) -> PlotLog {
    let mut env = None;
    let mut has_status_lines = false;
    let (mut broken_lines, mut out_of_order_lines) = (0, 0);
    let mut runs: Vec<Vec<Part>> = Vec::new();
    let mut run: Vec<Part> = Vec::new();
    let mut part = Part::fresh();
    for line in text.lines() {
        let line = line.trim_end();
        match game_log::record(line) {
            Record::Game { clock, reward } => {
                out_of_order_lines += usize::from(!part.push_game(clock, reward));
                continue;
            }
            Record::Status { seconds, agent_steps } => {
                has_status_lines = true;
                out_of_order_lines += usize::from(!part.push_status(seconds, agent_steps));
                continue;
            }
            Record::Broken => {
                broken_lines += 1;
                continue;
            }
            Record::Other => {}
        }
        if line == game_log::NEW_RUN {
            run.push(std::mem::replace(&mut part, Part::fresh()));
            runs.push(std::mem::take(&mut run));
        } else if let Some(agent_steps) = game_log::resumed_at(line) {
            run.push(std::mem::replace(&mut part, Part::resumed(agent_steps)));
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
    PlotLog { env, curves, has_status_lines, broken_lines, out_of_order_lines }
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
                mean: mean(&recent),
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

/// Seconds in a day, after which the reference's clock wraps.
const DAY: f64 = 86_400.0;

/// The mean of `scores`, which may lie near f64's limits: summed as they are when the
/// sum stays finite (exact for the usual integer scores), else each divided first.
fn mean(scores: &VecDeque<f64>) -> f64 {
    let count = scores.len() as f64;
    let sum: f64 = scores.iter().sum();
    if sum.is_finite() {
        sum / count
    } else {
        scores.iter().map(|score| score / count).sum()
    }
}

/// The value of an argument line `key: value`, a JSON value in a3g's logs and plain
/// text after the logger's `date : ` in the Python reference's (`time: ` in
/// a3c_continuous's).
fn argument(line: &str, key: &str) -> Option<String> {
    let prefix = format!("{key}: ");
    let after_logger = |separator: &str| {
        line.split_once(separator).and_then(|(_, rest)| rest.strip_prefix(&prefix))
    };
    let value = line
        .strip_prefix(&prefix)
        .or_else(|| after_logger(" : "))
        .or_else(|| after_logger(": "))?;
    Some(serde_json::from_str::<String>(value).unwrap_or_else(|_| value.trim().to_string()))
}

/// Reads and parses the log at `path`; one without a test game is an error.
pub fn read(path: &Path) -> Result<PlotLog> {
    let bytes = crate::files::read(path).map_err(|cause| Error::Io {
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

/// One curve as drawn: its games and the label of its legend entry.
struct Series<'a> {
    label: String,
    curve: &'a Curve,
    color: RGBColor,
}

/// Runs `a3g plot`: reads every log, draws them into one PNG and prints its path.
pub fn run(args: &PlotArgs) -> Result<()> {
    let first = args.logs.first().ok_or_else(|| {
        Error::BadArguments("no log to plot; pass one or more game logs".to_string())
    })?;
    let output = args.output.clone().unwrap_or_else(|| beside(first));
    refuse_to_replace_other_files(&output)?;
    let logs: Vec<(&PathBuf, PlotLog)> =
        args.logs.iter().map(|path| Ok((path, read(path)?))).collect::<Result<_>>()?;
    for (path, log) in &logs {
        if let Some(note) = skipped_note(path, log) {
            console::warn(&note);
        }
        if !log.has_status_lines {
            console::warn(&format!(
                "note: {} has no status lines, so the agent-steps panel leaves it out; \
                 only a3g train writes them",
                path.display()
            ));
        }
    }
    let mut series = Vec::new();
    for (path, log) in &logs {
        for (index, curve) in log.curves.iter().enumerate() {
            let mut label = path.display().to_string();
            if log.curves.len() > 1 {
                label.push_str(&format!(" (run {})", index + 1));
            }
            let color = PALETTE[series.len() % PALETTE.len()];
            series.push(Series { label, curve, color });
        }
    }
    let title = args.title.clone().unwrap_or_else(|| {
        let mut envs: Vec<&str> = Vec::new();
        for env in logs.iter().filter_map(|(_, log)| log.env.as_deref()) {
            if !envs.contains(&env) {
                envs.push(env);
            }
        }
        if envs.is_empty() {
            "learning curve".to_string()
        } else {
            envs.join(", ")
        }
    });
    let pixels = draw(&series, &title, args.width, args.height)
        .map_err(|error| Error::Drawing(error.to_string()))?;
    let png = encode_png(&pixels, args.width, args.height)?;
    std::fs::write(&output, png).map_err(|cause| Error::Io {
        action: "write the plot to",
        path: output.clone(),
        cause,
    })?;
    console::say(&output.display().to_string());
    Ok(())
}

/// The first bytes of every PNG file.
const PNG_SIGNATURE: [u8; 8] = [0x89, b'P', b'N', b'G', b'\r', b'\n', 0x1a, b'\n'];

/// A plot may replace an earlier plot or an empty file, but no other file: `-o`
/// naming a game log (one of those being drawn, say) or a model by a slip would
/// otherwise lose it. What is not a file (a folder, `/dev/stdout`) is left to the
/// write, which says what it is or writes to it.
fn refuse_to_replace_other_files(output: &Path) -> Result<()> {
    let Ok(metadata) = std::fs::metadata(output) else { return Ok(()) };
    if !metadata.is_file() || metadata.len() == 0 {
        return Ok(());
    }
    let mut start = [0u8; PNG_SIGNATURE.len()];
    let is_png = std::fs::File::open(output)
        .and_then(|mut file| std::io::Read::read_exact(&mut file, &mut start))
        .is_ok()
        && start == PNG_SIGNATURE;
    if is_png {
        return Ok(());
    }
    Err(Error::BadArguments(format!(
        "{} exists and is not a PNG, so a3g plot will not replace it; pass another -o",
        output.display()
    )))
}

/// The note on the game and status lines of the log at `path` that were left out, if
/// any were.
fn skipped_note(path: &Path, log: &PlotLog) -> Option<String> {
    let mut reasons = Vec::new();
    if log.broken_lines > 0 {
        reasons.push(format!(
            "{} not whole (cut short by a killed run, or fused with a line of another run \
             writing the same log)",
            log.broken_lines
        ));
    }
    if log.out_of_order_lines > 0 {
        reasons.push(format!(
            "{} whose clock runs back (written by another run logging into the same file)",
            log.out_of_order_lines
        ));
    }
    (!reasons.is_empty()).then(|| {
        format!(
            "note: left out {} game or status lines of {}: {}",
            log.broken_lines + log.out_of_order_lines,
            path.display(),
            reasons.join("; ")
        )
    })
}

/// `<log>.png`, beside the log.
fn beside(log: &Path) -> PathBuf {
    let mut name = log.as_os_str().to_owned();
    name.push(".png");
    PathBuf::from(name)
}

/// Series colours, Matplotlib's tab10, which stay apart for most colour vision.
const PALETTE: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// The font every label is drawn in: compiled in, so that drawing needs no fonts
/// installed (plotters' own font lookup goes through fontconfig).
const FONT: &str = "sans-serif";

type DrawResult<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// Draws both panels into an RGB buffer of `width` × `height` pixels.
fn draw(series: &[Series], title: &str, width: u32, height: u32) -> DrawResult<Vec<u8>> {
    static FONT_REGISTERED: OnceLock<bool> = OnceLock::new();
    let registered = FONT_REGISTERED.get_or_init(|| {
        plotters::style::register_font(FONT, FontStyle::Normal, dejavu::sans::regular()).is_ok()
    });
    if !registered {
        return Err("the compiled-in font cannot be read".into());
    }
    let mut pixels = vec![255; width as usize * height as usize * 3];
    {
        let root = BitMapBackend::with_buffer(&mut pixels, (width, height)).into_drawing_area();
        let root = root.titled(title, (FONT, 26))?;
        let (upper, lower) = root.split_vertically(root.dim_in_pixel().1 / 2);
        let scores = score_range(series);
        let span =
            series.iter().flat_map(|s| &s.curve.games).map(|g| g.seconds).fold(0.0, f64::max);
        let (unit, unit_name) = time_unit(span);
        let by_time = Panel {
            x_desc: format!("wall time ({unit_name})"),
            x: &|game: &Game| Some(game.seconds / unit),
            resume_x: &|resume: &Resume| resume.seconds / unit,
            x_format: &short_number,
            legend: true,
        };
        draw_panel(&upper, series, &by_time, scores)?;
        let by_steps = Panel {
            x_desc: "agent steps".to_string(),
            x: &|game: &Game| game.agent_steps,
            resume_x: &|resume: &Resume| resume.agent_steps as f64,
            x_format: &si_number,
            legend: false,
        };
        if series.iter().flat_map(|s| &s.curve.games).any(|game| game.agent_steps.is_some()) {
            draw_panel(&lower, series, &by_steps, scores)?;
        } else {
            let (width, height) = lower.dim_in_pixel();
            let gray = BLACK.mix(0.6);
            let style = TextStyle::from((FONT, 18).into_font())
                .color(&gray)
                .pos(Pos::new(HPos::Center, VPos::Center));
            lower.draw(&Text::new(
                "no agent steps to plot: the logs have no status lines",
                (width as i32 / 2, height as i32 / 2),
                style,
            ))?;
        }
        root.present()?;
    }
    Ok(pixels)
}

/// What sets one panel apart: its x axis.
struct Panel<'a> {
    x_desc: String,
    /// A game's x, if it has one on this axis.
    x: &'a dyn Fn(&Game) -> Option<f64>,
    resume_x: &'a dyn Fn(&Resume) -> f64,
    x_format: &'a dyn Fn(&f64) -> String,
    /// Whether this panel carries the legend (both panels share the series).
    legend: bool,
}

/// Draws each series as a dot per game and a line for its running mean, and a dashed
/// line where a run was resumed.
fn draw_panel(
    area: &DrawingArea<BitMapBackend, Shift>,
    series: &[Series],
    panel: &Panel,
    (low, high): (f64, f64),
) -> DrawResult<()> {
    let points = |s: &Series| -> Vec<(f64, f64, f64)> {
        s.curve
            .games
            .iter()
            .filter_map(|game| Some(((panel.x)(game)?, game.reward, game.mean)))
            .collect()
    };
    let resumes = |s: &Series| -> Vec<f64> { s.curve.resumes.iter().map(panel.resume_x).collect() };
    let x_max = series
        .iter()
        .flat_map(|s| points(s).into_iter().map(|(x, _, _)| x).chain(resumes(s)))
        .fold(0.0, f64::max);
    let x_max = if x_max > 0.0 { x_max * 1.02 } else { 1.0 };

    let mut chart = ChartBuilder::on(area)
        .margin(12)
        .x_label_area_size(48)
        .y_label_area_size(64)
        .build_cartesian_2d(0.0..x_max, low..high)?;
    chart
        .configure_mesh()
        .x_desc(panel.x_desc.as_str())
        .y_desc(y_desc(area.dim_in_pixel().1))
        .x_label_formatter(panel.x_format)
        .y_label_formatter(&short_number)
        .axis_desc_style((FONT, 16))
        .label_style((FONT, 14))
        .light_line_style(BLACK.mix(0.04))
        .bold_line_style(BLACK.mix(0.12))
        .draw()?;

    for s in series {
        let points = points(s);
        let color = s.color;
        chart.draw_series(
            points
                .iter()
                .map(|&(x, reward, _)| Circle::new((x, reward), 2, color.mix(0.35).filled())),
        )?;
        let drawn = chart.draw_series(LineSeries::new(
            points.iter().map(|&(x, _, mean)| (x, mean)),
            color.stroke_width(2),
        ))?;
        if panel.legend {
            drawn.label(s.label.as_str()).legend(move |(x, y)| {
                EmptyElement::at((x, y))
                    + PathElement::new(vec![(0, 0), (20, 0)], color.stroke_width(2))
                    + Circle::new((10, 0), 3, color.mix(0.35).filled())
            });
        }
    }
    let marker = BLACK.mix(0.55).stroke_width(1);
    let markers: Vec<f64> = series.iter().flat_map(resumes).collect();
    for (index, &x) in markers.iter().enumerate() {
        let drawn =
            chart.draw_series(DashedLineSeries::new([(x, low), (x, high)], 6, 4, marker))?;
        // One legend entry for all the markers, after the series'.
        if panel.legend && index == 0 {
            drawn
                .label("resumed from a checkpoint")
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], marker));
        }
    }
    if panel.legend {
        // Learning curves start at their lowest and rise to the right, so the upper
        // left is the corner they leave empty.
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.3))
            .label_font((FONT, 14))
            .draw()?;
    }
    Ok(())
}

/// The score axis's caption, as long as the panel's height leaves room for.
fn y_desc(panel_height: u32) -> &'static str {
    match panel_height {
        330.. => "score: games (dots), mean of 100 (line)",
        220.. => "score (line: mean of 100)",
        _ => "score",
    }
}

/// The score axis: every game's score with some room above and below. plotters looks
/// for tick spacings forever on an axis whose length is not finite, so the span is
/// taken in halves (scores of ±1e308 would overflow it) and the ends stay within a
/// quarter of f64's range; scores beyond them are drawn at the edge.
fn score_range(series: &[Series]) -> (f64, f64) {
    let scores = series.iter().flat_map(|s| &s.curve.games).map(|game| game.reward);
    let (low, high) =
        scores.fold((f64::INFINITY, f64::NEG_INFINITY), |(low, high), r| (low.min(r), high.max(r)));
    let half_span = high / 2.0 - low / 2.0;
    let room = if half_span > 0.0 { half_span * 0.1 } else { (high.abs() * 0.05).max(1.0) };
    let limit = f64::MAX / 4.0;
    ((low - room).clamp(-limit, limit), (high + room).clamp(-limit, limit))
}

/// The unit the time axis counts in for a run of `seconds`: seconds for a short run,
/// minutes, or hours from two hours on.
fn time_unit(seconds: f64) -> (f64, &'static str) {
    if seconds < 120.0 {
        (1.0, "seconds")
    } else if seconds < 7200.0 {
        (60.0, "minutes")
    } else {
        (3600.0, "hours")
    }
}

/// A tick label with no trailing zeros: 0.5, 12, -20, and 2.5e12 from ten million on
/// (a damaged log's scores or clock would otherwise give labels of hundreds of digits).
fn short_number(value: &f64) -> String {
    if value.abs() >= 1e7 {
        let text = format!("{value:.2e}");
        let (mantissa, exponent) = text.split_once('e').unwrap_or((&text, "0"));
        return format!("{}e{exponent}", mantissa.trim_end_matches('0').trim_end_matches('.'));
    }
    let text = format!("{value:.2}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    if text == "-0" {
        "0".to_string()
    } else {
        text.to_string()
    }
}

/// A count with an SI suffix: 250k, 1.5M, 40M; from a trillion on, as [`short_number`]
/// writes it.
fn si_number(value: &f64) -> String {
    let magnitude = value.abs();
    let (scaled, suffix) = if magnitude >= 1e12 {
        (*value, "")
    } else if magnitude >= 1e9 {
        (value / 1e9, "G")
    } else if magnitude >= 1e6 {
        (value / 1e6, "M")
    } else if magnitude >= 1e3 {
        (value / 1e3, "k")
    } else {
        (*value, "")
    };
    format!("{}{suffix}", short_number(&scaled))
}

/// Encodes an RGB buffer as a PNG file's bytes.
fn encode_png(pixels: &[u8], width: u32, height: u32) -> Result<Vec<u8>> {
    let mut bytes = Vec::new();
    let mut encoder = png::Encoder::new(&mut bytes, width, height);
    encoder.set_color(png::ColorType::RGB);
    encoder.set_depth(png::BitDepth::Eight);
    encoder
        .write_header()
        .and_then(|mut writer| writer.write_image_data(pixels))
        .map_err(|error| Error::Drawing(format!("PNG encoding failed: {error}")))?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;
    use crate::env::rng::Rng;

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
    /// short (the run was killed while writing it) is left out, and counted.
    #[test]
    fn new_run_starts_its_own_curve() {
        let log = parse(TWO_RUNS);
        assert_eq!(seconds_steps_means(&log.curves[1]), [(3.0, Some(300.0), -20.0)]);
        assert!(log.curves[1].resumes.is_empty());
        assert_eq!((log.broken_lines, log.out_of_order_lines), (1, 0));
    }

    /// Two runs writing one log (their own save folders, one --log-dir): lines fused
    /// into one are left out rather than read as their first half, and a3g lines whose
    /// clock runs back are another run's, left out rather than taken for a day's wrap
    /// (which drew 6 s of training as 216 hours). Each is counted.
    #[test]
    fn lines_of_two_runs_in_one_log_are_left_out() {
        let game = |seconds: u32, reward: u32| {
            format!("Time 00h 00m {seconds:02}s, episode reward {reward}, episode length 9, reward mean 1.0000")
        };
        let status = |seconds: u32| {
            format!(
                "[00h 00m {seconds:02}s] agent steps {seconds}000, emulator frames 4, 1 steps/s"
            )
        };
        let text = [
            game(1, 10),
            status(2),
            game(3, 30) + &game(1, 99),
            status(4) + &game(2, 99),
            game(4, 40),
            game(2, 99),
            status(1),
            game(5, 50) + " extra",
            game(6, 60),
            status(6),
        ]
        .join("\n");
        let log = parse(&text);
        let points: Vec<(f64, Option<f64>, f64)> =
            log.curves[0].games.iter().map(|g| (g.seconds, g.agent_steps, g.reward)).collect();
        assert_eq!(
            points,
            [(1.0, Some(1000.0), 10.0), (4.0, Some(4000.0), 40.0), (6.0, Some(6000.0), 60.0)]
        );
        assert_eq!((log.broken_lines, log.out_of_order_lines), (3, 2));
    }

    /// A clock of 10^14 hours followed by an ordinary line no longer loops a day at a
    /// time: an a3g line running back is left out, and the reference's wraps in one
    /// step.
    #[test]
    fn huge_clocks_read_at_once() {
        let huge =
            "Time 100000000000000h 00m 00s, episode reward 1, episode length 1, reward mean 1";
        let ordinary = "Time 00h 00m 05s, episode reward 2, episode length 1, reward mean 1";
        let log = parse(&format!("{huge}\n{ordinary}\n"));
        assert_eq!(log.curves[0].games.len(), 1);
        assert_eq!(log.out_of_order_lines, 1);
        let log = parse(&format!("d : {huge}\nd : {ordinary}\n"));
        let seconds: Vec<f64> = log.curves[0].games.iter().map(|g| g.seconds).collect();
        assert_eq!(seconds.len(), 2);
        assert!(seconds[1] >= seconds[0] && seconds[1] - seconds[0] <= DAY, "{seconds:?}");
    }

    /// Scores at f64's limits give a finite score axis (plotters searched forever for
    /// ticks on an infinite one) and a finite mean.
    #[test]
    fn extreme_scores_give_a_finite_axis() {
        let log = parse(
            "Time 00h 00m 01s, episode reward 1e308, episode length 1, reward mean 1\n\
             Time 00h 00m 02s, episode reward -1e308, episode length 1, reward mean 1\n\
             Time 00h 00m 03s, episode reward 1.7976931348623157e308, episode length 1, reward mean 1\n",
        );
        let curve = &log.curves[0];
        assert!(curve.games.iter().all(|game| game.mean.is_finite()));
        let series = [Series { label: String::new(), curve, color: PALETTE[0] }];
        let (low, high) = score_range(&series);
        assert!(low < -1e307 && high > 1e307 && (high - low).is_finite(), "{low} {high}");
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

    /// a3c_continuous's log: its env argument and games after the time of day.
    #[test]
    fn continuous_reference_log_reads() {
        let log = parse(
            "15:15:25.700445: env: BipedalWalker-v3\n\
             15:15:44.201368: Time: 00h 00m 18s, episode_reward: -139.14, episode_length: 199, reward_mean: -139.14\n\
             15:19:09.851423: Time: 00h 03m 44s, episode_reward: 285.43, episode_length: 1062, reward_mean: 73.14\n",
        );
        assert_eq!(log.env.as_deref(), Some("BipedalWalker-v3"));
        assert_eq!(
            seconds_steps_means(&log.curves[0]),
            [(18.0, None, -139.14), (224.0, None, (285.43 - 139.14) / 2.0)]
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
                    "Time 00h {:02}m {:02}s, episode reward {i}, episode length 1, reward mean 0\n",
                    i / 60,
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

    /// Tick labels drop trailing zeros and count steps with SI suffixes, in powers of
    /// ten where the numbers are huge; the time axis counts in seconds, minutes or hours
    /// by the run's length.
    #[test]
    fn axis_labels() {
        assert_eq!(short_number(&0.5), "0.5");
        assert_eq!(short_number(&-20.0), "-20");
        assert_eq!(short_number(&-0.001), "0");
        assert_eq!(short_number(&2.5e12), "2.5e12");
        assert_eq!(short_number(&-1e308), "-1e308");
        assert_eq!(si_number(&250_000.0), "250k");
        assert_eq!(si_number(&1_500_000.0), "1.5M");
        assert_eq!(si_number(&3e15), "3e15");
        assert_eq!(si_number(&0.0), "0");
        assert_eq!(time_unit(90.0).1, "seconds");
        assert_eq!(time_unit(3600.0).1, "minutes");
        assert_eq!(time_unit(36_000.0).1, "hours");
    }

    /// Ordinary and adversarial lines: the fuzz test's starting log.
    const ADVERSARIAL_LOG: &str = "\
env: \"CartPole-v1\"
load: true
[00h 00m 01s] agent steps 10, emulator frames 10, 10 steps/s
Time 00h 00m 02s, episode reward 9, episode length 9, reward mean 9.0000
Time 100000000000000h 00m 00s, episode reward 1, episode length 1, reward mean 1
Time 00h 00m 03s, episode reward 1e308, episode length 1, reward mean 1e308
Time 00h 00m 04s, episode reward -1e308, episode length 1, reward mean -1e308
2018-03-01 10:00:21,002 : Time 23h 59m 59s, episode reward 5e-324, episode length 7, reward mean 0.0000
2018-03-01 10:00:22,002 : Time 00h 00m 01s, episode reward -0, episode length 7, reward mean NaN
[18446744073709551615h 59m 59s] agent steps 18446744073709551615, emulator frames 0
--- a3g train resumed here, at 18446744073709551615 agent steps ---
Time 00h 00m 05s, episode reward NaN, episode length 1, reward mean inf
Time 00h 00m 06s, épisode reward 3, episode length 1, reward mean 3 ✓
[00h 00m 07s] agent steps 20, emulator frames 20, 1 steps/sTime 00h 00m 07s, episode reward 7, episode length 1, reward mean 7.0000
Time 00h 00m 08s, episode reward 8, episode length 1, reward mean 8.0000Time 00h 00m 01s, episode reward 1, episode length 1, reward mean 1.0000
--- a3g train started a new run here ---
Time 00h 00m 09s, episode reward 2, episode len
";

    fn pick<'a>(rng: &mut Rng, choices: &[&'a str]) -> &'a str {
        choices[rng.integer(0, choices.len() as u32 - 1) as usize]
    }

    /// One of `ordinary` seven times in ten, else one of `adversarial`.
    fn field<'a>(rng: &mut Rng, ordinary: &[&'a str], adversarial: &[&'a str]) -> &'a str {
        if rng.integer(0, 9) < 7 {
            pick(rng, ordinary)
        } else {
            pick(rng, adversarial)
        }
    }

    /// A line built at random from ordinary and adversarial fields, sometimes cut
    /// short or fused with another.
    fn random_line(rng: &mut Rng) -> String {
        let hours = ["100000000000000", "18446744073709551615", "18446744073709551616", "-1", "٣"];
        let sixtieths = ["60", "5", "-1", "٣٣", " 1"];
        let numbers = [
            "1e308",
            "-1e308",
            "1.7976931348623157e308",
            "NaN",
            "inf",
            "-inf",
            "5e-324",
            "-0",
            "18446744073709551615",
            "99999999999999999999",
            "+3",
            " 4",
            "１",
            "",
        ];
        let ordinary = ["0", "21", "-3.5", "500"];
        let clock = format!(
            "{}h {}m {}s",
            field(rng, &["00", "01", "25"], &hours),
            field(rng, &["00", "07", "59"], &sixtieths),
            field(rng, &["00", "07", "59"], &sixtieths)
        );
        let mut line = match rng.integer(0, 5) {
            0..=2 => format!(
                "{}Time {clock}, episode reward {}, episode length {}, reward mean {}",
                field(rng, &[""], &["2018-03-01 10:00:21,002 : ", "x : ", "é"]),
                field(rng, &ordinary, &numbers),
                field(rng, &["1", "500"], &numbers),
                field(rng, &ordinary, &numbers)
            ),
            3 => format!(
                "[{clock}] agent steps {}, emulator frames 1",
                field(rng, &["0", "500"], &numbers)
            ),
            4 => format!(
                "--- a3g train resumed here, at {} agent steps ---",
                field(rng, &["0", "500"], &numbers)
            ),
            _ => pick(
                rng,
                &[game_log::NEW_RUN, "load: true", "env: \"Pong\"", "", "\u{0}\u{feff}💥"],
            )
            .into(),
        };
        if rng.integer(0, 9) == 0 {
            line.push_str(&random_line(rng));
        }
        if rng.integer(0, 9) == 0 {
            let cut = rng.integer(0, line.len() as u32) as usize;
            line.truncate((0..=cut).rev().find(|&at| line.is_char_boundary(at)).unwrap_or(0));
        }
        line
    }

    /// What a parsed log always holds, whatever its text: curves of finite scores and
    /// means (within the curve's scores), clocks that never run back, agent steps
    /// finite and not negative, and no more lines left out than there are lines.
    fn assert_sane(log: &PlotLog, text: &str) {
        assert!(log.broken_lines + log.out_of_order_lines <= text.lines().count());
        for curve in &log.curves {
            assert!(!curve.games.is_empty());
            let low = curve.games.iter().map(|g| g.reward).fold(f64::INFINITY, f64::min);
            let high = curve.games.iter().map(|g| g.reward).fold(f64::NEG_INFINITY, f64::max);
            let mut last = 0.0;
            for game in &curve.games {
                assert!(game.seconds.is_finite() && game.seconds >= last, "{game:?}");
                last = game.seconds;
                assert!(game.reward.is_finite(), "{game:?}");
                // The mean of scores near f64's limits is rounded: within a part in 1e12.
                let slack = high.abs().max(low.abs()) * 1e-12;
                assert!(game.mean >= low - slack && game.mean <= high + slack, "{game:?}");
                assert!(game.agent_steps.is_none_or(|s| s.is_finite() && s >= 0.0), "{game:?}");
            }
            assert!(curve.resumes.iter().all(|r| r.seconds.is_finite() && r.seconds >= 0.0));
        }
    }

    /// Draws `log` small, in a thread of its own, and fails if that takes two seconds
    /// (a hang in plotters' tick search never returns).
    fn assert_draws_in_time(log: PlotLog, case: &str) {
        let (done, finished) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let series: Vec<Series> = log
                .curves
                .iter()
                .map(|curve| Series { label: "log".into(), curve, color: PALETTE[0] })
                .collect();
            let _ =
                done.send(draw(&series, "fuzz", 320, 240).map(|_| ()).map_err(|e| e.to_string()));
        });
        match finished.recv_timeout(Duration::from_secs(2)) {
            Ok(drawn) => drawn.unwrap_or_else(|error| panic!("{case}: {error}")),
            Err(_) => panic!("{case}: drawing took over 2 s"),
        }
    }

    /// The log parser on thousands of seeded random logs: the adversarial log above
    /// damaged at random (cut, fused, repeated, bytes changed), and logs of lines made
    /// from ordinary and adversarial fields (huge clocks and counts, scores of ±1e308,
    /// NaN, inf, signs, spaces, other scripts' digits, cut and fused lines). Each parses
    /// without a panic into a sane log (see `assert_sane`) within the time bound, and
    /// some draw; well under a second in all (`--nocapture` prints the times).
    #[test]
    fn random_and_adversarial_logs_parse_cleanly() {
        crate::fuzz::fuzz("log", 5, 5000, ADVERSARIAL_LOG.as_bytes(), &[], |bytes| {
            let text = String::from_utf8_lossy(bytes);
            assert_sane(&parse(&text), &text);
            Ok::<_, String>(())
        });
        let started = Instant::now();
        let mut rng = Rng::new(6);
        let (mut games, mut drawn) = (0, 0);
        for case in 0..5000 {
            let lines: Vec<String> =
                (0..rng.integer(1, 30)).map(|_| random_line(&mut rng)).collect();
            let text = lines.join("\n");
            let log = std::panic::catch_unwind(|| parse(&text))
                .unwrap_or_else(|_| panic!("random log {case} panicked:\n{text}"));
            assert_sane(&log, &text);
            games += log.curves.iter().map(|curve| curve.games.len()).sum::<usize>();
            if drawn < 30 && !log.curves.is_empty() && case % 50 == 0 {
                assert_draws_in_time(log, &format!("random log {case}:\n{text}"));
                drawn += 1;
            }
        }
        assert_draws_in_time(parse(ADVERSARIAL_LOG), "the adversarial log");
        eprintln!(
            "random logs: 5000 in {:.2} s, {games} games read, {drawn} drawn",
            started.elapsed().as_secs_f64()
        );
    }
}
