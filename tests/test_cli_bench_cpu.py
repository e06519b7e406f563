"""`localllm bench` on CPU as a user runs it: no bogus "0.00 TB/s" copy bandwidth (n/a with
its reason), and the decode figures carry their spread over -r repeats."""

from __future__ import annotations

from localllm.cli import main


def test_cpu_bench_says_why_there_is_no_bandwidth(testdata, capsys):
    model = str(testdata / "models" / "stories260K.gguf")
    args = ["bench", "-m", model, "--sizes", "tiny", "--scenario", "tg", "-r", "3"]
    assert main([*args, "--threads", "1", "--depth", "0"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "TB/s" not in out and "0.00" not in out.split("copy bandwidth")[1][:20]
    assert "copy bandwidth n/a (measured on CUDA only" in out
    assert " ± " in out  # tok/s mean ± stdev over the repeats
