"""`kvsize probe URL`: a running engine (vLLM, SGLang) against kvsize's model, figure by figure."""

from __future__ import annotations

import json
import math
from typing import Annotated, Any

import typer

from kvsize.cli.log import (
    ConfigOpt,
    LogToleranceOpt,
    MaxModelLenOpt,
    WholeWeightsOpt,
    json_document,
    measured_deployment,
    render_log_check,
    write_calibration,
)
from kvsize.cli.options import (
    CalibrationOpt,
    DebugOpt,
    EngineVersionOpt,
    GpuOpt,
    GpuUtilOpt,
    JsonOpt,
    KvDtypeOpt,
    PpOpt,
    TpOpt,
    WeightsDtypeOpt,
    emit,
    user_errors,
)

PROBE_EPILOG = "Example: kvsize probe http://localhost:8000 --gpu h100"
MAX_PAYLOAD_BYTES = 8 * 1024 * 1024  # /metrics of a busy server is some 100 KiB; more is no engine's
UrlArg = Annotated[
    str, typer.Argument(help="The engine's base URL (http://host:port).", show_default=False, metavar="URL")
]
TimeoutOpt = Annotated[
    float, typer.Option("--timeout", help="Seconds to wait for each request to the server.", metavar="SECONDS")
]
SaveCalibrationOpt = Annotated[
    str | None,
    typer.Option(
        "--save-calibration",
        help="Write what the server measured to a file for --calibration (vLLM: the activation, non-torch and "
        "CUDA-graph memory as one sum, needs --gpu and --tp; SGLang: the weights per rank).",
        show_default=False,
        metavar="FILE",
    ),
]


def base_url(url: str) -> str:
    """`url` without a trailing '/' or '/v1' (what an OpenAI client is given); http(s) only."""
    from urllib.parse import urlsplit

    from kvsize.errors import UsageError
    from kvsize.text import clean

    text = url.strip()
    parts = urlsplit(text if "://" in text else f"http://{text}")
    # A URL holds no white space or control characters (RFC 3986); urllib would only refuse it when fetching.
    malformed = any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in text)
    if parts.scheme not in ("http", "https") or not parts.hostname or malformed:
        raise UsageError(f"'{clean(url)[:80]}' is not an http(s) URL", hint="Give the server as http://host:port.")
    path = parts.path.rstrip("/")
    path = path[:-3] if path.endswith("/v1") else path
    return f"{parts.scheme}://{parts.netloc}{path}"


class Fetcher:
    """GET requests to one server: (status, body); a server that does not answer is EnvironmentProblem (exit 3)."""

    def __init__(self, base: str, timeout: float) -> None:
        import urllib.request
        from urllib.parse import urlsplit

        self.base, self.timeout = base, timeout
        host = urlsplit(base).hostname or ""
        loopback = host in ("localhost", "::1") or host.startswith("127.")
        handlers = [urllib.request.ProxyHandler({})] if loopback else []  # a proxy cannot reach this machine
        self.opener = urllib.request.build_opener(*handlers)

    def get(self, path: str) -> tuple[int, bytes]:
        import http.client
        import urllib.error

        from kvsize.errors import EnvironmentProblem

        try:
            with self.opener.open(self.base + path, timeout=self.timeout) as response:
                return response.status, response.read(MAX_PAYLOAD_BYTES + 1)[:MAX_PAYLOAD_BYTES]
        except urllib.error.HTTPError as exc:
            return exc.code, b""
        except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as exc:
            reason = getattr(exc, "reason", exc)
            raise EnvironmentProblem(
                f"cannot reach {self.base} ({reason})", hint="Is the engine running, and is the URL right?"
            ) from None

    def json(self, path: str) -> Any:
        status, body = self.get(path)
        if status != 200:
            return None
        try:
            return json.loads(body.decode("utf-8", "replace"))
        except ValueError:
            return None


def _resolve(ref: str | None, config: str | None, notes: list[str]) -> tuple[Any, Any]:
    """(spec, loaded) of the served model, or (None, None) when kvsize cannot find it."""
    from kvsize.calibration import resolve_measured_model

    return resolve_measured_model(ref, config, notes)


def probe_command(
    url: UrlArg,
    gpu: GpuOpt = None,
    config: ConfigOpt = None,
    tp: TpOpt = "",
    pp: PpOpt = "",
    ctx: MaxModelLenOpt = None,
    gpu_util: GpuUtilOpt = None,
    kv_dtype: KvDtypeOpt = "",
    weights_mem: WholeWeightsOpt = None,
    weights_dtype: WeightsDtypeOpt = None,
    tolerance: LogToleranceOpt = 1.0,
    timeout: TimeoutOpt = 5.0,
    engine_version: EngineVersionOpt = None,
    calibration: CalibrationOpt = None,
    save_calibration: SaveCalibrationOpt = None,
    json_output: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Compare what a running vLLM or SGLang server reports about its KV cache with kvsize's prediction.

    vLLM: /metrics (vllm:cache_config_info), /v1/models, /version. SGLang: /server_info.

    Exit 0: every figure within --tolerance; 1: some are not; 2: not an engine kvsize can read, or nothing to
    predict; 3: the server cannot be reached."""
    with user_errors(debug):
        from kvsize.calibration import calibration_target, require_match
        from kvsize.errors import UsageError
        from kvsize.probe import (
            cache_config_info,
            check_sglang_server,
            check_vllm_server,
            sglang_calibration,
            vllm_calibration,
            vllm_server,
        )

        if not math.isfinite(tolerance) or tolerance < 0:
            raise UsageError(f"--tolerance must be a number >= 0, got {tolerance}")
        if not math.isfinite(timeout) or timeout <= 0:
            raise UsageError(f"--timeout must be a number of seconds > 0, got {timeout}")
        base = base_url(url)
        cal_target = None
        if save_calibration is not None:
            from kvsize.safe_io import output_path

            cal_target = output_path(save_calibration, "--save-calibration")
        fetch = Fetcher(base, timeout)
        notes: list[str] = []
        status, body = fetch.get("/metrics")
        samples = cache_config_info(body.decode("utf-8", "replace")) if status == 200 and b"vllm:" in body else []
        sglang: Any = None
        llamacpp: Any = None
        if not samples:
            sglang = fetch.json("/server_info") or fetch.json("/get_server_info")
            if not (isinstance(sglang, dict) and ("internal_states" in sglang or "max_total_num_tokens" in sglang)):
                sglang = None
                llamacpp = fetch.json("/props")
        if sglang is None and not samples:
            if isinstance(llamacpp, dict) and "default_generation_settings" in llamacpp:
                raise UsageError(
                    f"{base} is a llama.cpp server, whose /props and /slots report no KV cache figure",
                    hint="Check llama-server's start-up log instead: kvsize log LOG.",
                )
            raise UsageError(
                f"{base} serves no engine kvsize can read",
                hint="kvsize reads vLLM (/metrics with vllm:cache_config_info) and SGLang (/server_info).",
            )
        if samples:
            server = vllm_server(samples, fetch.json("/v1/models"), fetch.json("/version"), model_override=None)
            if engine_version is not None:
                if server.version and server.version != engine_version.strip():
                    notes.append(
                        f"release {engine_version.strip()} from --engine-version (the server says {server.version})"
                    )
                import msgspec

                server = msgspec.structs.replace(server, version=engine_version.strip())
            model_ref, engine_name, release = server.model, "vllm", server.version
        else:
            model_ref = sglang.get("model_path") if isinstance(sglang.get("model_path"), str) else None
            engine_name = "sglang"
            release = engine_version.strip() if engine_version else sglang.get("version")
            if engine_version:
                sglang = {**sglang, "version": engine_version.strip()}
        spec, loaded = _resolve(model_ref, config, notes)
        dep = measured_deployment(
            spec,
            loaded,
            gpu=gpu,
            tp=tp,
            pp=pp,
            ctx=ctx,
            gpu_util=gpu_util,
            kv_dtype=kv_dtype,
            weights_mem=weights_mem,
            weights_dtype=weights_dtype,
            calibration=calibration,
        )
        cal = dep.calibration
        if cal is not None:
            target = calibration_target(
                dep.model_id or model_ref or "(a model the server does not name)",
                gpu=dep.gpu_id,
                engine=engine_name,
                engine_version=release if isinstance(release, str) else None,
                tp=dep.tp or 1,
                pp=dep.pp or 1,
                weights_bytes=dep.weights_bytes,
            )
            require_match(cal, target, source="--calibration")
        result = check_vllm_server(server, dep) if samples else check_sglang_server(sglang, dep)
        result.notes[:0] = notes
        if not result.figures:
            raise UsageError(
                f"nothing {base} serves that kvsize can predict"
                + (f" ({'; '.join(result.notes[:5])})" if result.notes else "")
            )
        if cal_target is not None:
            if sglang is not None:
                if dep.gpu_id is None or dep.model_id is None:
                    raise UsageError(
                        "a calibration must name the card and model it measured", hint="Pass --gpu (and --config)."
                    )
                measured = sglang_calibration(sglang, model=dep.model_id, gpu=dep.gpu_id, source=base, tp=dep.tp)
                if measured is None:
                    raise UsageError(
                        f"{base} serves no overhead a calibration holds (no memory_usage.weight in /server_info)",
                        hint="Use the engine's start-up log: kvsize log LOG --gpu GPU --save-calibration FILE.",
                    )
            else:
                measured = vllm_calibration(server, dep, result, source=base)
            write_calibration(cal_target, measured)
    emit(
        lambda console: render_probe(console, result, tolerance, base),
        lambda: _json(result, tolerance, base),
        json_output,
    )
    if not result.passed(tolerance):
        raise typer.Exit(1)


def _json(result: Any, tolerance: float, base: str) -> str:
    data = json.loads(json_document(result, tolerance, failure=None))
    data.pop("startup_failed", None)
    return json.dumps({"url": base, **data}, indent=2, allow_nan=False)


def render_probe(console: Any, result: Any, tolerance: float, base: str) -> None:
    """The figures as `kvsize log` shows them, with the server's column named for what it is."""
    from kvsize.text import markup

    render_log_check(console, result, tolerance, source=f"at {markup(base)}", measured="served")
