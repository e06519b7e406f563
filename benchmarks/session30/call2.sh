#!/usr/bin/env bash
# Session 30 call 2: the second part of the SmolLM2 file into /tmp/smol, beside call 1's first
# (one device call may carry 64 MiB; the machine keeps /tmp between back-to-back calls).
mkdir -p /tmp/smol && cp .carry/smol_b /tmp/smol/ && ls -l /tmp/smol
