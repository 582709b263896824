"""Checkpoints: a model's weights with a JSON record of its config, its training history and anything else.

``save_checkpoint`` writes them atomically (to a file beside the target, then renamed onto it);
``load_checkpoint`` reads them with ``torch.load(weights_only=True)`` and rebuilds the model from its
config (``registry.build_model``) when none is given. A file that is not such a checkpoint is a
``CheckpointError`` that names the file, what was expected and what was found.
"""

from __future__ import annotations

import json
import os
import tempfile
import zipfile
from pathlib import Path

import torch

from .checks import check_bool, check_device
from .device import available_devices
from .registry import MODEL_BUILDERS, build_model
from .training_loop import History


class CheckpointError(ValueError):
    """A file that ``load_checkpoint`` cannot load, or a model that ``save_checkpoint`` should not save."""


#: what ``load_checkpoint`` expects, for its messages
_EXPECTED = "expected a checkpoint written by save_checkpoint (a dict with 'state_dict' and a JSON 'record')"


def _kind(config) -> str | None:
    """The model kind a config names, or None where it names none that ``build_model`` knows."""
    kind = config.get("kind") if isinstance(config, dict) else None
    return kind if kind in MODEL_BUILDERS else None


def save_checkpoint(path, model, history: History | None = None, extra: dict | None = None, *,
                    require_config: bool = True) -> None:
    """Save the weights and a JSON-able record (``model.config``, the history, ``extra``).

    ``load_checkpoint(path)`` rebuilds the model from ``model.config``, so a model without one (with a
    ``kind`` that ``registry.build_model`` knows) is refused here rather than when it is loaded; with
    ``require_config=False`` it is saved, and must be loaded with ``load_checkpoint(path, model)``.
    The file is written next to ``path`` and then renamed onto it (``os.replace``), so a save that fails
    or is interrupted leaves the previous file at ``path`` as it was. A missing folder of ``path`` is
    created; a ``path`` that is a folder, or under a file, is a ``CheckpointError`` naming it. ``path``: a string
    or a path; ``require_config``: a bool.
    """
    _check_path(path)
    check_bool("require_config", require_config)
    if not isinstance(model, torch.nn.Module):
        raise CheckpointError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if history is not None and not isinstance(history, History):
        raise CheckpointError(f"history must be the History that fit or a trainer returned, or None, got "
                              f"{type(history).__name__}")
    if extra is not None and not isinstance(extra, dict):
        raise CheckpointError(f"extra must be a dict of JSON-able values, or None, got {type(extra).__name__}")
    config = getattr(model, "config", None)
    if require_config and _kind(config) is None:
        raise CheckpointError(
            f"cannot save {type(model).__name__} to {path}: load_checkpoint(path) rebuilds a model from its "
            f"config, and this model has {'no config' if config is None else f'the config {config!r}'} "
            f"(model.config with a 'kind' of {sorted(MODEL_BUILDERS)}). Build it with registry.build_model or "
            f"a make_... function, or pass require_config=False and load it with load_checkpoint(path, model).")
    record = {"config": config or {}, "history": history.to_dict() if history else None, "extra": extra or {}}
    try:
        text = json.dumps(record)
    except TypeError as err:
        raise ValueError(f"the config, history and extra must be JSON-able: {err}") from err
    state = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    path = Path(path)
    _prepare_folder(path)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.chmod(temporary, 0o666 & ~_umask())  # mkstemp's file is private (0600); give it a usual file's mode
        with os.fdopen(handle, "wb") as file:
            torch.save({"state_dict": state, "record": text}, file)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _check_path(path) -> None:
    if not isinstance(path, (str, os.PathLike)):
        raise CheckpointError(f"path must be a string or a path (the checkpoint's file), got {type(path).__name__} "
                              f"{path!r:.40}")


def _prepare_folder(path: Path) -> None:
    """Create ``path``'s folder where it is missing; a ``CheckpointError`` naming the path when it is a folder,
    or when something on the way to it is a file (rather than an error about the temporary file)."""
    if path.is_dir():
        raise CheckpointError(f"cannot save to {path}: it is a folder; give a file name, e.g. {path / 'model.pt'}")
    for ancestor in reversed(path.parents):  # the outermost first
        if ancestor.exists() and not ancestor.is_dir():
            raise CheckpointError(f"cannot save to {path}: {ancestor} is a file, not a folder")
    path.parent.mkdir(parents=True, exist_ok=True)


def _available(device: torch.device) -> torch.device:
    """``device`` if this machine has its kind, else a ``CheckpointError`` (torch's own error would be reported
    as a file that cannot be loaded)."""
    if device.type not in ("cpu", "meta", *available_devices()):
        raise CheckpointError(f"map_location {str(device)!r} is not available here; available: "
                              f"{', '.join(available_devices())}")
    return device


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _read_checkpoint(path: Path, map_location) -> tuple[dict, dict]:
    """The state dict and the parsed record of the checkpoint at ``path``, or a CheckpointError saying
    what the file holds instead."""
    def refuse(found: str):
        return CheckpointError(f"{path}: {_EXPECTED}, found {found}")

    if path.is_dir():
        raise refuse("a folder; give the checkpoint's file, e.g. " + str(path / "model.pt"))
    size = path.stat().st_size  # a missing file raises FileNotFoundError, which says so already
    if size == 0:
        raise refuse("an empty file (0 bytes): was its save interrupted?")
    try:
        saved = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as err:
        with open(path, "rb") as file:
            start = file.read(16)
        reason = f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"
        if start.startswith(b"PK") and not zipfile.is_zipfile(path):
            raise refuse(f"a truncated or damaged torch file ({size:,} bytes; {reason})") from err
        if start.startswith(b"PK") or start.startswith(b"\x80"):
            raise refuse(f"a torch file that cannot be loaded with weights_only=True ({reason})") from err
        raise refuse(f"a file that is not a torch file at all ({size:,} bytes starting {start!r})") from err
    if not isinstance(saved, dict):
        raise refuse(f"a {type(saved).__name__} saved with torch.save")
    if "record" not in saved or "state_dict" not in saved:
        if saved and all(isinstance(v, torch.Tensor) for v in saved.values()):
            raise refuse(f"a raw state dict ({len(saved)} tensors, e.g. {next(iter(saved))!r}, and no 'record'): "
                         f"load it with model.load_state_dict(torch.load(path)), or save with save_checkpoint")
        raise refuse(f"a dict with the keys {sorted(map(str, saved))[:8]}")
    try:
        record = json.loads(saved["record"])
        if not isinstance(record, dict):
            raise TypeError(f"a JSON {type(record).__name__}")
    except (TypeError, ValueError) as err:
        raise refuse(f"a 'record' that is not a JSON dict ({err})") from err
    if not isinstance(saved["state_dict"], dict):
        raise refuse(f"a 'state_dict' that is a {type(saved['state_dict']).__name__}, not a dict of tensors")
    return saved["state_dict"], record


def load_checkpoint(path, model=None, map_location="cpu"):
    """Load a checkpoint (``torch.load(weights_only=True)``): returns ``(model, record)``.

    Without ``model`` it is rebuilt from the stored config (``registry.build_model``). A file that is
    not such a checkpoint (empty, truncated, a raw state dict, anything else), or one of another kind of
    model than ``model``, raises :class:`CheckpointError` (a ValueError) naming the file, what was
    expected and what was found. ``path``: a string or a path; ``model``: a ``torch.nn.Module`` or None;
    ``map_location``: a device or its name (checked before the file is read, so that a device this machine
    lacks is not reported as a damaged file), or anything else ``torch.load`` takes (a dict, a function).
    """
    _check_path(path)
    if model is not None and not isinstance(model, torch.nn.Module):
        raise CheckpointError(f"model must be a torch.nn.Module or None, got {type(model).__name__}")
    if isinstance(map_location, (str, torch.device)):
        map_location = _available(check_device("map_location", map_location))
    elif not (map_location is None or isinstance(map_location, dict) or callable(map_location)):
        raise CheckpointError(f"map_location must be a device, its name, a dict or a function (as torch.load takes), "
                              f"got {type(map_location).__name__} {map_location!r:.40}")
    path = Path(path)
    state, record = _read_checkpoint(path, map_location)
    config = record.get("config") or {}
    stored = _kind(config)
    if model is None:
        if stored is None:
            raise CheckpointError(
                f"{path}: expected a checkpoint with a config that rebuilds its model (a 'kind' of "
                f"{sorted(MODEL_BUILDERS)}), found the config {config!r}: pass the model, load_checkpoint(path, model)")
        model = build_model(config)
    else:
        given = _kind(getattr(model, "config", None))
        if stored is not None and given is not None and stored != given:
            raise CheckpointError(f"{path}: expected a checkpoint of a {given!r} model (the model given), "
                                  f"found a checkpoint of a {stored!r} model (config {config!r})")
    try:
        model.load_state_dict(state)
    except RuntimeError as err:
        detail = " ".join(str(err).split())
        raise CheckpointError(
            f"{path}: expected weights that fit the {type(model).__name__} given (config "
            f"{getattr(model, 'config', None)!r}), found weights saved from the config {config!r}: "
            f"{detail[:300]}{'...' if len(detail) > 300 else ''}") from err
    if record.get("history"):
        record["history"] = History.from_dict(record["history"])
    return model, record
