"""Benchmark campaigns over KernelBench-format problem suites.

A campaign runs every problem of a suite in its own subprocess (eager and max-autotune timing,
compile, classify, optimize with the gates, a confirmation A/B), writes one result file per
problem as it finishes, and gathers them into ``results.json``, ``report.md`` and a plot.

Modules, one job each:
- :mod:`.suite`: finding the problems of a suite and their levels (no import of problem code);
- :mod:`.results`: the per-problem result record and its files;
- :mod:`.outcome`: optimized / matched / fallback / error and the fallback reason;
- :mod:`.summary`: geomeans, fast_p, outcome counts and the regression check;
- :mod:`.report` and :mod:`.plot`: ``results.json``, ``report.md`` and the PNG;
- :mod:`.problem_job`: what runs inside a problem's subprocess (imports torch);
- :mod:`.problem_process`: the parent side of that subprocess (timeouts, crashes, events);
- :mod:`.scheduler`: local slots (GPUs or CPU workers) draining a queue;
- :mod:`.ray_runner`: one Ray task per problem;
- :mod:`.campaign`: the whole campaign.

Nothing here imports torch at module load except :mod:`.problem_job` (subprocess only).
"""
