"""`python3 -m localllm.cli`: the `localllm` command."""

from __future__ import annotations

import sys

from localllm.cli import main

sys.exit(main())
