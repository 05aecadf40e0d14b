"""What analysts read: the per-attempt repair records, the HTML report page and the corpus
analysis."""
