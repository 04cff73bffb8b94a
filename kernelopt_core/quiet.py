"""Known harmless messages that torch prints because of what KernelOPT itself does.

* ``Could not find an active CPU backend. Generated kernels will not be executable!``: Triton
  says so when Inductor's helpers are imported with no GPU; on the CPU Triton backend the
  interpreter runs the kernels, so the warning is wrong there.
* ``W... torch/_inductor/debug.py ...] ... debug trace: <folder>``: Inductor logs the dump folder
  at warning level because ``kernelopt compile`` turns its debug trace on to write the dumps.

Everything else torch says is left alone. Pure Python; importing this does not import torch.
"""

from __future__ import annotations

import logging
import warnings

NO_ACTIVE_CPU_BACKEND = "Could not find an active CPU backend"
DEBUG_TRACE_LOGGER = "torch._inductor.debug"


class _DebugTraceFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a malformed record is not ours to judge
            return True
        return "debug trace:" not in message


_FILTER = _DebugTraceFilter()


def silence_known_torch_noise() -> None:
    """Filter the messages above in this process (idempotent; logging filters survive torch's
    own logging set-up because they sit on the logger torch writes to)."""
    warnings.filterwarnings("ignore", message=NO_ACTIVE_CPU_BACKEND, category=UserWarning)
    logger = logging.getLogger(DEBUG_TRACE_LOGGER)
    if _FILTER not in logger.filters:
        logger.addFilter(_FILTER)
