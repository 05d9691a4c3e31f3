//! Helpers: run the built `a3g` binary in a scratch folder and inspect what it printed.

use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Child, Command, Output};
use std::sync::mpsc;

/// The result of one run of the binary.
pub struct Run {
    pub status: std::process::ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl From<Output> for Run {
    fn from(output: Output) -> Self {
        Run {
            status: output.status,
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }
}

/// A scratch working folder, removed when dropped.
pub struct Scratch {
    dir: PathBuf,
}

impl Scratch {
    pub fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "a3g-test-{name}-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create scratch folder");
        Scratch { dir }
    }

    /// A path inside this folder.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Writes `contents` to `name` inside this folder.
    pub fn write(&self, name: &str, contents: &str) {
        std::fs::write(self.dir.join(name), contents).expect("write scratch file");
    }

    /// Runs `a3g` with `args` inside this folder.
    pub fn a3g(&self, args: &[&str]) -> Run {
        self.a3g_with_env(args, &[])
    }

    /// [`Scratch::a3g`] for arguments built as owned strings.
    pub fn a3g_owned(&self, args: &[String]) -> Run {
        self.a3g(&args.iter().map(String::as_str).collect::<Vec<_>>())
    }

    /// Runs `a3g` with `args` inside this folder under a file-size limit of `kilobytes`
    /// (`ulimit -f`): writes past it fail as a full disk's do (the shell ignores
    /// SIGXFSZ, which would otherwise kill the process).
    pub fn a3g_with_file_limit(&self, kilobytes: u32, args: &[String]) -> Run {
        let command = format!(
            "trap '' XFSZ; ulimit -f {kilobytes}; exec {} {}",
            env!("CARGO_BIN_EXE_a3g"),
            args.join(" ")
        );
        Command::new("bash")
            .args(["-c", &command])
            .current_dir(&self.dir)
            .env_remove("RUST_BACKTRACE")
            .output()
            .expect("start bash")
            .into()
    }

    /// Runs `a3g` with `args` (borrowed or owned, as [`cartpole`] builds them) inside
    /// this folder, with `vars` added to its environment.
    pub fn a3g_with_env(&self, args: &[impl AsRef<OsStr>], vars: &[(&str, &str)]) -> Run {
        Command::new(env!("CARGO_BIN_EXE_a3g"))
            .args(args)
            .current_dir(&self.dir)
            .env_remove("RUST_BACKTRACE")
            .envs(vars.iter().copied())
            .output()
            .expect("start the a3g binary")
            .into()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// One of a background run's output streams, read line by line as it comes, so that
/// a test can act on what the run has done rather than on how long it has run.
pub struct Lines {
    lines: mpsc::Receiver<String>,
    seen: String,
}

impl Lines {
    /// Takes over `child`'s piped stdout.
    pub fn stdout(child: &mut Child) -> Self {
        Self::read(child.stdout.take().expect("stdout piped"))
    }

    /// Takes over `child`'s piped stderr.
    pub fn stderr(child: &mut Child) -> Self {
        Self::read(child.stderr.take().expect("stderr piped"))
    }

    fn read(stream: impl Read + Send + 'static) -> Self {
        let (sender, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stream).lines().map_while(Result::ok) {
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        Lines { lines, seen: String::new() }
    }

    /// Waits, however long the machine takes, until a line contains `text`; panics
    /// if the stream closes first.
    pub fn wait_for(&mut self, text: &str) {
        loop {
            let line = self.lines.recv().unwrap_or_else(|_| {
                panic!("the run ended without printing {text:?}; it printed: {}", self.seen)
            });
            self.seen.push_str(&line);
            self.seen.push('\n');
            if line.contains(text) {
                return;
            }
        }
    }

    /// Everything the stream carried, once the run has closed it.
    pub fn all(mut self) -> String {
        for line in self.lines.iter() {
            self.seen.push_str(&line);
            self.seen.push('\n');
        }
        self.seen
    }
}

/// Asserts that a run failed the way a user error must: non-zero exit, exactly one
/// `error:` line on stderr, no panic; returns that line.
pub fn assert_one_line_error(run: &Run) -> String {
    assert!(!run.status.success(), "expected failure, got success; stdout: {}", run.stdout);
    assert!(!run.stderr.contains("panicked"), "panic: {}", run.stderr);
    let lines: Vec<&str> = run.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "expected one line on stderr, got: {:?}", run.stderr);
    assert!(lines[0].starts_with("error: "), "not an error line: {:?}", lines[0]);
    lines[0].to_string()
}

/// Sends signal `name` (INT, TERM, KILL) to a running a3g.
pub fn signal(child: &Child, name: &str) {
    let status = Command::new("kill")
        .args([&format!("-{name}"), &child.id().to_string()])
        .status()
        .expect("run kill");
    assert!(status.success());
}

/// `a3g train`'s arguments on CartPole-v1, with `extra` flags after the env.
pub fn cartpole(extra: &[&str]) -> Vec<String> {
    ["train", "--env", "CartPole-v1"].iter().chain(extra).map(|flag| flag.to_string()).collect()
}

/// A small CartPole training run's flags (one worker, 16 hidden units), with its own
/// extra flags after them.
pub fn small_cartpole(extra: &[&str]) -> Vec<String> {
    cartpole(&[&["--workers", "1", "--hidden-size", "16"], extra].concat())
}

/// Copies the set of `env`'s shipped model (trained_models/ of the checkout) into the
/// scratch folder's trained_models/.
pub fn copy_shipped(scratch: &Scratch, env: &str) {
    std::fs::create_dir_all(scratch.path("trained_models")).unwrap();
    let shipped = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("trained_models");
    for extension in ["safetensors", "optimizer.safetensors", "json"] {
        let name = format!("{env}.{extension}");
        if shipped.join(&name).exists() {
            std::fs::copy(shipped.join(&name), scratch.path(&format!("trained_models/{name}")))
                .unwrap();
        }
    }
}

/// The sidecar of `env`'s checkpoint in the scratch folder's trained_models/.
pub fn sidecar_json(scratch: &Scratch, env: &str) -> serde_json::Value {
    let path = scratch.path(&format!("trained_models/{env}.json"));
    let text = std::fs::read_to_string(path).expect("sidecar");
    serde_json::from_str(&text).expect("sidecar is JSON")
}

/// Rewrites the sidecar of `env`'s checkpoint through `edit`.
pub fn edit_sidecar(scratch: &Scratch, env: &str, edit: impl FnOnce(&mut serde_json::Value)) {
    let mut json = sidecar_json(scratch, env);
    edit(&mut json);
    let path = scratch.path(&format!("trained_models/{env}.json"));
    std::fs::write(path, serde_json::to_string_pretty(&json).unwrap()).unwrap();
}

/// The agent steps a checkpoint's sidecar records.
pub fn saved_agent_steps(sidecar: &std::path::Path) -> u64 {
    let text = std::fs::read_to_string(sidecar).expect("sidecar");
    let json: serde_json::Value = serde_json::from_str(&text).expect("sidecar is JSON");
    json["counters"]["agent_steps"].as_u64().expect("agent_steps")
}

/// The --max-steps that resumes `env`'s checkpoint in trained_models/ for one more
/// rollout: one past the agent steps it records, since --max-steps counts over resumes
/// (at or below them, --load is refused).
pub fn one_rollout_past_saved(scratch: &Scratch, env: &str) -> String {
    let saved = saved_agent_steps(&scratch.path(&format!("trained_models/{env}.json")));
    (saved + 1).to_string()
}

/// Where a test finds PyTorch for python3: the wheel the set-up installs into .deps/,
/// and the wheel that a `LIBTORCH` set by hand may belong to. python3's own packages
/// stay on its path after these, so `LIBTORCH_USE_PYTORCH=1` set-ups work too.
pub fn pytorch_path() -> std::ffi::OsString {
    let mut folders = vec![std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(".deps/torch")];
    if let Some(libtorch) = std::env::var_os("LIBTORCH") {
        folders.extend(std::path::Path::new(&libtorch).parent().map(std::path::Path::to_path_buf));
    }
    std::env::join_paths(folders.iter().filter(|folder| folder.join("torch").is_dir()))
        .expect("folders without ':'")
}

/// The environment for an a3g whose outside environments need Gymnasium: python3 finds
/// the packages that scripts/test installs into .deps/gymnasium and .deps/minigrid.
pub fn gymnasium_vars() -> Vec<(&'static str, String)> {
    let deps = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(".deps");
    let packages = [("gymnasium", "gymnasium"), ("minigrid", "minigrid")];
    for (folder, package) in packages {
        assert!(
            deps.join(folder).join(package).is_dir(),
            "{package} is missing from {}; ./scripts/test installs it",
            deps.join(folder).display()
        );
    }
    let path = std::env::join_paths(packages.iter().map(|(folder, _)| deps.join(folder)))
        .expect("folders without ':'");
    vec![("PYTHONPATH", path.to_string_lossy().into_owned())]
}

/// No process of a3g's outside environments is left running in this scratch folder
/// (each host runs where the a3g that started it ran), within a few seconds of
/// the run's end.
pub fn assert_no_env_host_left(scratch: &Scratch) {
    let folder = std::fs::canonicalize(scratch.path("")).expect("the scratch folder");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let left: Vec<String> = std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter(|entry| {
                std::fs::read_link(entry.path().join("cwd"))
                    .is_ok_and(|cwd| cwd.starts_with(&folder))
            })
            .filter_map(|entry| std::fs::read(entry.path().join("cmdline")).ok())
            .map(|cmdline| String::from_utf8_lossy(&cmdline).replace('\0', " "))
            .filter(|cmdline| cmdline.contains("a3g's host"))
            .collect();
        if left.is_empty() {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "environment processes left behind: {left:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

impl Scratch {
    /// Runs `a3g` with `args` inside this folder, its Python finding Gymnasium.
    pub fn a3g_gym(&self, args: &[&str]) -> Run {
        let vars = gymnasium_vars();
        let vars: Vec<(&str, &str)> =
            vars.iter().map(|(name, value)| (*name, value.as_str())).collect();
        self.a3g_with_env(args, &vars)
    }
}
