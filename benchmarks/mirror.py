"""Fork mirror latency: from a branch write to the mirrored file, 10 branches writing at once.

Target from the issue: p50 < 300 ms with 10 branches writing.

Ten durable branches of one workspace write concurrently (one thread per branch): plain file
writes into the branch view (what a write tool does: a new file or an edit of an existing
one, alternating) and, separately, ``sed -i`` run in the real sandbox. After each write the
writer polls the mirror (every 2 ms) until the mirrored file holds what it wrote; that delay
is the latency (for the sandbox, counted from the command's exit). A write not mirrored
within 5 s counts as missed.

Compared in the same run, on fresh branches, with a naive mirror: every second, re-diff
every branch (``Branch.changes()``) and re-copy every changed file. The seed's
materializer is not measured: it mirrors its own write tool only, so a ``sed -i`` is never
mirrored at all (missed = all).

Then the other direction (issue 17.2, "edit a branch in your IDE"): ``--ide-edits`` edits
(default 50) written into a branch's mirror directory, as an editor saves (every other one
a file the branch had written, the rest new files), each timed until the branch's view
holds it. The baseline, interleaved in the same run under the same load: the branch's own
write of that file until the mirror holds it (the direction above). Target: p50 < 300 ms.

    /work/venv/bin/python benchmarks/mirror.py [--branches 10] [--writes 20] [--shell 3]
        [--ide-edits 50] [--ide-only]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from branching_core.fork.mirror.materializer import ForkMaterializer
from branching_core.sandbox import run_command, sandbox_available
from branching_core.workspace import Workspace

DEADLINE_S = 5.0
POLL_S = 0.002


class NaivePoller:
    """The baseline: every ``interval`` seconds, re-diff every branch and re-copy all."""

    def __init__(self, root: Path, branches: dict[str, object], interval: float = 1.0) -> None:
        self.root = root
        self.branches = branches
        self.interval = interval
        self.stop = threading.Event()
        self.cycle_ms: list[float] = []
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.wait(self.interval):
            started = time.perf_counter()
            for label, br in self.branches.items():
                target = self.root / label
                changes = br.changes()  # type: ignore[attr-defined]
                for rel in changes.created + changes.modified:
                    src = Path(br.path) / rel  # type: ignore[attr-defined]
                    if src.is_file():
                        dst = target / rel
                        dst.parent.mkdir(parents=True, exist_ok=True)
                        shutil.copy2(src, dst)
            self.cycle_ms.append((time.perf_counter() - started) * 1000)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(5)


def wait_for(path: Path, content: str, since: float) -> float | None:
    """Seconds from ``since`` until ``path`` holds ``content``; None past the deadline."""
    while True:
        try:
            if path.read_text() == content:
                return time.monotonic() - since
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            pass
        if time.monotonic() - since > DEADLINE_S:
            return None
        time.sleep(POLL_S)


def run_writers(
    branches: dict[str, object],
    mirror_of: Callable[[str, str], Path],
    writes: int,
    shell: int,
) -> tuple[list[float], list[float], int, int]:
    """All branches write at once; returns (tool latencies, shell latencies, misses...)."""
    tool: list[float] = []
    sh: list[float] = []
    missed = {"tool": 0, "shell": 0}
    lock = threading.Lock()

    def writer(label: str, br: object) -> None:
        rng = random.Random(label)
        view = Path(br.path)  # type: ignore[attr-defined]
        for n in range(writes):
            rel = f"pkg/mod_{n % 5}.py" if n % 2 else f"new/{label}_{n}.txt"
            content = f"# {label} write {n} {rng.random()}\n"
            (view / rel).parent.mkdir(parents=True, exist_ok=True)
            (view / rel).write_text(content)
            got = wait_for(mirror_of(label, rel), content, time.monotonic())
            with lock:
                if got is None:
                    missed["tool"] += 1
                else:
                    tool.append(got)
            time.sleep(rng.uniform(0.01, 0.05))
        for n in range(shell):
            content = f"sed {label} {n}"
            result = run_command(f"sed -i 's/^.*$/{content}/' pkg/mod_4.py", view)
            if result.exit_code != 0:
                raise RuntimeError(result.stderr)
            got = wait_for(mirror_of(label, "pkg/mod_4.py"), content + "\n", time.monotonic())
            with lock:
                if got is None:
                    missed["shell"] += 1
                else:
                    sh.append(got)

    threads = [threading.Thread(target=writer, args=item) for item in branches.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return tool, sh, missed["tool"], missed["shell"]


def run_ide_edits(ws: Workspace, root: Path, edits: int) -> tuple[list[float], list[float], int]:
    """(mirror -> view latencies, view -> mirror latencies, misses), interleaved."""
    branches = {"ide": ws.branch("ide", durable=True), "other": ws.branch("other", durable=True)}
    mat = ForkMaterializer(root, "bench-ide")
    for label, br in branches.items():
        mat.add_branch(label, br)
    mat.start()
    view = Path(branches["ide"].path)
    to_view: list[float] = []
    to_mirror: list[float] = []
    missed = 0
    try:
        for n in range(edits):
            rel = f"pkg/mod_{n % 5}.py" if n % 2 else f"new/ide_{n}.py"
            if n % 2:  # the branch writes the file first (the baseline direction)
                content = f"VALUE = 'branch {n}'\n"
                (view / rel).write_text(content)
                got = wait_for(mat.branch_path("ide", rel), content, time.monotonic())
                if got is None:
                    missed += 1
                else:
                    to_mirror.append(got)
            edit = f"VALUE = 'editor {n}'\n"
            target = mat.branch_path("ide", rel)
            target.parent.mkdir(parents=True, exist_ok=True)
            started = time.monotonic()
            target.write_text(edit)  # what an editor's save does
            got = wait_for(view / rel, edit, started)
            if got is None:
                missed += 1
            else:
                to_view.append(got)
            time.sleep(0.03)
    finally:
        mat.close()
        for br in branches.values():
            br.abort()
    return to_view, to_mirror, missed


def fmt(values: list[float]) -> tuple[str, str, str]:
    if not values:
        return ("-", "-", "-")
    ms = sorted(v * 1000 for v in values)
    p95 = ms[min(len(ms) - 1, int(round(0.95 * (len(ms) - 1))))]
    return (f"{statistics.median(ms):.0f} ms", f"{p95:.0f} ms", f"{ms[-1]:.0f} ms")


def make_project(root: Path, files: int) -> None:
    (root / "pkg").mkdir(parents=True)
    (root / "new").mkdir()
    for i in range(5):
        (root / "pkg" / f"mod_{i}.py").write_text(f"VALUE = {i}\n")
    for i in range(files):
        sub = root / "tree" / f"d{i % 50}"
        sub.mkdir(parents=True, exist_ok=True)
        (sub / f"f{i}.txt").write_text(f"file {i}\n")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--branches", type=int, default=10)
    parser.add_argument("--writes", type=int, default=20, help="file writes per branch")
    parser.add_argument("--shell", type=int, default=3, help="sandboxed sed -i per branch")
    parser.add_argument("--files", type=int, default=2000, help="files in the workspace")
    parser.add_argument("--backend", default="auto")
    parser.add_argument("--ide-edits", type=int, default=50, help="edits made in the mirror")
    parser.add_argument("--ide-only", action="store_true", help="only the mirror -> branch run")
    args = parser.parse_args()
    ok, why = sandbox_available()
    if not ok:
        sys.exit(f"the sandbox does not work here: {why}")

    tmp = Path(tempfile.mkdtemp(prefix="forkdeck-mirror-bench-"))
    os.environ.setdefault("FORKDECK_STORE", str(tmp / "_stores"))
    try:
        root = tmp / "project"
        make_project(root, args.files)
        ws = Workspace(root, backend=args.backend)
        if args.ide_edits:
            to_view, to_mirror, ide_missed = run_ide_edits(ws, root, args.ide_edits)
            print(
                f"\nIDE edits in a branch's mirror ({args.ide_edits} edits, backend {ws.fstype}, "
                f"{args.files} files in the workspace)\n"
            )
            print("| direction | edits | p50 | p95 | max |")
            print("|---|---|---|---|---|")
            print(f"| mirror -> branch view (user's edit) | {len(to_view)} | {' | '.join(fmt(to_view))} |")
            print(
                f"| branch view -> mirror (baseline) | {len(to_mirror)} | {' | '.join(fmt(to_mirror))} |"
            )
            ide_p50 = statistics.median(to_view) * 1000 if to_view else float("nan")
            base_p50 = statistics.median(to_mirror) * 1000 if to_mirror else float("nan")
            print(
                f"missed: {ide_missed}; target p50 < 300 ms: "
                f"{'met' if ide_p50 < 300 else 'NOT met'} ({ide_p50:.0f} ms); "
                f"ide / baseline p50 ratio: {ide_p50 / base_p50:.2f}x"
            )
        if args.ide_only:
            return
        rows = []

        # ours: one watchfiles watcher over the 10 branches' stores
        branches = {f"b{i}": ws.branch(f"ours{i}", durable=True) for i in range(args.branches)}
        mat = ForkMaterializer(root, "bench")
        for label, br in branches.items():
            mat.add_branch(label, br)
        mat.start()
        ours = run_writers(branches, mat.branch_path, args.writes, args.shell)
        mat.close()
        for br in branches.values():
            br.abort()
        rows.append(("watchfiles mirror (ForkMaterializer)", ours))

        # naive: poll every second, re-diff and re-copy everything
        branches = {f"b{i}": ws.branch(f"naive{i}", durable=True) for i in range(args.branches)}
        naive_root = tmp / "naive-mirror"
        poller = NaivePoller(naive_root, branches)
        poller.start()
        naive = run_writers(branches, lambda label, rel: naive_root / label / rel, args.writes, 1)
        poller.close()
        for br in branches.values():
            br.abort()
        rows.append(("poll every 1 s + full re-copy", naive))

        n = args.branches
        print(
            f"\nMirror latency, {n} branches writing concurrently, backend {ws.fstype}, "
            f"{args.files} files in the workspace\n"
        )
        print("| mirror | writer | writes | p50 | p95 | max | missed |")
        print("|---|---|---|---|---|---|---|")
        for name, (tool, sh, miss_tool, miss_sh) in rows:
            print(
                f"| {name} | file write | {len(tool) + miss_tool} | {' | '.join(fmt(tool))} | {miss_tool} |"
            )
            print(
                f"| {name} | sandboxed `sed -i` | {len(sh) + miss_sh} | {' | '.join(fmt(sh))} | {miss_sh} |"
            )
        if poller.cycle_ms:
            print(
                f"\nnaive re-copy cycle (all {n} branches): "
                f"median {statistics.median(poller.cycle_ms):.1f} ms over {len(poller.cycle_ms)} cycles"
            )
        ours_p50 = statistics.median(ours[0]) * 1000 if ours[0] else float("nan")
        naive_p50 = statistics.median(naive[0]) * 1000 if naive[0] else float("nan")
        print(
            f"target p50 < 300 ms: {'met' if ours_p50 < 300 else 'NOT met'} ({ours_p50:.0f} ms); "
            f"naive / ours p50 ratio: {naive_p50 / ours_p50:.1f}x"
        )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
