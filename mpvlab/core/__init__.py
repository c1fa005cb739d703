"""The ground floor (`mpvlab.core`): everything that touches a process, a namespace or a host —
processes, namespaces, the run ledger, result directories, units, errors — with no knowledge of
scenarios."""
