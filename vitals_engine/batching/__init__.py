"""Batch mode: a run's model calls gathered into provider batches (`queues.py`)."""
