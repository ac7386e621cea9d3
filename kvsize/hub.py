"""Hugging Face Hub access: config.json and weight metadata. huggingface_hub is imported inside functions
so that `kvsize --help` and registry runs never load it.

huggingface_hub brings the behaviour users expect: HF_TOKEN / `hf auth login` credentials, HF_HUB_OFFLINE,
the shared HF cache (a config fetched once works offline afterwards) and revisions.
"""

from __future__ import annotations

import math
import os
import re
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kvsize.errors import ConfigError, EnvironmentProblem, KvsizeError, ModelNotFound

REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]{0,95}(/[A-Za-z0-9][\w.-]{0,95})?$")
MAX_HUB_CONFIG_BYTES = 4 * 1024 * 1024  # as kvsize.resolve.MAX_CONFIG_BYTES: real config.json files are < 100 KiB
DEFAULT_TIMEOUT_S = 5.0
"""Seconds per network operation unless HF_HUB_ETAG_TIMEOUT / HF_HUB_DOWNLOAD_TIMEOUT say otherwise:
huggingface_hub's own default (10 s per request, and several requests in a row) made an unreachable hub
take ~24 s to report. A config fetch makes one request first, a HEAD (get_hf_file_metadata, whose
retry_on_errors defaults to False: no retries); when it fails the local cache answers, so an unresponsive hub
costs one HF_HUB_ETAG_TIMEOUT."""

_unreachable: dict[str, float] = {}
"""Endpoints that failed at the transport level in this process, with when: calls within UNREACHABLE_FOR_S fail
at once instead of waiting for another timeout (`plan` asks once per GPU)."""
UNREACHABLE_FOR_S = 60.0
_TELEMETRY_VARIABLES = ("HF_HUB_DISABLE_TELEMETRY", "DISABLE_TELEMETRY", "DO_NOT_TRACK")


def _mark_unreachable() -> None:
    _unreachable[_endpoint()] = time.monotonic()


def _known_unreachable() -> bool:
    since = _unreachable.get(_endpoint())
    return since is not None and time.monotonic() - since < UNREACHABLE_FOR_S


def load_hub_client() -> None:
    """Import huggingface_hub, whose import reads the HF_* environment: a malformed HF_ENDPOINT (`http://[::1`)
    fails there, before any request, and is an environment error, not a traceback."""
    try:
        import huggingface_hub.constants  # where the HF_* variables are read
    except Exception as exc:
        raise EnvironmentProblem(
            f"huggingface_hub cannot start ({type(exc).__name__}: {' '.join(str(exc).split())})",
            hint="Check HF_ENDPOINT and the other HF_* environment variables.",
        ) from None
    if not any(os.environ.get(variable) for variable in _TELEMETRY_VARIABLES):
        # huggingface_hub 2.4 builds its user agent (utils/_headers.py _http_user_agent -> utils/_detect_agent.py
        # _fetch_registry) by first GETting {HF_ENDPOINT}/api/agent-harnesses with its own fixed 3 s timeout
        # (_REGISTRY_FETCH_TIMEOUT), before kvsize's request, whenever its day-old cached copy is missing: an
        # unresponsive hub then costs 3 s more than HF_HUB_ETAG_TIMEOUT says. Its own opt-out
        # (HF_HUB_DISABLE_TELEMETRY) skips that lookup; a user who set any of its telemetry variables keeps
        # their choice.
        huggingface_hub.constants.HF_HUB_DISABLE_TELEMETRY = True


def check_repo_id(repo_id: str) -> None:
    """kvsize's pattern, then huggingface_hub's own validator (`utils.validate_repo_id`: no '--' or '..', no
    '.git' suffix, ASCII only, no leading or trailing '-' or '.'), so that no id reaches the hub client that it
    would refuse with an exception of its own."""
    valid = REPO_ID.match(repo_id) is not None and ".." not in repo_id
    if valid:
        load_hub_client()
        from huggingface_hub.utils import validate_repo_id  # type: ignore[attr-defined]  # lazily exported

        try:
            validate_repo_id(repo_id)
        except ValueError:  # HFValidationError
            valid = False
    if not valid:
        raise ModelNotFound(
            f"'{repo_id}' is neither a local config.json nor a valid hub id",
            hint="Give a hub id like org/name (ASCII letters, digits, '-', '_', '.'; no '--', '..' or '.git'), "
            "or a path to a config.json or its folder.",
        )


def _timeout(variable: str) -> float:
    """The user's HF_HUB_*_TIMEOUT when set to a positive number, else kvsize's shorter default."""
    try:
        value = float(os.environ.get(variable, ""))
    except ValueError:
        return DEFAULT_TIMEOUT_S
    return value if 0 < value < 3600 else DEFAULT_TIMEOUT_S


def _endpoint() -> str:
    from huggingface_hub import constants

    return str(constants.ENDPOINT)


def transport_error_types() -> tuple[type[BaseException], ...]:
    """Base classes of the errors the hub's HTTP client raises when the transport fails, found from the client
    huggingface_hub actually uses (httpx, its successors, or requests), so a new subclass such as
    UnsupportedProtocol or RemoteProtocolError is matched by inheritance, not by name."""
    found: list[type[BaseException]] = [OSError, TimeoutError]
    try:
        from huggingface_hub import get_session

        package = sys.modules.get(type(get_session()).__module__.split(".")[0])
    except Exception:  # no session could be made: the stdlib bases are all we can name
        package = None
    for name in ("HTTPError", "RequestError", "TransportError", "RequestException", "InvalidURL", "StreamError"):
        candidate = getattr(package, name, None)
        if isinstance(candidate, type) and issubclass(candidate, Exception):
            found.append(candidate)
    return tuple(found)


@contextmanager
def spinner(label: str) -> Iterator[None]:
    """A spinner on stderr while a fetch is under way, only when stderr is a terminal, and only after a short
    delay so that cache hits draw nothing."""
    stream = sys.stderr
    try:
        interactive = stream is not None and stream.isatty()
    except (AttributeError, ValueError, OSError):
        interactive = False
    if not interactive:
        yield
        return
    stop = threading.Event()
    drawn = threading.Event()

    def spin() -> None:
        frames = "|/-\\"
        tick = 0
        if stop.wait(0.3):
            return
        while not stop.is_set():
            try:
                stream.write(f"\r{frames[tick % len(frames)]} {label}")
                stream.flush()
            except (OSError, ValueError):
                return
            drawn.set()
            tick += 1
            stop.wait(0.1)

    thread = threading.Thread(target=spin, name="kvsize-spinner", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=1)
        if drawn.is_set():
            try:
                stream.write("\r" + " " * (len(label) + 2) + "\r")
                stream.flush()
            except (OSError, ValueError):
                pass


def _unreachable_error(repo_id: str, exc: BaseException) -> EnvironmentProblem:
    return EnvironmentProblem(
        f"cannot reach the Hugging Face Hub for '{repo_id}': {type(exc).__name__}",
        hint="Check the network (and HF_ENDPOINT), or pass a local config.json.",
    )


@contextmanager
def hub_errors(repo_id: str, what: str) -> Iterator[None]:
    """Turn huggingface_hub and network exceptions into one-line kvsize errors."""
    load_hub_client()
    from huggingface_hub import errors
    from huggingface_hub.utils import logging as hub_logging

    hub_logging.set_verbosity_error()  # type: ignore[no-untyped-call]  # its retry warnings would break the one-line error contract
    try:
        yield
    except errors.LocalEntryNotFoundError:
        raise EnvironmentProblem(
            f"cannot reach the Hugging Face Hub for '{repo_id}' and its {what} is not in the local cache",
            hint="Connect to the network (and unset HF_HUB_OFFLINE), or pass a local config.json or its folder; "
            "'kvsize models' lists the models that work offline.",
        ) from None
    except errors.GatedRepoError:
        raise EnvironmentProblem(
            f"'{repo_id}' is a gated repository and no accepted token was found",
            hint="Accept its licence on the hub, then set HF_TOKEN or run 'hf auth login'; "
            "or pass a local config.json.",
        ) from None
    except errors.RepositoryNotFoundError:
        raise ModelNotFound(
            f"no model '{repo_id}' on the hub (or it is private)",
            hint="Check the id ('kvsize models' lists the built-in ones), set HF_TOKEN for "
            "private repos, or pass a local config.json.",
        ) from None
    except errors.RevisionNotFoundError:
        raise ModelNotFound(f"'{repo_id}' has no such revision", hint="Check --revision.") from None
    except errors.EntryNotFoundError:
        raise ModelNotFound(
            f"'{repo_id}' has no {what}", hint="Pass a local config.json for repositories without one."
        ) from None
    except errors.NotASafetensorsRepoError:
        raise ModelNotFound(f"'{repo_id}' has no readable {what} on the hub") from None
    except errors.SafetensorsParsingError as exc:  # "Failed to parse ... (repo 'x', revision 'main'): why. Please..."
        why = " ".join(str(exc).split("): ", 1)[-1].split(". ")[0].split())[:120]
        raise ModelNotFound(f"'{repo_id}' has no readable {what} on the hub ({why})") from None
    except errors.HFValidationError as exc:  # an id or revision the client refuses
        raise ModelNotFound(f"'{repo_id}': {' '.join(str(exc).split())}") from None
    except errors.HfHubHTTPError as exc:  # before the transport bases: it is an OSError and an HTTPError too
        status = exc.response.status_code if exc.response is not None else None
        if status == 401:
            raise EnvironmentProblem(
                f"the hub refused the token for '{repo_id}' (401)", hint="Set a valid HF_TOKEN or run 'hf auth login'."
            ) from None
        if status == 403:
            raise EnvironmentProblem(
                f"the hub denied access to '{repo_id}' (403)",
                hint="Accept the repository's licence on the hub and set HF_TOKEN, or pass a local config.json.",
            ) from None
        if status == 429:
            raise EnvironmentProblem(
                f"the hub is rate-limiting requests for '{repo_id}' (429)",
                hint="Wait a minute, or log in (HF_TOKEN) for a higher limit.",
            ) from None
        raise EnvironmentProblem(
            f"the hub failed on '{repo_id}' ({status or 'no status'})",
            hint="Try again later, or pass a local config.json.",
        ) from None
    except Exception as exc:
        # Connection refused, DNS, time-outs, TLS, garbage or unsupported protocols: OSError, or the client's
        # transport base classes (httpx.HTTPError, requests.RequestException, ...), matched by inheritance.
        if isinstance(exc, OSError) and exc.filename is not None:  # the local cache, not the network
            raise EnvironmentProblem(
                f"cannot use the Hugging Face cache for '{repo_id}' ({exc.strerror or type(exc).__name__}: "
                f"{exc.filename})",
                hint="Check HF_HOME / HF_HUB_CACHE (a writable folder), or pass a local config.json.",
            ) from None
        if isinstance(exc, transport_error_types()):
            _mark_unreachable()
            raise _unreachable_error(repo_id, exc) from None
        raise


def fetch_config_from_hub(repo_id: str, *, revision: str | None = None, token: str | None = None) -> Path:
    """Download (or take from the HF cache) config.json of a hub repo; returns the local file.

    The size the hub reports (HEAD) is checked first, so an oversized file is refused before it is
    downloaded; when the hub cannot be reached the HF cache answers (as huggingface_hub itself does offline)."""
    check_repo_id(repo_id)  # first: it also loads huggingface_hub, or says why it cannot
    from huggingface_hub import constants, get_hf_file_metadata, hf_hub_download, hf_hub_url
    from huggingface_hub.errors import LocalEntryNotFoundError

    timeout = _timeout("HF_HUB_ETAG_TIMEOUT")
    with hub_errors(repo_id, "config.json"), spinner(f"fetching {repo_id} config.json from the hub"):
        online = not constants.HF_HUB_OFFLINE and not _known_unreachable()
        failure: BaseException | None = None
        if online:
            try:
                meta = get_hf_file_metadata(
                    hf_hub_url(repo_id, "config.json", revision=revision), token=token, timeout=timeout
                )
            except Exception as exc:
                from huggingface_hub.errors import HfHubHTTPError

                if isinstance(exc, HfHubHTTPError) or not isinstance(exc, transport_error_types()):
                    raise  # a status the hub gave (404, gated, ...): reported by hub_errors
                _mark_unreachable()
                online, failure = False, exc  # the cache may still hold it
            else:
                if meta.size is not None and meta.size > MAX_HUB_CONFIG_BYTES:
                    raise ConfigError(
                        f"'{repo_id}': the hub reports a config.json of {meta.size:,} bytes "
                        f"(the limit is {MAX_HUB_CONFIG_BYTES:,}); not downloaded",
                        hint="Check the repository, or pass a local config.json.",
                    )
        try:
            path = hf_hub_download(
                repo_id,
                "config.json",
                revision=revision,
                token=token,
                etag_timeout=timeout,
                local_files_only=not online,
            )
        except LocalEntryNotFoundError:
            if failure is None:
                raise
            raise EnvironmentProblem(
                f"cannot reach the Hugging Face Hub for '{repo_id}' ({type(failure).__name__}) "
                "and its config.json is not in the local cache",
                hint="Check the network (and HF_ENDPOINT), or pass a local config.json or its folder.",
            ) from None
    return Path(path)


def fetch_weights_from_hub(repo_id: str, *, revision: str | None = None, token: str | None = None) -> dict[str, int]:
    """Parameter count per safetensors dtype ("BF16", "F8_E4M3", ...) from the hub's metadata. Raises
    ModelNotFound for repositories without safetensors (pytorch_model.bin only), EnvironmentProblem when the
    hub cannot be reached (at once if it already failed in this process). Answers, failures included, are kept
    for the process: `plan` asks once per GPU."""
    key = (_endpoint(), repo_id, revision)
    if key not in _weights_answers:
        try:
            _weights_answers[key] = _fetch_weights(repo_id, revision=revision, token=token)
        except KvsizeError as exc:
            _weights_answers[key] = exc
    answer = _weights_answers[key]
    if isinstance(answer, KvsizeError):
        raise answer
    return dict(answer)


_weights_answers: dict[tuple[str, str, str | None], dict[str, int] | KvsizeError] = {}


def _fetch_weights(repo_id: str, *, revision: str | None, token: str | None) -> dict[str, int]:
    check_repo_id(repo_id)
    from huggingface_hub import HfApi

    if _known_unreachable():
        raise EnvironmentProblem(f"the Hugging Face Hub was unreachable for '{repo_id}'")
    try:
        with hub_errors(repo_id, "safetensors weights"), spinner(f"reading {repo_id} safetensors headers from the hub"):
            meta = HfApi().get_safetensors_metadata(
                repo_id, revision=revision, token=token, timeout=_timeout("HF_HUB_DOWNLOAD_TIMEOUT")
            )
    except (AttributeError, TypeError, ValueError, KeyError, IndexError, RecursionError) as exc:
        # huggingface_hub 2.4 (hf_api._safetensors_file_metadata_from_header) catches only KeyError and
        # IndexError: a header that is a JSON list or number fails on `.get`, a tensor that is a list or a
        # dtype that is a list fails as TypeError, an index whose weight_map is not an object as AttributeError.
        raise _bad_header(
            repo_id, "a safetensors file", " ".join(str(exc).split())[:100] or type(exc).__name__
        ) from None
    return _parameter_counts(repo_id, meta.files_metadata)


MAX_TENSOR_ELEMENTS = 1 << 50  # no real tensor holds a quadrillion elements: a count past it is a corrupt shape


def _bad_header(repo_id: str, filename: str, problem: str) -> ConfigError:
    from kvsize.text import clean

    return ConfigError(
        f"'{repo_id}': {clean(filename)} on the hub has an unusable safetensors header ({clean(problem)})",
        hint="kvsize cannot count these weights from the hub; --weights-mem gives their size.",
    )


def _parameter_counts(repo_id: str, files: dict[str, Any]) -> dict[str, int]:
    """Parameters per dtype, summed from each tensor of each file's header, each tensor checked first
    (`_tensor_elements`). huggingface_hub's own `parameter_count` is not used: it counts a shape that is not a
    list as one parameter, and it decodes the header ignoring bytes that are not UTF-8, which the span check
    still catches when a digit of a shape was among them."""
    from kvsize.text import clean

    counts: dict[str, int] = {}
    for filename, file_meta in sorted(files.items()):
        for name, tensor in file_meta.tensors.items():
            elements = _tensor_elements(tensor.dtype, tensor.shape, tensor.data_offsets)
            if isinstance(elements, str):
                raise _bad_header(repo_id, filename, f"tensor {clean(repr(name))[:60]}: {elements}")
            counts[tensor.dtype] = counts.get(tensor.dtype, 0) + elements
    return counts


def _tensor_elements(dtype: object, shape: object, offsets: object) -> int | str:
    """The tensor's element count, or what is wrong with it: a dtype name, a shape of whole non-negative
    numbers, and data_offsets 0 <= begin <= end whose span is shape x the dtype's size where the dtype is known
    (the safetensors format's own validation)."""
    from kvsize.weights import SAFETENSORS_DTYPE_BYTES

    def whole(values: object) -> bool:
        return isinstance(values, (list, tuple)) and all(
            isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in values
        )

    if not isinstance(dtype, str) or not re.fullmatch(r"[A-Z0-9_]{1,16}", dtype):
        return f"dtype {str(dtype)[:30]!r} is not a dtype name"
    if not whole(shape) or not whole(offsets) or len(offsets) != 2:  # type: ignore[arg-type]
        return f"shape {str(shape)[:40]} or data_offsets {str(offsets)[:40]} are not whole numbers"
    assert isinstance(shape, (list, tuple)) and isinstance(offsets, (list, tuple))
    elements = math.prod(shape)
    if elements > MAX_TENSOR_ELEMENTS:
        return f"shape {str(shape)[:40]} holds over {MAX_TENSOR_ELEMENTS:,} elements"
    span = offsets[1] - offsets[0]
    if span < 0 or (dtype in SAFETENSORS_DTYPE_BYTES and span != elements * SAFETENSORS_DTYPE_BYTES[dtype]):
        return f"data_offsets {list(offsets)} do not span its {elements:,} {dtype} elements"
    return elements
