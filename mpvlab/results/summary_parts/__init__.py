"""summary.json's parts as pydantic models, one module per part (mpvlab/results/summary.py gathers them
under their public names): base (the record types and `build`), player, network, workload, cross,
kinds (the run head and one model per topology kind)."""
