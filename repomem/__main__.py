import sys

from repomem.cli.main import main

sys.exit(main())
