//! Environments from outside a3g: any id of the user's Gymnasium registry
//! (`--env gym:<id>`) or an environment class of the user's own (`--env
//! <file.py>:<Class>` or `--env <module>:<Class>`), each played in a Python process
//! that a3g starts and owns, never inside a3g's own process.
//!
//! The Python side is `host.py` beside this file, compiled into a3g and run with
//! `python -c`. Requests and replies cross the process's stdin and stdout in a
//! compact binary framing (described in host.py); pipes were chosen over embedding
//! Python because each environment then has its own interpreter (no GIL shared by the
//! workers) and its own address space: an exception comes back as a message, and a
//! segfault or a hang ends only that process. a3g bounds every reply by
//! `--env-timeout`, reads the last line of the process's stderr when it dies, and
//! kills the process when the environment is dropped, or when a3g itself dies (Linux's
//! parent-death signal), so none is left behind.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::fd::AsRawFd;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use serde::Deserialize;

use super::{Action, ActionSpace, Env, Frame, Screen, Step};
use crate::error::{Error, Result};
use image::{to_screen, ImageLayout};

mod image;

/// The least time a process is given to start and make its environment.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(120);

/// The Python side, run with `python -c`.
const HOST: &str = include_str!("host.py");

/// How often a wait for a reply checks whether the host has ended.
const EXIT_CHECK_INTERVAL: Duration = Duration::from_millis(250);

/// How `--env` names an environment from outside a3g.
#[derive(Clone, Debug, PartialEq)]
pub enum Target {
    /// `gym:<id>`: an id of Gymnasium's registry, made by `gymnasium.make`.
    Gym(String),
    /// `<file.py>:<Class>` or `<module>:<Class>`: a class following Gymnasium's `Env`
    /// API, made with `--env-kwargs` as keyword arguments.
    Class(String),
}

impl Target {
    /// The target `--env` names, if it names one outside a3g: built-in ids never hold
    /// a colon.
    pub fn parse(env: &str) -> Option<Target> {
        if let Some(id) = env.strip_prefix("gym:") {
            return Some(Target::Gym(id.to_string()));
        }
        env.contains(':').then(|| Target::Class(env.to_string()))
    }
}

/// How a Python environment is started.
#[derive(Clone, Debug, PartialEq)]
pub struct PythonOptions {
    /// The interpreter: `--python`, else `A3G_PYTHON`, else `python3`.
    pub python: String,
    /// Modules imported before the environment is made (`--env-import`), for packages
    /// that register their ids on import.
    pub imports: Vec<String>,
    /// Wrapper classes (`--env-wrapper`, `module:Class`) applied in order around the
    /// environment once it is made.
    pub wrappers: Vec<String>,
    /// Keyword arguments of `gymnasium.make` or the class (`--env-kwargs`).
    pub kwargs: serde_json::Map<String, serde_json::Value>,
    /// Longest wait for the process's start or any reply (`--env-timeout`).
    pub timeout: Duration,
    /// Made with `render_mode="rgb_array"`, for `eval --render`.
    pub render: bool,
}

impl Default for PythonOptions {
    fn default() -> Self {
        PythonOptions {
            python: "python3".into(),
            imports: Vec::new(),
            wrappers: Vec::new(),
            kwargs: serde_json::Map::new(),
            timeout: Duration::from_secs(60),
            render: false,
        }
    }
}

/// A space as host.py describes it.
#[derive(Debug, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
enum SpaceDescription {
    Discrete {
        n: i64,
    },
    Box {
        shape: Vec<i64>,
        dtype: String,
        /// Bounds per element; `None` where unbounded.
        low: Vec<Option<f64>>,
        high: Vec<Option<f64>>,
    },
    Other {
        name: String,
        text: String,
    },
}

/// The first reply of a host: its environment's spaces.
#[derive(Debug, Deserialize)]
struct Description {
    observation: SpaceDescription,
    action: SpaceDescription,
    #[serde(default)]
    render_fps: Option<f64>,
}

/// An environment played in a Python process of its own.
pub struct PythonEnv {
    /// `--env` as given.
    id: String,
    child: Child,
    /// Whether the host's process group has been killed, which is done once, before
    /// the host is reaped.
    group_ended: bool,
    requests: Option<ChildStdin>,
    replies: ChildStdout,
    /// The process's stderr: an unlinked file, whose last line says why it died.
    stderr: File,
    timeout: Duration,
    action_space: ActionSpace,
    observation_shape: Vec<i64>,
    /// Values in one observation as the host sends them (bytes for an image).
    observation_len: usize,
    /// Set for image observations, which become `screen`'s screens.
    image: Option<ImageLayout>,
    screen: Screen,
    /// Agent steps since the episode began, and the cut `--max-episode-length` sets.
    elapsed_steps: u32,
    max_episode_steps: Option<u32>,
    steps: u64,
    /// The seed of the first reset; later resets go on from the environment's own
    /// random state, as Gymnasium's are meant to.
    first_seed: Option<u64>,
    step_seconds: f64,
}

/// What a reply carried.
enum Reply {
    Ok(Vec<u8>),
    Raised(String),
}

impl PythonEnv {
    /// Starts the process, makes the environment in it and checks its spaces.
    pub fn start(
        env: &str,
        target: &Target,
        options: &PythonOptions,
        seed: u64,
        max_episode_steps: Option<u32>,
        screen: Screen,
    ) -> Result<PythonEnv> {
        let fail = |problem: String| Error::EnvProcess { env: env.to_string(), problem };
        let request = serde_json::json!({
            "gym_id": match target { Target::Gym(id) => Some(id), Target::Class(_) => None },
            "class": match target { Target::Class(class) => Some(class), Target::Gym(_) => None },
            "imports": options.imports,
            "wrappers": options.wrappers,
            "kwargs": options.kwargs,
            "render": options.render,
        });
        let (stderr, stderr_for_child) = unlinked_log()
            .map_err(|err| fail(format!("cannot make a file for its Python's stderr: {err}")))?;
        let mut command = Command::new(&options.python);
        command
            .args(["-c", HOST, &request.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr_for_child)
            // Out of the terminal's process group: Ctrl-C stops a3g, which stops these.
            .process_group(0);
        // SAFETY: prctl is async-signal-safe and touches no memory of the parent.
        unsafe {
            command.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let mut child = spawn_from_lasting_thread(command).map_err(|err| {
            fail(format!(
                "cannot start Python {:?} ({err}); install Python 3 with gymnasium, or name one with \
                 --python or A3G_PYTHON",
                options.python
            ))
        })?;
        let requests = child.stdin.take().expect("stdin was piped");
        let replies = child.stdout.take().expect("stdout was piped");
        let mut env = PythonEnv {
            id: env.to_string(),
            child,
            group_ended: false,
            requests: Some(requests),
            replies,
            stderr,
            timeout: options.timeout,
            action_space: ActionSpace::Discrete { n: 1 },
            observation_shape: Vec::new(),
            observation_len: 0,
            image: None,
            screen,
            elapsed_steps: 0,
            max_episode_steps,
            steps: 0,
            first_seed: Some(seed),
            step_seconds: 1.0 / 30.0,
        };
        // Importing Gymnasium and an environment's packages (a physics engine) may take
        // far longer than a step, on a loaded machine longest: the start has its own,
        // generous bound, at least `STARTUP_TIMEOUT`.
        env.timeout = options.timeout.max(STARTUP_TIMEOUT);
        let started = env.reply("start");
        env.timeout = options.timeout;
        let description = match started? {
            Reply::Ok(json) => serde_json::from_slice::<Description>(&json)
                .map_err(|err| fail(format!("a3g's host described it unreadably ({err})")))?,
            Reply::Raised(traceback) => {
                return Err(fail(raised_while("while being made", &traceback)))
            }
        };
        env.action_space = action_space(&description.action).map_err(&fail)?;
        env.image = image_layout(&description.observation);
        match env.image {
            Some(layout) => {
                let side = screen.side() as i64;
                env.observation_shape = vec![1, side, side];
                env.observation_len = layout.len();
            }
            None => {
                env.observation_shape =
                    observation_shape(&description.observation).map_err(&fail)?;
                env.observation_len = env.observation_shape.iter().product::<i64>() as usize;
            }
        }
        if let Some(fps) = description.render_fps.filter(|fps| *fps > 0.0 && fps.is_finite()) {
            env.step_seconds = 1.0 / fps;
        }
        Ok(env)
    }

    fn fail(&self, problem: String) -> Error {
        Error::EnvProcess { env: self.id.clone(), problem }
    }

    /// Sends one request and waits for its reply.
    fn call(&mut self, what: &str, request: &[u8]) -> Result<Vec<u8>> {
        let sent = match self.requests.as_mut() {
            Some(requests) => requests.write_all(request).and_then(|()| requests.flush()),
            None => Err(std::io::ErrorKind::BrokenPipe.into()),
        };
        if sent.is_err() {
            return Err(self.died(what));
        }
        match self.reply(what)? {
            Reply::Ok(payload) => Ok(payload),
            Reply::Raised(traceback) => {
                Err(self.fail(raised_while(&format!("in {what}"), &traceback)))
            }
        }
    }

    /// Reads one reply, within the timeout.
    fn reply(&mut self, what: &str) -> Result<Reply> {
        let deadline = Instant::now() + self.timeout;
        let mut head = [0u8; 5];
        self.read_exactly(&mut head, deadline, what)?;
        let length = u32::from_le_bytes([head[1], head[2], head[3], head[4]]) as usize;
        let mut payload = vec![0u8; length];
        self.read_exactly(&mut payload, deadline, what)?;
        match head[0] {
            b'o' => Ok(Reply::Ok(payload)),
            b'e' => Ok(Reply::Raised(String::from_utf8_lossy(&payload).into_owned())),
            other => Err(self.fail(format!(
                "a3g's host answered {what} with an unknown reply {other:#04x}; is host.py damaged?"
            ))),
        }
    }

    fn read_exactly(&mut self, buffer: &mut [u8], deadline: Instant, what: &str) -> Result<()> {
        let mut filled = 0;
        while filled < buffer.len() {
            let left = deadline.saturating_duration_since(Instant::now());
            // Waited on in slices: a process the environment forked keeps the reply
            // pipe open after the host itself has ended, so no end of file tells.
            if !readable_within(&self.replies, left.min(EXIT_CHECK_INTERVAL)) {
                // A host that wrote its last reply (a traceback) and ended between the
                // wait and this check has left that reply to be read first.
                if self.host_ended() && !readable_within(&self.replies, Duration::ZERO) {
                    return Err(self.died(what));
                }
                if left <= EXIT_CHECK_INTERVAL {
                    return Err(self.hung(what));
                }
                continue;
            }
            match self.replies.read(&mut buffer[filled..]) {
                Ok(0) => return Err(self.died(what)),
                Ok(count) => filled += count,
                Err(err) if err.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return Err(self.died(what)),
            }
        }
        Ok(())
    }

    /// The error for a process that gave no reply in time; the process is killed.
    fn hung(&mut self, what: &str) -> Error {
        self.end_process_group();
        let _ = self.child.wait();
        self.fail(format!(
            "no reply to {what} within {} s, so its Python process was stopped; raise --env-timeout \
             if the environment is that slow",
            self.timeout.as_secs_f64()
        ))
    }

    /// The error for a process that ended: how, and its stderr's last line.
    fn died(&mut self, what: &str) -> Error {
        self.wait_for_end(Duration::from_secs(2));
        self.end_process_group();
        let status = self.child.wait().ok();
        let how = match status {
            Some(status) => match (status.code(), status.signal()) {
                (Some(code), _) => format!("exited with status {code}"),
                (None, Some(signal)) => {
                    format!("was killed by signal {signal}{}", signal_name(signal))
                }
                _ => "ended".to_string(),
            },
            None => "ended".to_string(),
        };
        let last = last_line(&mut self.stderr);
        let said =
            if last.is_empty() { String::new() } else { format!(", its last words: {last}") };
        // A process that ends before it says anything may not be a3g's host at all.
        let exited = status.is_some_and(|status| status.code().is_some());
        let advice = if what == "start" && exited && last.is_empty() {
            "; check that --python (or A3G_PYTHON) names a Python 3 with gymnasium"
        } else {
            ""
        };
        self.fail(format!("its Python process {how} during {what}{said}{advice}"))
    }

    /// Whether the host has ended, left unreaped: until it is reaped its id, and so
    /// its group's, cannot be handed to another process.
    fn host_ended(&self) -> bool {
        if self.group_ended {
            return true;
        }
        // SAFETY: waitid writes only the siginfo_t it is given.
        unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            let flags = libc::WEXITED | libc::WNOHANG | libc::WNOWAIT;
            libc::waitid(libc::P_PID, self.child.id(), &mut info, flags) == 0 && info.si_pid() != 0
        }
    }

    /// Waits up to `within` for the host to end, leaving it unreaped.
    fn wait_for_end(&self, within: Duration) {
        let deadline = Instant::now() + within;
        while !self.host_ended() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Kills the host's process group, the host (which leads it) and whatever the
    /// environment started there and left running (a simulator it forked); called
    /// before the host is reaped, so the group's id is still theirs.
    fn end_process_group(&mut self) {
        if std::mem::replace(&mut self.group_ended, true) {
            return;
        }
        // SAFETY: kill takes plain integers and touches no memory.
        unsafe {
            libc::kill(-(self.child.id() as libc::pid_t), libc::SIGKILL);
        }
    }

    fn observation(&self, bytes: &[u8], what: &str) -> Result<Vec<f32>> {
        if let Some(layout) = self.image {
            if bytes.len() != layout.len() {
                return Err(self.fail(format!(
                    "{what} gave an image of {} bytes, not the {}x{}x{} of its observation space",
                    bytes.len(),
                    layout.height,
                    layout.width,
                    layout.channels
                )));
            }
            return Ok(to_screen(bytes, layout, self.screen));
        }
        if bytes.len() != 4 * self.observation_len {
            return Err(self.fail(format!(
                "{what} gave an observation of {} values, not the {} of its observation space",
                bytes.len() / 4,
                self.observation_len
            )));
        }
        Ok(bytes.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect())
    }
}

impl Env for PythonEnv {
    fn id(&self) -> &str {
        &self.id
    }

    fn action_space(&self) -> &ActionSpace {
        &self.action_space
    }

    fn observation_shape(&self) -> &[i64] {
        &self.observation_shape
    }

    fn screen(&self) -> Option<Screen> {
        self.image.is_some().then_some(self.screen)
    }

    fn reset(&mut self, seed: Option<u64>) -> Result<Vec<f32>> {
        let seed = seed.or(self.first_seed.take());
        let mut request = vec![b'r', u8::from(seed.is_some())];
        request.extend_from_slice(&seed.unwrap_or(0).to_le_bytes());
        let payload = self.call("reset()", &request)?;
        self.elapsed_steps = 0;
        self.observation(&payload, "reset()")
    }

    fn step(&mut self, action: &Action) -> Result<Step> {
        let mut request = vec![b's'];
        match action {
            Action::Discrete(index) => request.extend_from_slice(&(*index as i64).to_le_bytes()),
            Action::Continuous(values) => {
                values.iter().for_each(|value| request.extend_from_slice(&value.to_le_bytes()))
            }
        }
        let payload = self.call("step()", &request)?;
        if payload.len() < 10 {
            return Err(self.fail("a3g's host gave a step reply too short to read".into()));
        }
        let reward = f64::from_le_bytes(payload[..8].try_into().expect("8 bytes"));
        if !reward.is_finite() {
            return Err(
                self.fail(format!("step() gave the reward {reward}; rewards must be finite"))
            );
        }
        if (reward as f32).is_infinite() {
            return Err(self.fail(format!(
                "step() gave the reward {reward:e}, beyond the {:e} that a3g's 32-bit floats hold; \
                 scale the rewards down (a gymnasium.wrappers:TransformReward wrapper, or in the \
                 environment)",
                f32::MAX
            )));
        }
        self.steps += 1;
        self.elapsed_steps += 1;
        let cut = self.max_episode_steps.is_some_and(|max| self.elapsed_steps >= max);
        Ok(Step {
            observation: self.observation(&payload[10..], "step()")?,
            reward: reward as f32,
            terminated: payload[8] != 0,
            truncated: payload[9] != 0 || cut,
            lives: 0,
            life_lost: false,
        })
    }

    fn env_frames(&self) -> u64 {
        self.steps
    }

    fn render(&mut self) -> Result<Frame> {
        let payload = self.call("render()", b"f")?;
        let size = |at: usize| u32::from_le_bytes(payload[at..at + 4].try_into().expect("4 bytes"));
        let (height, width) = (size(0) as usize, size(4) as usize);
        let rgb = &payload[8..];
        let fits = u16::try_from(width).is_ok() && u16::try_from(height).is_ok();
        if !fits || width == 0 || height == 0 || rgb.len() != width * height * 3 {
            return Err(
                self.fail(format!("render() gave a {height}x{width} picture a3g cannot record"))
            );
        }
        Ok(Frame::from_rgb(width as u16, height as u16, rgb)
            .unwrap_or_else(|| quantized(width as u16, height as u16, rgb)))
    }

    fn step_seconds(&self) -> f64 {
        self.step_seconds
    }
}

impl Drop for PythonEnv {
    /// Closes the process's stdin, which ends its host; kills it if it does not end
    /// at once (an environment stuck in its own code).
    fn drop(&mut self) {
        drop(self.requests.take());
        self.wait_for_end(Duration::from_millis(200));
        self.end_process_group();
        let _ = self.child.wait();
    }
}

/// The action space a3g plays: Discrete, or a 1-D Box of floats whose bounds and their
/// span are finite in 32-bit floats.
fn action_space(space: &SpaceDescription) -> std::result::Result<ActionSpace, String> {
    match space {
        SpaceDescription::Discrete { n } if *n >= 1 => Ok(ActionSpace::Discrete { n: *n as usize }),
        SpaceDescription::Box { shape, dtype, .. } if shape.len() == 1 && !dtype.starts_with("float") => {
            Err(format!(
                "its action space is a Box of {dtype}, and a3g's Gaussian policy gives real numbers; \
                 make it a Box of float32 (rounding in step()), or a Discrete space"
            ))
        }
        SpaceDescription::Box { shape, low, high, .. } if shape.len() == 1 => {
            let bounds = |side: &[Option<f64>]| -> Option<Vec<f32>> {
                side.iter().map(|bound| bound.map(|bound| bound as f32)).collect()
            };
            let (Some(low), Some(high)) = (bounds(low), bounds(high)) else {
                return Err("its action space is a Box with infinite bounds; a3g's Gaussian policy needs \
                            finite ones (wrap it in gymnasium.wrappers.ClipAction or give it bounds)"
                    .into());
            };
            if low.len() != shape[0] as usize || high.len() != low.len() {
                return Err(format!(
                    "its action space has {} dimensions, too many for a3g",
                    shape[0]
                ));
            }
            // The policy maps its output onto low..high, so the span must be a float too.
            if low.iter().zip(&high).any(|(low, high)| !(high - low).is_finite()) {
                return Err(format!(
                    "its action space is a Box whose bounds span more than the {:e} that a3g's \
                     32-bit floats hold; give it the bounds the environment really takes",
                    f32::MAX
                ));
            }
            Ok(ActionSpace::Continuous { low, high })
        }
        other => Err(format!(
            "its action space {} is not one a3g plays; a3g takes Discrete and 1-D Box actions",
            space_text(other)
        )),
    }
}

/// The layout of image observations: a Box of bytes, height x width (x 1, 3 or 4
/// channels), which host.py sends as bytes.
fn image_layout(space: &SpaceDescription) -> Option<ImageLayout> {
    match space {
        SpaceDescription::Box { shape, dtype, .. } if dtype == "uint8" => ImageLayout::of(shape),
        _ => None,
    }
}

/// The observation shape a3g feeds the MLP: a Box of numbers flattened to one vector
/// (a 1-D Box as it is), or a Discrete one-hot.
fn observation_shape(space: &SpaceDescription) -> std::result::Result<Vec<i64>, String> {
    match space {
        SpaceDescription::Discrete { n } if *n >= 1 => Ok(vec![*n]),
        SpaceDescription::Box { shape, .. }
            if !shape.is_empty() && shape.iter().all(|&size| size >= 1) =>
        {
            Ok(vec![shape.iter().product()])
        }
        other => Err(format!(
            "its observation space {} is not one a3g plays; a3g takes Box and Discrete observations: \
             put a wrapper that gives one around it with --env-wrapper <module>:<Class>",
            space_text(other)
        )),
    }
}

fn space_text(space: &SpaceDescription) -> String {
    match space {
        SpaceDescription::Discrete { n } => format!("Discrete({n})"),
        SpaceDescription::Box { shape, dtype, .. } => format!("Box(shape {shape:?}, {dtype})"),
        SpaceDescription::Other { name, text } => format!("{name} ({text})"),
    }
}

/// "raised ValueError: ... while being made", from a Python traceback: its last line
/// says what was raised.
fn raised_while(when: &str, traceback: &str) -> String {
    let last = traceback.lines().rev().find(|line| !line.trim().is_empty()).unwrap_or("").trim();
    let advice = if last.contains("No module named 'gymnasium'") {
        "; install gymnasium for that Python (pip install gymnasium), or name another with --python"
    } else if last.contains("No module named") {
        "; install the package for that Python, or name another with --python"
    } else if last.starts_with("TypeError") && last.ends_with(", as in old Gym") {
        "; a3g plays Gymnasium's API, where reset(seed=...) returns (observation, info) and step() \
         (observation, reward, terminated, truncated, info): port the environment to it (Gymnasium's \
         migration guide), or wrap it with shimmy's GymV21CompatibilityV0"
    } else {
        ""
    };
    format!("its Python code raised {last} {when}{advice}")
}

/// Starts `command` from a thread that lives as long as a3g. PR_SET_PDEATHSIG fires
/// when the thread that started a child ends, not the process: environments made by
/// short-lived threads (made side by side at the start) would be killed with them.
fn spawn_from_lasting_thread(command: Command) -> std::io::Result<Child> {
    type Request = (Command, crossbeam::channel::Sender<std::io::Result<Child>>);
    static SPAWNER: std::sync::OnceLock<Option<crossbeam::channel::Sender<Request>>> =
        std::sync::OnceLock::new();
    let spawner = SPAWNER.get_or_init(|| {
        let (requests, incoming) = crossbeam::channel::unbounded::<Request>();
        let started = std::thread::Builder::new().name("env spawner".into()).spawn(move || {
            for (mut command, reply) in incoming {
                let _ = reply.send(command.spawn());
            }
        });
        started.ok().map(|_| requests)
    });
    let gone = || std::io::Error::other("a3g could not keep a thread to start environments from");
    let spawner = spawner.as_ref().ok_or_else(gone)?;
    let (reply, child) = crossbeam::channel::bounded(1);
    spawner.send((command, reply)).map_err(|_| gone())?;
    child.recv().map_err(|_| gone())?
}

/// A file for a process's stderr, already unlinked so nothing is left behind: one
/// handle to read it back, one for the child.
fn unlinked_log() -> std::io::Result<(File, File)> {
    let path = std::env::temp_dir().join(format!(
        "a3g-env-{}-{}.stderr",
        std::process::id(),
        NEXT_LOG.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    let writer = File::create(&path)?;
    let reader = File::open(&path);
    let _ = std::fs::remove_file(&path);
    Ok((reader?, writer))
}

static NEXT_LOG: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The last words of a log, up to 300 characters: Python's fatal error with the line
/// of code it names first (faulthandler's report of a crash), else its last line.
fn last_line(log: &mut File) -> String {
    let length = log.seek(SeekFrom::End(0)).unwrap_or(0);
    let _ = log.seek(SeekFrom::Start(length.saturating_sub(16_384)));
    let mut tail = Vec::new();
    let _ = log.read_to_end(&mut tail);
    let text = String::from_utf8_lossy(&tail);
    let lines: Vec<&str> = text.lines().map(str::trim).filter(|line| !line.is_empty()).collect();
    let fatal = lines.iter().rposition(|line| line.starts_with("Fatal Python error"));
    let words = match fatal {
        Some(at) => match lines[at..].iter().find(|line| line.starts_with("File ")) {
            Some(code) => format!("{} ({code})", lines[at]),
            None => lines[at].to_string(),
        },
        None => lines.last().copied().unwrap_or_default().to_string(),
    };
    words.chars().take(300).collect()
}

/// Whether `pipe` has something to read (or was closed) within `wait`.
fn readable_within(pipe: &ChildStdout, wait: Duration) -> bool {
    let mut poll = libc::pollfd { fd: pipe.as_raw_fd(), events: libc::POLLIN, revents: 0 };
    let deadline = Instant::now() + wait;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let millis = left.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: one valid pollfd, for a descriptor this process owns.
        let ready = unsafe { libc::poll(&mut poll, 1, millis) };
        if ready > 0 {
            return true;
        }
        let interrupted =
            ready < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted;
        if ready < 0 && !interrupted {
            // Not a wait's end: the caller, which waits in slices, would spin on it.
            std::thread::sleep(left);
        }
        if !interrupted || left.is_zero() {
            return false;
        }
    }
}

fn signal_name(signal: i32) -> &'static str {
    match signal {
        libc::SIGSEGV => " (SIGSEGV, a crash)",
        libc::SIGABRT => " (SIGABRT)",
        libc::SIGKILL => " (SIGKILL, perhaps out of memory)",
        libc::SIGBUS => " (SIGBUS)",
        libc::SIGFPE => " (SIGFPE)",
        _ => "",
    }
}

/// An RGB picture of more than 256 colours, on a fixed palette of 3 bits of red and
/// green and 2 of blue: enough for a recording to show what happened.
fn quantized(width: u16, height: u16, rgb: &[u8]) -> Frame {
    let palette = (0..=255u8)
        .map(|index| {
            let (red, green, blue) = (index >> 5, (index >> 2) & 7, index & 3);
            [red * 36 + red / 2, green * 36 + green / 2, blue * 85]
        })
        .collect();
    let pixels = rgb
        .chunks_exact(3)
        .map(|pixel| (pixel[0] & 0xe0) | ((pixel[1] >> 3) & 0x1c) | (pixel[2] >> 6))
        .collect();
    Frame { width, height, palette, pixels }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `gym:` names a registry id, a colon anywhere else a class, and no colon a
    /// built-in id.
    #[test]
    fn targets_are_told_apart_by_their_colon() {
        assert_eq!(Target::parse("gym:CartPole-v1"), Some(Target::Gym("CartPole-v1".into())));
        assert_eq!(
            Target::parse("envs/maze.py:Maze"),
            Some(Target::Class("envs/maze.py:Maze".into()))
        );
        assert_eq!(
            Target::parse("my_pkg.envs:Maze"),
            Some(Target::Class("my_pkg.envs:Maze".into()))
        );
        assert_eq!(Target::parse("CartPole-v1"), None);
    }

    /// A traceback's last line is what was raised; a missing gymnasium says how to
    /// install it.
    #[test]
    fn a_traceback_comes_down_to_its_last_line() {
        let traceback =
            "Traceback (most recent call last):\n  File \"x.py\", line 3, in step\n    \
                         raise ValueError('bad action')\nValueError: bad action\n";
        assert_eq!(
            raised_while("in step()", traceback),
            "its Python code raised ValueError: bad action in step()"
        );
        let missing = "Traceback:\nModuleNotFoundError: No module named 'gymnasium'\n";
        assert!(raised_while("while being made", missing).contains("pip install gymnasium"));
    }

    /// Spaces a3g cannot play are refused, naming them.
    #[test]
    fn unsupported_spaces_are_named() {
        let dict =
            SpaceDescription::Other { name: "Dict".into(), text: "Dict('a': Discrete(2))".into() };
        assert!(action_space(&dict).unwrap_err().contains("Dict"));
        assert!(observation_shape(&dict).unwrap_err().contains("Dict"));
        let unbounded = SpaceDescription::Box {
            shape: vec![1],
            dtype: "float32".into(),
            low: vec![None],
            high: vec![Some(1.0)],
        };
        assert!(action_space(&unbounded).unwrap_err().contains("infinite"));
        assert_eq!(observation_shape(&unbounded).unwrap(), vec![1]);
        let box_of = |dtype: &str, low: f64, high: f64| SpaceDescription::Box {
            shape: vec![1],
            dtype: dtype.into(),
            low: vec![Some(low)],
            high: vec![Some(high)],
        };
        for (low, high) in [(-1e300, 1e300), (-3e38, 3e38)] {
            let error = action_space(&box_of("float64", low, high)).unwrap_err();
            assert!(error.contains("32-bit floats"), "{low}..{high}: {error}");
        }
        assert!(action_space(&box_of("float64", -1e30, 1e30)).is_ok());
        assert!(action_space(&box_of("int64", 0.0, 4.0)).unwrap_err().contains("Box of int64"));
        let grid = SpaceDescription::Box {
            shape: vec![5, 4],
            dtype: "float32".into(),
            low: vec![None; 20],
            high: vec![None; 20],
        };
        assert_eq!(observation_shape(&grid).unwrap(), vec![20], "flattened");
        let image = SpaceDescription::Box {
            shape: vec![64, 48, 3],
            dtype: "uint8".into(),
            low: vec![Some(0.0); 4096],
            high: vec![Some(255.0); 4096],
        };
        assert_eq!(image_layout(&image), Some(ImageLayout { height: 64, width: 48, channels: 3 }));
        assert_eq!(image_layout(&grid), None, "numbers, not bytes");
    }

    /// The fixed palette keeps a colour's top bits.
    #[test]
    fn quantized_frames_keep_the_colours_top_bits() {
        let frame = quantized(2, 1, &[255, 255, 255, 0, 0, 0]);
        assert_eq!(frame.pixels, [255, 0]);
        assert_eq!(frame.palette[255], [255, 255, 255]);
        assert_eq!(frame.palette[0], [0, 0, 0]);
    }
}
