import sys

from letterchunk.cli import main

sys.exit(main())
