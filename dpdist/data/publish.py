"""Results written in two steps, *prepare* then *publish*, on local disks and object stores.

A scheduled job must not leave a readable result unless its privacy-ledger entry is
committed, and must leave no half-written result when it fails. A local directory rename
gives both; an object store has no rename (an S3 "rename" is a copy of every object, then
deletes: not atomic). The protocol here works on both:

1. **Stage.** The result group (:func:`dpdist.data.results.write_result`'s layout) is
   written completely to local disk, and its checksum computed: SHA-256 over the sorted
   lines ``relative-path <TAB> sha256(bytes)`` of every file of the group
   (:func:`group_checksum`).
2. **Prepare.** Local target: the staged group sits in a hidden ``.NAME.staging-*``
   directory beside the target. Object store: every object *except the root* ``zarr.json``
   is uploaded under the target prefix. Without its root ``zarr.json`` the prefix is not a
   Zarr group: ``zarr.open_group`` and :func:`~dpdist.data.results.load_result` refuse it,
   so nothing readable exists yet. Objects left under the prefix by an earlier attempt that
   never published are deleted first.
3. (The caller commits its ledger entry with the target and the checksum.)
4. **Publish.** Local: one ``rename`` of the staged directory onto the target. Object
   store: one ``PUT`` of the root ``zarr.json``, the *commit marker*. A single PUT is atomic
   (readers see the whole object or none) and S3 reads are strongly consistent after it,
   so the group appears in one step, complete.

A failure before publish leaves nothing readable at the target (a failed prepare deletes
what it uploaded; a killed process can leave unpublished objects, which are not a group and
are deleted by the next attempt at the same target). A failure after the ledger commit but
before publish leaves a committed entry without output: the budget is counted, which is the
safe side.

Credentials for object stores come only from the standard environment of the store's
client (for S3: ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_ENDPOINT_URL``,
profiles and instance roles, read by botocore through s3fs); nothing here accepts, stores
or prints them.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from typing import Any

from dpdist.data.results import check_output_path, write_result
from dpdist.exceptions import InfrastructureError, ValidationError

__all__ = ["StagedResult", "group_checksum", "is_remote", "result_checksum", "stage_result", "target_exists"]

#: The root metadata document of a Zarr v3 group: uploaded last, it publishes the result.
MARKER = "zarr.json"


def is_remote(url: str) -> bool:
    """Whether ``url`` is an fsspec URL other than a local ``file://`` path."""
    return "://" in str(url) and not str(url).startswith("file://")


def _fs(url: str):
    from fsspec.core import url_to_fs

    try:
        return url_to_fs(url)
    except ImportError as exc:
        raise ValidationError(f"no filesystem for {url!r}: {exc} (for s3:// install 'dpdist[s3]')") from None


def _storage_error(what: str, url: str, exc: BaseException, *, noise_drawn: bool) -> InfrastructureError:
    return InfrastructureError(f"storage error while {what} {url!r}: {type(exc).__name__}: {exc}",
                               noise_drawn=noise_drawn)


def target_exists(url: str) -> bool:
    """Whether a *published* result (or anything, locally) is at ``url``."""
    if not is_remote(url):
        return os.path.exists(url)
    fs, root = _fs(url)
    try:
        return bool(fs.exists(f"{root.rstrip('/')}/{MARKER}"))
    except (OSError, ValueError) as exc:
        raise _storage_error("checking", url, exc, noise_drawn=False) from None


def check_target(url: str, *, overwrite: bool = False) -> str:
    """Validate an output location before any computation; return its normalised form."""
    if not is_remote(url):
        return check_output_path(url[len("file://"):] if url.startswith("file://") else url, overwrite=overwrite)
    url = url.rstrip("/")
    if target_exists(url) and not overwrite:
        raise ValidationError(f"output {url!r} already exists (set overwrite)")
    return url


def _hash_file(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _manifest_digest(items: list[tuple[str, str]]) -> str:
    h = hashlib.sha256()
    for rel, digest in sorted(items):
        h.update(f"{rel}\t{digest}\n".encode())
    return "sha256:" + h.hexdigest()


def group_checksum(local_dir: str) -> str:
    """Checksum of the result group in ``local_dir`` (see the module docstring)."""
    items = []
    for base, _, files in os.walk(local_dir):
        for name in files:
            full = os.path.join(base, name)
            items.append((os.path.relpath(full, local_dir).replace(os.sep, "/"), _hash_file(full)))
    return _manifest_digest(items)


def result_checksum(url: str) -> str:
    """Recompute the checksum of a written result from its stored files or objects."""
    if not is_remote(url):
        return group_checksum(url)
    fs, root = _fs(url)
    root = root.rstrip("/")
    items = []
    for key in fs.find(root):
        rel = key[len(root) + 1:]
        items.append((rel, hashlib.sha256(fs.cat_file(key)).hexdigest()))
    return _manifest_digest(items)


@dataclass
class StagedResult:
    """A complete result group on local disk, ready to prepare and publish at ``target``."""

    target: str
    local_dir: str
    checksum: str
    overwrite: bool = False
    _scratch: str = ""
    _uploaded: list = field(default_factory=list)
    published: bool = False

    def prepare(self) -> None:
        """Step 2: make everything but the publishing step durable at the target."""
        if not is_remote(self.target):
            return  # staged beside the target already
        fs, root = _fs(self.target)
        root = root.rstrip("/")
        try:
            if fs.exists(root):
                if fs.exists(f"{root}/{MARKER}"):
                    if not self.overwrite:
                        raise ValidationError(f"output {self.target!r} already exists (set overwrite)")
                    fs.rm_file(f"{root}/{MARKER}")  # unpublish first: never a mixed group
                fs.rm(root, recursive=True)  # unpublished leftovers of an earlier attempt
                fs.invalidate_cache(root)
            for base, _, files in os.walk(self.local_dir):
                for name in sorted(files):
                    full = os.path.join(base, name)
                    rel = os.path.relpath(full, self.local_dir).replace(os.sep, "/")
                    if rel == MARKER:
                        continue
                    fs.put_file(full, f"{root}/{rel}")
                    self._uploaded.append(f"{root}/{rel}")
        except ValidationError:
            raise
        except Exception as exc:
            self.discard()
            raise _storage_error("writing", self.target, exc, noise_drawn=True) from None

    def publish(self) -> str:
        """Step 4: make the result visible in one atomic step; returns the target."""
        try:
            if is_remote(self.target):
                fs, root = _fs(self.target)
                fs.put_file(os.path.join(self.local_dir, MARKER), f"{root.rstrip('/')}/{MARKER}")
            else:
                if os.path.exists(self.target):
                    if not self.overwrite:
                        raise ValidationError(f"output {self.target!r} already exists (set overwrite)")
                    backup = tempfile.mkdtemp(prefix=f".{os.path.basename(self.target)}.old-",
                                              dir=os.path.dirname(self.target))
                    os.rmdir(backup)
                    os.rename(self.target, backup)
                    os.rename(self.local_dir, self.target)
                    shutil.rmtree(backup, ignore_errors=True)
                else:
                    os.rename(self.local_dir, self.target)
        except ValidationError:
            raise
        except Exception as exc:
            raise _storage_error("publishing", self.target, exc, noise_drawn=True) from None
        self.published = True
        shutil.rmtree(self._scratch, ignore_errors=True)
        return self.target

    def discard(self) -> None:
        """Remove everything staged or uploaded (never a published result)."""
        if not self.published and self._uploaded:
            try:
                fs, _ = _fs(self.target)
                fs.rm(self._uploaded)
            except Exception:  # best effort: unpublished objects are not a result
                pass
            self._uploaded = []
        if not self.published:
            shutil.rmtree(self._scratch, ignore_errors=True)


def stage_result(target: str, metadata: dict, values: dict[str, Any], *, overwrite: bool = False) -> StagedResult:
    """Step 1: write the result group to local disk and checksum it.

    A local target is staged in a hidden directory beside it (same file system, so the
    publishing rename is atomic); a remote one in a local temporary directory.
    """
    target = check_target(target, overwrite=overwrite)
    if is_remote(target):
        scratch = tempfile.mkdtemp(prefix="dpdist-staging-")
    else:
        scratch = tempfile.mkdtemp(prefix=f".{os.path.basename(target)}.staging-", dir=os.path.dirname(target))
    try:
        local = write_result(os.path.join(scratch, "result.zarr"), metadata, values)
        return StagedResult(target, local, group_checksum(local), overwrite=overwrite, _scratch=scratch)
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
