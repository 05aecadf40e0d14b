"""Running letters end to end: the pipeline, the output-folder layout, the folder lock and the
run ledger (``run.json``)."""
