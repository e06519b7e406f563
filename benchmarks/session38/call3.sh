#!/usr/bin/env bash
# Session 38 call 3 (warm; one command line): LOCALLLM_PDL=1 / 0 alternating twice more
# (pp512 and the cached-prefix turn, 5 runs each), then the prefill-chunk attention variants
# (e7d1c49's kernel; s3 = 3 pipeline stages, m128 = 128 query rows per program, w8 = 8 warps,
# n32 = 32-token KV tiles, pN = N partitions forced).
R=$PWD; source scripts/device_setup.sh >/dev/null; for i in 3 4; do for p in 1 0; do s=$(date +%s); timeout 80 env LOCALLLM_PDL=$p python3 -m localllm.cli bench --model llama3-8b-q4_k_m --scenario pp,prefix -p 512 -r 5 --json $OUT/pdl${p}_$i.json > $OUT/pdl${p}_$i.log 2>&1; echo "== PDL=$p run $i rc=$? $(( $(date +%s) - s )) s"; grep -E "pp512|3900" $OUT/pdl${p}_$i.log; done; done; cd $R && timeout 150 python3 scripts/ab_attention.py --models llama3-8b --kv fp16 --seqs 4000,8000 --q 24,112 --parts 8,16,33 --variants m128,m128w8,n32,s3,w8 > $OUT/ab_attention.log 2>&1
