//! Training across machines, as two processes on one machine talking over 127.0.0.1
//! only: the ranks train one model, a rank with other settings is refused, a rank
//! that dies stops the other. In a build without the engine (no gloo headers), a
//! launched a3g is refused on one line instead.

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::util::{
    assert_one_line_error, pytorch_path, saved_agent_steps, signal, small_cartpole, Lines, Scratch,
};

/// A port free on 127.0.0.1 a moment ago.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|listener| listener.local_addr()).unwrap().port()
}

/// The variables torchrun sets for rank `rank` of two, with rank 0 on 127.0.0.1.
fn launched_as(rank: usize, port: u16) -> Vec<(&'static str, String)> {
    vec![
        ("RANK", rank.to_string()),
        ("WORLD_SIZE", "2".into()),
        ("LOCAL_RANK", rank.to_string()),
        ("MASTER_ADDR", "127.0.0.1".into()),
        ("MASTER_PORT", port.to_string()),
    ]
}

fn start_rank(scratch: &Scratch, rank: usize, port: u16, args: &[String]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_a3g"))
        .args(args)
        .current_dir(scratch.path(""))
        .env_remove("RUST_BACKTRACE")
        .envs(launched_as(rank, port))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the a3g binary")
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

/// Two ranks of one CartPole worker each train one model: every sync checks that
/// they agreed on the same weights, --max-steps counts both ranks' steps, rank 0
/// alone writes the checkpoint (with the summed counters) and the game log, and both
/// end cleanly.
#[test]
fn two_ranks_train_one_model() {
    let scratches = [Scratch::new("rank0"), Scratch::new("rank1")];
    let port = free_port();
    let args =
        small_cartpole(&["--max-steps", "4000", "--sync-interval", "0.2", "--sync-timeout", "30"]);
    if !cfg!(a3g_c10d) {
        let run = scratches[0].a3g_with_env(
            &args.iter().map(String::as_str).collect::<Vec<_>>(),
            &launched_as(0, port)
                .iter()
                .map(|(name, value)| (*name, value.as_str()))
                .collect::<Vec<_>>(),
        );
        let line = assert_one_line_error(&run);
        assert!(line.contains("built without training across machines"), "{line}");
        return;
    }
    let mut ranks: Vec<Child> =
        (0..2).map(|rank| start_rank(&scratches[rank], rank, port, &args)).collect();
    let outputs: Vec<(Lines, Lines)> =
        ranks.iter_mut().map(|child| (Lines::stdout(child), Lines::stderr(child))).collect();
    let statuses: Vec<_> = ranks
        .iter_mut()
        .map(|child| wait_within(child, Duration::from_secs(90), "a rank"))
        .collect();
    let outputs: Vec<(String, String)> =
        outputs.into_iter().map(|(out, err)| (out.all(), err.all())).collect();
    for (status, (stdout, stderr)) in statuses.iter().zip(&outputs) {
        assert!(status.success(), "{stdout}\n{stderr}");
    }
    assert!(outputs[0].0.contains("reached --max-steps"), "{}", outputs[0].0);
    assert!(outputs[1].0.contains("over all ranks"), "{}", outputs[1].0);
    let saved = saved_agent_steps(&scratches[0].path("trained_models/CartPole-v1.json"));
    assert!(saved >= 4000, "{saved}");
    assert!(scratches[0].path("logs/CartPole-v1_log").exists());
    assert!(!scratches[1].path("trained_models").exists(), "rank 1 wrote a checkpoint");
    assert!(!scratches[1].path("logs").exists(), "rank 1 wrote a game log");
}

/// A rank started with another learning rate, or another --sync-merge, than rank 0's
/// is refused, and so is rank 0: each prints one line naming the setting and both
/// values.
#[test]
#[cfg_attr(not(a3g_c10d), ignore = "this build has no c10d (no gloo headers at set-up)")]
fn a_rank_with_other_settings_is_refused() {
    for (flag, setting, values) in
        [("--lr", "lr", ["0.001", "0.002"]), ("--sync-merge", "sync merge", ["sum", "mean"])]
    {
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

/// PyTorch's own launcher starts the ranks: `torch.distributed.run --standalone` (the
/// torch the set-up installed) with a3g as the program, its agent serving the store
/// on 127.0.0.1, and the two ranks train to --max-steps.
#[test]
#[cfg_attr(not(a3g_c10d), ignore = "this build has no c10d (no gloo headers at set-up)")]
fn torchrun_launches_the_ranks() {
    let scratch = Scratch::new("torchrun");
    let train = small_cartpole(&["--max-steps", "2000", "--sync-interval", "0.2"]);
    let output = Command::new("python3")
        .args([
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc-per-node",
            "2",
            "--local-addr",
            "127.0.0.1",
            "--no-python",
            env!("CARGO_BIN_EXE_a3g"),
        ])
        .args(&train)
        .current_dir(scratch.path(""))
        .env("PYTHONPATH", pytorch_path())
        .env_remove("RUST_BACKTRACE")
        .output()
        .unwrap_or_else(|error| panic!("cannot run python3 ({error}); this test needs Python 3"));
    let (stdout, stderr) =
        (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "{stdout}\n{stderr}");
    assert_eq!(stdout.matches("over all ranks").count(), 1, "{stdout}");
    let saved = saved_agent_steps(&scratch.path("trained_models/CartPole-v1.json"));
    assert!(saved >= 2000, "{saved}");
}

/// A world of one rank is a run on one machine, in a build with the engine or
/// without: no rendezvous, and the run trains and writes its checkpoint as always.
#[test]
fn a_world_of_one_runs_without_the_engine() {
    let scratch = Scratch::new("world-of-one");
    let port = free_port();
    let vars = [
        ("RANK", "0"),
        ("WORLD_SIZE", "1"),
        ("MASTER_ADDR", "127.0.0.1"),
        ("MASTER_PORT", &port.to_string()),
    ];
    let args = small_cartpole(&["--max-steps", "500"]);
    let run = scratch.a3g_with_env(&args.iter().map(String::as_str).collect::<Vec<_>>(), &vars);
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
    let port = free_port().to_string();
    let vars =
        [("RANK", "0"), ("WORLD_SIZE", "2"), ("MASTER_ADDR", "127.0.0.1"), ("MASTER_PORT", &port)];
    let run = |extra: &[&str]| {
        let args = small_cartpole(extra);
        scratch.a3g_with_env(&args.iter().map(String::as_str).collect::<Vec<_>>(), &vars)
    };
    let line = assert_one_line_error(&run(&["--sync-interval", "40", "--sync-timeout", "60"]));
    assert!(line.contains("--sync-interval 40 is more than half of --sync-timeout 60"), "{line}");
}
