"""Gates 2-4 on the worker's side: the tasks a worker runs by name for the cascade.

:mod:`.skeleton` is what every kind of target shares (verdicts, the candidate's and the baseline's
processes, containment, exchange buffers, kernel-alone timing); :mod:`.graph` holds the tasks of a
kernel in an Inductor dump, :mod:`kernelopt_core.userkernels.tasks` those of a user's own kernel.
Nothing is imported here: the worker imports the module a task names.
"""
