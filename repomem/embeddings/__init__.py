"""Sentence embeddings of the index's windows: the model, and the vectors kept beside the index."""
