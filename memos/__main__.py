"""``python -m memos`` runs the command line."""

import sys

from .cli.app import main

sys.exit(main())
