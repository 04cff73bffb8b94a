"""Benchmark campaigns over KernelBench-format problem suites.

A campaign runs every problem of a suite in its own subprocess (eager and max-autotune timing,
compile, classify, optimize with the gates, a confirmation A/B), writes one result file per problem
as it finishes, and gathers them into ``results.json``, ``report.md`` and a plot.

Modules, one purpose each: :mod:`.suite` (problems and levels), :mod:`.results` (the per-problem
record), :mod:`.outcome`, :mod:`.summary` (geomeans, fast_p, the regression check), :mod:`.report`
and :mod:`.plot`, :mod:`.problem_main` (inside a problem's subprocess; imports torch),
:mod:`.problem_process` (its parent side), :mod:`.scheduler` (local slots), :mod:`.ray_runner` and
:mod:`.campaign`. Nothing else imports torch at module load.
"""
