import sys

from mpvlab.content.cli import main

sys.exit(main())
