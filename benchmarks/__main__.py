"""`python -m benchmarks`: see benchmarks/cli.py (entry point `benchmarks.cli:main`)."""

import sys

from fuser.benchmarks.cli import main

sys.exit(main())
