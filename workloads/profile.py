"""Workload profiles: the statistics the simulator draws prompts and responses from.

A profile is a TOML file in `workloads/profiles/`. Each prompt has a latent difficulty z ~ N(0, 1)
that sets the median response length of its group, exp(mu + sigma_between * z), and its pass rate;
the K samples of the group spread around that median by exp(sigma_within * e). Verification latency
is log-normal, optionally mixed with a slow tail (`tail_share` of the samples). The group spread is
smaller than the spread between prompts, and the tail reaches the response cap, as the papers
report. `mu` is solved so that the mean response length after the profile's own cap `max_tokens`
equals its `mean_tokens`; a run's lower cap truncates these lengths, not reshapes them.

Draws depend only on (seed, workload, prompt index), never on the order in which a system consumes
them, so every system sees the same prompts and lengths for a given seed: comparisons between
systems use common random numbers.
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
import math
import tomllib
import zlib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from harness.core.runtime import Prompt
from workloads import draws, streams
from workloads.profile_schema import check_keys, check_values


@dataclass(frozen=True, slots=True)
class Hidden:
    """Ground truth of one prompt, known only to the simulated runtime.

    The first K samples are drawn with the prompt; a system that asks for more
    (speculative extra responses) gets further samples of the same prompt drawn
    on demand from their own random stream, so the first K never change."""

    lengths: tuple[int, ...]  # response tokens each sample would generate, uncapped
    rewards: tuple[float, ...]
    verify_s: tuple[float, ...]  # verifier latency per sample
    kind: str = "local"  # the verifier: local, sandbox or judge
    extra: Any = field(default=None, repr=False, compare=False)
    # each of the first K's (length, reward, latency), made once: asked for at each stage
    drawn: tuple[tuple[int, float, float], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "drawn", tuple(zip(self.lengths, self.rewards,
                                                    self.verify_s, strict=True)))

    def sample(self, i: int) -> tuple[int, float, float]:
        """(length, reward, verifier latency) of sample i."""
        try:
            return self.drawn[i]
        except IndexError:  # past the first K
            return self.extra(i)


@dataclass(frozen=True)
class Profile:
    name: str
    summary: str
    prompt_mu_log: float
    prompt_sigma_log: float
    prompt_min: int
    prompt_max: int
    mean_tokens: float
    max_tokens: int
    min_tokens: int
    sigma_between: float
    sigma_within: float
    pass_rate: float
    pass_slope: float
    verify_mean_s: float
    verify_sigma: float
    source: dict[str, str]
    verifier_kind: str = "local"
    tail_share: float = 0.0  # share of samples whose verification is slow (sandbox stragglers)
    tail_mean_s: float = 0.0
    tail_sigma: float = 0.0

    @classmethod
    def from_toml(cls, data: dict[str, Any], where: str) -> Profile:
        try:
            p, r, w, v = data["prompt"], data["response"], data["reward"], data["verifier"]
            return cls(
                name=data["name"], summary=data["summary"],
                prompt_mu_log=float(p["mu_log"]), prompt_sigma_log=float(p["sigma_log"]),
                prompt_min=int(p["min"]), prompt_max=int(p["max"]),
                mean_tokens=float(r["mean_tokens"]), max_tokens=int(r["max_tokens"]),
                min_tokens=int(r["min_tokens"]), sigma_between=float(r["sigma_between"]),
                sigma_within=float(r["sigma_within"]), pass_rate=float(w["pass_rate"]),
                pass_slope=float(w["slope"]), verify_mean_s=float(v["latency_mean_s"]),
                verify_sigma=float(v["latency_sigma"]),
                source={k: str(t.get("source", "")) for k, t in
                        (("prompt", p), ("response", r), ("reward", w), ("verifier", v))},
                verifier_kind=str(v.get("kind", "local")),
                tail_share=float(v.get("tail_share", 0.0)),
                tail_mean_s=float(v.get("tail_mean_s", 0.0)),
                tail_sigma=float(v.get("tail_sigma", 0.0)),
            )
        except KeyError as err:
            raise ValueError(f"{where}: missing field {err.args[0]!r}") from None

    def mu_for(self, cap: int) -> float:
        """The log-median that gives `mean_tokens` after capping at `cap`."""
        s = math.hypot(self.sigma_between, self.sigma_within)

        def capped_mean(mu: float) -> float:
            phi = _normal_cdf
            lc = math.log(cap)
            return (math.exp(mu + s * s / 2) * phi((lc - mu - s * s) / s)
                    + cap * (1 - phi((lc - mu) / s)))

        if capped_mean(math.log(cap)) <= self.mean_tokens:
            raise ValueError(f"profile {self.name}: mean_tokens too close to the cap {cap}")
        lo, hi = 0.0, math.log(cap)
        for _ in range(80):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if capped_mean(mid) < self.mean_tokens else (lo, mid)
        return (lo + hi) / 2


def _normal_cdf(x: float) -> float:
    return 0.5 * (1 + math.erf(x / math.sqrt(2)))


class SimWorkload:
    """The simulated prompt stream of one run (implements runtime.Workload)."""

    def __init__(self, profile: Profile, seed: int, group_size: int, ahead: bool = True):
        """`ahead`: a prompt not kept is drawn with the next ones (`prompt`)."""
        self.name = profile.name
        self._ahead = ahead
        self.profile = profile
        self._seed = seed
        self._k = group_size
        # The natural lengths are fixed by the profile at its own cap; a run with
        # another cap truncates them (the engine stops at the run's cap).
        self._mu = profile.mu_for(profile.max_tokens)
        self._next = 0
        # The workload's name enters the seed so that workloads are independent.
        self._stream = zlib.crc32(profile.name.encode())
        self.identity = repr(profile)  # every field: what the prompts are a function of

    def take(self, n: int) -> list[Prompt]:
        out = [self.prompt(self._next + i) for i in range(n)]
        self._next += n
        return out

    def prompt(self, index: int) -> Prompt:
        """A prompt is a pure function of (profile, seed, samples per group, index) and
        frozen, so a process keeps the ones it drew: a reproduction runs many systems, and
        the claims' roofline twin, on the same prompts, and a prompt's random streams cost
        more to set up than to draw from (`draws.kept`). One not kept is drawn with the
        next ones not kept either (`draw_many`: the same prompts, for less than half the
        CPU), as a run takes its prompts in order."""
        return draws.kept((self.identity, self._seed, self._k, index), self.draw,
                          self.draw_many if self._ahead else None)

    def draw_many(self, indices: list[int]) -> list[Prompt]:
        """Prompts `indices`, each as `draw` draws it, drawn together (`draws.draw_many`)."""
        return draws.draw_many(self.profile, self._mu, (self._seed, self._stream), self._k,
                               indices, self._samples, Hidden)

    def draw(self, index: int) -> Prompt:
        """Prompt `index` drawn from its own random stream (what `prompt` keeps)."""
        return self.draw_many([index])[0]

    def _samples(self, rng: np.random.Generator, z: float, k: int
                 ) -> tuple[tuple[int, ...], tuple[float, ...], tuple[float, ...]]:
        """k samples of a prompt of difficulty z: lengths, rewards, check latencies."""
        tail = self.profile.tail_share > 0
        row = np.empty((1, (5 if tail else 3) * k))
        draws.fill(rng, row[0], k, tail)
        lengths, rewards, verify = draws.outcomes(self.profile, self._mu, np.array([z]),
                                                  row, k)
        return (tuple(lengths[0].tolist()), tuple(rewards[0].tolist()),
                tuple(verify[0].tolist()))


@dataclass(frozen=True)
class Mixture:
    """A workload that mixes several profiles (e.g. math, code and judge tasks):
    each prompt index draws its component with the given weights."""

    name: str
    summary: str
    components: tuple[Profile, ...]
    weights: tuple[float, ...]
    source: str

    @property
    def max_tokens(self) -> int:
        return max(p.max_tokens for p in self.components)

    @property
    def prompt_max(self) -> int:
        return max(p.prompt_max for p in self.components)

    @property
    def mean_tokens(self) -> float:
        return sum(p.mean_tokens * w for p, w in zip(self.components, self.weights,
                                                      strict=True)) / sum(self.weights)


class MixtureWorkload:
    """The prompt stream of a `Mixture` (implements runtime.Workload)."""

    def __init__(self, mixture: Mixture, seed: int, group_size: int):
        self.name = mixture.name
        self.profile = mixture
        # one prompt at a time: a component draws only the indices that pick it
        self._parts = [SimWorkload(p, seed, group_size, ahead=False)
                       for p in mixture.components]
        total = sum(mixture.weights)
        self._cum = tuple(np.cumsum([w / total for w in mixture.weights]).tolist())
        self._seed = seed
        self._k = group_size
        self._stream = zlib.crc32(mixture.name.encode())
        self._next = 0
        self.identity = repr(mixture)

    def take(self, n: int) -> list[Prompt]:
        out = [self.prompt(self._next + i) for i in range(n)]
        self._next += n
        return out

    def prompt(self, index: int) -> Prompt:
        """Prompt `index` of the component its own random stream picks; kept, as
        `SimWorkload.prompt` keeps its prompts (the pick costs a stream of its own)."""
        return draws.kept((self.identity, self._seed, self._k, index), self._draw)

    def _draw(self, index: int) -> Prompt:
        u = streams.rng(self._seed, self._stream, index).random()
        part = bisect.bisect_right(self._cum, u)  # numpy's searchsorted, side="right"
        return self._parts[min(part, len(self._parts) - 1)].prompt(index)


def make_workload(name: str, seed: int, group_size: int) -> Any:
    """The prompt stream named by a workload: a profile, a mixture, or `trace:PATH`."""
    from workloads.trace_source import TraceWorkload, is_trace

    if is_trace(name):
        return TraceWorkload(name, group_size)
    profile = load_profile(name)
    if isinstance(profile, Mixture):
        return MixtureWorkload(profile, seed, group_size)
    return SimWorkload(profile, seed, group_size)


def workload_limits(name: str, group_size: int = 2) -> tuple[int, int]:
    """(response cap, longest prompt) of a workload, for defaults and checks."""
    from workloads.trace_source import TraceWorkload, is_trace

    if is_trace(name):
        source = TraceWorkload(name, group_size)
        return source.max_tokens, source.prompt_max
    profile = load_profile(name)
    return profile.max_tokens, profile.prompt_max


def _profiles_dir() -> Path:
    return Path(str(resources.files("workloads") / "profiles"))


def profile_names() -> list[str]:
    return sorted(p.stem for p in _profiles_dir().glob("*.toml") if not p.stem.startswith("_"))


FILE_PREFIX = "profile:"  # `profile:PATH`: a profile file of the user's own


def is_profile_file(name: str) -> bool:
    """A workload named by a profile file (`profile:PATH`, or a path ending in .toml)
    rather than by a packaged profile's name."""
    return name.startswith(FILE_PREFIX) or name.endswith(".toml")


def load_profile(name: str) -> Profile | Mixture:
    """A packaged profile by name, or a profile file by path (`is_profile_file`):
    a researcher's own workload needs no edit to the package."""
    from harness.core.registry import unknown_name
    from workloads.own_jsonl import is_own, profile_of

    if is_own(name):  # `jsonl:PATH`: its measured profile, beside it
        return _load_file(profile_of(name))
    if is_profile_file(name):
        path = Path(name.removeprefix(FILE_PREFIX)).expanduser()
        if not path.is_file():
            raise ValueError(f"{path}: no such file (a workload profile; see "
                             f"workloads/profiles/*.toml for the fields)")
        return _load_file(path)
    path = _profiles_dir() / f"{name}.toml"
    if name.startswith("_") or not path.exists():
        raise unknown_name("workload", name, profile_names())
    return _load_file(path)


def file_figures(name: str, workload: Any = None) -> dict[str, Any]:
    """`{"profile": fields}` for a workload named by a profile file: every figure of the
    resolved profile (a mixture's components included), those `workload` draws from when
    given. A trace's `run_start` header carries it, so that the run reads the same after
    the user's file has changed or gone; `{}` for a packaged profile or a trace, whose
    header is as it always was."""
    from workloads.own_jsonl import is_own
    from workloads.trace_source import is_trace

    if is_trace(name) or not (is_profile_file(name) or is_own(name)):
        return {}
    profile = getattr(workload, "profile", None) or load_profile(name)
    return {"profile": dataclasses.asdict(profile)}


def _load_file(path: Path) -> Profile | Mixture:
    """The profile or mixture a TOML file holds, its values checked (one line naming
    the file and field); a mixture's components are packaged names or profile files,
    a relative path taken from the mixture's folder."""
    try:
        raw = path.read_bytes()
        data = _toml(raw)
        if "mixture" not in data:
            return _profile(str(path), raw)
        mix = data["mixture"]
        names = [c if not is_profile_file(c) or Path(c.removeprefix(FILE_PREFIX)).is_absolute()
                 else str(path.parent / c.removeprefix(FILE_PREFIX)) for c in mix["components"]]
        weights = tuple(float(w) for w in mix["weights"])
        scale = float(mix.get("length_scale", 1.0))  # lengths x scale, cap included
        name, summary, source = data["name"], data["summary"], str(mix.get("source", ""))
    except tomllib.TOMLDecodeError as err:
        raise ValueError(f"{path}: not valid TOML: {err}") from None
    except KeyError as err:
        raise ValueError(f"{path}: missing field {err.args[0]!r}") from None
    except (TypeError, ValueError) as err:
        if str(err).startswith(str(path)):
            raise
        raise ValueError(f"{path}: {err}") from None
    parts = tuple(load_profile(c) for c in names)
    if any(isinstance(p, Mixture) for p in parts):
        raise ValueError(f"{path}: a mixture cannot contain a mixture")
    if len(weights) != len(parts) or min(weights, default=0) < 0 or sum(weights) <= 0:
        raise ValueError(f"{path}: mixture.weights: one non-negative weight per component, "
                         f"not all 0")
    if scale != 1.0:  # each component keeps its name: the same prompts, scaled
        parts = tuple(dataclasses.replace(p, mean_tokens=p.mean_tokens * scale,
                                          max_tokens=round(p.max_tokens * scale))
                      for p in parts)  # type: ignore[misc]
    return Mixture(name, summary, parts, weights, source)  # type: ignore[arg-type]


@functools.lru_cache(maxsize=256)
def _toml(raw: bytes) -> dict[str, Any]:
    """A profile file's TOML, its keys checked (workloads.profile_schema); kept by the
    file's bytes, so a file read again unchanged (each run of a reproduction reads its
    workload's) is parsed once a process, and an edited one again. Callers only read it."""
    data = tomllib.loads(raw.decode())
    check_keys(data)
    return data


@functools.lru_cache(maxsize=256)
def _profile(where: str, raw: bytes) -> Profile:
    """The profile (not a mixture) a file of these bytes holds, checked: kept like
    `_toml` (a Profile is frozen). A mixture is assembled again on each load, so that an
    edited component is read even where the mixture's own file is unchanged."""
    return check_values(Profile.from_toml(_toml(raw), where), Path(where))
