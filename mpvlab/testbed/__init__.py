"""The test bed: the namespace rigs that tests/ and bench/ build their experiments on.

Not platform API and never imported by the product. Every rig stands on testbed.bed.Bed, which
makes its namespaces and processes through core (core.netns, core.proc) and lists them in a run
ledger (core.ledger) under a `tb` run id, holding the run's owner lock: a test killed mid-way leaves
nothing that the next bed or `mpvlab cleanup` does not remove. It imports core and the components
(links, cc, collectors, schedulers, player, topologies), never the orchestrator (mpvlab).
"""
