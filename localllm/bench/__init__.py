"""`localllm bench`: measurements (bench.py), benchmark models (models.py), per-kernel profile."""
