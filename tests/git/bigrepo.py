"""A git repository of N tracked files, built quickly: ``git fast-import`` writes the
commit (a hundred distinct blobs shared by every path), ``git checkout`` writes the files
and the index. Shared by the in-suite test and ``benchmarks/git.py``."""

from __future__ import annotations

import subprocess
from pathlib import Path

BLOBS = 100


def build_repo(root: Path, files: int) -> Path:
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
    chunks = []
    for i in range(BLOBS):
        body = f"content {i}\n".encode()
        chunks.append(b"blob\nmark :%d\ndata %d\n%s\n" % (i + 1, len(body), body))
    chunks.append(b"commit refs/heads/main\ncommitter T <t@example.com> 0 +0000\ndata 4\ninit\n")
    for i in range(files):
        chunks.append(b"M 100644 :%d d%03d/f%06d.txt\n" % (i % BLOBS + 1, i // 100 % 1000, i))
    chunks.append(b"\n")
    subprocess.run(["git", "fast-import", "--quiet"], cwd=root, input=b"".join(chunks), check=True)
    subprocess.run(["git", "checkout", "-q", "-f", "main"], cwd=root, check=True)
    return root


TIMED_STATUS = (
    "s=$(date +%s%N); git status --porcelain >/dev/null; e=$(date +%s%N); echo $((e - s))"
)
