"""Worker tasks for the process-lifetime tests (imported inside the worker as ``tests.lifetime_tasks``).

``sleep_task`` makes "mid-task" deterministic: it starts a child the way the worker starts a zygote
(owned, in a session of its own, from a thread that then ends), writes a marker file naming both
processes and the worker's temporary folders, and sleeps. A test waits for the marker, then ends the owner however it likes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

from kernelopt_core.measure.task_context import SCRATCH_ENV, SHARED_MEMORY_ENV
from kernelopt_core.process_lifetime import start_owned

# Like the zygote: the parent-death signal only, no watch thread.
GRANDCHILD = ("from kernelopt_core.process_lifetime import die_with_owner\n"
              "die_with_owner(watch=False)\nimport time\ntime.sleep(600)\n")


def sleep_task(payload: dict) -> dict:
    started: list[subprocess.Popen[bytes]] = []
    thread = threading.Thread(target=lambda: started.append(start_owned(
        [sys.executable, "-c", GRANDCHILD], stdin=subprocess.DEVNULL, start_new_session=True)))
    thread.start()
    thread.join()
    marker = {"worker": os.getpid(), "grandchild": started[0].pid,
              "scratch": [os.environ.get(name) for name in (SCRATCH_ENV, SHARED_MEMORY_ENV) if os.environ.get(name)]}
    temporary = payload["marker"] + ".tmp"
    with open(temporary, "w", encoding="utf-8") as handle:
        json.dump(marker, handle)
    os.replace(temporary, payload["marker"])  # whole or absent: the test reads it as soon as it appears
    time.sleep(float(payload.get("seconds", 600)))
    return marker
