"""mpvlab's emulation on Mininet's Python API (`mpvlab.emulation`): the emulated nodes and links
(nodes.py) and the interactive CLI of `mpvlab shell` (cli.py).

Named for what it does rather than after the library it uses, so that no folder of this tree is
ever taken for the Mininet library (`import mininet` always finds the library). The checkout's
top-level mininet/ folder holds what a Mininet user looks for there: custom topologies for
`mn --custom`."""
