"""A second device on a CPU-only machine, for tests: tensors "on the accelerator" are CPU tensors that
the mode tags, and an operation that mixes tagged tensors with untagged (CPU) ones raises as CUDA does.

CI has no GPU, yet the commonest GPU bug, a tensor made on the CPU that meets a model on the GPU
(``torch.arange(n)`` without ``device=``, lengths or data left on the CPU), needs no GPU to catch:
only the bookkeeping of where each tensor lives. Inside ``SimulatedAccelerator()``:

* ``x.to(ACCELERATOR)``, ``module.to(ACCELERATOR)`` and factories given ``device=ACCELERATOR`` (or the
  ``device`` of a tagged tensor) make tagged tensors; ``x.cpu()`` and ``x.to("cpu")`` untagged copies;
* a tagged tensor's ``.device`` is ``ACCELERATOR``, ``cuda`` (code that branches on the device type
  takes its CUDA branch), and an operation with a tagged input tags its outputs;
* an operation given tagged tensors and untagged ones with at least one dimension raises
  ``RuntimeError`` ("Expected all tensors to be on the same device"), as CUDA does; the exceptions are
  CUDA's own: indexing with CPU index tensors, ``copy_`` and packing with CPU lengths. Zero-dimensional
  CPU tensors mix freely, as on CUDA;
* ``.numpy()`` of a tagged tensor raises, as it does for a CUDA tensor, and so does drawing random
  numbers for tagged tensors from a CPU generator.

Values are computed on the CPU as usual, so results can be compared with an untagged run.
"""

from __future__ import annotations

import threading
import weakref

import torch
from torch.overrides import TorchFunctionMode

ACCELERATOR = torch.device("cuda")
_TENSOR = torch.Tensor

# CUDA accepts CPU tensors beside CUDA ones in these (index tensors, the source of a copy, the lengths of
# packing, module.to()'s test whether a parameter's data may be swapped); torch's own functions are
# named, not imported, so that this file uses no private name of torch's
_MIXING_ALLOWED = {_TENSOR.__getitem__, _TENSOR.__setitem__, _TENSOR.copy_}
_MIXING_ALLOWED_NAMES = {"_pack_padded_sequence", "_pad_packed_sequence", "_has_compatible_shallow_copy_type"}
# recurrent layers on packed sequences take the batch sizes, on the CPU, as their second argument
_PACKED_RNN_NAMES = {"gru", "lstm", "rnn_tanh", "rnn_relu"}
_MOVES = {_TENSOR.to, _TENSOR.cuda, _TENSOR.cpu}
_NUMPY = {_TENSOR.numpy, _TENSOR.__array__}
_DEVICE_GET, _DATA_SET = _TENSOR.device.__get__, _TENSOR.data.__set__
_IN_PLACE_DESTINATION = {_TENSOR.copy_, _TENSOR.__setitem__}


class DeviceMixError(RuntimeError):
    """A CPU tensor met a tensor on the (simulated) accelerator."""


def _name(func) -> str:
    return getattr(func, "__qualname__", None) or getattr(func, "__name__", repr(func))


class SimulatedAccelerator(TorchFunctionMode):
    """The mode: see the module docstring. ``on_accelerator(t)`` says whether ``t`` is tagged."""

    def __init__(self):
        super().__init__()
        self._tagged: dict[int, weakref.ref] = {}
        self._patched: list = []
        self._depth, self._lock = 0, threading.Lock()

    def __enter__(self):
        """Also tag parameters made from tagged tensors (``nn.Parameter`` bypasses the mode), and run
        threads started inside the mode under it (modes are per thread; the checkers call the reader's
        function in a thread of their own). The outermost entry patches, the last exit restores."""
        with self._lock:
            self._depth += 1
            if self._depth == 1:
                self._patch()
        return super().__enter__()

    def __exit__(self, *exc):
        with self._lock:
            self._depth -= 1
            if self._depth == 0:
                for owner, name, original in self._patched:
                    setattr(owner, name, original)
        return super().__exit__(*exc)

    def _patch(self):
        mode, new_parameter, run = self, torch.nn.Parameter.__new__, threading.Thread.run

        def parameter(cls, data=None, requires_grad=True):
            made = new_parameter(cls, data, requires_grad)
            return mode._tag(made) if mode.on_accelerator(data) else made

        def run_in_mode(thread):
            with mode:
                run(thread)

        self._patched = [(torch.nn.Parameter, "__new__", new_parameter), (threading.Thread, "run", run)]
        torch.nn.Parameter.__new__ = parameter
        threading.Thread.run = run_in_mode

    # -- the tags ---------------------------------------------------------------------------------------
    def on_accelerator(self, t) -> bool:
        ref = self._tagged.get(id(t))
        return ref is not None and ref() is t

    def _tag(self, t):
        if isinstance(t, torch.Tensor):
            key = id(t)
            self._tagged[key] = weakref.ref(t, lambda _, key=key: self._tagged.pop(key, None))
        return t

    def _untag(self, t):
        self._tagged.pop(id(t), None)
        return t

    def _is_accelerator(self, device) -> bool:
        if device is None:
            return False
        if isinstance(device, int):
            return True  # an index means a CUDA device
        device = torch.device(device)
        return device.type in ("cuda", "mps")

    # -- the mode ---------------------------------------------------------------------------------------
    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func == _DEVICE_GET:
            return ACCELERATOR if self.on_accelerator(args[0]) else func(*args)
        if func == _DATA_SET:  # module.to() sets param.data to the moved copy
            target, value = args
            result = func(*args)
            (self._tag if self.on_accelerator(value) else self._untag)(target)
            return result
        name = getattr(func, "__name__", "")
        if name == "_parse_to":  # module.to()'s reading of its arguments: keep the device
            return func(*args, **kwargs)
        if func in _MOVES:
            return self._move(func, args, kwargs)
        if func in _NUMPY and self.on_accelerator(args[0]):
            raise TypeError("can't convert a tensor on the (simulated) accelerator to numpy: use Tensor.cpu() "
                            "to copy the tensor to host memory first")
        device = kwargs.get("device")
        to_accelerator = self._is_accelerator(device)
        if device is not None:
            kwargs = {**kwargs, "device": "cpu"}
        checked = args
        if name in _PACKED_RNN_NAMES and len(args) > 1 and isinstance(args[1], torch.Tensor) and args[1].dim() == 1:
            checked = (args[0], *args[2:])  # the batch sizes of a packed sequence stay on the CPU
        tensors = list(_tensors(checked, kwargs))
        if not tensors and device is None:
            return func(*args, **kwargs)  # no tensor, no device: nothing to check or tag
        tagged = [t for t in tensors if self.on_accelerator(t)]
        if tagged and func not in _MIXING_ALLOWED and name not in _MIXING_ALLOWED_NAMES:
            plain = [t for t in tensors if not self.on_accelerator(t) and t.dim() > 0]
            if plain:
                raise DeviceMixError(
                    f"Expected all tensors to be on the same device, but {_name(func)} got tensors on the "
                    f"(simulated) accelerator and {len(plain)} on the CPU, of shapes "
                    f"{[tuple(t.shape) for t in plain]}")
        generator = kwargs.get("generator")
        if (tagged or to_accelerator) and generator is not None and generator.device.type == "cpu":
            raise DeviceMixError(f"{_name(func)}: a CPU generator cannot draw numbers for the accelerator")
        result = func(*args, **kwargs)
        if func in _IN_PLACE_DESTINATION:
            return result  # the destination stays where it is
        if name == "_pack_padded_sequence" and tagged:
            self._tag(result[0])  # the packed data; its batch sizes stay on the CPU, as on CUDA
        elif to_accelerator or (tagged and device is None):
            for t in _tensors((result,), {}):
                self._tag(t)
        return result

    def _move(self, func, args, kwargs):
        """``.to``, ``.cuda`` and ``.cpu``: compute the move on the CPU, then set the tag."""
        source, options = args[0], {}
        if func is _TENSOR.cpu:
            target = False
        elif func is _TENSOR.cuda:
            target = True
        else:
            other = next((a for a in (*args[1:], *kwargs.values()) if isinstance(a, torch.Tensor)), None)
            if other is not None:  # .to(other): other's device and dtype
                target, options["dtype"] = self.on_accelerator(other), other.dtype
            else:
                device, dtype, memory_format = _to_arguments(args[1:], kwargs)
                target = self.on_accelerator(source) if device is None else self._is_accelerator(device)
                options = {k: v for k, v in (("dtype", dtype), ("memory_format", memory_format)) if v is not None}
        result = _TENSOR.to(source, **options) if options else source
        if result is source and target != self.on_accelerator(source):
            result = source.clone()  # a move makes a new tensor; the source keeps its place
        if result is source:
            return result
        return self._tag(result) if target else self._untag(result)


def _to_arguments(args, kwargs) -> tuple:
    """``(device, dtype, memory_format)`` of a ``Tensor.to`` call without a tensor argument (None: not given)."""
    device, dtype, memory_format = kwargs.get("device"), kwargs.get("dtype"), kwargs.get("memory_format")
    for a in args:
        if isinstance(a, torch.dtype):
            dtype = a
        elif isinstance(a, (str, torch.device)) or (isinstance(a, int) and not isinstance(a, bool)):
            device = a
    return device, dtype, memory_format


def _tensors(args, kwargs):
    """The tensors among ``args`` and ``kwargs``' values, looking one list or tuple deep."""
    for a in (*args, *kwargs.values()):
        if isinstance(a, torch.Tensor):
            yield a
        elif isinstance(a, (list, tuple)):
            yield from (t for t in a if isinstance(t, torch.Tensor))


def simulated(device: torch.device) -> bool:
    """Whether ``device`` stands for the simulated accelerator: CUDA named on a machine without it."""
    return torch.device(device).type == "cuda" and not torch.cuda.is_available()


def activate_in_this_process() -> SimulatedAccelerator:
    """Run the rest of this process on the simulated accelerator, as a notebook kernel's startup file
    does (``tests/test_notebooks_on_simulated_gpu.py``): with ``ATTN_UTILS_DEVICE=cuda`` the notebook's
    ``get_device()`` then picks it. ``torch.cuda.synchronize`` becomes a no-op; CUDA's memory statistics
    and random state remain out of reach, so cells that measure them need a real GPU."""
    import attn_utils.device

    mode = SimulatedAccelerator()
    mode.__enter__()
    attn_utils.device.available_devices = lambda: ["cuda", "cpu"]
    torch.cuda.synchronize = lambda *args, **kwargs: None
    return mode
