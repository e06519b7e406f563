"""`localllm bench --compare llama.cpp[=DIR]`: llama-bench and llama-batched-bench run on the
same file with matching settings, side by side with our figures (tools.py finds them,
commands.py builds their command lines, parse.py reads their output, compare.py pairs the
figures, ratio_table.py prints one table of ratios)."""
