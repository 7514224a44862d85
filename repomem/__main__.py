import sys

from repomem.cli import main

sys.exit(main())
