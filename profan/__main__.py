import sys

from profan.cli import main

sys.exit(main())
