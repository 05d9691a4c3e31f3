"""Training speed, a3g against rl_a3c_pytorch in the same run: both train
PongDeterministic-v4 with the same number of workers, one after the other, alternating,
and each is measured over the same steady window (after a warm-up) of its run.

- The reference runs its own main.py, unmodified, through the gym stand-in in
  benches/reference_gym. Its agent steps are counted by its environments (each process
  keeps its count in a file the stand-in updates at every step); its log is not read.
  Only training processes' steps count, as in a3g's status line, not the test agent's.
  It is started in a process group of its own, which is stopped with SIGTERM (then
  SIGKILL): it ignores Ctrl-C.
- a3g's agent steps come from its status lines, each timed as it arrives.
- CPU shares (of one core, so two busy cores make 200%) come from /proc: per process
  for the reference, per thread for a3g, over the same window. The test agent's share
  is a3g's `test agent` thread and the reference's "Test Agent" process.
- Agent steps per CPU-second (of all the run's processes or threads) are printed too:
  where other work shares the machine, each run gets what cores it can, and this figure
  separates a trainer's own cost per step from the share of the machine it got.

Run through benches/against_reference.sh, which installs the reference and its Python
packages and builds a3g; `--help` lists the options.
"""

import argparse
import glob
import os
import re
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
STATUS = re.compile(r"agent steps (\d+),.*ms per update: (.*)$")


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "seconds", nargs="?", type=float, default=300, help="length of each run (default 300)"
    )
    parser.add_argument(
        "workers", nargs="?", type=int, default=2, help="workers of both trainers (default 2)"
    )
    parser.add_argument(
        "rounds",
        nargs="?",
        type=int,
        default=2,
        help="reference, then a3g, this many times (default 2)",
    )
    parser.add_argument(
        "--warm-up",
        type=float,
        default=30,
        help="seconds left out at the start of each run (default 30)",
    )
    parser.add_argument("--env", default="PongDeterministic-v4")
    parser.add_argument("--only", choices=["reference", "a3g"], help="run one side only")
    parser.add_argument(
        "--reference", type=Path, required=True, help="folder holding rl_a3c_pytorch's main.py"
    )
    parser.add_argument(
        "--python-path", required=True, help="PYTHONPATH for the reference's packages and torch"
    )
    parser.add_argument("--a3g", type=Path, required=True, help="the a3g binary")
    args = parser.parse_args()
    args.a3g, args.reference = args.a3g.resolve(), args.reference.resolve()
    if "NoFrameskip" in args.env:
        # The stand-in counts environment steps; the reference's max-and-skip wrapper
        # makes --skip-rate of them per agent step on these ids.
        parser.error(
            "NoFrameskip ids are not supported: the reference's steps would be counted as frames"
        )
    if args.seconds <= args.warm_up + 10:
        parser.error(
            f"runs of {args.seconds:g} s leave no window after the {args.warm_up:g} s warm-up"
        )
    return args


def cpu_model():
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown CPU"


def load_average():
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def stat_fields(path):
    """The fields of a /proc stat file after the command name, and that name."""
    text = Path(path).read_text()
    name = text[text.index("(") + 1 : text.rindex(")")]
    return name, text[text.rindex(")") + 2 :].split()


def cpu_seconds(fields):
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime + stime


def group_processes(group):
    """{pid: (role, cpu seconds)} for the live processes of a process group."""
    found = {}
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            _, fields = stat_fields(stat)
            if int(fields[2]) != group or fields[0] == "Z":
                continue
            title = (
                Path(stat)
                .with_name("cmdline")
                .read_bytes()
                .split(b"\0")[0]
                .decode(errors="replace")
            )
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile
        role = (
            "train"
            if title.startswith("Train Agent")
            else "test" if title.startswith("Test Agent") else "main"
        )
        found[int(Path(stat).parent.name)] = (role, cpu_seconds(fields))
    return found


def process_threads(pid):
    """{tid: (thread name, cpu seconds)} for the threads of one process."""
    found = {}
    for stat in glob.glob(f"/proc/{pid}/task/[0-9]*/stat"):
        try:
            name, fields = stat_fields(stat)
        except (OSError, ValueError):
            continue
        found[int(Path(stat).parent.name)] = (name, cpu_seconds(fields))
    return found


def cpu_by_name(before, after, name_of):
    """CPU seconds spent between two samples, summed by name_of(label)."""
    spent = {}
    for key, (label, seconds) in after.items():
        start = before[key][1] if key in before else 0.0
        spent[name_of(label)] = spent.get(name_of(label), 0.0) + seconds - start
    return spent


def stop_group(process, grace):
    """SIGTERM to the process group, then SIGKILL to whatever is left after `grace` s."""
    group = process.pid  # started with start_new_session: its pid is its group's id
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 10)):
        try:
            os.killpg(group, sig)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            process.poll()
            if not group_processes(group):
                process.wait()
                return sig
            time.sleep(0.2)
    raise RuntimeError(f"process group {group} survived SIGKILL")


def sleep_until(moment, process, log):
    while time.monotonic() < moment:
        if process.poll() is not None:
            sys.exit(
                f"the run ended early (exit status {process.returncode}); its output:\n{tail(log)}"
            )
        time.sleep(min(1.0, max(0.0, moment - time.monotonic())))


def tail(path, lines=30):
    return "\n".join(Path(path).read_text(errors="replace").splitlines()[-lines:])


def share(seconds, window):
    return f"{100 * seconds / window:.0f}%"


def stand_in_environment(python_path, counters):
    """The environment a Python trainer runs in: the gym stand-in first on its path,
    counting agent steps into the folder `counters`."""
    return dict(
        os.environ,
        PYTHONPATH=f"{HERE / 'reference_gym'}:{python_path}",
        A3G_STEP_COUNTER_DIR=str(counters),
    )


def counted_steps(counters):
    """{role: agent steps} from the stand-in's counter files in the folder `counters`."""
    counts = {}
    for path in counters.glob("*.steps"):
        data = path.read_bytes()
        if len(data) == 8:  # else just created, not yet sized
            role = path.name.split("-")[0]
            counts[role] = counts.get(role, 0) + struct.unpack("<Q", data)[0]
    return counts


def run_reference(args, scratch):
    counters = scratch / "steps"
    for folder in (counters, scratch / "logs", scratch / "models"):
        folder.mkdir()
    env = stand_in_environment(args.python_path, counters)
    # fmt: off
    command = [
        sys.executable, str(args.reference / "main.py"),
        "--env", args.env, "--workers", str(args.workers),
        "--env-config", str(args.reference / "config.json"),
        "--log-dir", f"{scratch / 'logs'}/", "--save-model-dir", f"{scratch / 'models'}/",
    ]
    # fmt: on

    log = scratch / "reference.log"
    started = time.monotonic()
    with open(log, "w") as output:
        process = subprocess.Popen(
            command,
            cwd=scratch,
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        sleep_until(started + args.warm_up, process, log)
        t0, steps0, cpu0 = time.monotonic(), counted_steps(counters), group_processes(process.pid)
        if not steps0.get("train"):
            sys.exit(
                f"the reference took no training step in {args.warm_up:g} s; its output:\n{tail(log)}"
            )
        sleep_until(started + args.seconds, process, log)
        t1, steps1, cpu1 = time.monotonic(), counted_steps(counters), group_processes(process.pid)
    finally:
        stop_group(process, grace=10)
    window = t1 - t0
    trained = steps1.get("train", 0) - steps0.get("train", 0)
    cpu = cpu_by_name(cpu0, cpu1, lambda role: role)
    cpu["all"] = sum(cpu.values())
    per_cpu_second = trained / cpu["all"]
    cpu = {role: share(seconds, window) for role, seconds in cpu.items()}
    test_steps = steps1.get("test", 0) - steps0.get("test", 0)
    return {
        "rate": trained / window,
        "per_cpu_second": per_cpu_second,
        "detail": f"{trained:,} agent steps in {window:.0f} s; CPU, share of one core: "
        f"test agent {cpu.get('test', '0%')} ({test_steps:,} steps of its own), "
        f"{args.workers} training processes {cpu.get('train', '0%')}, "
        f"main {cpu.get('main', '0%')}, all {cpu['all']}",
    }


def run_a3g(args, scratch):
    # fmt: off
    command = [
        str(args.a3g), "train", "--env", args.env, "--workers", str(args.workers),
        "--status-interval", "5", "--max-time", f"{args.seconds + 120:.0f}s",
        "--save-model-dir", str(scratch / "models"), "--log-dir", str(scratch / "logs"),
    ]
    # fmt: on
    log = scratch / "a3g.log"
    lines = []  # (arrival time, agent steps, phases) of each status line

    def read(stream, output):
        for line in stream:
            output.write(line)
            match = STATUS.search(line)
            if match:
                lines.append((time.monotonic(), int(match[1]), match[2]))

    started = time.monotonic()
    with open(log, "w") as output:
        process = subprocess.Popen(
            command,
            cwd=scratch,
            stdout=subprocess.PIPE,
            stderr=output,
            text=True,
            start_new_session=True,
        )
        reader = threading.Thread(target=read, args=(process.stdout, output))
        reader.start()
        try:
            sleep_until(started + args.warm_up, process, log)
            t0, cpu0 = time.monotonic(), process_threads(process.pid)
            sleep_until(started + args.seconds, process, log)
            t1, cpu1 = time.monotonic(), process_threads(process.pid)
        finally:
            stop_group(process, grace=60)
            reader.join()
    window = [line for line in lines if t0 <= line[0] <= t1]
    if len(window) < 2:
        sys.exit(f"a3g printed fewer than two status lines in its window; its output:\n{tail(log)}")
    (first, steps0, _), (last, steps1, _) = window[0], window[-1]

    def thread_kind(name):
        return (
            "test" if name == "test agent" else "train" if name.startswith("training") else "other"
        )

    cpu = cpu_by_name(cpu0, cpu1, thread_kind)
    cpu["all"] = sum(cpu.values())
    rate = (steps1 - steps0) / (last - first)
    # The CPU window (t0..t1) and the status lines' window differ by a few seconds.
    per_cpu_second = rate * (t1 - t0) / cpu["all"]
    cpu = {kind: share(seconds, t1 - t0) for kind, seconds in cpu.items()}
    phases = mean_phases([phases for _, _, phases in window[1:]])
    return {
        "rate": rate,
        "per_cpu_second": per_cpu_second,
        "detail": f"{steps1 - steps0:,} agent steps in {last - first:.0f} s; CPU, share of one core: "
        f"test agent {cpu.get('test', '0%')}, training threads {cpu.get('train', '0%')}, "
        f"other threads {cpu.get('other', '0%')}, all {cpu['all']}; "
        f"ms per update over the window: {phases}",
    }


def mean_phases(lines):
    """The mean of status lines' "pull 1.27, rollout 84.92, ..." phases, in one such text."""
    sums = {}
    for line in lines:
        for phase in line.split(", "):
            name, milliseconds = phase.rsplit(" ", 1)
            sums[name] = sums.get(name, 0.0) + float(milliseconds)
    return ", ".join(f"{name} {total / len(lines):.1f}" for name, total in sums.items())


def main():
    args = parse_args()
    sides = [side for side in ("reference", "a3g") if args.only in (None, side)]
    print(
        f"{args.env}, --workers {args.workers}, {args.seconds:g} s runs, window after {args.warm_up:g} s; "
        f"{os.cpu_count()} cores ({cpu_model()}); load average {load_average()}",
        flush=True,
    )
    results = []
    for round in range(1, args.rounds + 1):
        for side in sides:
            load_before = load_average()
            with tempfile.TemporaryDirectory(prefix=f"a3g-bench-{side}-") as scratch:
                if side == "reference":
                    result = run_reference(args, Path(scratch))
                else:
                    result = run_a3g(args, Path(scratch))
            result.update(side=side, round=round)
            results.append(result)
            print(
                f"round {round}, {side}: {result['rate']:.1f} agent steps/s, "
                f"{result['per_cpu_second']:.1f} per CPU-second ({result['detail']}); "
                f"load average {load_before} before, {load_average()} after",
                flush=True,
            )
    print()
    print(
        "| round | rl_a3c_pytorch (agent steps/s) | a3g (agent steps/s) | a3g / reference "
        "| the same per CPU-second: reference, a3g, a3g / reference |"
    )
    print("| --- | --- | --- | --- | --- |")
    for round in range(1, args.rounds + 1):
        cells = []
        for figure in ("rate", "per_cpu_second"):
            found = {r["side"]: r[figure] for r in results if r["round"] == round}
            reference, a3g = found.get("reference"), found.get("a3g")
            cells += [f"{value:.1f}" if value else "-" for value in (reference, a3g)]
            cells.append(f"{a3g / reference:.2f}x" if reference and a3g else "-")
        print(f"| {round} | {' | '.join(cells[:3])} | {', '.join(cells[3:])} |")
    if len(sides) == 2:
        totals = {side: sum(r["rate"] for r in results if r["side"] == side) for side in sides}
        print(
            f"\nall rounds: a3g at {totals['a3g'] / totals['reference']:.2f}x "
            "the reference's agent steps/s"
        )


if __name__ == "__main__":
    main()
