"""Walk a tensor in its logical (row-major) order, a bounded number of elements at a time.

Gate 2 and 3 helpers fill and compare tensors that can be large, strided, or views into a
guarded allocation; they must not make a full-size copy. :func:`flat_pieces` yields pieces that
cover the tensor in logical order with their flat start index: views where the memory is
contiguous, otherwise sub-tensors of at most ``chunk`` elements (which a caller may copy).
Worker-side: torch is imported by the caller, never here.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

DEFAULT_CHUNK = 1 << 20  # elements per piece (4 MiB of fp32)


def flat_pieces(tensor: Any, chunk: int = DEFAULT_CHUNK, start: int = 0) -> Iterator[tuple[int, Any]]:
    """(flat start index, piece) covering ``tensor`` in logical order; each piece has at most ``chunk``
    elements, or is a contiguous slice of at most ``chunk`` elements."""
    numel = tensor.numel()
    if numel == 0:
        return
    if tensor.is_contiguous():
        flat = tensor.view(-1)
        for offset in range(0, numel, chunk):
            yield start + offset, flat[offset:offset + chunk]
        return
    if tensor.dim() <= 1:
        for offset in range(0, numel, chunk):
            yield start + offset, tensor[offset:offset + chunk]
        return
    if numel <= chunk:
        yield start, tensor
        return
    inner = numel // tensor.shape[0]
    step = max(1, chunk // max(inner, 1))
    for index in range(0, tensor.shape[0], step):
        part = tensor[index:index + step]
        offset = start + index * inner
        if part.numel() <= chunk:
            yield offset, part
        else:  # one index of dim 0 holds more than a chunk (then step == 1)
            yield from flat_pieces(part[0], chunk, offset)


def read_flat(piece: Any) -> Any:
    """A piece as a 1-D tensor (a view when contiguous, else a copy of at most one chunk)."""
    return piece.reshape(-1)


def write_flat(piece: Any, values: Any) -> None:
    """Write 1-D ``values`` into a piece in logical order, in place."""
    if piece.is_contiguous():
        piece.view(-1).copy_(values)
    else:
        piece.copy_(values.view(piece.shape))


def aligned_flat(tensors: list[Any], chunk: int = DEFAULT_CHUNK) -> Iterator[tuple[int, list[Any]]]:
    """(flat start, [1-D piece of each tensor]) over tensors of one numel, cut at common boundaries
    (their layouts may differ, so their own pieces do not line up)."""
    sources = [(read_flat(piece) for _, piece in flat_pieces(t, chunk)) for t in tensors]
    current: list[Any] = [None] * len(tensors)
    start = 0
    while True:
        for i, source in enumerate(sources):
            while current[i] is None or current[i].numel() == 0:
                current[i] = next(source, None)
                if current[i] is None:
                    return
        count = min(piece.numel() for piece in current)
        yield start, [piece[:count] for piece in current]
        current = [piece[count:] for piece in current]
        start += count
