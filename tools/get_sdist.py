"""Download and extract the sources of PyPI sdists, for reading engine releases: get_sdist.py PKG DEST V1 V2 ..."""

import io
import json
import os
import sys
import tarfile
import urllib.parse
import urllib.request

pkg, dest, *versions = sys.argv[1:]
meta = json.load(urllib.request.urlopen(f"https://pypi.org/pypi/{pkg}/json"))
os.makedirs(dest, exist_ok=True)
for v in versions:
    out = os.path.join(dest, f"{pkg}-{v}")
    if os.path.isdir(out):
        continue
    files = [f for f in meta["releases"].get(v, []) if f["packagetype"] == "sdist"]
    if not files:
        print("NO SDIST", v, flush=True)
        continue
    data = urllib.request.urlopen(urllib.parse.urljoin(f"https://pypi.org/pypi/{pkg}/json", files[0]["url"])).read()
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        members = [
            m
            for m in tar.getmembers()
            if m.isfile() and (m.name.endswith((".py", ".cpp", ".h", ".hpp", ".cu", ".txt", ".toml", ".md", ".cmake")))
        ]
        top = members[0].name.split("/")[0] if members else f"{pkg}-{v}"
        tar.extractall(dest, members=members, filter="data")
        if top != f"{pkg}-{v}" and os.path.isdir(os.path.join(dest, top)):
            os.rename(os.path.join(dest, top), out)
    print("ok", v, len(data) // 1024**2, "MB", flush=True)
