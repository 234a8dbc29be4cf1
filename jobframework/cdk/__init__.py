"""CDK constructs that provision jobframework: queues, workers, tables, schedules, API, monitoring."""
