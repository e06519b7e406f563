"""Checks that every Triton kernel config the dispatch can choose fits a GPU it may run on:
`space` enumerates the launches for a device profile (running the real launchers on meta
tensors, `capture`), `compile` builds each one for a named target without that GPU and reads
its shared memory and registers. `scripts/check_consumer_configs.py` runs the full set."""
