"""Workloads, one home each: what runs over the network once it is up, as the scenario names it
(`workload.kind`). Each module here holds one workload's scenario model, the checks that tie it to
the rest of the scenario, its part of the summary and its console lines (base.py: WorkloadKind);
registry.py lists them. The code that runs a workload needs a run context and stays in the runner
(mpvlab/runner/workloads/), which imports this package, never the other way round: the scenario
schema (mpvlab/input) composes these models without importing the run."""
