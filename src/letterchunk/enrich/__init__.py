"""Stage 2, enrichment: what the model is asked for one chunk and how its answer is applied."""
