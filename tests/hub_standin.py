"""A local stand-in for the Hugging Face Hub: a loopback HTTP server that answers the few routes huggingface_hub
uses for `config.json` and safetensors metadata (`HEAD`/`GET /{repo}/resolve/{revision}/{file}`), with one repo
per failure the real hub can produce. Only 127.0.0.1, an ephemeral port, daemon threads, bounded waits.

Headers follow huggingface_hub's reading of them (huggingface_hub 2.4 `file_download.get_hf_file_metadata`:
X-Repo-Commit, ETag, Content-Length; `utils/_http.hf_raise_for_status`: X-Error-Code RepoNotFound,
EntryNotFound, GatedRepo).
"""

from __future__ import annotations

import json
import socket
import struct
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

COMMIT = "c0ffee" * 6 + "abcd"  # 40 hex digits
# A small Llama-shaped config: KV bytes per token (bf16) = 2 (K,V) x 4 layers x 2 kv heads x 64 dim x 2 B = 2048.
CONFIG: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 512,
    "intermediate_size": 1024,
    "num_hidden_layers": 4,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "vocab_size": 32000,
    "max_position_embeddings": 4096,
    "torch_dtype": "bfloat16",
}
# One BF16 tensor of 1,000,000 elements: the hub's safetensors metadata counts 1,000,000 BF16 parameters.
_HEADER = json.dumps({"w": {"dtype": "BF16", "shape": [1000, 1000], "data_offsets": [0, 2_000_000]}}).encode()
SAFETENSORS_PREFIX = struct.pack("<Q", len(_HEADER)) + _HEADER
HUGE_SIZE = 200 * 1024 * 1024


class StandInHub:
    """The running server: `endpoint` for HF_ENDPOINT, `requests` as (method, path) pairs received."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str]] = []
        self.stop = threading.Event()
        self.endpoint = ""


def _handler(hub: StandInHub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's signature
            pass

        def _send(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
            self.send_response(status)
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            if "Content-Length" not in (headers or {}):
                self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def _file(self, body: bytes, *, size: int | None = None) -> None:
            self._send(
                200,
                body,
                {
                    "X-Repo-Commit": COMMIT,
                    "ETag": f'"etag-{len(body)}-{size or 0}"',
                    "Content-Length": str(size if size is not None else len(body)),
                },
            )

        def _route(self) -> None:
            hub.requests.append((self.command, self.path))
            parts = self.path.split("?")[0].strip("/").split("/")
            # /{org}/{name}/resolve/{revision}/{file}
            if len(parts) < 5 or parts[2] != "resolve":
                self._send(404, headers={"X-Error-Code": "RepoNotFound"})
                return
            name, filename = parts[1], parts[-1]
            if name == "missing":
                self._send(404, headers={"X-Error-Code": "RepoNotFound", "X-Error-Message": "Repository not found"})
            elif name == "gated":
                self._send(401, headers={"X-Error-Code": "GatedRepo", "X-Error-Message": "Access restricted"})
            elif name == "forbidden":
                self._send(403, headers={"X-Error-Message": "Forbidden"})
            elif name == "garbage":
                self.wfile.write(b"SSH-2.0-OpenSSH_9.6 not http at all\r\n\x00\xff\r\n\r\n")
                self.close_connection = True
            elif name == "reset":
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                self.close_connection = True  # closing with linger 0 sends a TCP reset
            elif name == "slow":
                hub.stop.wait(15)  # far beyond the client's timeout; released when the fixture ends
                self.close_connection = True
            elif name == "huge" and filename == "config.json":
                # The size is reported; serving it is never reached by a client that checks first.
                self._file(b"{}" if self.command == "HEAD" else b" " * 1024 + b"{}", size=HUGE_SIZE)
            elif filename == "config.json":
                self._file(json.dumps(CONFIG).encode())
            elif name == "ok" and filename == "model.safetensors":
                self._file(SAFETENSORS_PREFIX)
            else:  # "binonly" (pytorch_model.bin only) and every other file: no such entry
                self._send(404, headers={"X-Error-Code": "EntryNotFound", "X-Error-Message": "Entry not found"})

        def do_HEAD(self) -> None:  # noqa: N802 - the stdlib's naming
            self._route()

        def do_GET(self) -> None:  # noqa: N802
            self._route()

    return Handler


@contextmanager
def running_hub(
    handler: Callable[[StandInHub], type[BaseHTTPRequestHandler]] | None = None,
) -> Iterator[StandInHub]:
    """The stand-in hub on a loopback port; `handler` builds another request handler (a subclass of _handler's)."""
    hub = StandInHub()
    server = ThreadingHTTPServer(("127.0.0.1", 0), (handler or _handler)(hub))
    server.daemon_threads = True
    hub.endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield hub
    finally:
        hub.stop.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
