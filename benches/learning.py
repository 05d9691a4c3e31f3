"""Learning side by side: a3g, rl_a3c_pytorch and ikostrikov/pytorch-a3c each train the
same game from scratch for the same wall time, one after the other, on the same machine.

Each run leaves OUT/<side>.log, a game log `a3g plot` reads: test games on the run's
clock and status lines giving agent steps, so that the curves against wall time and
against agent steps are drawn the same way for all three (OUT/learning.png).

- a3g's log is its own (logs/<env>_log): test games and status lines as it wrote them.
- The Python trainers run unmodified through the gym stand-in in benches/reference_gym.
  Their agent steps are counted by their training processes' environments (the
  stand-in's step counters), not read from their output, and written as a status line
  every --status-interval seconds. Their test games are read from their output as they
  come (rl_a3c_pytorch's logs/<env>_log, pytorch-a3c's stdout) and stamped with the
  run's clock on arrival, within a second. Both are started in a process group of their
  own, stopped with SIGTERM (then SIGKILL) at the end: neither ends on Ctrl-C.
- The three test agents keep their own cadences: the Python ones rest 60 s after each
  game, a3g's takes a tenth of a core on Atari (--test-share 0.1).

Run through benches/learning.sh, which installs the Python trainers and their packages
and builds a3g; `--help` lists the options.
"""

import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

from against_reference import (
    counted_steps,
    cpu_model,
    load_average,
    stand_in_environment,
    stop_group,
    tail,
)

SIDES = ("a3g", "rl_a3c_pytorch", "pytorch-a3c")
# What finds Pong's best settings on two cores (docs/benchmarks.md, "Pong learned on two
# cores"); --a3g-flags replaces it.
A3G_FLAGS = (
    "--model universe --trainer ga3c --workers 32 --train-batch 8 --predict-min-batch 8 "
    "--predict-timeout-us 2000 --lr 3e-4"
)
GAME = re.compile(r"episode reward (-?[0-9.]+), episode length ([0-9]+)")
GAME_LINE = re.compile(r"Time ([0-9]+)h ([0-9]+)m ([0-9]+)s, " + GAME.pattern)
STATUS_LINE = re.compile(r"^\[([0-9]+)h ([0-9]+)m ([0-9]+)s\] agent steps ([0-9]+)")


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("minutes", type=float, help="wall time of each run")
    parser.add_argument("out", type=Path, help="folder for the logs and the plot (made new)")
    parser.add_argument(
        "--sides",
        nargs="*",
        choices=SIDES,
        default=list(SIDES),
        help="which to run, in order (none: only report on --include's logs)",
    )
    parser.add_argument("--env", default="PongDeterministic-v4")
    parser.add_argument(
        "--workers",
        type=int,
        default=2,
        help="training processes of the Python trainers (default 2, one per core here)",
    )
    parser.add_argument("--a3g-flags", default=A3G_FLAGS, help=f"default: {A3G_FLAGS}")
    parser.add_argument(
        "--milestone",
        type=float,
        default=18,
        help="report when a test game first scores at least this (default 18)",
    )
    parser.add_argument("--status-interval", type=float, default=30)
    parser.add_argument(
        "--include",
        type=Path,
        action="append",
        default=[],
        metavar="LOG",
        help="an earlier run's <side>.log to put in the table and the plot (repeatable)",
    )
    parser.add_argument("--reference", type=Path, required=True, help="rl_a3c_pytorch's folder")
    parser.add_argument("--ikostrikov", type=Path, required=True, help="pytorch-a3c's folder")
    parser.add_argument(
        "--python-path", required=True, help="PYTHONPATH for the trainers' packages and torch"
    )
    parser.add_argument("--a3g", type=Path, required=True, help="the a3g binary")
    args = parser.parse_args()
    if not args.sides and not args.include:
        parser.error("nothing to run or report: give --sides or --include")
    if args.minutes <= 0:
        parser.error("minutes must be positive")
    for log in args.include:
        if not log.is_file():
            parser.error(f"--include {log}: no such file")
    if args.out.exists():
        parser.error(f"{args.out} exists; give a new folder, so that no earlier run is lost")
    # Each trainer runs in a folder of its own inside OUT, so paths given to it are absolute.
    args.a3g, args.reference, args.ikostrikov, args.out = (
        path.resolve() for path in (args.a3g, args.reference, args.ikostrikov, args.out)
    )
    args.python_path = ":".join(str(Path(entry).resolve()) for entry in args.python_path.split(":"))
    return args


def clock(seconds):
    seconds = int(seconds)
    return f"{seconds // 3600:02}h {seconds // 60 % 60:02}m {seconds % 60:02}s"


def read_log(path):
    """(games as (seconds, reward), status as (seconds, agent steps)) of a game log."""
    games, status = [], []
    for line in Path(path).read_text(errors="replace").splitlines():
        game, steps = GAME_LINE.search(line), STATUS_LINE.match(line)
        if game:
            games.append((clock_seconds(game), float(game[4])))
        elif steps:
            status.append((clock_seconds(steps), int(steps[4])))
    return games, status


def clock_seconds(match):
    """Seconds of a match whose first three groups are a clock's hours, minutes, seconds."""
    hours, minutes, seconds = (int(group) for group in match.groups()[:3])
    return hours * 3600 + minutes * 60 + seconds


def summary(path, milestone):
    games, status = read_log(path)
    steps, seconds = (status[-1][1], status[-1][0]) if status else (0, 0)
    rate = f"{steps / seconds:,.0f}" if seconds else "-"
    if not games:
        return {"games": 0, "steps": steps, "rate": rate}
    means = [
        sum(r for _, r in games[max(0, i - 99) : i + 1]) / min(i + 1, 100)
        for i in range(len(games))
    ]
    best_at, best = max(games, key=lambda game: (game[1], -game[0]))
    reached = next((t for t, r in games if r >= milestone), None)
    return {
        "games": len(games),
        "steps": steps,
        "rate": rate,
        "best": f"{best:g} at {clock(best_at)}",
        "milestone": clock(reached) if reached is not None else "not reached",
        "final mean": f"{means[-1]:.2f}",
        "best mean": f"{max(means[min(len(means), 10) - 1 :]):.2f}",
        # Where the run ended up: the 100-game mean still holds its first games.
        "last 10": f"{sum(r for _, r in games[-10:]) / len(games[-10:]):.1f}",
    }


def progress(side, started, path):
    games, status = read_log(path)
    steps = status[-1][1] if status else 0
    best = f", best {max(r for _, r in games):g}, last {games[-1][1]:g}" if games else ""
    print(
        f"  {side} {clock(time.monotonic() - started)}: {steps:,} agent steps, "
        f"{len(games)} test games{best}",
        flush=True,
    )


def run_a3g(args, run, log):
    command = [
        str(args.a3g), "train", "--env", args.env, "--max-time", f"{args.minutes * 60:.0f}s",
        "--status-interval", f"{args.status_interval:g}",
        "--save-model-dir", str(run / "models"), "--log-dir", str(run / "logs"),
    ] + shlex.split(args.a3g_flags)  # fmt: skip
    own_log = run / "logs" / f"{args.env}_log"
    started = time.monotonic()
    with open(run / "output.txt", "w") as output:
        process = subprocess.Popen(
            command, cwd=run, stdout=output, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        # --max-time ends it; a final checkpoint takes seconds, a stuck run is stopped.
        while process.poll() is None and time.monotonic() < started + args.minutes * 60 + 120:
            time.sleep(min(60, args.minutes * 60))
            if own_log.exists():
                progress("a3g", started, own_log)
    finally:
        if process.poll() is None:
            stop_group(process, grace=60)
    if process.returncode != 0 or not own_log.exists():
        sys.exit(f"a3g failed (exit status {process.returncode}):\n{tail(run / 'output.txt')}")
    shutil.copyfile(own_log, log)


def run_python(side, args, run, log):
    counters = run / "steps"
    for folder in (counters, run / "logs", run / "models"):
        folder.mkdir()
    if side == "rl_a3c_pytorch":
        command = [
            sys.executable, str(args.reference / "main.py"), "--env", args.env,
            "--workers", str(args.workers), "--env-config", str(args.reference / "config.json"),
            "--log-dir", f"{run / 'logs'}/", "--save-model-dir", f"{run / 'models'}/",
        ]  # fmt: skip
        games_source = run / "logs" / f"{args.env}_log"
    else:
        command = [
            sys.executable, str(args.ikostrikov / "main.py"), "--env-name", args.env,
            "--num-processes", str(args.workers),
        ]  # fmt: skip
        games_source = run / "output.txt"
    env = stand_in_environment(args.python_path, counters)
    # pytorch-a3c sets it only after torch is imported, too late to take effect.
    env["OMP_NUM_THREADS"] = "1"

    def write_status(out, elapsed):
        steps = counted_steps(counters).get("train", 0)
        out.write(f"[{clock(elapsed)}] agent steps {steps}, {steps / elapsed:.0f} steps/s\n")

    started = time.monotonic()
    with open(run / "output.txt", "w") as output:
        process = subprocess.Popen(
            command, cwd=run, env=env, stdout=output, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    read_to, pending, next_status, next_progress = 0, "", args.status_interval, 60
    try:
        with open(log, "w") as out:
            out.write(f'env: "{args.env}"\ntrainer: "{side}, {shlex.join(command[2:])}"\n')
            while (elapsed := time.monotonic() - started) < args.minutes * 60:
                if process.poll() is not None:
                    sys.exit(
                        f"{side} ended early (exit status {process.returncode}):\n"
                        f"{tail(run / 'output.txt')}"
                    )
                if games_source.exists():
                    with open(games_source, errors="replace") as source:
                        source.seek(read_to)
                        text = source.read()
                        read_to = source.tell()
                    *lines, pending = (pending + text).split("\n")
                    for line in lines:
                        if game := GAME.search(line):
                            reward, length = game.groups()
                            out.write(
                                f"Time {clock(elapsed)}, episode reward {float(reward):g}, "
                                f"episode length {length}\n"
                            )
                if elapsed >= next_status:
                    write_status(out, elapsed)
                    next_status += args.status_interval
                out.flush()
                if elapsed >= next_progress:
                    progress(side, started, log)
                    next_progress += 60
                time.sleep(1)
            write_status(out, elapsed)
    finally:
        stop_group(process, grace=10)


def main():
    args = parse_args()
    args.out.mkdir(parents=True)
    print(
        f"{args.env}, {args.minutes:g} min each: {', '.join(args.sides)}; "
        f"{os.cpu_count()} cores ({cpu_model()}); load average {load_average()}; "
        f"a3g flags: {args.a3g_flags}",
        flush=True,
    )
    logs = []
    for included in args.include:
        logs.append(args.out / included.name)
        shutil.copyfile(included, logs[-1])
    for side in args.sides:
        run, log = args.out / f"{side}-run", args.out / f"{side}.log"
        run.mkdir()
        print(f"{side}: started {time.strftime('%H:%M:%S')}", flush=True)
        if side == "a3g":
            run_a3g(args, run, log)
        else:
            run_python(side, args, run, log)
        logs.append(log)
        result = summary(log, args.milestone)
        print(f"{side}: {result}; load average {load_average()}", flush=True)
    print()
    print(
        f"| trainer | agent steps | agent steps/s | test games | best game | "
        f"first game of {args.milestone:g}+ | best 100-game mean | final 100-game mean "
        "| mean of the last 10 games |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for log in logs:
        side, result = log.stem, summary(log, args.milestone)
        cells = [f"{result['steps']:,}", result["rate"], str(result["games"])] + [
            result.get(key, "-")
            for key in ("best", "milestone", "best mean", "final mean", "last 10")
        ]
        print(f"| {side} | {' | '.join(cells)} |")
    plot = args.out / "learning.png"
    subprocess.run(
        # Run beside the logs: the curves are labelled by the names given.
        [str(args.a3g), "plot", *(log.name for log in logs), "-o", plot.name,
         "--title", f"{args.env}, {args.minutes:g} min each, {os.cpu_count()} cores"],
        check=True, cwd=args.out,
    )  # fmt: skip


if __name__ == "__main__":
    main()
