"""How a config field is declared: its default, its help text, and the error a bad
value raises. A module of its own so that the config's tables (harness.core.config,
harness.core.async_knobs) declare fields the same way without importing each other."""

from __future__ import annotations

import dataclasses
from dataclasses import field
from typing import Any


class ConfigError(ValueError):
    """A bad configuration value; the message names the option."""


def opt(default: Any, help: str) -> Any:
    """A config field with a default and its help text (in the field's metadata)."""
    return field(default=default, metadata={"help": help})


def help_of(f: dataclasses.Field[Any]) -> str:
    return str(f.metadata.get("help", ""))


def need(ok: bool, option: str, message: str) -> None:
    """Refuse a value in one line that names its option (`--set areal.x`)."""
    if not ok:
        raise ConfigError(f"--{option}: {message}")
