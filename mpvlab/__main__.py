import sys

from mpvlab.cli import main

sys.exit(main())
