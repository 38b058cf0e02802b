import os
import sys

# Before anything imports nylorun: its Powertools logger takes its level when it is made.
os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")
os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "true")
os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")

from bench.run import main

sys.exit(main())
