"""Measurement: the worker process, timing statistics and timers, ncu, device peaks (docs/measurement.md).

Importing this package, or any of its modules, never imports torch; the modules that run inside a
worker import it inside their functions.
"""
