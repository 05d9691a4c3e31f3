//! Training across machines, as two processes on one machine talking over 127.0.0.1
//! only: the ranks train one model, a rank with other settings is refused, a rank
//! that dies stops the other. In a build without the engine (no gloo headers), a
//! launched a3g is refused on one line instead.

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::util::{
    assert_no_env_host_left, assert_one_line_error, cartpole, edit_sidecar, gymnasium_vars,
    pytorch_path, saved_agent_steps, sidecar_json, signal, small_cartpole, Lines, Run, Scratch,
};

/// A port free on 127.0.0.1 a moment ago.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|listener| listener.local_addr()).unwrap().port()
}

/// The variables torchrun sets for rank `rank` of `world_size`, with rank 0's store
/// on 127.0.0.1:`port`.
fn launched_as(rank: usize, world_size: usize, port: u16) -> Vec<(&'static str, String)> {
    vec![
        ("RANK", rank.to_string()),
        ("WORLD_SIZE", world_size.to_string()),
        ("LOCAL_RANK", rank.to_string()),
        ("MASTER_ADDR", "127.0.0.1".into()),
        ("MASTER_PORT", port.to_string()),
    ]
}

fn rank_command(scratch: &Scratch, rank: usize, port: u16, args: &[String]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_a3g"));
    command
        .args(args)
        .current_dir(scratch.path(""))
        .env_remove("RUST_BACKTRACE")
        .envs(launched_as(rank, 2, port))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command
}

/// Runs a3g with `args` to its end as rank `rank` of `world_size` (launched_as).
fn run_as_rank(
    scratch: &Scratch,
    rank: usize,
    world_size: usize,
    port: u16,
    args: &[String],
) -> Run {
    let vars = launched_as(rank, world_size, port);
    let vars: Vec<(&str, &str)> =
        vars.iter().map(|(name, value)| (*name, value.as_str())).collect();
    scratch.a3g_with_env(args, &vars)
}

fn start_rank(scratch: &Scratch, rank: usize, port: u16, args: &[String]) -> Child {
    rank_command(scratch, rank, port, args).spawn().expect("start the a3g binary")
}

/// Waits up to `limit` for `child` to end; kills it and panics past that.
fn wait_within(child: &mut Child, limit: Duration, what: &str) -> std::process::ExitStatus {
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            return status;
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            panic!("{what} still ran after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Reads every rank's output as it comes (a full pipe would stop a rank), waits up to
/// `limit` for each to end, and asserts that each ended successfully; their stdout and
/// stderr, in rank order.
fn ended_successfully(mut ranks: Vec<Child>, limit: Duration) -> Vec<(String, String)> {
    let outputs: Vec<(Lines, Lines)> =
        ranks.iter_mut().map(|child| (Lines::stdout(child), Lines::stderr(child))).collect();
    let statuses: Vec<_> =
        ranks.iter_mut().map(|child| wait_within(child, limit, "a rank")).collect();
    let outputs: Vec<(String, String)> =
        outputs.into_iter().map(|(out, err)| (out.all(), err.all())).collect();
    for (status, (stdout, stderr)) in statuses.iter().zip(&outputs) {
        assert!(status.success(), "{stdout}\n{stderr}");
    }
    outputs
}

/// Two ranks of one CartPole worker each train one model: every sync checks that
/// they agreed on the same weights, --max-steps counts both ranks' steps, rank 0
/// alone writes the checkpoint (with the summed counters) and the game log, and both
/// end cleanly.
#[test]
fn two_ranks_train_one_model() {
    let scratches = [Scratch::new("rank0"), Scratch::new("rank1")];
    let port = free_port();
    let args = small_cartpole(&[
        "--max-steps",
        "4000",
        "--sync-interval",
        "0.2",
        "--sync-timeout",
        "30",
        "--status-interval",
        "0.5",
    ]);
    if !cfg!(a3g_c10d) {
        let line = assert_one_line_error(&run_as_rank(&scratches[0], 0, 2, port, &args));
        assert!(line.contains("built without training across machines"), "{line}");
        return;
    }
    let ranks: Vec<Child> =
        (0..2).map(|rank| start_rank(&scratches[rank], rank, port, &args)).collect();
    let outputs = ended_successfully(ranks, Duration::from_secs(90));
    assert!(outputs[0].0.contains("reached --max-steps"), "{}", outputs[0].0);
    assert!(outputs[1].0.contains("over all ranks"), "{}", outputs[1].0);
    // Every status line of a rank tells how often it synced, and one after syncs what
    // a merge and a sync cost.
    for (stdout, _) in &outputs {
        let rates: Vec<f64> = stdout
            .lines()
            .filter(|line| line.contains("agent steps") && line.contains("steps/s"))
            .map(|line| {
                let before = line.split(" syncs/s").next().filter(|part| part.len() < line.len());
                let rate: f64 = before
                    .and_then(|part| part.rsplit(' ').next()?.parse().ok())
                    .unwrap_or_else(|| panic!("no syncs/s in a status line: {line}"));
                assert!(rate == 0.0 || line.contains(" ms a merge, "), "{line}");
                assert!(rate == 0.0 || line.contains(" ms of CPU a sync)"), "{line}");
                rate
            })
            .collect();
        assert!(!rates.is_empty(), "{stdout}");
        assert!(rates.iter().any(|&rate| rate > 0.0), "{rates:?}");
    }
    let saved = saved_agent_steps(&scratches[0].path("trained_models/CartPole-v1.json"));
    assert!(saved >= 4000, "{saved}");
    assert!(scratches[0].path("logs/CartPole-v1_log").exists());
    assert!(!scratches[1].path("trained_models").exists(), "rank 1 wrote a checkpoint");
    assert!(!scratches[1].path("logs").exists(), "rank 1 wrote a game log");
}

/// Two ranks train an environment from outside a3g, each with its own Python
/// processes for its environments, and leave none of them behind.
#[test]
#[cfg_attr(not(a3g_c10d), ignore = "this build has no c10d (no gloo headers at set-up)")]
fn two_ranks_train_an_outside_environment() {
    let scratches = [Scratch::new("gym-rank0"), Scratch::new("gym-rank1")];
    let port = free_port();
    let args: Vec<String> = [
        "train",
        "--env",
        "gym:CartPole-v1",
        "--workers",
        "1",
        "--hidden-size",
        "16",
        "--max-steps",
        "3000",
        "--sync-interval",
        "0.2",
        "--sync-timeout",
        "30",
    ]
    .map(String::from)
    .to_vec();
    let ranks: Vec<Child> = (0..2)
        .map(|rank| {
            rank_command(&scratches[rank], rank, port, &args)
                .envs(gymnasium_vars())
                .spawn()
                .expect("start the a3g binary")
        })
        .collect();
    ended_successfully(ranks, Duration::from_secs(120));
    let saved = saved_agent_steps(&scratches[0].path("trained_models/gym:CartPole-v1.json"));
    assert!(saved >= 3000, "{saved}");
    scratches.iter().for_each(assert_no_env_host_left);
}

/// A rank started with another learning rate, --sync-merge, --trainer or
/// --sync-interval than rank 0's is refused, and so is rank 0: each prints one line
/// naming the flag and both values.
#[test]
#[cfg_attr(not(a3g_c10d), ignore = "this build has no c10d (no gloo headers at set-up)")]
fn a_rank_with_other_settings_is_refused() {
    for (flag, setting, values) in [
        ("--lr", "--lr", ["0.001", "0.002"]),
        ("--sync-merge", "--sync-merge", ["sum", "mean"]),
        ("--trainer", "has --trainer", ["a3c", "ga3c"]),
        ("--sync-interval", "has --sync-interval", ["1", "2"]),
    ] {
        let scratches = [Scratch::new("differs0"), Scratch::new("differs1")];
        let port = free_port();
        let mut ranks: Vec<Child> = (0..2)
            .map(|rank| {
                let args = small_cartpole(&[
                    "--max-steps",
                    "100000",
                    flag,
                    values[rank],
                    "--sync-timeout",
                    "30",
                ]);
                start_rank(&scratches[rank], rank, port, &args)
            })
            .collect();
        for (rank, child) in ranks.iter_mut().enumerate() {
            let stderr = Lines::stderr(child);
            let status = wait_within(child, Duration::from_secs(60), "a refused rank");
            let stderr = stderr.all();
            assert!(!status.success(), "rank {rank} ran with {flag} {}", values[rank]);
            let lines: Vec<&str> = stderr.lines().collect();
            assert_eq!(lines.len(), 1, "{stderr}");
            assert!(lines[0].starts_with(&format!("error: rank {rank} of 2: ")), "{stderr}");
            assert!(
                lines[0].contains(setting)
                    && lines[0].contains(values[0])
                    && lines[0].contains(values[1]),
                "{stderr}"
            );
        }
    }
}

/// A rank killed mid-run stops the other within --sync-timeout, on one line naming
/// itself, with a non-zero exit; rank 0's last checkpoint stays loadable.
#[test]
#[cfg_attr(not(a3g_c10d), ignore = "this build has no c10d (no gloo headers at set-up)")]
fn a_killed_rank_stops_the_other() {
    let scratches = [Scratch::new("kill0"), Scratch::new("kill1")];
    let port = free_port();
    let args = small_cartpole(&[
        "--max-time",
        "120s",
        "--sync-interval",
        "0.2",
        "--sync-timeout",
        "5",
        "--save-interval",
        "0",
    ]);
    let mut ranks: Vec<Child> =
        (0..2).map(|rank| start_rank(&scratches[rank], rank, port, &args)).collect();
    let mut rank0_out = Lines::stdout(&mut ranks[0]);
    let rank0_err = Lines::stderr(&mut ranks[0]);
    // Read, or rank 1's status lines could fill its pipe and stop it.
    let _rank1_out = Lines::stdout(&mut ranks[1]);
    // A test game is logged once rank 0's test agent has played with synced weights.
    rank0_out.wait_for("Time ");
    let sidecar = scratches[0].path("trained_models/CartPole-v1.json");
    let waited = Instant::now();
    while !sidecar.exists() {
        assert!(waited.elapsed() < Duration::from_secs(30), "rank 0 saved no checkpoint");
        std::thread::sleep(Duration::from_millis(50));
    }
    signal(&ranks[1], "KILL");
    let _ = ranks[1].wait();
    let killed_at = Instant::now();
    let status = wait_within(&mut ranks[0], Duration::from_secs(30), "rank 0 after its peer died");
    assert!(killed_at.elapsed() < Duration::from_secs(20), "{:?}", killed_at.elapsed());
    assert!(!status.success());
    let stderr = rank0_err.all();
    let errors: Vec<&str> = stderr.lines().filter(|line| line.starts_with("error: ")).collect();
    assert_eq!(errors.len(), 1, "{stderr}");
    assert!(errors[0].contains("rank 0 of 2: could not"), "{stderr}");
    let eval = scratches[0].a3g(&["eval", "--env", "CartPole-v1", "--num-episodes", "1"]);
    assert!(eval.status.success(), "{}", eval.stderr);
}

/// PyTorch's launcher (the torch the set-up installed), in `scratch`'s folder, starting
/// two ranks of a3g with `train` on 127.0.0.1, `launcher` flags added to its own.
fn torchrun(scratch: &Scratch, launcher: &[&str], train: &[String]) -> Command {
    let mut command = Command::new("python3");
    command
        .args(["-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"])
        .args(launcher)
        .args(["--local-addr", "127.0.0.1", "--no-python", env!("CARGO_BIN_EXE_a3g")])
        .args(train)
        .current_dir(scratch.path(""))
        .env("PYTHONPATH", pytorch_path())
        .env_remove("RUST_BACKTRACE");
    command
}

/// PyTorch's own launcher starts the ranks: `torch.distributed.run --standalone` (the
/// torch the set-up installed) with a3g as the program, its agent serving the store
/// on 127.0.0.1, and the two ranks train to --max-steps.
#[test]
#[cfg_attr(not(a3g_c10d), ignore = "this build has no c10d (no gloo headers at set-up)")]
fn torchrun_launches_the_ranks() {
    let scratch = Scratch::new("torchrun");
    let train = small_cartpole(&["--max-steps", "2000", "--sync-interval", "0.2"]);
    let output = torchrun(&scratch, &[], &train)
        .output()
        .unwrap_or_else(|error| panic!("cannot run python3 ({error}); this test needs Python 3"));
    let (stdout, stderr) =
        (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "{stdout}\n{stderr}");
    assert_eq!(stdout.matches("over all ranks").count(), 1, "{stdout}");
    let saved = saved_agent_steps(&scratch.path("trained_models/CartPole-v1.json"));
    assert!(saved >= 2000, "{saved}");
}

/// Under `torchrun --max-restarts 1`, a rank killed mid-run (SIGKILL) is restarted by
/// torchrun with the others, and with `--resume auto` the world goes on from rank 0's
/// last checkpoint, with no hand-written --load: the same command, run again by the
/// launcher, resumes and trains to --max-steps, which counts the steps before the kill.
#[test]
#[cfg_attr(not(a3g_c10d), ignore = "this build has no c10d (no gloo headers at set-up)")]
fn torchrun_restarts_a_killed_rank_and_the_world_resumes() {
    let scratch = Scratch::new("torchrun-restart");
    let train = small_cartpole(&[
        "--max-steps",
        "40000",
        "--sync-interval",
        "0.2",
        "--sync-timeout",
        "10",
        "--resume",
        "auto",
        "--save-interval",
        "0",
    ]);
    let mut torchrun = torchrun(&scratch, &["--max-restarts", "1"], &train)
        // Files, not pipes: a pipe nobody reads meanwhile would fill and stop the ranks.
        .stdout(std::fs::File::create(scratch.path("stdout.txt")).unwrap())
        .stderr(std::fs::File::create(scratch.path("stderr.txt")).unwrap())
        .spawn()
        .unwrap_or_else(|error| panic!("cannot run python3 ({error}); this test needs Python 3"));
    let sidecar = scratch.path("trained_models/CartPole-v1.json");
    let started = Instant::now();
    while !sidecar.exists() {
        assert!(started.elapsed() < Duration::from_secs(120), "no checkpoint was written");
        std::thread::sleep(Duration::from_millis(50));
    }
    let before = saved_agent_steps(&sidecar);
    let rank1 = rank_process(&scratch, 1).expect("rank 1 runs");
    let killed = Command::new("kill").args(["-KILL", &rank1.to_string()]).status().unwrap();
    assert!(killed.success());
    let status = wait_within(&mut torchrun, Duration::from_secs(240), "torchrun");
    let stdout = std::fs::read_to_string(scratch.path("stdout.txt")).unwrap();
    let stderr = std::fs::read_to_string(scratch.path("stderr.txt")).unwrap();
    assert!(status.success(), "{stdout}\n{stderr}");
    assert!(stderr.contains("(--resume auto)"), "the restart resumed: {stderr}");
    let saved = saved_agent_steps(&sidecar);
    assert!(saved >= 40000 && saved > before, "{before} then {saved}");
}

/// The process id of the a3g running as rank `rank` in `scratch`'s folder, found by
/// its working folder and the RANK torchrun gave it.
fn rank_process(scratch: &Scratch, rank: usize) -> Option<u32> {
    let folder = scratch.path("").canonicalize().ok()?;
    let wanted = format!("RANK={rank}");
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|entry| {
        let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
        let exe = std::fs::read_link(entry.path().join("exe")).ok()?;
        let cwd = std::fs::read_link(entry.path().join("cwd")).ok()?;
        let environ = std::fs::read(entry.path().join("environ")).ok()?;
        let is_rank = environ.split(|&byte| byte == 0).any(|var| var == wanted.as_bytes());
        (exe.file_name()? == "a3g" && cwd == folder && is_rank).then_some(pid)
    })
}

/// A world of one rank is a run on one machine, in a build with the engine or
/// without: no rendezvous, and the run trains and writes its checkpoint as always.
#[test]
fn a_world_of_one_runs_without_the_engine() {
    let scratch = Scratch::new("world-of-one");
    let args = small_cartpole(&["--max-steps", "500"]);
    let run = run_as_rank(&scratch, 0, 1, free_port(), &args);
    assert!(run.status.success(), "{}", run.stderr);
    assert!(run.stdout.contains("reached --max-steps"), "{}", run.stdout);
    assert!(!run.stdout.contains("over all ranks"), "{}", run.stdout);
    assert!(saved_agent_steps(&scratch.path("trained_models/CartPole-v1.json")) >= 500);
}

/// An interval over half the timeout, with which a stopping rank would give up on
/// the others before they sync, is refused on one line (a timeout under a second,
/// which c10d would read as none, is refused with the other flags' ranges in
/// tests/safety.rs).
#[test]
fn a_sync_interval_over_half_the_timeout_is_refused() {
    let scratch = Scratch::new("sync-flags");
    let port = free_port();
    let run = |extra: &[&str]| run_as_rank(&scratch, 0, 2, port, &small_cartpole(extra));
    let line = assert_one_line_error(&run(&["--sync-interval", "40", "--sync-timeout", "60"]));
    assert!(line.contains("--sync-interval 40 is more than half of --sync-timeout 60"), "{line}");
    let line = assert_one_line_error(&run(&["--sync-timeout", "1"]));
    assert!(
        line.contains(
            "--sync-interval 1 (the default at 2 ranks) is more than half of --sync-timeout 1"
        ),
        "{line}"
    );
}

/// Without --sync-interval, four ranks sync more often than two (every 0.05 s, or
/// longer for a costly sync, rather than every second): a lone rank 0 of four with
/// --sync-timeout 1 passes the interval's check, where one of two is refused (above),
/// and waits for the others (SyncInterval's unit test has the figures).
#[test]
fn four_ranks_default_interval_passes_a_one_second_timeout() {
    let scratch = Scratch::new("sync-default");
    let args = small_cartpole(&["--sync-timeout", "1"]);
    let line = assert_one_line_error(&run_as_rank(&scratch, 0, 4, free_port(), &args));
    assert!(!line.contains("more than half"), "{line}");
    if cfg!(a3g_c10d) {
        assert!(line.contains("not all 4 ranks joined within 1 s"), "{line}");
    }
}

/// Runs one rank of a world whose other ranks are not started (rank `rank` of
/// `world_size`, its store at 127.0.0.1:`port`) with --sync-timeout 3; returns its
/// one error line and how long it ran.
fn lone_rank(rank: usize, world_size: usize, port: u16, extra: &[&str]) -> (String, Duration) {
    let scratch = Scratch::new("lone-rank");
    let args = small_cartpole(
        &[&["--max-time", "60", "--sync-interval", "1", "--sync-timeout", "3"], extra].concat(),
    );
    let started = Instant::now();
    let run = run_as_rank(&scratch, rank, world_size, port, &args);
    (assert_one_line_error(&run), started.elapsed())
}

/// A rank whose MASTER_PORT reaches something that is not rank 0's store (a
/// listener that accepts and never answers, as a web server waiting for a request
/// does), or nothing at all, fails within --sync-timeout on one line naming the
/// address and what to check; c10d's own log and stack frames stay off stderr.
#[test]
#[cfg_attr(not(a3g_c10d), ignore = "this build has no c10d (no gloo headers at set-up)")]
fn a_wrong_port_fails_within_the_timeout_on_one_line() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    // Accepts every connection and holds it open without a word.
    std::thread::spawn(move || {
        let held: Vec<_> = listener.incoming().map_while(Result::ok).collect();
        drop(held);
    });
    let (line, took) = lone_rank(1, 2, port, &[]);
    assert!(took < Duration::from_secs(10), "{took:?}: {line}");
    assert!(
        line.contains(&format!("127.0.0.1:{port}"))
            && line.contains("did not answer as rank 0's c10d store"),
        "{line}"
    );
    assert!(line.contains("MASTER_PORT"), "{line}");

    let (line, took) = lone_rank(1, 2, free_port(), &[]);
    assert!(took < Duration::from_secs(10), "{took:?}: {line}");
    assert!(
        line.contains("no store listened at 127.0.0.1:") && line.contains("start rank 0"),
        "{line}"
    );
}

/// Ranks of a world that never fills (WORLD_SIZE 3, two ranks started) each end
/// within --sync-timeout on one line saying that not every rank came, and so does a
/// rank whose rank 0 failed at start (its --load finds no checkpoint).
#[test]
#[cfg_attr(not(a3g_c10d), ignore = "this build has no c10d (no gloo headers at set-up)")]
fn a_partial_world_fails_within_the_timeout_on_one_line() {
    let port = free_port();
    let ranks: Vec<_> =
        (0..2).map(|rank| std::thread::spawn(move || lone_rank(rank, 3, port, &[]))).collect();
    for rank in ranks {
        let (line, took) = rank.join().unwrap();
        assert!(took < Duration::from_secs(10), "{took:?}: {line}");
        // Rank 0 gives up first when it started first, closing the store under rank 1.
        assert!(
            line.contains("not all 3 ranks joined within 3 s")
                || line.contains("closed before all 3 ranks joined"),
            "{line}"
        );
    }

    let port = free_port();
    let rank0 = std::thread::spawn(move || lone_rank(0, 2, port, &["--load"]));
    let (line, took) = lone_rank(1, 2, port, &[]);
    assert!(took < Duration::from_secs(10), "{took:?}: {line}");
    assert!(line.contains("rank 1 of 2: could not join the other ranks"), "{line}");
    let (line, _) = rank0.join().unwrap();
    assert!(line.contains("no checkpoint for CartPole-v1"), "{line}");
}

/// A rank started on the port of a running world (a second run's rank 1, whose own
/// rank 0 failed on the taken port) is refused at once on one line, and the running
/// world goes on to its end undisturbed.
#[test]
#[cfg_attr(not(a3g_c10d), ignore = "this build has no c10d (no gloo headers at set-up)")]
fn a_rank_never_joins_another_runs_world() {
    let scratches = [Scratch::new("first-world0"), Scratch::new("first-world1")];
    let port = free_port();
    let args =
        small_cartpole(&["--max-time", "12", "--sync-interval", "0.2", "--sync-timeout", "8"]);
    let mut ranks: Vec<Child> =
        (0..2).map(|rank| start_rank(&scratches[rank], rank, port, &args)).collect();
    let mut outputs: Vec<Lines> = ranks.iter_mut().map(Lines::stdout).collect();
    for output in &mut outputs {
        output.wait_for("steps/s");
    }
    let (line, took) = lone_rank(1, 2, port, &[]);
    // The message, not the time, tells a refusal from the 3 s timeout (which says that
    // not every rank came); the bound only keeps a loaded machine's start-up in.
    assert!(took < Duration::from_secs(10), "{took:?}: {line}");
    assert!(
        line.contains("rank 1 has already joined the world whose store is at 127.0.0.1:"),
        "{line}"
    );
    for child in &mut ranks {
        assert!(wait_within(child, Duration::from_secs(60), "the first world").success());
    }
    assert!(outputs.remove(1).all().contains("reached --max-time"));
}

/// A rank beside one that resumed a checkpoint far into a run counts its rates from
/// where the run started: its first status line does not take the resumed steps for
/// steps made in that interval.
#[test]
#[cfg_attr(not(a3g_c10d), ignore = "this build has no c10d (no gloo headers at set-up)")]
fn rates_count_from_where_each_rank_started() {
    let scratches = [Scratch::new("resumed-rates0"), Scratch::new("resumed-rates1")];
    let first = scratches[0].a3g_owned(&small_cartpole(&["--max-steps", "300"]));
    assert!(first.status.success(), "{}", first.stderr);
    let resumed_steps = 40_000_000u64;
    edit_sidecar(&scratches[0], "CartPole-v1", |json| {
        json["counters"]["agent_steps"] = resumed_steps.into();
    });
    let port = free_port();
    let mut ranks: Vec<Child> = (0..2)
        .map(|rank| {
            let load: &[&str] = if rank == 0 { &["--load"] } else { &[] };
            let args = small_cartpole(
                &[&["--max-time", "4", "--status-interval", "0.5", "--sync-interval", "0.2"], load]
                    .concat(),
            );
            start_rank(&scratches[rank], rank, port, &args)
        })
        .collect();
    let outputs: Vec<Lines> = ranks.iter_mut().map(Lines::stdout).collect();
    for child in &mut ranks {
        assert!(wait_within(child, Duration::from_secs(60), "a rank").success());
    }
    for output in outputs {
        let stdout = output.all();
        let rates: Vec<f64> = stdout
            .lines()
            .filter_map(|line| line.split(" steps/s").next()?.rsplit(", ").next()?.parse().ok())
            .collect();
        assert!(!rates.is_empty(), "{stdout}");
        // One CartPole worker makes thousands of steps a second, not millions.
        assert!(rates.iter().all(|&rate| rate < 1_000_000.0), "{stdout}");
    }
}

/// A checkpoint rank 0 resumes that has already trained --max-steps ends every rank
/// at once, with nothing written: under `--resume auto` as done (exit 0), under
/// `--load` with rank 0's one line asking for a larger budget, rank 1 saying what
/// rank 0's model holds either way.
#[test]
#[cfg_attr(not(a3g_c10d), ignore = "this build has no c10d (no gloo headers at set-up)")]
fn a_spent_step_budget_ends_every_rank() {
    let scratches = [Scratch::new("spent-ranks0"), Scratch::new("spent-ranks1")];
    let first = scratches[0].a3g_owned(&small_cartpole(&["--max-steps", "300"]));
    assert!(first.status.success(), "{}", first.stderr);
    let sidecar = scratches[0].path("trained_models/CartPole-v1.json");
    let saved = saved_agent_steps(&sidecar).to_string();
    let before = std::fs::read(&sidecar).unwrap();
    for rank_zero_flag in ["--resume auto", "--load"] {
        let port = free_port();
        let mut ranks: Vec<Child> = (0..2)
            .map(|rank| {
                let resume: Vec<&str> = match rank {
                    0 => rank_zero_flag.split(' ').collect(),
                    _ => Vec::new(),
                };
                let args = small_cartpole(
                    &[&["--max-steps", &saved, "--sync-timeout", "20"], &resume[..]].concat(),
                );
                start_rank(&scratches[rank], rank, port, &args)
            })
            .collect();
        let outputs: Vec<(Lines, Lines)> =
            ranks.iter_mut().map(|child| (Lines::stdout(child), Lines::stderr(child))).collect();
        let statuses: Vec<_> = ranks
            .iter_mut()
            .map(|child| wait_within(child, Duration::from_secs(60), "a rank"))
            .collect();
        let texts: Vec<(String, String)> =
            outputs.into_iter().map(|(stdout, stderr)| (stdout.all(), stderr.all())).collect();
        assert!(statuses[1].success(), "{rank_zero_flag}: {:?}", texts[1]);
        assert!(
            texts[1].0.contains("rank 0's model has trained"),
            "{rank_zero_flag}: {:?}",
            texts[1]
        );
        if rank_zero_flag == "--load" {
            assert!(!statuses[0].success(), "{:?}", texts[0]);
            assert!(texts[0].1.contains("pass a larger --max-steps"), "{:?}", texts[0]);
        } else {
            assert!(statuses[0].success(), "{:?}", texts[0]);
            assert!(texts[0].0.contains("nothing is left to train"), "{:?}", texts[0]);
        }
        assert!(
            std::fs::read(&sidecar).unwrap() == before,
            "{rank_zero_flag}: the checkpoint changed"
        );
        assert!(!scratches[1].path("trained_models").exists());
    }
}

/// A rank whose WORLD_SIZE differs from rank 0's is refused at once on one line
/// naming both sizes, before Gloo's set-up could complete for some ranks and not
/// others; rank 0, whose world never fills, ends within its timeout.
#[test]
#[cfg_attr(not(a3g_c10d), ignore = "this build has no c10d (no gloo headers at set-up)")]
fn a_rank_of_another_world_size_is_refused_at_once() {
    let port = free_port();
    let rank0 = std::thread::spawn(move || lone_rank(0, 2, port, &[]));
    std::thread::sleep(Duration::from_millis(700));
    let (line, took) = lone_rank(1, 3, port, &[]);
    // The message, not the time, tells a refusal from the 3 s timeout; the bound only
    // keeps a loaded machine's start-up in.
    assert!(took < Duration::from_secs(10), "{took:?}: {line}");
    assert!(
        line.contains("this rank's WORLD_SIZE is 3 and rank 0's") && line.contains("is 2"),
        "{line}"
    );
    let (line, took) = rank0.join().unwrap();
    assert!(took < Duration::from_secs(10), "{took:?}: {line}");
    assert!(line.contains("not all 2 ranks joined"), "{line}");
}

/// A run kept to loopback (MASTER_ADDR 127.0.0.1) serves its store on 127.0.0.1
/// alone, not on every interface, where other machines could reach it.
#[test]
#[cfg_attr(not(a3g_c10d), ignore = "this build has no c10d (no gloo headers at set-up)")]
fn a_loopback_store_listens_on_loopback_only() {
    let scratch = Scratch::new("loopback-store");
    let port = free_port();
    let mut rank0 = start_rank(
        &scratch,
        0,
        port,
        &small_cartpole(&["--max-time", "30", "--sync-interval", "1", "--sync-timeout", "8"]),
    );
    // /proc/net/tcp{,6} list sockets as hex address:port, state 0A for listening.
    let suffix = format!(":{port:04X}");
    let listening = || -> Vec<String> {
        ["/proc/net/tcp", "/proc/net/tcp6"]
            .iter()
            .flat_map(|table| {
                std::fs::read_to_string(table)
                    .unwrap_or_default()
                    .lines()
                    .map(str::to_string)
                    .collect::<Vec<_>>()
            })
            .filter_map(|line| {
                let fields: Vec<&str> = line.split_whitespace().collect();
                (fields.len() > 3 && fields[1].ends_with(&suffix) && fields[3] == "0A")
                    .then(|| fields[1].to_string())
            })
            .collect()
    };
    let waited = Instant::now();
    let mut sockets = listening();
    while sockets.is_empty() && waited.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(50));
        sockets = listening();
    }
    let _ = rank0.kill();
    let _ = rank0.wait();
    assert_eq!(sockets, vec![format!("0100007F{suffix}")], "the store's listening sockets");
}

/// Every rank of a resumed run starts with one command, the model's flags left out:
/// rank 0's checkpoint (32 hidden units, not the flags' default) sizes every rank's
/// model, and the ranks train on from it to the step budget.
#[test]
#[cfg_attr(not(a3g_c10d), ignore = "this build has no c10d (no gloo headers at set-up)")]
fn every_rank_resumes_with_one_command() {
    let scratches = [Scratch::new("one-command0"), Scratch::new("one-command1")];
    let first = scratches[0].a3g_owned(&cartpole(&[
        "--workers",
        "1",
        "--hidden-size",
        "32",
        "--max-steps",
        "300",
    ]));
    assert!(first.status.success(), "{}", first.stderr);
    let sidecar = scratches[0].path("trained_models/CartPole-v1.json");
    let resumed_from = saved_agent_steps(&sidecar);
    let budget = (resumed_from + 2000).to_string();
    let port = free_port();
    let args = cartpole(&[
        "--workers",
        "1",
        "--load",
        "--max-steps",
        &budget,
        "--sync-interval",
        "0.2",
        "--sync-timeout",
        "30",
    ]);
    let mut ranks: Vec<Child> =
        (0..2).map(|rank| start_rank(&scratches[rank], rank, port, &args)).collect();
    let errors: Vec<Lines> = ranks.iter_mut().map(Lines::stderr).collect();
    // Read, or a pipe full of test games' lines would stop the rank writing them.
    let _outputs: Vec<Lines> = ranks.iter_mut().map(Lines::stdout).collect();
    let statuses: Vec<_> = ranks
        .iter_mut()
        .map(|child| wait_within(child, Duration::from_secs(90), "a rank"))
        .collect();
    for (status, stderr) in statuses.iter().zip(errors) {
        assert!(status.success(), "{}", stderr.all());
    }
    assert!(saved_agent_steps(&sidecar) >= resumed_from + 2000);
    assert_eq!(sidecar_json(&scratches[0], "CartPole-v1")["model"]["hidden_size"], 32);
}
