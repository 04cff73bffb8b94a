"""The language server's features, one module each. Each has ``register(server, ctx)``: it
registers the LSP methods and commands it answers on the pygls server, and works only with its
own small ``...Context`` (never with the shell, ``server.py``, which builds the contexts)."""
