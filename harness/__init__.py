"""rolloutbench's engine room: trace, metrics, runtimes, CLI, reproductions."""

__version__ = "0.1.0"
