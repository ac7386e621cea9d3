"""`kvsize check capacity.yaml`: deployments that must keep fitting, checked in CI.

The file is YAML, read with `yaml.safe_load` only (no tags that build objects), validated by pydantic with
unknown keys rejected; errors name the line and the field. Its JSON Schema is `kvsize schema`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, get_args

import msgspec
import yaml
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    create_model,
    field_validator,
    model_validator,
)

from kvsize.deployment import (
    READERS,
    DeploymentSettings,
    Reader,
    combination_problems,
    read_count,
    read_fraction,
    read_positive_number,
    read_tokens,
    read_tokens_or_zero,
    reader_message,
)
from kvsize.errors import ConfigError, KvsizeError
from kvsize.strict_yaml import (
    MAX_EXPANDED_NODES,
    AliasBombError,
    BadValueError,
    DuplicateKeyError,
    DuplicateMergeError,
    compose_bounded,
)
from kvsize.units import format_bytes

MAX_FILE_BYTES = 4 * 1024 * 1024


def _read_with(read: Reader, accepts: Any) -> BeforeValidator:
    """A pydantic validator running a `kvsize.deployment` reader; its error becomes the field's message."""

    def validate(value: Any) -> Any:
        if value is None:
            return None
        try:
            return read(value)
        except KvsizeError as exc:
            raise ValueError(reader_message(exc)) from None

    return BeforeValidator(validate, json_schema_input_type=accepts)


Count = Annotated[int | None, _read_with(read_count, int | str | None)]
RequiredCount = Annotated[int, _read_with(read_count, int | str)]
RequiredTokens = Annotated[int, _read_with(read_tokens, int | str)]
Tokens = Annotated[int | None, _read_with(read_tokens, int | str | None)]
Fraction = Annotated[float | None, _read_with(read_fraction, float | str | None)]
TokensOrZero = Annotated[int | None, _read_with(read_tokens_or_zero, int | str | None)]
PositiveNumber = Annotated[float | None, _read_with(read_positive_number, float | str | None)]


def _settings_fields() -> dict[str, Any]:
    """The deployment settings' keys as pydantic fields: the record's types, defaults and descriptions, read by
    the CLI's readers (kvsize.deployment.READERS)."""
    fields: dict[str, Any] = {}
    for info in msgspec.structs.fields(DeploymentSettings):
        kind, meta = get_args(info.type)[:2]
        read, accepts = READERS[info.name]
        fields[info.name] = (
            Annotated[kind, _read_with(read, accepts)],
            Field(default=info.default, description=meta.description),
        )
    return fields


if TYPE_CHECKING:
    from kvsize.calibration import Calibration, CalibrationTarget

if TYPE_CHECKING:  # type checkers see a plain model; its fields are read through `Deployment.settings()`
    _Settings = BaseModel
else:
    _Settings = create_model(
        "DeploymentSettings", __config__=ConfigDict(extra="forbid", frozen=True), **_settings_fields()
    )


class Requirement(BaseModel):
    """What must hold for a deployment to pass. Without any limit, `batch` requests of `ctx` must fit."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    ctx: RequiredTokens
    """Tokens per request: 8192, 8k, 128k, 1M."""
    batch: RequiredCount = 1
    """Requests of `ctx` tokens served at once (the default check: they must fit)."""
    min_concurrency: Count = None
    """At least this many requests of `ctx` tokens must fit at once (all replicas together)."""
    max_kv_fraction: Fraction = None
    """`batch` requests of `ctx` may take at most this share of the KV budget."""
    max_context: Tokens = None
    """Each of `batch` requests must be able to reach at least this context."""
    min_pool_tokens: Count = None
    """The engine's KV pool (vLLM "GPU KV cache size") must hold at least this many tokens."""
    prefix_len: TokensOrZero = None
    """Tokens every request shares (a system prompt), stored once where the engine shares prefixes: 0, 2k."""
    prompt_len: Tokens = None
    """Prompt tokens per request; with output_len, the steady-state figures (ctx stays the admission size)."""
    output_len: Tokens = None
    min_steady_state_concurrency: PositiveNumber = None
    """At least this many requests of prompt_len + output_len resident on average (all replicas together)."""


class Deployment(_Settings):
    """One deployment: a model on a kind of GPU under an engine, and what it must sustain. The memory,
    parallelism and engine settings are those of the command line (`kvsize.deployment`), validated alike."""

    name: str = Field(min_length=1)
    model: str = Field(min_length=1)
    """Hub id, or a path to a config.json or its folder (relative paths: from this file's folder)."""
    gpu: str | None = None
    """GPU profile id or alias (kvsize gpus)."""
    engine: str = "vllm"
    engine_version: str | None = None
    kv_dtype: str = "auto"
    weights_dtype: str | None = None
    calibration: str | None = None
    """A file written by `kvsize log --save-calibration` (relative paths: from this file's folder)."""
    require: Requirement

    @field_validator("engine")
    @classmethod
    def _one_engine(cls, value: str) -> str:
        # One verdict per deployment: 'all' or a list would be judged on its first engine alone, silently.
        if value.strip().lower() == "all" or "," in value:
            raise ValueError("a deployment is sized under one engine; write one deployment per engine")
        return value

    @model_validator(mode="after")
    def _settings_combine(self) -> Deployment:
        for problem in combination_problems(self):
            raise ValueError(problem)
        return self

    def settings(self) -> DeploymentSettings:
        """The deployment's parallelism, memory and engine settings, as the CLI holds them."""
        return DeploymentSettings(**{key: getattr(self, key) for key in READERS})  # already read: no re-reading


class CapacityFile(BaseModel):
    """A list of deployments for `kvsize check`."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    deployments: list[Deployment] = Field(min_length=1)
    _lines: tuple[int | None, ...] = PrivateAttr(default=())
    """1-based line of each deployment in the file it was read from."""

    def line_of(self, index: int) -> int | None:
        return self._lines[index] if index < len(self._lines) else None


class CheckResult(BaseModel):
    """One deployment's verdict, with the figures it was judged on."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    model: str
    passed: bool = Field(serialization_alias="pass")
    reason: str
    gpu: str | None
    engine: str
    tp: int
    pp: int
    replicas: int
    ctx: int
    batch: int
    kv_dtype: str
    kv_bytes_per_token: int | None = None
    kv_cache_bytes_per_gpu: int | None = None
    kv_budget_bytes: int | None = None
    weights_bytes: int | None = None
    max_concurrency: int | None = None
    kv_pool_tokens: int | None = None
    shared_bytes: int | None = None
    steady_state_concurrency: float | None = None
    concurrency: float | None = None
    max_context: int | None = None
    """The longest context each of `batch` requests can have, never past the model's maximum context."""
    max_context_by_memory: int | None = None
    """What the KV budget alone holds per request (may pass the model's maximum; null: no limit)."""
    line: int | None = None
    """The deployment's line in the capacity file."""
    _launch: Any = PrivateAttr(default=None)
    """check_file(emit=True): the kvsize.launch.Launch serving a deployment that passed, or why there is none."""

    @property
    def launch(self) -> Any:
        """The launch command (kvsize.launch.Launch), or a str saying why there is none; None: not asked, or the
        deployment failed."""
        return self._launch


# --- reading the file ------------------------------------------------------------------------------------


def _line_of(root: yaml.Node | None, loc: Sequence[int | str]) -> int | None:
    """1-based line of the YAML node at a pydantic error location."""
    node = root
    line = node.start_mark.line + 1 if node is not None else None
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            found = next((v for k, v in node.value if getattr(k, "value", None) == part), None)
            if found is None:  # a key the file lacks (a missing field): the line of the mapping that lacks it
                return line
            node = found
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            node = node.value[part]
        else:
            break
        line = node.start_mark.line + 1
    return line


def parse_capacity(text: str, *, source: str) -> CapacityFile:
    """Validate a capacity file's text; errors name the file, the line and the field."""
    if len(text.encode()) > MAX_FILE_BYTES:
        raise ConfigError(f"{source}: larger than {MAX_FILE_BYTES} bytes")
    try:
        # One loader for every YAML kvsize reads: alias expansion bounded, duplicate and double merge keys refused.
        data, root = compose_bounded(text)
    except AliasBombError:
        raise ConfigError(
            f"{source}: anchors and aliases expand to over {MAX_EXPANDED_NODES:,} nodes",
            hint="Refusing a possible alias bomb; write the deployments out.",
        ) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f" line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = " ".join(str(exc.problem or exc.context or "invalid YAML").split())
        if isinstance(exc, (DuplicateKeyError, DuplicateMergeError)):
            hint = "Give each key once; merge the two entries."
        elif isinstance(exc, BadValueError):
            hint = "Write a plain number or text (quote a value that must stay text)."
        else:
            hint = "Capacity files are plain YAML: no tags that build objects."
        error = ConfigError(f"{source}:{where}: {problem}", hint=hint)
        error.line = mark.line + 1 if mark else None
        raise error from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source}: invalid YAML ({' '.join(str(exc).split())})") from None
    if not isinstance(data, Mapping):
        raise ConfigError(
            f"{source}: must be a mapping with a 'deployments' list", hint="See 'kvsize schema' for the format."
        )
    try:
        capacity = CapacityFile.model_validate(data)
        capacity._lines = tuple(_line_of(root, ["deployments", i]) for i in range(len(capacity.deployments)))
        return capacity
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = [p for p in err["loc"] if isinstance(p, (int, str))]
        message = str(err["msg"]).removeprefix("Value error, ")
        field = ".".join(str(p) for p in loc) or "(top)"
        line = _line_of(root, loc)
        if err["type"] == "extra_forbidden":
            message = f"unknown key '{loc[-1]}'"
        elif err["type"] == "missing":
            message = "missing"
        error = ConfigError(
            f"{source}: line {line}: field '{field}': {message}", hint="See 'kvsize schema' for the format."
        )
        error.line = line
        raise error from None


def load_capacity(path: Path) -> CapacityFile:
    from kvsize.safe_io import read_small_text

    # Regular files under the cap only: /dev/zero, a FIFO or a huge file is refused before any read.
    text = read_small_text(path, max_bytes=MAX_FILE_BYTES, what="capacity file")
    return parse_capacity(text, source=str(path))


# --- judging ---------------------------------------------------------------------------------------------


def _resolve_model(model: str, base: Path) -> str:
    """Relative paths in the file are relative to the file's folder. A name the file system refuses (too long,
    '~unknown-user') is left as written, for load_model_config to report in one line."""
    try:
        if model.startswith((".", "~")) or model.endswith(".json") or (base / model).exists():
            expanded = Path(model).expanduser()
            return str(expanded if expanded.is_absolute() else base / expanded)
    except (OSError, ValueError, RuntimeError):
        pass
    return model


@lru_cache(maxsize=256)
def _loaded(model: str, revision: str | None) -> Any:
    from kvsize.resolve import load_model_config

    return load_model_config(model, revision=revision)


def _sized(loaded: Any, revision: str | None, arguments: dict[str, Any], sized: dict[bytes, Any] | None) -> Any:
    """estimate_loaded(loaded, **arguments), once per distinct deployment: `sized` (one check's memo) maps the
    model and every argument, as JSON, to the estimate. Deployments that differ only in their name or their
    requirement's thresholds share one sizing (an Estimate is immutable); arguments that are not plain data
    are sized anew."""
    import msgspec

    from kvsize.api import estimate_loaded

    if sized is None:
        return estimate_loaded(loaded, **arguments)
    try:
        key = msgspec.json.encode([loaded.location, loaded.model, revision, sorted(arguments.items())])
    except (TypeError, msgspec.EncodeError):
        return estimate_loaded(loaded, **arguments)
    if key not in sized:
        sized[key] = estimate_loaded(loaded, **arguments)
    return sized[key]


def check_deployment(
    d: Deployment,
    *,
    base: Path,
    default_calibration: Calibration | None = None,
    emit: bool = False,
    with_max_context: bool = False,
    sized: dict[bytes, Any] | None = None,
) -> CheckResult:
    """Size one deployment and judge it against its requirement; `emit`: with the engine's launch command when it
    passes (kvsize check --emit-dir); `with_max_context`: max_context computed even when the requirement does not
    ask for it (kvsize check --json), else only then (the search costs about a third of the check's time)."""
    req = d.require
    settings = d.settings()
    ctx = req.ctx
    group = settings.tp * settings.pp
    replicas = 1
    common: dict[str, Any] = {
        "name": d.name,
        "model": d.model,
        "gpu": d.gpu or (format_bytes(settings.gpu_mem) if settings.gpu_mem else None),
        "engine": d.engine,
        "tp": settings.tp,
        "pp": settings.pp,
        "ctx": ctx,
        "batch": req.batch,
        "kv_dtype": d.kv_dtype,
    }
    if settings.gpus is not None:
        if settings.gpus % group:
            return CheckResult(
                passed=False,
                replicas=0,
                reason=f"gpus {settings.gpus} is not a multiple of tp x pp = {group}",
                **common,
            )
        replicas = settings.gpus // group
    if d.gpu is None and settings.gpu_mem is None:
        return CheckResult(passed=False, replicas=replicas, reason="no gpu or gpu_mem given", **common)
    options = settings.estimate_options()
    if d.calibration is not None or default_calibration is not None:
        from kvsize.calibration import apply_calibration, calibration_mismatches, read_calibration

        target = _calibration_target(d, base)
        if d.calibration is not None:  # its own ('' too: refused): about this deployment, or exit 2
            path = str(base / d.calibration)
            options = apply_calibration(options, read_calibration(path), target=target, source=path)
        elif default_calibration is not None and not calibration_mismatches(default_calibration, target):
            # --calibration for the whole file: it applies to the deployments it measured, and to no other
            options = apply_calibration(options, default_calibration, target=target)
    loaded = _loaded(_resolve_model(d.model, base), settings.revision)
    arguments: dict[str, Any] = {
        "ctx": [ctx],
        "batch": [req.batch],
        "kv_dtype": d.kv_dtype,
        "engine": d.engine,
        "engine_version": d.engine_version,
        "gpu": d.gpu,
        "weights_dtype": d.weights_dtype,
        **options,
        "with_max_context": with_max_context or req.max_context is not None,
        "prefix_len": req.prefix_len,
        "prompt_len": req.prompt_len,
        "output_len": req.output_len,
    }
    result = _sized(loaded, settings.revision, arguments, sized)
    s = result.scenarios[0]
    fit = s.gpu
    assert fit is not None
    common["kv_dtype"] = s.kv_dtype.value
    figures: dict[str, Any] = {
        "kv_bytes_per_token": s.kv_bytes_per_token,
        "kv_cache_bytes_per_gpu": s.kv_cache_bytes_per_gpu,
        "kv_budget_bytes": fit.kv_budget_bytes,
        "weights_bytes": fit.weights_bytes,
        "max_concurrency": fit.max_concurrency * replicas,
        "kv_pool_tokens": fit.kv_pool_tokens,
        "concurrency": fit.concurrency,
        "max_context": fit.max_context,
        "max_context_by_memory": fit.max_context_by_memory,
    }
    # A ctx the engine refuses for the model (kvsize/fit.py context_limit) fails with the engine's rule; the
    # memory is judged on its own.
    limit = fit.context_limit if fit.context_limit is not None and fit.context_limit.refuses else None
    failures = []
    if limit is not None:
        switch = f"; {limit.override} overrides it" if limit.override else ""
        failures.append(f"{limit.reason} ({limit.source}){switch}")
    failures += _judge(
        req,
        fit.kv_budget_bytes,
        s.kv_cache_bytes_per_gpu,
        fit.max_concurrency * replicas,
        fit.max_context,
        fit.kv_pool_tokens,
        fits=fit.memory_fits,  # a refusing limit is its own failure above
        replicas=replicas,
        max_context_by_memory=fit.max_context_by_memory,
    )
    steady = fit.steady_state_concurrency * replicas if fit.steady_state_concurrency is not None else None
    figures.update(shared_bytes=s.shared_bytes, steady_state_concurrency=steady)
    if req.min_steady_state_concurrency is not None and (steady or 0) < req.min_steady_state_concurrency:
        failures.append(
            f"steady-state concurrency is {steady or 0:.1f}, below {req.min_steady_state_concurrency:g}"
            + ("" if steady is not None else " (give prompt_len and output_len)")
        )
    reason = "; ".join(failures) if failures else _summary(req, fit.max_concurrency * replicas)
    checked = CheckResult(passed=not failures, replicas=replicas, reason=reason, **common, **figures)
    if emit and not failures:
        checked._launch = _launch(d, base, s, options)
    return checked


def _launch(d: Deployment, base: Path, scenario: Any, options: Mapping[str, Any]) -> Any:
    """The command serving `d` as it was sized (kvsize.launch.sized_launch, as `kvsize MODEL --emit`), or why
    there is none: an engine kvsize emits no command for, or a release with no flag list."""
    from kvsize.errors import UsageError
    from kvsize.launch import EMIT_ENGINES, sized_launch

    if scenario.engine not in EMIT_ENGINES:
        return f"no launch command for engine {scenario.engine} (only {', '.join(EMIT_ENGINES)})"
    settings = d.settings()
    try:
        return sized_launch(
            _resolve_model(d.model, base),
            scenario,
            _loaded(_resolve_model(d.model, base), settings.revision),
            options,
            gpu=d.gpu,
            engine_version=d.engine_version,
            kv_memory_bytes=settings.kv_memory,
            revision=settings.revision,
            weights_dtype=d.weights_dtype,
        )
    except UsageError as exc:
        return f"{exc}. {exc.hint}" if exc.hint else str(exc)


def _judge(
    req: Requirement,
    budget: int,
    kv_per_gpu: int,
    concurrency: int,
    max_context: int | None,
    pool_tokens: int | None,
    *,
    fits: bool,
    replicas: int,
    max_context_by_memory: int | None = None,
) -> list[str]:
    failures = []
    if budget < 0:
        return [f"the weights leave no KV memory (budget {format_bytes(budget)})"]
    limits = (req.min_concurrency, req.max_kv_fraction, req.max_context, req.min_pool_tokens)
    if all(limit is None for limit in limits) and not fits and replicas == 1:
        failures.append(
            f"{_plural(req.batch, 'request')} of {req.ctx:,} tokens need "
            f"{format_bytes(kv_per_gpu)} of KV per GPU, over the budget of {format_bytes(budget)}"
        )
    if req.min_concurrency is not None and concurrency < req.min_concurrency:
        failures.append(f"max concurrency at {req.ctx:,} tokens is {concurrency:,}, below {req.min_concurrency:,}")
    if req.max_kv_fraction is not None and kv_per_gpu > req.max_kv_fraction * budget:
        failures.append(
            f"{_plural(req.batch, 'request')} of {req.ctx:,} tokens take {kv_per_gpu / budget:.1%} of the KV "
            f"budget, over {req.max_kv_fraction:.0%}"
            if budget
            else "the KV budget is zero"
        )
    if req.max_context is not None and max_context is not None and max_context < req.max_context:
        by_model = max_context_by_memory is None or max_context_by_memory > max_context
        failures.append(
            f"{_plural(req.batch, 'request')} reach{'es' if req.batch == 1 else ''} at most {max_context:,} tokens"
            + (" (the model's maximum context)" if by_model else "")
            + f", below {req.max_context:,}"
        )
    if req.min_pool_tokens is not None and (pool_tokens or 0) < req.min_pool_tokens:
        failures.append(f"the KV pool holds {pool_tokens or 0:,} tokens, below {req.min_pool_tokens:,}")
    return failures


def _summary(req: Requirement, concurrency: int) -> str:
    return f"ok: {concurrency:,} request{'s' if concurrency != 1 else ''} of {req.ctx:,} tokens fit"


def _calibration_target(d: Deployment, base: Path) -> CalibrationTarget:
    """The deployment a calibration must have measured to apply to `d` (its weights as kvsize finds them)."""
    from kvsize.calibration import calibration_target, model_weights

    settings = d.settings()
    try:
        weights = model_weights(_loaded(_resolve_model(d.model, base), settings.revision), d.weights_dtype)
    except KvsizeError:  # a model that cannot be loaded fails its own deployment
        weights = None
    return calibration_target(
        d.model,
        gpu=d.gpu,
        engine=d.engine,
        engine_version=d.engine_version,
        tp=settings.tp,
        pp=settings.pp,
        weights_bytes=weights,
    )


def check_file(
    path: Path, calibration: str | None = None, *, emit: bool = False, with_max_context: bool = False
) -> list[CheckResult]:
    """Every deployment's verdict. A model that cannot be loaded fails its deployment (the others are still
    checked); any other bad value (GPU, engine, dtype) is bad input naming the deployment and its line, and so is
    a requirement that cannot be judged (min_pool_tokens under an engine with no pool).
    `calibration` (kvsize check --calibration) applies to the deployments without one of their own that it
    measured (model, card, engine, release, tp x pp), to no other; one that matches none is bad input.
    `emit`: each result carries its launch command, or why it has none (CheckResult.launch).
    `with_max_context`: every result's max_context computed (kvsize check --json); else only where required."""
    capacity = load_capacity(path)
    base = path.parent
    for index, d in enumerate(capacity.deployments):  # a requirement that cannot be judged is bad input: exit 2
        problem = _unjudgeable(d)
        if problem is not None:
            line = capacity.line_of(index)
            where = f"{path}: line {line}: deployment '{d.name}'" if line else f"{path}: deployment '{d.name}'"
            error = ConfigError(
                f"{where}: {problem}",
                hint="min_pool_tokens judges the pool vllm, sglang and trtllm allocate at start-up; for other "
                "engines require min_concurrency or max_kv_fraction.",
            )
            error.line = line
            raise error
    measured: Calibration | None = None
    if calibration is not None:
        from kvsize.calibration import calibration_mismatches, read_calibration, require_match

        measured = read_calibration(calibration)
        targets = []
        for d in capacity.deployments:
            if d.calibration:
                continue
            try:
                targets.append(_calibration_target(d, base))
            except KvsizeError:  # reported with its deployment's line below
                continue
        if targets and all(calibration_mismatches(measured, t) for t in targets):
            require_match(measured, targets[0], source=str(calibration))  # applies to none: say how it differs
    results = []
    sized: dict[bytes, Any] = {}
    for index, d in enumerate(capacity.deployments):
        line = capacity.line_of(index)
        where = f"{path}: line {line}: deployment '{d.name}'" if line else f"{path}: deployment '{d.name}'"
        try:
            _loaded(_resolve_model(d.model, base), d.settings().revision)
        except KvsizeError as exc:  # its hint says how to fix it: "Did you mean: ..." for a loose name
            hint = f" {exc.hint}" if exc.hint else ""
            results.append(_unloadable(d, line, f"model '{d.model}' cannot be loaded: {_sentence(str(exc))}{hint}"))
            continue
        try:
            results.append(
                check_deployment(
                    d,
                    base=base,
                    default_calibration=measured,
                    emit=emit,
                    with_max_context=with_max_context,
                    sized=sized,
                ).model_copy(update={"line": line})
            )
        except KvsizeError as exc:  # say which deployment; the class (and so the exit code) stays
            exc.args = (f"{where}: {exc}",)
            exc.line = line
            raise
    return results


def _unjudgeable(d: Deployment) -> str | None:
    """Why `d`'s requirement cannot be judged, or None. min_pool_tokens is the engine's own KV pool (vLLM "GPU KV
    cache size", SGLang max_total_num_tokens, TensorRT-LLM allocatePools: kvsize/fit.py pool_figures); formula,
    hf and llama.cpp have none, so the requirement would otherwise read as a pool of 0 tokens."""
    if d.require.min_pool_tokens is None:
        return None
    from kvsize.engines import get_engine
    from kvsize.engines.sglang import SglangEngine
    from kvsize.engines.trtllm import TrtllmEngine
    from kvsize.engines.vllm import VllmEngine

    pooled = (VllmEngine, SglangEngine, TrtllmEngine)
    try:
        engine = get_engine(d.engine)
    except KvsizeError:  # an unknown engine is reported with its deployment when it is sized
        return None
    if isinstance(engine, pooled):
        return None
    return f"engine {d.engine} has no KV pool to hold min_pool_tokens"


def _plural(count: int, word: str) -> str:
    return f"{count:,} {word}" + ("" if count == 1 else "s")


def _sentence(text: str) -> str:
    return text if text.endswith((".", "?", "!", ")")) else f"{text}."


def _unloadable(d: Deployment, line: int | None, reason: str) -> CheckResult:
    ctx = int(d.require.ctx)
    settings = d.settings()
    return CheckResult(
        name=d.name,
        model=d.model,
        passed=False,
        reason=reason,
        gpu=d.gpu or (str(settings.gpu_mem) if settings.gpu_mem else None),
        engine=d.engine,
        tp=settings.tp,
        pp=settings.pp,
        replicas=0,
        ctx=ctx,
        batch=d.require.batch,
        kv_dtype=d.kv_dtype,
        line=line,
    )


# --- reporting -------------------------------------------------------------------------------------------


def junit_xml(results: Sequence[CheckResult], *, suite: str = "kvsize capacity") -> str:
    """A JUnit report: one test case per deployment, a <failure> with the reason when it fails. Names and
    reasons pass through `kvsize.text.clean`, which escapes every character XML 1.0 forbids (C0 controls,
    lone surrogates, U+FFFE/U+FFFF), so the file stays well-formed whatever a deployment is called."""
    from xml.sax.saxutils import escape, quoteattr

    from kvsize.text import clean

    failures = sum(not r.passed for r in results)
    lines = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        f'<testsuite name={quoteattr(clean(suite))} tests="{len(results)}" failures="{failures}" errors="0">',
    ]
    for r in results:
        lines.append(f"  <testcase classname={quoteattr(clean(r.model))} name={quoteattr(clean(r.name))}>")
        if not r.passed:
            reason = clean(r.reason)
            lines.append(f"    <failure message={quoteattr(reason)}>{escape(reason)}</failure>")
        lines.append("  </testcase>")
    lines.append("</testsuite>")
    return "\n".join(lines) + "\n"


def github_error_annotation(exc: KvsizeError, *, file: str) -> str:
    """The workflow command for a capacity file that cannot be checked at all (exit 2): one ::error on the
    line the error names, when it names one, with the same text as the `Error:` line."""
    from kvsize.text import workflow_message, workflow_property

    message = " ".join(f"{_sentence(str(exc))} {exc.hint or ''}".split())
    return (
        f"::error file={workflow_property(file)}{f',line={exc.line}' if exc.line else ''}"
        f",title={workflow_property('kvsize capacity: bad input')}::{workflow_message(message)}"
    )


def github_annotations(results: Sequence[CheckResult], *, file: str) -> list[str]:
    """GitHub Actions workflow commands: one ::error per failing deployment. Property values escape '%', CR,
    LF, ':' and ',' and the message '%', CR and LF (actions/runner ActionCommand.cs escape mappings), so a
    deployment named 'x,file=/etc/passwd,line=1::y' cannot forge the annotation's file or end it early."""
    from kvsize.text import workflow_message, workflow_property

    return [
        f"::error file={workflow_property(file)}{f',line={r.line}' if r.line else ''}"
        f",title={workflow_property(f'kvsize capacity: {r.name}')}::{workflow_message(r.reason)}"
        for r in results
        if not r.passed
    ]
