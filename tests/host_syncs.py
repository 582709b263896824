"""Counting host synchronisations: the calls that make the host wait for the device on CUDA (a value
read back, a data-dependent shape), counted on any machine with a torch-function mode."""

from __future__ import annotations

import collections

import torch
from torch.overrides import TorchFunctionMode

_T = torch.Tensor
#: reading a value back (item, bool, int, float, index, tolist, numpy) or a result whose shape depends on
#: the data (nonzero, masked_select, unique). Indexing with a boolean mask syncs too but is not seen: its
#: nonzero runs below the torch-function layer.
SYNCING = {_T.item, _T.__bool__, _T.__int__, _T.__float__, _T.__index__, _T.tolist, _T.numpy, _T.nonzero,
           torch.nonzero, _T.masked_select, torch.masked_select, torch.unique, _T.unique}


class HostSyncs(TorchFunctionMode):
    """``with HostSyncs() as syncs: ...``, then ``syncs.total`` and ``syncs.by_name``.

    Only reads of tensors off the CPU count (reading a CPU tensor makes nobody wait), unless
    ``include_cpu=True``; tensors on the simulated accelerator count as off the CPU."""

    def __init__(self, include_cpu: bool = False):
        super().__init__()
        self.include_cpu = include_cpu
        self.by_name: collections.Counter = collections.Counter()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func in SYNCING and (self.include_cpu or any(
                isinstance(a, torch.Tensor) and a.device.type != "cpu" for a in args)):
            self.by_name[getattr(func, "__name__", repr(func))] += 1
        return func(*args, **(kwargs or {}))

    @property
    def total(self) -> int:
        return sum(self.by_name.values())
