"""Tensors handed between a checker and a candidate process without copying them twice.

The checker allocates *exchange buffers* and hands the candidate process a :class:`SharedRef`
(a small picklable description); both sides map the same memory:

* on the CPU backend, a file in a folder both may write (``/dev/shm`` when present), mapped
  ``MAP_SHARED`` with ``torch.from_file``;
* on a GPU, a CUDA IPC handle (``torch.multiprocessing.reductions``). Exchange buffers come from a
  private memory pool where torch offers one (``torch.cuda.MemPool``), so the segments the
  candidate process maps hold exchange buffers only, never the checker's own tensors.

A candidate process hands tensors back the same way (:func:`share_tensor`). Views of a buffer
travel as :class:`TensorView` (dtype, sizes, strides, element offset). Imported in worker-side
processes only; torch is imported inside the functions.
"""

from __future__ import annotations

import base64
import itertools
import os
import shutil
import tempfile
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any

from ..measure.task_context import worker_scratch, worker_shared_memory

_COUNTER = itertools.count()


@dataclass
class SharedRef:
    """A buffer one process lends the other; JSON-able, so no pickle ever crosses from a candidate."""

    kind: str  # "file" or "cuda-ipc"
    nbytes: int
    device: str
    path: str | None = None
    ipc: list[Any] | None = None  # torch's CUDA IPC rebuild arguments, encoded by _encode_ipc

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "nbytes": self.nbytes, "device": self.device, "path": self.path, "ipc": self.ipc}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SharedRef:
        return cls(str(data["kind"]), int(data["nbytes"]), str(data["device"]), data.get("path"), data.get("ipc"))


@dataclass
class TensorView:
    buffer: int  # index into the message's list of SharedRefs
    dtype: str  # e.g. "torch.float32"
    size: tuple[int, ...]
    stride: tuple[int, ...]
    offset: int  # in elements of dtype

    def to_json(self) -> dict[str, Any]:
        return {"buffer": self.buffer, "dtype": self.dtype, "size": list(self.size), "stride": list(self.stride),
                "offset": self.offset}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TensorView:
        return cls(int(data["buffer"]), str(data["dtype"]), tuple(int(v) for v in data["size"]),
                   tuple(int(v) for v in data["stride"]), int(data["offset"]))


# The classes torch's CUDA IPC rebuild may name; anything else in a message is refused.
_IPC_CLASSES = ("torch.Tensor", "torch.UntypedStorage", "torch.storage.UntypedStorage",
                "torch.storage.TypedStorage", "torch.nn.parameter.Parameter")


def _encode_ipc(reduced: Any) -> list[Any]:
    import torch
    from torch.multiprocessing.reductions import rebuild_cuda_tensor

    function, args = reduced
    if function is not rebuild_cuda_tensor:
        raise ValueError(f"unexpected CUDA tensor reduction {function!r}")
    out: list[Any] = []
    for value in args:
        if isinstance(value, bytes):
            out.append({"bytes": base64.b64encode(value).decode("ascii")})
        elif isinstance(value, torch.dtype):
            out.append({"dtype": str(value)})
        elif isinstance(value, type):
            out.append({"class": f"{value.__module__}.{value.__qualname__}".replace("torch._C.", "torch.")})
        elif isinstance(value, torch.device):
            out.append({"device": str(value)})
        elif isinstance(value, (tuple, list)):
            out.append({"tuple": [int(v) for v in value]})
        else:
            out.append(value)
    return out


def _decode_ipc(encoded: list[Any]) -> Any:
    import importlib

    import torch
    from torch.multiprocessing.reductions import rebuild_cuda_tensor

    args: list[Any] = []
    for value in encoded:
        if isinstance(value, dict) and "bytes" in value:
            args.append(base64.b64decode(value["bytes"]))
        elif isinstance(value, dict) and "dtype" in value:
            args.append(_dtype(value["dtype"]))
        elif isinstance(value, dict) and "device" in value:
            args.append(torch.device(value["device"]))
        elif isinstance(value, dict) and "tuple" in value:
            args.append(tuple(int(v) for v in value["tuple"]))
        elif isinstance(value, dict) and "class" in value:
            name = str(value["class"])
            candidates = [n for n in _IPC_CLASSES if n.rsplit(".", 1)[-1] == name.rsplit(".", 1)[-1]]
            if not candidates:
                raise ValueError(f"a shared CUDA buffer names an unexpected class {name!r}")
            module, _, attr = candidates[0].rpartition(".")
            args.append(getattr(importlib.import_module(module), attr))
        elif value is None or isinstance(value, (bool, int, float, str)):
            args.append(value)
        else:
            raise ValueError(f"unexpected value in a shared CUDA buffer description: {value!r}")
    return rebuild_cuda_tensor(*args)


def _dtype(name: str) -> Any:
    import torch

    value = getattr(torch, name.replace("torch.", ""), None)
    if not isinstance(value, torch.dtype):
        raise ValueError(f"unknown dtype {name!r}")
    return value


def view_of(buffer: Any, view: TensorView) -> Any:
    """The tensor ``view`` describes, inside ``buffer`` (a flat uint8 tensor)."""
    dtype = _dtype(view.dtype)
    return buffer.view(dtype).as_strided(tuple(view.size), tuple(view.stride), view.offset)


def shared_folder() -> str:
    """Where CPU exchange files go: RAM-backed /dev/shm when there is one (inside the worker's own
    folder there, removed with the worker)."""
    base = worker_shared_memory() or worker_scratch() or (
        "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else tempfile.gettempdir())
    return tempfile.mkdtemp(prefix=f"kernelopt-exchange-{os.getpid()}-", dir=base)


def _cuda_pool(device: str) -> Any:
    import torch

    pool_type = getattr(torch.cuda, "MemPool", None)
    if pool_type is None or not hasattr(torch.cuda, "use_mem_pool"):
        return None
    try:
        return pool_type()
    except Exception:  # noqa: BLE001 - an older or unusual build: fall back to the default pool
        return None


@dataclass
class ExchangeArena:
    """The checker's exchange buffers for one candidate process; :meth:`close` frees them all."""

    device: str
    folder: str | None = None
    live_bytes: int = 0
    peak_bytes: int = 0
    notes: list[str] = field(default_factory=list)
    _buffers: list[Any] = field(default_factory=list)
    _pool: Any = None

    def __post_init__(self) -> None:
        if self.device.startswith("cuda"):
            self._pool = _cuda_pool(self.device)
            if self._pool is None:
                self.notes.append("no private CUDA memory pool in this torch: exchange buffers share segments")
        elif self.folder is None:
            self.folder = shared_folder()

    @property
    def pool_id(self) -> tuple[int, int] | None:
        """The private CUDA pool's id (what an allocator snapshot names it by), while the arena is open."""
        return tuple(self._pool.id) if self._pool is not None else None

    def allocate(self, nbytes: int) -> tuple[Any, SharedRef]:
        import torch

        nbytes = max(1, int(nbytes))
        if self.device.startswith("cuda"):
            from torch.multiprocessing.reductions import reduce_tensor

            context = torch.cuda.use_mem_pool(self._pool) if self._pool is not None else nullcontext()
            with context:
                buffer = torch.empty(nbytes, dtype=torch.uint8, device=self.device)
            ref = SharedRef("cuda-ipc", nbytes, self.device, ipc=_encode_ipc(reduce_tensor(buffer)))
        else:
            assert self.folder is not None
            path = os.path.join(self.folder, f"x{next(_COUNTER)}.bin")
            with open(path, "wb") as handle:
                handle.truncate(nbytes)
            buffer = torch.from_file(path, shared=True, size=nbytes, dtype=torch.uint8)
            ref = SharedRef("file", nbytes, "cpu", path=path)
        self._buffers.append(buffer)
        self.live_bytes += nbytes
        self.peak_bytes = max(self.peak_bytes, self.live_bytes)
        return buffer, ref

    def close(self) -> None:
        self._buffers.clear()
        self.live_bytes = 0
        if self.device.startswith("cuda"):
            import torch

            torch.cuda.synchronize()
            torch.cuda.ipc_collect()
            self._pool = None
            torch.cuda.empty_cache()
        elif self.folder:
            shutil.rmtree(self.folder, ignore_errors=True)


def open_shared(ref: SharedRef) -> Any:
    """Map a buffer the other process allocated (a flat uint8 tensor)."""
    import torch

    if ref.kind == "file":
        assert ref.path is not None
        return torch.from_file(ref.path, shared=True, size=ref.nbytes, dtype=torch.uint8)
    if ref.kind == "cuda-ipc":
        assert ref.ipc is not None
        return _decode_ipc(ref.ipc)
    raise ValueError(f"unknown shared buffer kind {ref.kind!r}")


def share_tensor(tensor: Any, folder: str | None = None) -> tuple[SharedRef, TensorView, Any]:
    """Hand a tensor to the other process: (ref, view, what to keep alive until it is done).

    On a GPU the tensor's own memory is shared (no copy). On the CPU its bytes are copied into a
    file in ``folder`` (the candidate process's scratch), since ordinary memory cannot be mapped
    by another process.
    """
    import torch

    if tensor.is_cuda:
        from torch.multiprocessing.reductions import reduce_tensor

        flat = tensor.detach()
        storage = flat.untyped_storage()
        base = torch.empty(0, dtype=torch.uint8, device=flat.device).set_(storage)
        ref = SharedRef("cuda-ipc", storage.nbytes(), str(flat.device), ipc=_encode_ipc(reduce_tensor(base)))
        view = TensorView(0, str(flat.dtype), tuple(flat.size()), tuple(flat.stride()), flat.storage_offset())
        return ref, view, base
    assert folder is not None, "a CPU tensor is shared through a file: give a folder"
    contiguous = tensor.detach().contiguous()
    nbytes = contiguous.numel() * contiguous.element_size()
    path = os.path.join(folder, f"out{next(_COUNTER)}.bin")
    with open(path, "wb") as handle:
        handle.truncate(max(1, nbytes))
    mapped = torch.from_file(path, shared=True, size=max(1, nbytes), dtype=torch.uint8)
    if nbytes:
        mapped[:nbytes].view(contiguous.dtype).copy_(contiguous.reshape(-1))
    ref = SharedRef("file", max(1, nbytes), "cpu", path=path)
    view = TensorView(0, str(contiguous.dtype), tuple(contiguous.size()), tuple(contiguous.stride()), 0)
    return ref, view, mapped


__all__ = ["ExchangeArena", "SharedRef", "TensorView", "open_shared", "share_tensor", "view_of"]
