"""Results on disk: a Zarr group holding released arrays and the release metadata.

Layout of a result group::

    OUT/                     zarr group, attrs["dpdist"] = Release.metadata()
      <name>                 dense arrays
      <name>/data, indices, indptr   sparse (CSR) arrays; group attrs give format and shape

Writes are atomic: the group is written into a hidden temporary directory beside ``OUT``
and renamed into place only when complete, so a failed run leaves nothing at ``OUT``.
Only released (noised) values are ever written here.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from dpdist.exceptions import ValidationError

__all__ = ["LoadedResult", "check_output_path", "load_result", "swap_into_place", "write_json", "write_result"]


def check_output_path(path: str | os.PathLike, *, overwrite: bool = False) -> str:
    """Validate an output path before any computation: parent exists and is writable, target free.

    Writability is probed by creating (and removing) a hidden directory in the parent, the
    way :func:`write_result` will write, so a read-only directory or file system is found
    whatever the permission bits say.
    """
    path = os.path.abspath(os.fspath(path))
    parent = os.path.dirname(path)
    if not os.path.isdir(parent):
        raise ValidationError(f"output directory {parent!r} does not exist")
    if os.path.exists(path) and not overwrite:
        raise ValidationError(f"output {path!r} already exists (pass overwrite=True to replace it)")
    try:
        os.rmdir(tempfile.mkdtemp(prefix=f".{os.path.basename(path)}.probe-", dir=parent))
    except OSError as exc:
        raise ValidationError(f"output directory {parent!r} is not writable ({exc.strerror or exc})") from None
    return path


def write_json(path: str | os.PathLike, obj: Any) -> str:
    """Write ``obj`` as a JSON file at ``path`` atomically (a temporary file renamed into place)."""
    path = os.path.abspath(os.fspath(path))
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.tmp-", dir=os.path.dirname(path))
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(obj, fh, indent=2, default=str)
            fh.write("\n")
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return path


def write_result(path: str | os.PathLike, metadata: dict, values: dict[str, Any], *, overwrite: bool = False) -> str:
    """Write released ``values`` and ``metadata`` atomically as a Zarr group at ``path``."""
    import zarr

    path = check_output_path(path, overwrite=overwrite)
    parent = os.path.dirname(path)
    tmp = tempfile.mkdtemp(prefix=f".{os.path.basename(path)}.tmp-", dir=parent)
    try:
        root = zarr.open_group(tmp, mode="w")
        root.attrs["dpdist"] = json.loads(json.dumps(metadata))
        for name, value in values.items():
            if sp.issparse(value):
                csr = sp.csr_array(value)
                g = root.create_group(name)
                g.attrs["format"] = "csr"
                g.attrs["shape"] = list(csr.shape)
                for part in ("data", "indices", "indptr"):
                    arr = np.asarray(getattr(csr, part))
                    g.create_array(part, shape=arr.shape, dtype=arr.dtype)[...] = arr
            elif value is None:
                continue
            else:
                arr = np.asarray(value)
                if arr.ndim == 0:
                    root.attrs[name] = arr.item()
                else:
                    root.create_array(name, shape=arr.shape, dtype=arr.dtype)[...] = arr
        swap_into_place(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return path


def swap_into_place(tmp: str, path: str) -> None:
    """Move the complete directory ``tmp`` to ``path`` (beside it, same filesystem), replacing an
    existing ``path`` only once the new one is complete: a failure leaves the old one or none,
    never a half-written one."""
    parent = os.path.dirname(path)
    if os.path.exists(path):
        backup = tempfile.mkdtemp(prefix=f".{os.path.basename(path)}.old-", dir=parent)
        os.rmdir(backup)
        os.rename(path, backup)
        os.rename(tmp, path)
        shutil.rmtree(backup, ignore_errors=True)
    else:
        os.rename(tmp, path)


@dataclass
class LoadedResult:
    """A result read back by :func:`load_result`.

    ``metadata`` is the release metadata (mechanism, privacy, parameters, noise scales,
    seeding, version); ``values`` maps names to arrays or ``scipy.sparse`` CSR arrays.
    Values are also reachable as attributes and items (``res.covariance``, ``res["covariance"]``).
    """

    path: str
    metadata: dict
    values: dict = field(default_factory=dict)

    def __getitem__(self, name: str):
        return self.values[name]

    def __getattr__(self, name: str):
        values = self.__dict__.get("values", {})
        if name in values:
            return values[name]
        raise AttributeError(name)

    @property
    def privacy(self) -> dict | None:
        return self.metadata.get("privacy")


def load_result(path: str | os.PathLike) -> LoadedResult:
    """Read a result group written by dpdist (``dpdist ... --output PATH``)."""
    import zarr

    path = os.fspath(path)
    if "://" not in path and not os.path.exists(path):
        raise ValidationError(f"no dpdist result at {path!r}: the path does not exist")
    try:  # fsspec URLs (s3://...): an unpublished result has no root zarr.json (data/publish.py)
        root = zarr.open_group(path, mode="r")
    except FileNotFoundError:  # zarr.errors.GroupNotFoundError is one
        raise ValidationError(f"no dpdist result at {path!r}") from None
    if "dpdist" not in root.attrs:
        raise ValidationError(f"{path!r} is not a dpdist result (no 'dpdist' metadata)")
    values: dict[str, Any] = {}
    for name, node in root.members():
        if isinstance(node, zarr.Group) and node.attrs.get("format") == "csr":
            values[name] = sp.csr_array(
                (node["data"][...], node["indices"][...], node["indptr"][...]),
                shape=tuple(node.attrs["shape"]),
            )
        elif isinstance(node, zarr.Array):
            values[name] = node[...]
    for k, v in root.attrs.items():
        if k != "dpdist":
            values[k] = v
    return LoadedResult(path=path, metadata=dict(root.attrs["dpdist"]), values=values)
