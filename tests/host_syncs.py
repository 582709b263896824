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
    """``with HostSyncs() as syncs: ...``, then ``syncs.total`` and ``syncs.by_name``."""

    def __init__(self):
        super().__init__()
        self.by_name: collections.Counter = collections.Counter()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func in SYNCING:
            self.by_name[getattr(func, "__name__", repr(func))] += 1
        return func(*args, **(kwargs or {}))

    @property
    def total(self) -> int:
        return sum(self.by_name.values())
