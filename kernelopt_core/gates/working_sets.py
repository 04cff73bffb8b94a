"""Worker task: give back every working set the search's gate tasks keep between tasks.

Between candidates the worker keeps a candidate's contained process (kernel timing reuses it), a spare
one, and the baseline's timing process holding the original graph and its arguments. A task that needs
the device to itself, such as a configuration check compiling the whole problem twice, runs after this
one, so that no second process holds a working set on the device beside it.
"""

from __future__ import annotations

import gc
from typing import Any

from ..measure.task_context import RECYCLE_KEY

# Allocated device memory a released worker may keep (a loaded graph's constants, Triton's small buffers).
RETAINED_LIMIT_BYTES = 256 * 2**20


def _device_bytes(device: str) -> dict[str, int] | None:
    if not device.startswith("cuda"):
        return None
    import torch

    torch.cuda.synchronize(device)
    return {"allocated": int(torch.cuda.memory_allocated(device)), "reserved": int(torch.cuda.memory_reserved(device))}


def release_working_sets(payload: dict[str, Any]) -> dict[str, Any]:
    """``{"device"}`` -> what this worker held on the device before and after (None on the CPU)."""
    from .sanitize import settle_sanitizer
    from .tasks.skeleton import close_baselines, close_candidate

    device = str(payload.get("device") or "cpu")
    settle_sanitizer()  # its targets hold the graph too
    before = _device_bytes(device)
    close_candidate({"keep_spare": False})  # the candidate's process and the spare
    close_baselines({})  # the baseline's timing process
    gc.collect()
    if device.startswith("cuda"):
        import torch

        torch.cuda.ipc_collect()  # blocks the closed processes had mapped are freed only once collected
        torch.cuda.empty_cache()
    after = _device_bytes(device)
    out: dict[str, Any] = {"closed": ["candidate", "spare", "baseline"], "before": before, "after": after}
    if after is not None and after["allocated"] > RETAINED_LIMIT_BYTES:
        # what this worker still holds would count against the check that follows (on the H100, 1.5 working
        # sets after a timing that ran out of memory): the worker ends after this reply, and the next task
        # starts in a fresh one
        out[RECYCLE_KEY] = f"{after['allocated'] / 2**30:.2f} GiB still allocated after the working sets went"
    return out
