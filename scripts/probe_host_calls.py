"""What the small torch calls on a step's host path cost on this machine (GPU needed), us per
call: the staging buffer's copy to the device (`StepBuffers.upload`) and its parts, an event
record, the argmax ids' copy back to the host (`HostIds`) and a variant into a pinned buffer
kept across steps. Guides the host-path work of issue 15 (BENCHMARKS, session 29).

Usage: python3 scripts/probe_host_calls.py [--n 20000]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import torch

from localllm.device import current_stream
from localllm.engine.graph_layout import StepBuffers
from localllm.engine.step_sampling import HostIds


def per_call(fn: Callable[[], object], n: int) -> float:
    for _ in range(200):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    dt = time.perf_counter() - t0
    torch.cuda.synchronize()
    return dt / n * 1e6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=20000)
    a = ap.parse_args()
    dev = torch.device("cuda")
    buf = StepBuffers.allocate(64, 8, 256, dev)
    nbytes = buf.tables_offset + buf.table_bytes  # a batch-1 step's copy
    d, h = buf.dev[:nbytes], buf.hosts[0][:nbytes]
    ev = torch.cuda.Event()
    stream = torch.cuda.current_stream()
    greedy = torch.zeros(64, dtype=torch.int64, device=dev)
    pinned = torch.empty(64, dtype=torch.int64).pin_memory()
    cases: dict[str, Callable[[], object]] = {
        "upload (as the engine)": lambda: buf.upload(nbytes),
        "slices dev[:n], host[:n]": lambda: (buf.dev[:nbytes], buf.hosts[0][:nbytes]),
        "copy_ pinned -> device, cached slices": lambda: d.copy_(h, non_blocking=True),
        "Event.record()": lambda: ev.record(),
        "Event.record(stream)": lambda: ev.record(stream),
        "torch.cuda.current_stream()": torch.cuda.current_stream,
        "localllm.device.current_stream(0)": lambda: current_stream(0),
        "HostIds(greedy) (as the engine)": lambda: HostIds(greedy),
        "greedy.to(cpu, non_blocking)": lambda: greedy.to("cpu", non_blocking=True),
        "pinned.copy_(greedy, non_blocking)": lambda: pinned.copy_(greedy, non_blocking=True),
        "event.synchronize() (done)": ev.synchronize,
        "pinned.tolist() (64)": pinned.tolist,
        "pinned[:5].tolist()": lambda: pinned[:5].tolist(),
    }
    for name, fn in cases.items():
        print(f"{per_call(fn, a.n):8.2f} us  {name}")


if __name__ == "__main__":
    main()
