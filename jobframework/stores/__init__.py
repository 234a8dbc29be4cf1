"""Storage of the framework's records, one interface per kind of record.

A kind of record has here:

* a ``Protocol`` that says what the rest of the package may ask of it;
* the DynamoDB implementation, converting items with boto3's ``TypeSerializer`` /
  ``TypeDeserializer`` (:mod:`jobframework.stores.items`), never hand-written attribute values;
* an in-memory twin with the same rules (conditional writes included), so that the pipeline's unit
  tests run without the embedded AWS and without sleeps; one contract test runs against both.

Done: a job's records (:mod:`jobframework.stores.job_records`: status, start claim, cancel marker),
enqueue dedup markers (:mod:`jobframework.stores.dedup`) and saga records
(:mod:`jobframework.stores.sagas`), each with a contract test run against both implementations; the
retry budget's counter (:mod:`jobframework.budget`, its in-memory twin beside it) has one too. A
tracked idempotent job's start is read from its idempotency record (:mod:`jobframework.stores.key_records`,
behind :class:`~jobframework.stores.job_records.JobRecords`). The
flow-control items (limits, debounce, pause) are still written by their modules through
:class:`jobframework.state.StateStore`'s client.
"""
