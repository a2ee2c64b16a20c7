"""The `checkpoint` state file and checkpoint files on disk (TF1's checkpoint_management.py).

The state file is a text CheckpointState proto in the checkpoints' directory naming the newest
checkpoint and the ones kept. It is written under a temporary name and renamed, after the
checkpoint it names is complete, so `latest_checkpoint` never names a partial checkpoint.
"""

from __future__ import annotations

import glob
import logging
import os

from google.protobuf import text_format

from flowgraph.core import errors
from flowgraph.core.protos import CheckpointState, SaverDef
from flowgraph.core.tensor_bundle import fs, index_filename, temp_suffix

__all__ = [
    "checkpoint_exists",
    "generate_checkpoint_state_proto",
    "get_checkpoint_mtimes",
    "get_checkpoint_state",
    "latest_checkpoint",
    "meta_graph_filename",
    "remove_checkpoint",
    "update_checkpoint_state",
]

log = logging.getLogger(__name__)


def _state_path(save_dir: str, latest_filename: str | None) -> str:
    return os.path.join(save_dir, latest_filename or "checkpoint")


def generate_checkpoint_state_proto(
    save_dir,
    model_checkpoint_path,
    all_model_checkpoint_paths=None,
    all_model_checkpoint_timestamps=None,
    last_preserved_timestamp=None,
) -> CheckpointState:
    """A CheckpointState; paths are made relative to `save_dir` when the given model path is
    relative (TF's rule), and the model path is appended to the list if missing."""
    paths = list(all_model_checkpoint_paths or [])
    if not paths or paths[-1] != model_checkpoint_path:
        paths.append(model_checkpoint_path)
    if all_model_checkpoint_timestamps is not None and (
        len(all_model_checkpoint_timestamps) != len(paths)
    ):
        raise ValueError(
            f"Checkpoint timestamps, if provided, must match checkpoint paths (got paths {paths} "
            f"and timestamps {all_model_checkpoint_timestamps})"
        )
    if not os.path.isabs(save_dir):
        if not os.path.isabs(model_checkpoint_path):
            model_checkpoint_path = os.path.relpath(model_checkpoint_path, save_dir)
        paths = [p if os.path.isabs(p) else os.path.relpath(p, save_dir) for p in paths]
    state = CheckpointState(
        model_checkpoint_path=model_checkpoint_path, all_model_checkpoint_paths=paths
    )
    if all_model_checkpoint_timestamps is not None:
        state.all_model_checkpoint_timestamps.extend(all_model_checkpoint_timestamps)
    if last_preserved_timestamp is not None:
        state.last_preserved_timestamp = last_preserved_timestamp
    return state


def update_checkpoint_state(
    save_dir,
    model_checkpoint_path,
    all_model_checkpoint_paths=None,
    latest_filename=None,
    all_model_checkpoint_timestamps=None,
    last_preserved_timestamp=None,
    save_relative_paths=False,
):
    """Writes the `checkpoint` file of `save_dir` atomically (temporary file + rename)."""
    path = _state_path(save_dir, latest_filename)
    paths = list(all_model_checkpoint_paths or [])
    if save_relative_paths:
        model_checkpoint_path = _relative(model_checkpoint_path, save_dir)
        paths = [_relative(p, save_dir) for p in paths]
    state = generate_checkpoint_state_proto(
        save_dir,
        model_checkpoint_path,
        paths,
        all_model_checkpoint_timestamps,
        last_preserved_timestamp,
    )
    if os.path.abspath(path) == os.path.abspath(model_checkpoint_path):
        raise errors.InvalidArgumentError(
            None,
            None,
            f"Save path '{model_checkpoint_path}' conflicts with path used for "
            "checkpoint state.  Please use a different save path.",
        )
    if save_dir:
        os.makedirs(save_dir, exist_ok=True)
    tmp = path + temp_suffix()
    with fs.open_write(tmp) as f:
        f.write(text_format.MessageToString(state).encode())
    fs.rename(tmp, path)


def _relative(p: str, save_dir: str) -> str:
    return os.path.relpath(p, save_dir) if os.path.isabs(p) else p


def get_checkpoint_state(checkpoint_dir, latest_filename=None) -> CheckpointState | None:
    """The CheckpointState of `checkpoint_dir`, with relative paths joined to it; None if there
    is no state file. A state file that does not parse is logged and gives None."""
    path = _state_path(checkpoint_dir, latest_filename)
    if not os.path.isfile(path):
        return None
    try:
        with open(path) as f:
            state = text_format.Parse(f.read(), CheckpointState())
    except (text_format.ParseError, UnicodeDecodeError) as e:
        log.warning("%s: %s", path, e)
        return None
    if not state.model_checkpoint_path:
        raise ValueError(f"Invalid checkpoint state loaded from {checkpoint_dir}")
    if not os.path.isabs(state.model_checkpoint_path):
        state.model_checkpoint_path = os.path.join(checkpoint_dir, state.model_checkpoint_path)
    for i, p in enumerate(state.all_model_checkpoint_paths):
        if not os.path.isabs(p):
            state.all_model_checkpoint_paths[i] = os.path.join(checkpoint_dir, p)
    return state


def _pattern_files(prefix: str) -> list[str]:
    """The files of a V1 checkpoint written under the filespec `prefix`."""
    return glob.glob(prefix) if any(c in prefix for c in "*?[") else []


def checkpoint_exists(checkpoint_prefix) -> bool:
    """Whether a checkpoint (V2: its `.index`; V1: files matching the pattern) exists."""
    checkpoint_prefix = str(checkpoint_prefix)
    if os.path.isfile(index_filename(checkpoint_prefix)):
        return True
    return bool(_pattern_files(checkpoint_prefix)) or os.path.isfile(checkpoint_prefix)


def latest_checkpoint(checkpoint_dir, latest_filename=None) -> str | None:
    """The prefix of the newest checkpoint named by the state file, if it exists on disk."""
    state = get_checkpoint_state(checkpoint_dir, latest_filename)
    if state and state.model_checkpoint_path:
        if checkpoint_exists(state.model_checkpoint_path):
            return state.model_checkpoint_path
        log.error("Couldn't match files for checkpoint %s", state.model_checkpoint_path)
    return None


def get_checkpoint_mtimes(checkpoint_prefixes) -> list[float]:
    """Modification times of the checkpoints (of their `.index` for V2); missing ones skipped."""
    out = []
    for prefix in checkpoint_prefixes:
        for candidate in (index_filename(prefix), prefix):
            if os.path.isfile(candidate):
                out.append(os.path.getmtime(candidate))
                break
    return out


def remove_checkpoint(
    checkpoint_prefix, checkpoint_format_version=SaverDef.V2, meta_graph_suffix="meta"
):
    """Deletes a checkpoint's files: the index first (so it stops existing), then data, meta."""
    files = []
    if checkpoint_format_version == SaverDef.V2:
        files.append(index_filename(checkpoint_prefix))
        files += sorted(glob.glob(glob.escape(checkpoint_prefix) + ".data-?????-of-?????"))
    else:
        files += _pattern_files(checkpoint_prefix) or [checkpoint_prefix]
    files.append(meta_graph_filename(checkpoint_prefix, meta_graph_suffix))
    for f in files:
        try:
            os.remove(f)
        except FileNotFoundError:
            pass


def meta_graph_filename(checkpoint_filename, meta_graph_suffix="meta") -> str:
    """ "model.ckpt-123.meta" for "model.ckpt-123" (a sharded "-?????-of-00002" suffix dropped)."""
    base = checkpoint_filename
    if "-?????-of-" in base:
        base = base.split("-?????-of-")[0]
    return f"{base}.{meta_graph_suffix}"
