"""The job module of the multi-process FIFO test's `jf worker` processes (see worker_fifo_def)."""

from tests.functional.flow.worker_fifo_def import define

ordered = define()
