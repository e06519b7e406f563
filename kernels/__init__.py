"""Compute kernels. Every op has a pure-torch reference and (where it pays) a Triton kernel
with the same signature; `localllm.kernels.registry` is the one place that picks which runs."""
