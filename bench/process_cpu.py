"""CPU time per request of each process a platform runs, under wrk's closed-loop load.

    .venv/bin/python -m bench.process_cpu --root PID --target URL --key KEY \\
        --lua GWBENCH/chat.lua [--connections 64] [--seconds 10] [--label L] [VAR=VALUE ...]

`scripts/bench-gateway-cpu` starts the platform and runs this for each path. The figure is
each process's user and system time (from /proc) over the measured seconds, divided by the
requests wrk completed in them: the processes under `--root` (the launcher), grouped as the
gateway, Redis, Celery and the rest. Throughput on a shared machine swings with its
neighbours (steal time, a 2x spread from day to day); CPU time per request moves much
less, since the time the kernel gives to others is not charged to these processes.
VAR=VALUE pairs go to chat.lua's environment (GWB_TEMPERATURE=0, GWB_UNIQUE=0).
"""

import argparse
import json
import os
import subprocess
import sys

TICK_S = 1 / os.sysconf("SC_CLK_TCK")
GROUPS = (("gateway.asgi", "gateway"), ("redis-server", "redis"), ("celery", "celery"))


def cpu_by_group(root: int) -> dict[str, float]:
    """Seconds of CPU so far of each process under root, by group."""
    parents: dict[int, int] = {}
    seconds: dict[int, float] = {}
    commands: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat, open(f"/proc/{entry}/cmdline") as cmd:
                fields = stat.read().rsplit(")", 1)[1].split()
                commands[int(entry)] = cmd.read()
        except OSError:  # gone meanwhile
            continue
        parents[int(entry)] = int(fields[1])
        seconds[int(entry)] = (int(fields[11]) + int(fields[12])) * TICK_S
    groups: dict[str, float] = {}
    for pid, used in seconds.items():
        # A process is in the group of its nearest ancestor (itself included) that names
        # one: uvicorn's worker processes (GATEWAY_PROCESSES > 1) are spawned with a
        # command line of multiprocessing's, under the server's process that names the app.
        group, ancestor = None, pid
        while ancestor > 1 and ancestor != root:
            if group is None:
                command = commands.get(ancestor, "")
                group = next((name for mark, name in GROUPS if mark in command), None)
            ancestor = parents.get(ancestor, 0)
        if ancestor == root:
            groups[group or "other"] = groups.get(group or "other", 0.0) + used
    return groups


def wrk(args: argparse.Namespace, seconds: int) -> int:
    """Requests completed by one wrk run (chat.lua prints them as JSON)."""
    env = {**os.environ, "GWB_KEY": args.key, "GWB_MODEL": args.model}
    env.update(pair.split("=", 1) for pair in args.lua_env)
    command = ["wrk", "-t1", f"-c{args.connections}", f"-d{seconds}s", "-s", args.lua]
    if args.loadgen_cpu is not None:
        command = ["taskset", "-c", args.loadgen_cpu, *command]
    output = subprocess.run(
        [*command, args.target], env=env, capture_output=True, text=True, check=True
    ).stdout
    line = next(line for line in output.splitlines() if line.startswith("GWBENCH_JSON "))
    summary = json.loads(line.removeprefix("GWBENCH_JSON "))
    if any(summary[k] for k in ("err_connect", "err_read", "err_write", "err_status")):
        sys.exit(f"wrk saw errors: {summary}")
    return int(summary["requests"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=int, required=True, help="the launcher's pid")
    parser.add_argument("--target", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--model", default="fake")
    parser.add_argument("--lua", required=True, help="gwbench's chat.lua")
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--loadgen-cpu", default="0")
    parser.add_argument("--label", default="")
    parser.add_argument("lua_env", nargs="*", metavar="VAR=VALUE")
    args = parser.parse_args()
    if args.warmup:
        wrk(args, args.warmup)
    before = cpu_by_group(args.root)
    requests = wrk(args, args.seconds)
    used = {
        group: spent - before.get(group, 0.0) for group, spent in cpu_by_group(args.root).items()
    }
    per_request = {group: used[group] / requests * 1e6 for group in sorted(used)}
    total = sum(per_request.values())
    parts = " ".join(f"{group} {us:.0f}" for group, us in per_request.items())
    print(
        f"{args.label:<10} {requests / args.seconds:8.1f} req/s  CPU us/request: "
        f"{parts}  all {total:.0f}"
    )


if __name__ == "__main__":
    main()
