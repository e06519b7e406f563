"""Time the fused dequant-GEMM (`kernels/linear/qmm_triton.py`) on the 8B model's shapes with
weights read from memory (enough copies to overflow L2), at the heuristic config and a few
others; optionally next to another version of the module (`--old path/to/module.py`).

Usage: python3 scripts/probe_qmm.py [--ts 16,32] [--fmts q4_k,q6_k] [--old FILE] [--sweep]
       python3 scripts/probe_qmm.py --ts 32,64 --neighbours [--ahead] [--budget 400]
       python3 scripts/probe_qmm.py --ts 40,64 --confirm --old .carry/old/kernels/linear/qmm_triton.py
       python3 scripts/probe_qmm.py --configs FILE.jsonl [--warm 8]
Prints us per call, GB/s and % of 4.1 TB/s for the packed weight bytes. `--neighbours` times
the heuristic's config against its neighbours (the scale prefetch toggled, stages, groups per
step, weight rows, warps, operand order, split K, the next tile decoded ahead; `--ahead`: all of them with it on), each checked against the heuristic's output.
`--confirm` times, on this kernel, the config the `--old` module's heuristic picks against this
heuristic's, with and without the scale prefetch. `--configs` times the heuristic's config and
each listed one (JSON lines of fmt, n, k, t, cfg: `MMConfig` fields) for every (fmt, n, k, t) the
file names; `--warm N` first compiles them in N processes (Triton's disk cache is shared).
"""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import itertools
import json
import os
import sys
import time
from dataclasses import replace

import torch
from triton.testing import do_bench_cudagraph

sys.path.insert(0, os.path.dirname(__file__))
from bench_qlinear import PEAK_BW, random_weight  # noqa: E402

from localllm.kernels.device import device_props  # noqa: E402
from localllm.kernels.linear import qmm_triton as mm  # noqa: E402
from localllm.kernels.linear.qlinear_triton import qlinear_triton  # noqa: E402
from localllm.kernels.quant import kernel_facts  # noqa: E402

SHAPES = {"q4_k": [(6144, 4096), (4096, 4096), (28672, 4096), (4096, 14336)],
          "q6_k": [(4096, 14336), (1024, 4096), (128256, 4096)],
          "q4_0": [(12288, 4096), (4096, 4096), (22016, 4096), (4096, 11008)]}  # fmt: skip


def cold_copies(fmt: str, n: int, k: int):
    w = random_weight(fmt, n, k)
    reps = max(1, int(256e6 // w.nbytes))
    planes = [w.tensors[p] for p in kernel_facts(fmt).planes]
    return w, [[p.clone() for p in planes] for _ in range(reps)]


def launch(mod, x, planes, fmt, n, cfg, exact: bool = False):
    """One GEMM: the engine's `qmm_launch` (fitted, spill guard) or, `exact`, `cfg` as given."""
    return mod._launch(x, planes, fmt, n, None, cfg)[0] if exact else mod.qmm_launch(
        x, planes, fmt, n, None, cfg)  # fmt: skip


def time_us(mod, x, copies, fmt, n, cfg, exact: bool = False) -> float:
    def run():
        for planes in copies:
            launch(mod, x, planes, fmt, n, cfg, exact)

    return do_bench_cudagraph(run, rep=30) * 1e3 / len(copies)


def neighbours(cfg, n: int) -> list:
    """The heuristic's config, then one-knob changes around it with the scale prefetch on."""
    pf = replace(cfg, prefetch=not cfg.prefetch)
    on = cfg if cfg.prefetch else pf
    out = [cfg, pf]
    out += [replace(on, stages=st, ng=ng) for st in (2, 3, 4) for ng in (4, 8, 16)]
    out += [replace(on, bn=bn, warps=wp) for bn in (32, 64, 128) for wp in (4, 8)]
    out += [replace(on, swap=not on.swap), replace(cfg, ahead=not cfg.ahead)]
    if n <= 16384:
        out += [replace(on, split=sp) for sp in (1, 2, 4) if sp != on.split]
    seen, uniq = set(), []
    for c in out:
        if c not in seen and not (c.bm > 64 and c.swap and c.warps == 4):
            seen.add(c)
            uniq.append(c)
    return uniq


def time_configs(fmt, n, k, t, copies, cfgs, deadline=float("inf"), exact=False) -> list:
    """[(us, config, max error relative to the first config's output)] for `cfgs` (the
    heuristic's first) on t random rows; configs that do not compile or fit are reported."""
    x = torch.randn(t, k, device="cuda").half()
    ref = launch(mm, x, copies[0], fmt, n, cfgs[0], exact).float()
    res = []
    for c in cfgs:
        if time.time() > deadline:
            print("budget spent", flush=True)
            break
        try:
            o = launch(mm, x, copies[0], fmt, n, c, exact).float()
            err = ((o - ref).abs().max() / ref.abs().max()).item()
            res.append((time_us(mm, x, copies, fmt, n, c, exact), c, err))
        except Exception as e:  # noqa: BLE001 - configs that do not compile or fit
            print(f"   {c}: {type(e).__name__}", flush=True)
    return res


def write_records(name: str, fmt, n, k, t, res, heur) -> None:
    """Append `time_configs` results to $OUT/`name` as JSON lines."""
    with open(os.path.join(os.environ.get("OUT", "."), name), "a") as f:
        for us, c, err in res:
            rec = {"fmt": fmt, "n": n, "k": k, "t": t, "us": us, "err": err, "cfg": c.__dict__,
                   "heuristic": c == heur}  # fmt: skip
            f.write(json.dumps(rec) + "\n")


def run_neighbours(fmt, n, k, t, w, copies, sms, smem, arch, deadline, ahead=False) -> None:
    """`ahead`: the neighbours with the step-ahead decode on (after the heuristic's config)."""
    cfg = mm.mm_config(fmt, n, k, t, sms, smem, arch)
    cfgs = neighbours(cfg, n)
    if ahead:
        cfgs = [cfg] + list(dict.fromkeys(replace(c, ahead=True) for c in cfgs))
    res = time_configs(fmt, n, k, t, copies, cfgs, deadline)
    base = res[0][0]
    best = min(res, key=lambda r: r[0])
    second = "ahead" if ahead else "prefetch"  # the second config: one knob toggled
    print(f"{fmt} {n}x{k} T={t}: heuristic {base:.1f} us, {second} {res[1][0]:.1f} us, "
          f"best {best[0]:.1f} us ({w.nbytes / best[0] / 1e3 / PEAK_BW * 1e9:.0%}) {best[1]}",
          flush=True)  # fmt: skip
    write_records("probe_qmm_neighbours.jsonl", fmt, n, k, t, res, cfg)


def old_config(old, fmt, n, k, t, sms, smem, arch):
    """The `--old` module's pick (its `mm_config` took no arch before session 17)."""
    if "arch" in inspect.signature(old.mm_config).parameters:
        return old.mm_config(fmt, n, k, t, sms, smem, arch)
    return old.mm_config(fmt, n, k, t, sms, smem)


def run_confirm(old, fmt, n, k, t, w, copies, sms, smem, arch) -> None:
    x = torch.randn(t, k, device="cuda").half()
    cfg = mm.mm_config(fmt, n, k, t, sms, smem, arch)
    ocfg = mm.MMConfig(**old_config(old, fmt, n, k, t, sms, smem, arch).__dict__)
    ref = mm.qmm_launch(x, copies[0], fmt, n, None, ocfg).float()
    line, res = f"{fmt} {n}x{k} T={t}:", []
    for tag, c in (("old", ocfg), ("new", cfg), ("new-pf" + "-+"[not cfg.prefetch],
                                                 replace(cfg, prefetch=not cfg.prefetch))):  # fmt: skip
        o = mm.qmm_launch(x, copies[0], fmt, n, None, c).float()
        err = ((o - ref).abs().max() / ref.abs().max()).item()
        us = time_us(mm, x, copies, fmt, n, c)
        res.append({"tag": tag, "us": us, "err": err, "cfg": c.__dict__})
        line += f" {tag} {us:.1f} us ({w.nbytes / us / 1e3 / PEAK_BW * 1e9:.0%}, err {err:.0e}) |"
    print(line, cfg, flush=True)
    with open(os.path.join(os.environ.get("OUT", "."), "probe_qmm_confirm.jsonl"), "a") as f:
        f.write(json.dumps({"fmt": fmt, "n": n, "k": k, "t": t, "runs": res}) + "\n")


def _warm(jobs: list, exact: bool = False) -> int:
    """Compile (launch once) every listed config of one worker's share."""
    done, weights = 0, {}
    for fmt, n, k, t, cfg in jobs:
        if (fmt, n, k) not in weights:
            w = random_weight(fmt, n, k)
            weights[(fmt, n, k)] = [w.tensors[p] for p in kernel_facts(fmt).planes]
        x = torch.randn(t, k, device="cuda").half()
        try:
            launch(mm, x, weights[(fmt, n, k)], fmt, n, mm.MMConfig(**cfg), exact)
            done += 1
        except Exception:  # noqa: BLE001, S112 - the timing pass reports it
            continue
    torch.cuda.synchronize()
    return done


def run_configs(path: str, warm: int, sms: int, smem: int, arch: int) -> None:
    rows = [json.loads(line) for line in open(path) if line.strip()]
    run_jobs([(r["fmt"], r["n"], r["k"], r["t"], r["cfg"]) for r in rows], warm, sms, smem, arch)


def run_jobs(jobs: list, warm: int, sms: int, smem: int, arch: int, exact: bool = False,
             name: str = "probe_qmm_configs.jsonl", tag: str = "") -> None:  # fmt: skip
    """Time the heuristic's config and each listed one ((fmt, n, k, t, cfg as a dict)) per
    shape, compiled first in `warm` processes; `exact`: launched as given (no fitting or spill
    guard). Prints the best per shape, appends every timing to $OUT/`name`."""
    if warm > 1:
        import multiprocessing
        from functools import partial

        shares = [jobs[i::warm] for i in range(warm)]
        with multiprocessing.get_context("spawn").Pool(warm) as pool:
            done = sum(pool.map(partial(_warm, exact=exact), shares))
            print(f"compiled {done} of {len(jobs)}", flush=True)
    by_shape: dict = {}
    for fmt, n, k, t, cfg in jobs:
        by_shape.setdefault((fmt, n, k), {}).setdefault(t, []).append(mm.MMConfig(**cfg))
    for (fmt, n, k), per_t in by_shape.items():
        w, copies = cold_copies(fmt, n, k)
        for t, cfgs in per_t.items():
            heur = mm.mm_config(fmt, n, k, t, sms, smem, arch)
            res = time_configs(fmt, n, k, t, copies, [heur] + [c for c in cfgs if c != heur],
                               exact=exact)  # fmt: skip
            best = min(res, key=lambda r: r[0])
            print(f"{tag}{fmt} {n}x{k} T={t}: heuristic {res[0][0]:.1f} us, best {best[0]:.1f} "
                  f"us ({w.nbytes / best[0] / 1e3 / PEAK_BW * 1e9:.0%}) {best[1]} err "
                  f"{best[2]:.0e}", flush=True)  # fmt: skip
            write_records(name, fmt, n, k, t, res, heur)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ts", default="32")
    ap.add_argument("--fmts", default="q4_k,q6_k,q4_0")
    ap.add_argument("--old", default="")
    ap.add_argument("--sweep", action="store_true")
    ap.add_argument("--bms", default="", help="--sweep these M block sizes (default: heuristic's)")
    ap.add_argument("--ngs", default="8", help="--sweep these groups per K step")
    ap.add_argument("--splits", default="1,2,4,8")
    ap.add_argument("--stages", default="3,4")
    ap.add_argument("--shapes", default="", help="only these NxK (comma list)")
    ap.add_argument("--cublas", action="store_true", help="also time qlinear_triton (L2-warm)")
    ap.add_argument("--neighbours", action="store_true")
    ap.add_argument("--ahead", action="store_true",
                    help="--neighbours: every neighbour with the step-ahead decode on")  # fmt: skip
    ap.add_argument("--confirm", action="store_true", help="needs --old")
    ap.add_argument("--budget", type=float, default=1e9, help="seconds (--neighbours)")
    ap.add_argument("--configs", default="", help="time these configs (JSON lines)")
    ap.add_argument("--warm", type=int, default=0, help="--configs: compile in N processes first")
    a = ap.parse_args()
    if a.confirm and not a.old:
        ap.error("--confirm needs --old FILE (an older qmm_triton.py)")
    deadline = time.time() + a.budget
    old = None
    if a.old:
        spec = importlib.util.spec_from_file_location("qmm_old", a.old)
        old = importlib.util.module_from_spec(spec)
        sys.modules["qmm_old"] = old
        spec.loader.exec_module(old)
    props = device_props(torch.device("cuda"))
    sms, smem, arch = props.sm_count, props.smem_per_block, props.arch
    if a.configs:
        run_configs(a.configs, a.warm, sms, smem, arch)
        return
    for fmt in a.fmts.split(","):
        for n, k in SHAPES[fmt]:
            if a.shapes and f"{n}x{k}" not in a.shapes.split(","):
                continue
            w, copies = cold_copies(fmt, n, k)
            for t in map(int, a.ts.split(",")):
                if a.confirm:
                    run_confirm(old, fmt, n, k, t, w, copies, sms, smem, arch)
                    continue
                if a.neighbours:
                    if time.time() < deadline:
                        run_neighbours(fmt, n, k, t, w, copies, sms, smem, arch, deadline,
                                       a.ahead)  # fmt: skip
                    continue
                x = torch.randn(t, k, device="cuda").half()
                cfg = mm.mm_config(fmt, n, k, t, sms, smem, arch)
                ref = mm.qmm_launch(x, copies[0], fmt, n, None, cfg).float()
                line = f"{fmt} {n}x{k} T={t}:"
                if old is not None:
                    ocfg = old_config(old, fmt, n, k, t, sms, smem, arch)
                    o = old.qmm_launch(x, copies[0], fmt, n, None, ocfg).float()
                    us = time_us(old, x, copies, fmt, n, ocfg)
                    line += f" old {us:.1f} us ({w.nbytes / us / 1e3 / PEAK_BW * 1e9:.0%})"
                    line += f" maxdiff {((o - ref).abs().max() / ref.abs().max()).item():.1e} |"
                if a.cublas:
                    us = do_bench_cudagraph(lambda x=x, w=w: qlinear_triton(x, w), rep=30) * 1e3
                    line += f" current path {us:.1f} us |"
                us = time_us(mm, x, copies, fmt, n, cfg)
                line += f" new {us:.1f} us ({w.nbytes / us / 1e3 / PEAK_BW * 1e9:.0%}) {cfg}"
                print(line, flush=True)
                if not a.sweep:
                    continue
                res = []
                bms = [int(b) for b in a.bms.split(",") if b] or [cfg.bm]
                ngs = [int(g) for g in a.ngs.split(",")]
                splits = [int(v) for v in a.splits.split(",")]
                stage_list = [int(v) for v in a.stages.split(",")]
                for bm, ng, bn, warps, split, stages in itertools.product(
                    bms, ngs, (64, 128), (4, 8), splits, stage_list
                ):
                    if split > 1 and n > 8192 or stages == 4 and (bn, warps) != (128, 4):
                        continue
                    c = mm.MMConfig(bm, bn, ng, split, warps, stages, True)
                    try:
                        res.append((time_us(mm, x, copies, fmt, n, c), c))
                    except Exception as e:  # noqa: BLE001 - configs that do not compile
                        print(f"   {c}: {type(e).__name__}", flush=True)
                res.sort(key=lambda r: r[0])
                for us, c in res[:4]:
                    print(
                        f"   {us:.1f} us ({w.nbytes / us / 1e3 / PEAK_BW * 1e9:.0%}) {c}",
                        flush=True,
                    )
                with open(os.path.join(os.environ.get("OUT", "."), "probe_qmm.jsonl"), "a") as f:
                    for us, c in res:
                        f.write(
                            json.dumps(
                                {"fmt": fmt, "n": n, "k": k, "t": t, "us": us, "cfg": c.__dict__}
                            )
                            + "\n"
                        )


if __name__ == "__main__":
    main()
