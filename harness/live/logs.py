"""Third-party logs of a live run go to `engine.log` in the run folder, not stdout.

vLLM alone writes some 170 INFO and WARNING lines while an engine starts, into
stdout by default, where they bury rolloutbench's own lines. During a live run
the loggers of vLLM, Ray, transformers and torch (and Python warnings) write to
the run's `engine.log` instead, and the libraries' progress bars are off.

vLLM configures its logger itself (a stdout handler) at import and again when an
engine starts, unless `VLLM_CONFIGURE_LOGGING=0`; that variable is set here, for
this process and, through the Ray runtime environment (`ENV`), for the actors,
which route their own loggers to the same file when they start
(`route_from_env`).
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

LIBRARIES = ("vllm", "ray", "transformers", "torch", "py.warnings")
LOG_ENV = "ROLLOUTBENCH_ENGINE_LOG"  # the file, for the Ray actors of this run
ENV = {"VLLM_CONFIGURE_LOGGING": "0", "HF_HUB_DISABLE_PROGRESS_BARS": "1"}
FORMAT = "%(asctime)s %(process)d %(name)s %(levelname)s %(message)s"

Saved = list[tuple[logging.Logger, list[logging.Handler], bool, int]]


def quiet_bars() -> None:
    """transformers adds its own stderr handler on first use and draws bars while
    it writes or reads a checkpoint: add the handler now (so it is replaced below
    rather than added later) and turn the bars off."""
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:
        return
    hf_logging.get_logger()  # configures the library's root logger once
    hf_logging.disable_progress_bar()


def _library_loggers() -> list[logging.Logger]:
    """The libraries' top loggers, and any of their children that print on their own
    (torch gives `torch.distributed` its own stderr handler once vLLM is loaded)."""
    tops = [logging.getLogger(name) for name in LIBRARIES]
    children = [logger for name, logger in list(logging.root.manager.loggerDict.items())
                if isinstance(logger, logging.Logger) and logger.handlers
                and any(name.startswith(top + ".") for top in LIBRARIES)]
    return tops + children


def route(path: str | os.PathLike[str]) -> tuple[logging.Handler, Saved, bool]:
    """Send the libraries' loggers to `path` (appending); returns what `restore`
    needs to put them back."""
    for key, value in ENV.items():
        os.environ[key] = value
    quiet_bars()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path, mode="a", encoding="utf-8")
    handler.setFormatter(logging.Formatter(FORMAT))
    saved: Saved = []
    for logger in _library_loggers():
        saved.append((logger, list(logger.handlers), logger.propagate, logger.level))
        logger.handlers = [handler]
        logger.propagate = False
        if logger.name in LIBRARIES:
            logger.setLevel(logging.INFO)
    was_capturing = getattr(logging, "_warnings_showwarning", None) is not None
    logging.captureWarnings(True)
    return handler, saved, was_capturing


def restore(handler: logging.Handler, saved: Saved, was_capturing: bool) -> None:
    for logger, handlers, propagate, level in saved:
        logger.handlers = handlers
        logger.propagate = propagate
        logger.setLevel(level)
    logging.captureWarnings(was_capturing)
    handler.close()


@contextmanager
def engine_log(path: str | os.PathLike[str]) -> Iterator[Path]:
    """During the block, third-party logs go to `path`; Ray actors started in it
    (their runtime environment copies `LOG_ENV`) send theirs there too."""
    state = route(path)
    before = os.environ.get(LOG_ENV)
    os.environ[LOG_ENV] = str(Path(path).resolve())
    try:
        yield Path(path)
    finally:
        restore(*state)
        if before is None:
            os.environ.pop(LOG_ENV, None)
        else:
            os.environ[LOG_ENV] = before


@contextmanager
def children_write_to_log() -> Iterator[None]:
    """Processes started in the block (vLLM's engine core) write their stdout and
    stderr to the run's engine.log for their whole life. With
    VLLM_CONFIGURE_LOGGING=0 the engine core has no log handler of its own, so its
    warnings would reach the terminal through logging's last resort; it inherits
    the file descriptors it starts with. Outside `engine_log`: nothing changes."""
    path = os.environ.get(LOG_ENV)
    if not path:
        yield
        return
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    log = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.dup2(log, 1)
        os.dup2(log, 2)
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, log):
            os.close(fd)


def actor_env() -> dict[str, str]:
    """What a Ray actor of this run needs in its environment to log where the run does."""
    path = os.environ.get(LOG_ENV)
    return {**ENV, LOG_ENV: path} if path else dict(ENV)


def route_from_env() -> None:
    """In a Ray actor: route for the actor's lifetime, when the run's folder is
    on this node (on another node the actor keeps Ray's own log files)."""
    path = os.environ.get(LOG_ENV)
    if path and Path(path).parent.is_dir():
        route(path)
