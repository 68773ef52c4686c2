"""Hardware and model presets, read from ``presets/*.toml``: the numbers live in data files
(with sources, estimates flagged) so they can be reviewed and cited without reading code.

A user's own presets live in one TOML file outside the package, tables
``[gpus.NAME]`` and ``[models.NAME]`` with the same fields as the packaged ones:
``$ROLLOUTBENCH_PRESETS`` when set, else ``$XDG_CONFIG_HOME/rolloutbench/presets.toml``
(``~/.config/rolloutbench/presets.toml``). They add names; one that would shadow a
packaged preset is refused, so a result never means two different GPUs."""

import difflib
import json
import math
import os
import tomllib
from dataclasses import MISSING, asdict, dataclass, fields
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

from harness.core.config import ConfigError
from harness.core.files import parse_toml
from harness.core.registry import UnknownName

T = TypeVar("T")


class PresetError(UnknownName):
    """Unknown preset name: an UnknownName (so a KeyError, and one line on the command
    line like any unknown name); ``except KeyError`` callers keep working."""


@dataclass(frozen=True)
class Hardware:
    """One GPU: memory, bandwidth, dense BF16 throughput and its GPU-to-GPU link."""

    name: str
    memory_gb: float
    hbm_bandwidth_gbs: float
    bf16_tflops: float
    link: str
    link_bandwidth_gbs: float
    link_latency_us: float
    source: str
    nvlink_domain: int = 8  # GPUs the link above joins (a server; 72 in an NVL72 rack)
    internode_bandwidth_gbs: float = 50.0  # one GPU's NIC, per direction (400 Gb/s)
    internode_latency_us: float = 25.0  # estimate: a small all-reduce across servers

    def tp_link(self, tp: int) -> tuple[float, float]:
        """(GB/s per direction, small-message latency in us) of a `tp`-GPU group's
        all-reduce: the link within one NVLink domain; a group wider than the domain
        spans servers, and its ring crosses each GPU's NIC, the slowest hop, so the NIC's
        figures (a 4-server TP 32 of H100s is not one NVLink domain)."""
        if tp <= self.nvlink_domain:
            return self.link_bandwidth_gbs, self.link_latency_us
        return (min(self.link_bandwidth_gbs, self.internode_bandwidth_gbs),
                max(self.link_latency_us, self.internode_latency_us))


@dataclass(frozen=True)
class Model:
    """One decoder-only transformer, dense or mixture-of-experts, with the sizes the cost
    models need. The MoE fields default to a dense model, so a dense preset names none."""

    name: str
    params_b: float  # every parameter (all experts): what memory holds and a sync moves
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int  # the dense MLP's (a MoE's dense layers', if any)
    vocab: int
    tied_embeddings: bool
    source: str
    active_params_b: float = 0.0  # MoE: the parameters one token passes through (0: dense)
    experts: int = 0  # MoE: routed experts per MoE layer (0: dense)
    experts_per_token: int = 0  # MoE: routed experts each token goes to (top-k)
    expert_intermediate: int = 0  # MoE: one expert's MLP width
    expert_params_b: float = 0.0  # MoE: parameters of all routed experts, all layers
    kv_width: int = 0  # elements a token caches per layer (0: K and V, 2*kv_heads*head_dim;
    # multi-head latent attention caches its latent and rope key instead)
    config: str = ""  # the config.json it was read from (the kernel estimator reads it as is)

    @property
    def is_moe(self) -> bool:
        return self.experts > 0

    @property
    def active_b(self) -> float:
        """Billions of parameters one token's forward pass multiplies by."""
        return self.active_params_b or self.params_b

    def weight_bytes(self, dtype_bytes: float = 2) -> float:
        """Bytes of all weights (tied embeddings once, every expert): what memory holds."""
        return self.params_b * 1e9 * dtype_bytes

    def step_weight_bytes(self, batch: float, dtype_bytes: float = 2) -> float:
        """Bytes one decode step of `batch` sequences reads: every weight of a dense model;
        of a MoE, the non-expert weights and the experts some token of the batch routes to,
        E * (1 - (1 - k/E)^batch) of the E per layer when routing is uniform."""
        if not self.is_moe:
            return self.weight_bytes(dtype_bytes)
        share = 1.0 - (1.0 - self.experts_per_token / self.experts) ** max(batch, 1.0)
        dense = self.params_b - self.expert_params_b
        return (dense + self.expert_params_b * share) * 1e9 * dtype_bytes

    def kv_bytes_per_token(self, dtype_bytes: float = 2) -> float:
        """KV-cache bytes per cached token: K and V per layer per KV head (GQA-aware), or
        the latent width of multi-head latent attention."""
        width = self.kv_width or 2 * self.kv_heads * self.head_dim
        return self.layers * width * dtype_bytes

    @property
    def flops_per_token_forward(self) -> float:
        """Forward matmul FLOPs per token, ~2 * active params (one multiply-add per weight
        a token passes through: all of a dense model, a MoE's routed top-k experts only).

        Excludes attention scores (see ``attention_flops_forward``); slightly overcounts
        untied models, whose input embedding is a lookup rather than a matmul.
        """
        return 2.0 * self.active_b * 1e9

    def attention_flops_forward(self, context: int) -> float:
        """Forward FLOPs for one new token attending to ``context`` tokens.

        Per layer and query head: Q.K^T and P.V each cost 2 * head_dim FLOPs per attended
        token, hence 4 * layers * heads * head_dim * context.
        """
        return 4.0 * self.layers * self.heads * self.head_dim * context


USER_TABLES = {"hardware.toml": "gpus", "models.toml": "models"}


def user_presets_path() -> Path:
    """Where a user's own presets are read from (the file need not exist)."""
    given = os.environ.get("ROLLOUTBENCH_PRESETS")
    if given:
        return Path(given)
    home = os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config"
    return Path(home) / "rolloutbench" / "presets.toml"


def _table(filename: str) -> dict[str, dict[str, Any]]:
    """The packaged presets of one file, then the user's own of that kind."""
    path = user_presets_path()
    try:
        info = path.stat()
        stamp: tuple[int, int] | None = (info.st_mtime_ns, info.st_size)
    except OSError:
        stamp = None
    return _tables(filename, str(path), stamp)


@cache
def _tables(filename: str, user: str, stamp: tuple[int, int] | None
            ) -> dict[str, dict[str, Any]]:
    """Parse once per user file version; the packaged files ship as package data."""
    text = resources.files("harness.sim").joinpath("presets", filename).read_text("utf-8")
    table = tomllib.loads(text)
    table.update(_user_rows(filename, user, stamp, set(table)))
    return table


def _user_rows(filename: str, user: str, stamp: tuple[int, int] | None,
               packaged: set[str]) -> dict[str, dict[str, Any]]:
    """The user's own presets of one kind (none when the file is absent); one that would
    shadow a packaged name is refused."""
    if stamp is None:
        return {}
    try:
        mine = parse_toml(Path(user).read_bytes()).get(USER_TABLES[filename], {})
    except (OSError, tomllib.TOMLDecodeError) as err:
        raise ConfigError(f"presets file {user}: {err}") from None
    rows = {}
    for name, fields_ in mine.items():
        key = name.lower()
        if key in packaged:
            raise ConfigError(f"presets file {user}: {USER_TABLES[filename]}.{name} is a "
                             f"packaged preset; give yours another name")
        if not isinstance(fields_, dict):
            raise ConfigError(f"presets file {user}: {USER_TABLES[filename]}.{name} must be "
                             f"a table")
        rows[key] = {"source": f"user presets file {user}", **fields_}
    return rows


def check_user_file(path: Path) -> None:
    """A presets file of the user's own holds `[gpus.NAME]` and `[models.NAME]` tables and
    nothing else: anything else (`[gpu.x]`, a stray key) was read as nothing and said
    nowhere, and the preset it meant was then "unknown". Checked where the file is named
    (`--presets`, $ROLLOUTBENCH_PRESETS, the default path), not where a run's config file
    carries its presets beside its own fields (`run --config` of a plan's best/*.toml)."""
    try:
        whole = parse_toml(path.read_bytes())
    except (OSError, tomllib.TOMLDecodeError) as err:
        raise ConfigError(f"presets file {path}: {err}") from None
    kinds = sorted(USER_TABLES.values())
    for key in sorted(whole.keys() - set(kinds)):
        close = difflib.get_close_matches(key, kinds, 1, 0.5)
        hint = f"did you mean {close[0]!r}?" if close else "it holds [gpus.NAME], [models.NAME]"
        raise ConfigError(f"presets file {path}: unknown table or key {key!r}; {hint}")


def user_figures(model: str, gpus: list[str]) -> dict[str, dict[str, dict[str, Any]]]:
    """`{"presets": {"gpus": {NAME: fields}, "models": {...}}}` for those of these names
    that are the user's own presets, resolved; `{}` when all are packaged. A trace's
    header carries it, so that a run on a user's GPU can be read without the user's
    file (and a run on packaged presets keeps the header it always had)."""
    out: dict[str, dict[str, Any]] = {}
    for filename, kind, names, load in (("hardware.toml", "gpus", gpus, load_hardware),
                                        ("models.toml", "models", [model], load_model)):
        path = user_presets_path()
        mine = set(_table(filename)) - set(_tables(filename, str(path), None))
        for name in dict.fromkeys(n.lower() for n in names):
            if name in mine:
                value = load(name)
                out.setdefault(kind, {})[name] = model_row(value)
    return {"presets": out} if out else {}


def figures_toml(model: str, gpus: list[str]) -> list[str]:
    """`user_figures` as the tables of a presets file (`[gpus."NAME"]`, ...), for a
    config file that must stand alone (a `plan` best/*.toml): `run --config` reads such
    tables as the user's presets. No lines when every preset is packaged."""
    def show(value: Any) -> str:
        return ("true" if value else "false") if isinstance(value, bool) else json.dumps(value)

    lines: list[str] = []
    for kind, rows in user_figures(model, gpus).get("presets", {}).items():
        for name, row in rows.items():
            lines += ["", f"[{kind}.{json.dumps(name)}]"]
            lines += [f"{key} = {show(value)}" for key, value in row.items()]
    return lines


def _lookup(filename: str, kind: str, name: str) -> dict[str, Any]:
    table = _table(filename)
    if name in table:
        return table[name]
    key = name.lower()  # the keys are lower case: "Qwen2.5-14B" is "qwen2.5-14b"
    if key in table:
        return table[key]
    # A bare prefix ("a100") may fit several keys; otherwise ask difflib for the nearest one.
    close = [k for k in table if key and k.startswith(key)]
    close = close or difflib.get_close_matches(key, table, n=1, cutoff=0.4)
    # no close name: point to the list, not print it (eleven models ran to 230 columns)
    hint = (f"did you mean {' or '.join(map(repr, close))}?" if close
            else f"`rolloutbench presets` lists the {len(table)} known")
    raise PresetError(f"unknown {kind} preset {name!r}; {hint}")


def _build(cls: type[T], name: str, raw: dict[str, Any]) -> T:
    """Check the table has exactly the dataclass fields, with figures that can exist, so a
    typo or an impossible number in a file fails in one line before any work (a zero
    bf16_tflops would otherwise end a run in a ZeroDivisionError deep in the cost model)."""
    spec = {f.name: f.type for f in fields(cls)}
    required = {f.name for f in fields(cls) if f.default is MISSING}
    missing, extra = required - raw.keys(), raw.keys() - spec.keys()
    where = raw.get("source", "") if str(raw.get("source", "")).startswith("user") else ""
    head = f"{where + ': ' if where else ''}preset {name!r}"
    if missing or extra:
        hints = [f"{key!r}: did you mean {close[0]!r}?" for key in sorted(extra)
                 for close in [difflib.get_close_matches(key, sorted(missing), 1, 0.5)]
                 if close]
        wrong = [f"{what} {sorted(keys)}" for what, keys in (("missing", missing),
                                                              ("unknown", extra)) if keys]
        raise ConfigError(f"{head}: {', '.join(wrong)}"
                          + (f" ({'; '.join(hints)})" if hints else "")
                          + " (the field names are those `rolloutbench presets --json` shows)")
    # TOML parses "40" as an int; accept it where a float is declared. Exact types otherwise.
    values = {k: float(v) if spec[k] is float and type(v) is int else v for k, v in raw.items()}
    for key, value in values.items():
        if type(value) is not spec[key]:
            raise ConfigError(f"{head}: {key} should be {spec[key].__name__}")
        if type(value) in (int, float) and not (math.isfinite(value) and value > 0):
            raise ConfigError(f"{head}: {key} = {value} must be a finite number above 0")
    return cls(**values)


def load_hardware(name: str) -> Hardware:
    """The GPU preset ``name`` (a key of hardware.toml); raises PresetError if unknown."""
    return _build(Hardware, name, _lookup("hardware.toml", "hardware", name))


def load_model(name: str) -> Model:
    """The model preset ``name`` (a key of models.toml), or the model of a Hugging Face
    ``config.json`` when ``name`` is its path (or its folder's); raises PresetError for an
    unknown preset and ModelConfigError (a ValueError) for a bad file."""
    from harness.sim.model_config import is_config_path, load_config_fields

    if is_config_path(name):
        return Model(**load_config_fields(name))
    raw = _lookup("models.toml", "model", name)
    if raw.get("config"):  # a preset read from a config.json (every MoE preset): its sizes
        path = packaged_config(str(raw["config"]))
        read = {**load_config_fields(path), "name": str(raw.get("name", name)),
                "source": str(raw.get("source", path)), "config": path}
        model = Model(**read)
        full = asdict(model)
        clash = sorted(k for k in raw.keys() - {"name", "config", "source"}
                       if k not in full or raw[k] != full[k])
        if clash:  # sizes given beside the file (a `presets --json` row) must be the file's
            raise ConfigError(f"preset {name!r}: {', '.join(clash)} differ from its config "
                              f"{path}; a preset with `config` takes its sizes from the file")
        return model
    return _build(Model, name, raw)


def shipped_config(stem: str) -> Path:
    """The config.json the measured-kernel database ships for a model, by its file stem
    (`Qwen--Qwen3-30B-A3B`: a hub name with '/' as '--')."""
    return Path(packaged_config(f"aiconfigurator_core/model_configs/{stem}_config.json"))


def packaged_config(ref: str) -> str:
    """The path of a preset's config.json: `aiconfigurator_core/...` is a file shipped
    inside that package (the measured-kernel database ships the configs of the models it
    prices); any other path is taken as it is."""
    head, _, rest = ref.partition("/")
    if head != "aiconfigurator_core":
        return ref
    import aiconfigurator_core

    return str(Path(aiconfigurator_core.__file__).parent / rest)


def model_row(model: Model | Hardware) -> dict[str, Any]:
    """A model's or GPU's fields as a presets file takes them: those at their defaults (the
    MoE fields of a dense model, a GPU's server-sized NVLink domain and NIC) left out, so a
    row reads as it did before those fields existed."""
    defaults = {f.name: f.default for f in fields(model) if f.default is not MISSING}
    return {k: v for k, v in asdict(model).items() if k not in defaults or v != defaults[k]}


def hardware_names() -> list[str]:
    """Hardware preset keys, in file order (for CLI choices and error messages)."""
    return list(_table("hardware.toml"))


def model_names() -> list[str]:
    """Model preset keys, in file order (for CLI choices and error messages)."""
    return list(_table("models.toml"))
