import sys

from .running.cli import main

sys.exit(main())
