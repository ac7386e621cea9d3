"""Hugging Face Hub access: config.json and weight metadata. huggingface_hub is imported inside functions
so that `kvsize --help` and registry runs never load it.

huggingface_hub brings the behaviour users expect: HF_TOKEN / `hf auth login` credentials, HF_HUB_OFFLINE,
the shared HF cache (a config fetched once works offline afterwards) and revisions.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kvsize.errors import EnvironmentProblem, ModelNotFound

REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]{0,95}(/[A-Za-z0-9][\w.-]{0,95})?$")


def check_repo_id(repo_id: str) -> None:
    if not REPO_ID.match(repo_id) or ".." in repo_id:
        raise ModelNotFound(
            f"'{repo_id}' is neither a local config.json nor a valid hub id",
            hint="Give a hub id like org/name, or a path to a config.json or its folder.",
        )


@contextmanager
def hub_errors(repo_id: str, what: str) -> Iterator[None]:
    """Turn huggingface_hub and network exceptions into one-line kvsize errors."""
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
    except errors.HfHubHTTPError as exc:
        status = exc.response.status_code if exc.response is not None else None
        if status == 401:
            raise EnvironmentProblem(
                f"the hub refused the token for '{repo_id}' (401)", hint="Set a valid HF_TOKEN or run 'hf auth login'."
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
    except (OSError, TimeoutError) as exc:  # connection refused, DNS failure, read time-outs
        raise EnvironmentProblem(
            f"cannot reach the Hugging Face Hub for '{repo_id}': {type(exc).__name__}",
            hint="Check the network, or pass a local config.json.",
        ) from None
    except Exception as exc:  # httpx / requests transport errors do not share a stdlib base class
        if type(exc).__module__.split(".")[0] in ("httpx", "httpcore", "requests", "urllib3"):
            raise EnvironmentProblem(
                f"cannot reach the Hugging Face Hub for '{repo_id}': {type(exc).__name__}",
                hint="Check the network, or pass a local config.json.",
            ) from None
        raise


def fetch_config_from_hub(repo_id: str, *, revision: str | None = None, token: str | None = None) -> Path:
    """Download (or take from the HF cache) config.json of a hub repo; returns the local file."""
    from huggingface_hub import hf_hub_download

    check_repo_id(repo_id)
    with hub_errors(repo_id, "config.json"):
        return Path(hf_hub_download(repo_id, "config.json", revision=revision, token=token))


def fetch_weights_from_hub(repo_id: str, *, revision: str | None = None, token: str | None = None) -> dict[str, int]:
    """Parameter count per safetensors dtype ("BF16", "F8_E4M3", ...) from the hub's metadata."""
    from huggingface_hub import get_safetensors_metadata

    with hub_errors(repo_id, "safetensors weights"):
        meta = get_safetensors_metadata(repo_id, revision=revision, token=token)
    return {str(dtype): int(count) for dtype, count in meta.parameter_count.items()}
