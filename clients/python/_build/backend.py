"""A PEP 517 build backend in the standard library only.

It exists so that ``pip install ./clients/python`` works on a machine
without network access to a package index: pip's isolated build
environment installs the backend's requirements, and this backend has none.
It builds a pure-Python wheel of ``src/sandboxd`` (and an sdist of the
tree); it must never run code of the package it builds.
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import re
import tarfile
import zipfile
from typing import Dict, List, Optional, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PKG = "sandboxd"


def _project() -> Dict[str, str]:
    """The simple `key = "value"` lines of pyproject.toml's [project] table."""
    meta: Dict[str, str] = {}
    section = ""
    with open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line.startswith("["):
                section = line
                continue
            m = re.match(r'^([A-Za-z-]+)\s*=\s*"([^"]*)"$', line)
            if section == "[project]" and m:
                meta[m.group(1)] = m.group(2)
    return meta


def _metadata() -> str:
    p = _project()
    readme = ""
    path = os.path.join(ROOT, "README.md")
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            readme = f.read()
    return (f"Metadata-Version: 2.1\nName: {p['name']}\nVersion: {p['version']}\n"
            f"Summary: {p.get('description', '')}\nLicense: {p.get('license', '')}\n"
            f"Requires-Python: {p.get('requires-python', '')}\n"
            "Description-Content-Type: text/markdown\n\n" + readme)


def _dist_info() -> str:
    p = _project()
    return f"{p['name']}-{p['version']}.dist-info"


def _package_files() -> List[Tuple[str, str]]:
    """(archive name, path on disk) of every file of the package, sorted."""
    out = []
    src = os.path.join(ROOT, "src")
    for dirpath, dirnames, filenames in os.walk(os.path.join(src, PKG)):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for name in sorted(filenames):
            if name.endswith((".pyc", ".pyo")):
                continue
            full = os.path.join(dirpath, name)
            out.append((os.path.relpath(full, src).replace(os.sep, "/"), full))
    return out


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def _write_wheel(wheel_directory: str, entries: List[Tuple[str, bytes]]) -> str:
    p = _project()
    info = _dist_info()
    entries = entries + [
        (f"{info}/METADATA", _metadata().encode()),
        (f"{info}/WHEEL", b"Wheel-Version: 1.0\nGenerator: sandboxd-backend\nRoot-Is-Purelib: true\nTag: py3-none-any\n"),
        (f"{info}/top_level.txt", (PKG + "\n").encode()),
    ]
    record = [_record_line(n, d) for n, d in entries] + [f"{info}/RECORD,,"]
    entries.append((f"{info}/RECORD", ("\n".join(record) + "\n").encode()))
    name = f"{p['name']}-{p['version']}-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w", zipfile.ZIP_DEFLATED) as z:
        for n, d in entries:
            zi = zipfile.ZipInfo(n, date_time=(1980, 1, 1, 0, 0, 0))
            zi.external_attr = 0o644 << 16
            z.writestr(zi, d, zipfile.ZIP_DEFLATED)
    return name


def get_requires_for_build_wheel(config_settings: Optional[dict] = None) -> List[str]:
    return []


def get_requires_for_build_sdist(config_settings: Optional[dict] = None) -> List[str]:
    return []


def get_requires_for_build_editable(config_settings: Optional[dict] = None) -> List[str]:
    return []


def prepare_metadata_for_build_wheel(metadata_directory: str, config_settings: Optional[dict] = None) -> str:
    info = os.path.join(metadata_directory, _dist_info())
    os.makedirs(info, exist_ok=True)
    with open(os.path.join(info, "METADATA"), "w", encoding="utf-8") as f:
        f.write(_metadata())
    return _dist_info()


prepare_metadata_for_build_editable = prepare_metadata_for_build_wheel


def build_wheel(wheel_directory: str, config_settings: Optional[dict] = None,
                metadata_directory: Optional[str] = None) -> str:
    entries = []
    for name, path in _package_files():
        with open(path, "rb") as f:
            entries.append((name, f.read()))
    return _write_wheel(wheel_directory, entries)


def build_editable(wheel_directory: str, config_settings: Optional[dict] = None,
                   metadata_directory: Optional[str] = None) -> str:
    """A wheel holding only a .pth file that puts src/ on sys.path."""
    return _write_wheel(wheel_directory, [(f"__editable__.{PKG}.pth", (os.path.join(ROOT, "src") + "\n").encode())])


def build_sdist(sdist_directory: str, config_settings: Optional[dict] = None) -> str:
    p = _project()
    base = f"{p['name']}-{p['version']}"
    name = base + ".tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz", format=tarfile.PAX_FORMAT) as tar:
        for rel in ("pyproject.toml", "README.md", "_build/backend.py"):
            if os.path.exists(os.path.join(ROOT, rel)):
                tar.add(os.path.join(ROOT, rel), arcname=f"{base}/{rel}")
        for arc, path in _package_files():
            tar.add(path, arcname=f"{base}/src/{arc}")
        info = tarfile.TarInfo(f"{base}/PKG-INFO")
        data = _metadata().encode()
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return name
