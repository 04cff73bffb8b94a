"""Deploying accepted kernels: the substitution rules, the Inductor hook, the backend, and export.

``substitution`` decides (pure Python); ``runtime_hook`` applies the decisions inside Inductor and
``compile_backend`` offers them as a ``torch.compile`` backend (both import torch, in the user's
process only); ``export`` writes a re-stitched graph with a loader (pure Python).
"""
