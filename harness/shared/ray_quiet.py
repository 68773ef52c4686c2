"""Ray's own lines kept off the terminal while `ray.init` joins a cluster.

What prints them: Ray's C++ core in this process (`gcs_client.cc`, one warning
per retry while the cluster refuses or does not answer), which writes straight
to file descriptor 2; neither `logging_level` nor `log_to_driver` reach it, nor
RAY_BACKEND_LOG_LEVEL (tried: the warnings come all the same).
Ray's Python loggers are held at ERROR by `ray.init(logging_level=...)`, and
what they still print goes through their handler's stream, that same fd 2.

So during the attempt fd 2 points at a file, and `sys.stderr` is meanwhile a
stream on the terminal's own descriptor: this process's own lines (a spinner, a
warning) still show. The file is the live run's engine.log when it has one
(ROLLOUTBENCH_ENGINE_LOG, harness.live.logs), else a temporary file that is
kept, and named in the error, only when connecting failed with lines in it.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ENGINE_LOG_ENV = "ROLLOUTBENCH_ENGINE_LOG"  # harness.live.logs.LOG_ENV (a layer above)


class Capture:
    """Where fd 2 went; `note()` for an error message, `abandon()` for a thread left running."""

    def __init__(self) -> None:
        log = os.environ.get(ENGINE_LOG_ENV, "")
        if log and Path(log).parent.is_dir():
            self.fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            self.path, self.temporary = Path(log), False
        else:
            self.fd, name = tempfile.mkstemp(prefix="rolloutbench-ray-", suffix=".log")
            self.path, self.temporary = Path(name), True
        self.start = os.lseek(self.fd, 0, os.SEEK_END)  # an engine.log has lines before
        self.kept = not self.temporary
        self.abandoned = False

    def text(self, most: int = 1 << 16) -> str:
        """What was written in the block so far (its first `most` bytes)."""
        try:
            with self.path.open("rb") as f:
                f.seek(self.start)
                return f.read(most).decode(errors="replace")
        except OSError:
            return ""

    def note(self) -> str:
        """'; Ray's messages: PATH' when the file holds any (and then it is kept)."""
        try:
            said = self.path.stat().st_size > self.start
        except OSError:
            return ""
        self.kept = self.kept or said
        return f"; Ray's messages: {self.path}" if said else ""

    def abandon(self) -> None:
        """`ray.init` goes on in a thread given up on: its lines stay off the terminal."""
        self.abandoned = True


def _is_fd2(stream: object) -> bool:
    try:
        return stream.fileno() == 2  # type: ignore[attr-defined]
    except (AttributeError, OSError, ValueError):
        return False


@contextmanager
def quiet_stderr() -> Iterator[Capture]:
    """During the block, what is written to fd 2 goes to `Capture.path`."""
    capture = Capture()
    own = sys.stderr
    swap = _is_fd2(own)  # a test's captured stderr is no fd 2: it stays as it is
    own.flush()
    saved = os.dup(2)
    if swap:
        sys.stderr = os.fdopen(os.dup(saved), "w", buffering=1,
                               encoding=getattr(own, "encoding", None) or "utf-8",
                               errors=getattr(own, "errors", None) or "backslashreplace")
    os.dup2(capture.fd, 2)
    try:
        yield capture
    finally:
        sys.stderr.flush()
        if not (capture.abandoned and swap):  # else fd 2 stays on the file for good
            os.dup2(saved, 2)
            if swap:
                sys.stderr.close()
                sys.stderr = own
        os.close(saved)
        os.close(capture.fd)
        if capture.temporary and not capture.kept:
            capture.path.unlink(missing_ok=True)
