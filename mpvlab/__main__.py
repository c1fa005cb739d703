from mpvlab.cli import entry

entry()
