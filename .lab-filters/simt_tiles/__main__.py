"""``python -m simt_tiles`` — the same as the ``simt-tiles`` command."""

import sys

from .cli import main

sys.exit(main())
