"""Compile every Triton kernel config the dispatch can choose on consumer GPUs and check that
each fits: shared memory per block, registers per thread and per block. No GPU needed.

    python3 scripts/check_consumer_configs.py                  # rtx3060 (sm_86), rtx4090 (sm_89)
    python3 scripts/check_consumer_configs.py --profiles h200 --jobs 8
    python3 scripts/check_consumer_configs.py --ci             # the representative CI subset
    python3 scripts/check_consumer_configs.py --models llama2-7b --kernels _attn_kernel \
        --where KDOT=1                                         # constexpr values, e.g. the
                                                               # long-context attention loop

Each profile's launches come from `kernels/checks/space.py` (every decode batch 1..128,
prefill chunks, every quant format, activation and KV dtype, the model shapes of
`kernels/checks/models.py`); each distinct config (`select.variants`) is compiled once.
Register spills are reported, not failed. The dp4a GEMVs must also keep their K loops free of
shared memory (`checks/compile.py`, REGISTER_LOOPS). Exit status 1 if any launch does not fit."""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.pop("TRITON_INTERPRET", None)  # compile for real (the kernels must be JIT functions)
os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")  # Triton's runtime default
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from localllm.kernels.checks.capture import Launch  # noqa: E402
from localllm.kernels.checks.compile import Resources, compile_launch, violations  # noqa: E402
from localllm.kernels.checks.models import MODELS  # noqa: E402
from localllm.kernels.checks.select import representative, variants  # noqa: E402
from localllm.kernels.checks.space import enumerate_launches  # noqa: E402
from localllm.kernels.device import PROFILES, DeviceProps, profile  # noqa: E402

_JOBS: list[tuple[DeviceProps, Launch]] = []  # inherited by the forked workers


def _check(i: int) -> tuple[int, Resources | None, list[str]]:
    props, launch = _JOBS[i]
    try:
        res = compile_launch(launch, props.arch)
    except Exception as e:  # a config that does not even compile is a failure too
        return i, None, [f"does not compile: {type(e).__name__}: {str(e).splitlines()[0][:200]}"]
    return i, res, violations(res, props, launch.kernel.split(":")[1])


def _matches(launch: Launch, where: dict[str, str]) -> bool:
    """Whether the launch's constexprs have the values `where` names (as printed)."""
    consts = dict(launch.constexprs)
    return all(k in consts and str(consts[k]) == v for k, v in where.items())


def run(profiles: list[str], ci: bool, jobs: int, models: list[str] | None = None,
        kernels: list[str] | None = None, where: dict[str, str] | None = None) -> list[dict]:  # fmt: skip
    _JOBS.clear()
    shapes = [MODELS[m] for m in models] if models else None
    for name in profiles:
        props = profile(name)
        launches = enumerate_launches(props, shapes)
        if kernels:
            launches = [la for la in launches if la.kernel.split(":")[1] in kernels]
        if where:
            launches = [la for la in launches if _matches(la, where)]
        chosen = representative(launches) if ci else variants(launches)
        print(f"{name} (sm_{props.arch}): {len(launches)} launches, "
              f"{len(variants(launches))} configs, checking {len(chosen)}")  # fmt: skip
        _JOBS.extend((props, launch) for launch in chosen)
    with multiprocessing.get_context("fork").Pool(jobs) as pool:
        results = pool.map(_check, range(len(_JOBS)), chunksize=1)
    rows = []
    for i, res, bad in results:
        props, launch = _JOBS[i]
        rows.append({"profile": props.name, "arch": props.arch, "launch": launch.describe(),
                     "shared": res.shared if res else None,
                     "registers": res.registers if res else None,
                     "spill": res.spill if res else None,
                     "loop_shared": res.loop_shared if res else None,
                     "threads": res.threads if res else None, "violations": bad})  # fmt: skip
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profiles", default="rtx3060,rtx4090", help="comma-separated profiles")
    ap.add_argument("--ci", action="store_true", help="only the representative subset")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--models", help=f"comma-separated model shapes ({', '.join(MODELS)})")
    ap.add_argument("--kernels", help="comma-separated kernel names (_qmm_kernel, ..)")
    ap.add_argument("--where", help="only launches with these constexpr values: NAME=VALUE,..")
    ap.add_argument("--json", type=Path, help="write every result here")
    args = ap.parse_args(argv)
    where: dict[str, str] = {}
    for item in args.where.split(",") if args.where else []:
        name, eq, value = item.partition("=")
        if not (name and eq and value):
            ap.error(f"--where takes NAME=VALUE,.. (got {item!r})")
        where[name] = value
    models = args.models.split(",") if args.models else None
    for m in models or []:
        if m not in MODELS:
            ap.error(f"unknown model {m!r} (known: {', '.join(MODELS)})")
    for name in args.profiles.split(","):
        if name not in PROFILES:
            ap.error(f"unknown GPU profile {name!r} (known: {', '.join(PROFILES)})")
    t0 = time.time()
    with tempfile.TemporaryDirectory() as cache:  # compile everything afresh
        os.environ["TRITON_CACHE_DIR"] = cache
        kernels = args.kernels.split(",") if args.kernels else None
        rows = run(args.profiles.split(","), args.ci, args.jobs, models, kernels, where)
    bad = [r for r in rows if r["violations"]]
    for r in bad:
        print(f"FAIL {r['profile']}: {r['launch']}: {'; '.join(r['violations'])}")
    spills = [r for r in rows if r["spill"]]
    for r in spills:
        print(f"spills {r['spill']} B/thread on {r['profile']}: {r['launch']}")
    if not rows:
        print("nothing to check")
        return 1
    most = max(rows, key=lambda r: r["shared"] or 0)
    print(f"{len(rows)} compiled in {time.time() - t0:.0f} s: {len(bad)} do not fit, "
          f"{len(spills)} spill; most shared memory {most['shared']} B "
          f"({most['profile']}: {most['launch']})")  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
