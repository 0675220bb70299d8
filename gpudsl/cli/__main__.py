"""``python -m gpudsl.cli``: the ``gpudsl`` command."""
import sys

from . import main

sys.exit(main())
