"""Ray's token authentication, as connecting to a cluster needs it.

A cluster started with `RAY_AUTH_MODE=token` answers every call that lacks its
token with UNAUTHENTICATED. `ray.init` then retries for some 20 s, printing one
C++ warning a second, and ends with a ConnectionError that does not say why. The
address probe (`ray_connect.check_address`) sends the token `ray.init` would
send (`metadata`), so a refusal is known in milliseconds and said in one line
(`refused`).

Ray's rules (docs.ray.io, ray-security/token-auth.html): `RAY_AUTH_MODE=token`
turns it on, on the cluster and on every client; the token is `RAY_AUTH_TOKEN`,
else the file `RAY_AUTH_TOKEN_PATH` names, else `~/.ray/auth_token`. Ray's own
loader reads them here, so the probe sends exactly what `ray.init` sends.
"""

from __future__ import annotations

import os

from harness.core.config import ConfigError

MODE_ENV = "RAY_AUTH_MODE"
TOKEN_ENV = "RAY_AUTH_TOKEN"
PATH_ENV = "RAY_AUTH_TOKEN_PATH"
DEFAULT_FILE = "~/.ray/auth_token"
WHERE_TOKEN = f"{TOKEN_ENV}, the file {PATH_ENV} names, or {DEFAULT_FILE}"
MARKS = ("InvalidAuthToken", "UNAUTHENTICATED", "Unauthenticated", "AuthenticationError")


def token_mode() -> bool:
    """Whether this process authenticates with a token (Ray's reading of RAY_AUTH_MODE)."""
    try:
        from ray._raylet import AuthenticationMode, get_authentication_mode
    except ImportError:  # no Ray, or one without token authentication
        return os.environ.get(MODE_ENV, "").strip().lower() == "token"
    return bool(get_authentication_mode() == AuthenticationMode.TOKEN)


def metadata(where: str) -> tuple[tuple[str, str], ...]:
    """gRPC metadata carrying this process's token as `ray.init` sends it; () with
    token authentication off here. Token mode without a token is a ConfigError."""
    if not token_mode():
        return ()
    try:
        from ray._raylet import AuthenticationTokenLoader
    except ImportError:
        return ()
    loader = AuthenticationTokenLoader.instance()
    try:
        found = loader.has_token()
    except Exception:  # noqa: BLE001  (Ray's AuthenticationError: none, or a bad file)
        found = False
    if not found:
        raise ConfigError(missing(where))
    return tuple(loader.get_token_for_http_header().items())


def source() -> str:
    """Where this process's token comes from, in Ray's order."""
    if os.environ.get(TOKEN_ENV, "").strip():
        return TOKEN_ENV
    path = os.environ.get(PATH_ENV, "").strip()
    return f"{PATH_ENV} ({path})" if path else DEFAULT_FILE


def missing(where: str) -> str:
    path = os.environ.get(PATH_ENV, "").strip()
    if path and not os.environ.get(TOKEN_ENV, "").strip():
        return f"{where}: {MODE_ENV}=token, but {PATH_ENV} names {path}, a missing or empty file"
    return (f"{where}: {MODE_ENV}=token, but no token here: give the cluster's token in "
            f"{WHERE_TOKEN}")


def refused(where: str) -> str:
    """The one line for a cluster that refused this process: how to authenticate."""
    if not token_mode():
        return (f"{where}: the cluster requires token authentication: set {MODE_ENV}=token "
                f"and give the cluster's token in {WHERE_TOKEN}")
    return (f"{where}: the cluster refused the token from {source()} ({MODE_ENV}=token): "
            "not the token it was started with (`ray get-auth-token` on its head node "
            "prints that one)")


def is_refusal(err: BaseException, said: str = "") -> bool:
    """Whether `ray.init` failed on authentication: its error says so, or Ray's
    lines while it tried (`said`) do (its ConnectionError alone does not)."""
    text = f"{type(err).__name__}: {err}\n{said}"
    return any(mark in text for mark in MARKS)
