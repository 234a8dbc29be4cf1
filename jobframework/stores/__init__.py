"""Storage of the framework's records, one interface per kind of record.

Each kind (job status, enqueue dedup marker, retry-budget counter, saga record, ...) has a module
here holding:

* a ``Protocol`` that says what the rest of the package may ask of that kind of record;
* the DynamoDB implementation, converting items with boto3's ``TypeSerializer`` /
  ``TypeDeserializer`` (:mod:`jobframework.stores.items`), never hand-written attribute values;
* an in-memory twin with the same semantics (conditional writes included), so that the pipeline's
  unit tests run without the embedded AWS and without sleeps.
"""
