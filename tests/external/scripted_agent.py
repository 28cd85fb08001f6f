"""A scripted stand-in for an agent CLI, run by the tests inside branch sandboxes.

``python scripted_agent.py MODE [ARG]``: prints progress (with colours, as agent CLIs
do), does what MODE says in its working directory, and exits. Standard library only; it
lives in the repository (the sandbox hides the host's /tmp).

* ``fix``: writes a correct ``calc.py``.
* ``break``: writes a wrong ``calc.py`` and a stray ``notes.txt``.
* ``big``: the correct ``calc.py`` plus an unrelated ``README.extra`` (a bigger diff).
* ``steer``: waits for one line on its terminal and writes it to ``steered.txt``.
* ``hang TOKEN``: starts a detached grandchild, then both sleep forever (a killed agent
  must take its whole tree with it); TOKEN marks both command lines.
* ``secrets``: tries to read and write the files named in ``$PROBE_PATHS`` and reports.
* ``cost N``: reports a cost of $N in Claude Code's JSON shape, then fixes.
* ``fail``: exits 3 without changing anything.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

GOOD = "def add(a, b):\n    return a + b\n"
BAD = "def add(a, b):\n    return a * b\n"


def say(text: str) -> None:
    print(f"\x1b[36m[scripted]\x1b[0m {text}", flush=True)


def main(argv: list[str]) -> int:
    mode = argv[0]
    say(f"starting {mode} in {os.getcwd()} (terminal: {os.isatty(0)})")
    if mode == "fix":
        with open("calc.py", "w") as fh:
            fh.write(GOOD)
    elif mode == "break":
        with open("calc.py", "w") as fh:
            fh.write(BAD)
        with open("notes.txt", "w") as fh:
            fh.write("scratch\n")
    elif mode == "big":
        with open("calc.py", "w") as fh:
            fh.write(GOOD)
        with open("README.extra", "w") as fh:
            fh.write("".join(f"line {i}\n" for i in range(50)))
    elif mode == "steer":
        say("waiting for a steer")
        line = sys.stdin.readline()
        with open("steered.txt", "w") as fh:
            fh.write(line)
        say(f"steered: {line.strip()}")
    elif mode == "hang":
        token = argv[1]
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)", token],
                         start_new_session=True)
        with open("partial.txt", "w") as fh:
            fh.write("half done\n")
        say("working forever")
        time.sleep(3600)
    elif mode == "secrets":
        report = {}
        for path in os.environ["PROBE_PATHS"].split(":"):
            entry = {}
            try:
                with open(path) as fh:
                    entry["read"] = fh.read()
            except OSError as exc:
                entry["read_error"] = exc.strerror
            try:
                with open(path, "a") as fh:
                    fh.write("written by the agent\n")
                entry["wrote"] = True
            except OSError as exc:
                entry["write_error"] = exc.strerror
            report[path] = entry
        print("REPORT " + json.dumps(report), flush=True)
    elif mode == "cost":
        print(json.dumps({"type": "result", "total_cost_usd": float(argv[1])}), flush=True)
        time.sleep(float(argv[2]) if len(argv) > 2 else 0)
        with open("calc.py", "w") as fh:
            fh.write(GOOD)
    elif mode == "fail":
        say("giving up")
        return 3
    say("done")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
