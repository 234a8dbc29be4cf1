"""Run by the adoption test with the fresh venv's Python (jobframework from the wheel): provision the
project's topology on the embedded AWS, enqueue a job, receive it as the event source mapping would,
hand the event to the synthesized handler, run from the asset folder by ``RUNTIME_PYTHON`` (a venv with
only boto3, Powertools and pydantic), then print what happened as one JSON line.

Usage: drive_asset.py PROJECT_DIR TEMPLATE ASSET_DIR RUNTIME_PYTHON OUTBOX
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

RUN_HANDLER = """
import importlib, json, sys
asset, handler, event_file, response_file, timeout = sys.argv[1:6]
sys.path.insert(0, asset)

class Context:
    function_name = "consumer"
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:consumer"
    aws_request_id = "req-1"
    def get_remaining_time_in_millis(self):
        return int(timeout) * 1000  # a fresh invocation of the synthesized function's timeout

module, name = handler.rsplit(".", 1)
response = getattr(importlib.import_module(module), name)(json.load(open(event_file)), Context())
import email_validator, pydantic, aws_lambda_powertools, boto3
where = {m.__name__: m.__file__ for m in (email_validator, pydantic, aws_lambda_powertools, boto3)}
where["jobframework"] = importlib.import_module("jobframework").__file__
json.dump({"response": response, "where": where}, open(response_file, "w"))
"""


def main() -> None:
    project, template_path, asset, runtime_python, outbox = sys.argv[1:6]
    template = json.loads(Path(template_path).read_text())
    workers = {
        r["Properties"]["FunctionName"]: r["Properties"]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::Lambda::Function"
        and r["Properties"].get("Handler") == "jobframework.entrypoints.worker.lambda_handler"
    }
    any_worker = next(iter(workers.values()))  # every consumer gets the same variables
    literal_env = {k: v for k, v in any_worker["Environment"]["Variables"].items() if isinstance(v, str)}

    sys.path.insert(0, project)
    from jobframework.client import JobClient
    from jobframework.envelope import lambda_record
    from jobframework.jobs import registry
    from jobframework.local.aws import EmbeddedAWS
    from jobframework.modules import import_job_modules
    from jobframework.topology import Topology, TopologySettings

    import_job_modules(literal_env["JF_JOBS"].split(","))
    topology = Topology.from_registry(registry, TopologySettings(app=literal_env["POWERTOOLS_SERVICE_NAME"]))
    lane = next(q for q in topology.queues if q.lane == "default")
    worker = workers[topology.consumer(lane.consumer).function_name]  # the default queue's consumer
    with EmbeddedAWS() as aws:
        config = aws.provision(topology)
        sqs = aws.client("sqs")
        client = JobClient(config, sqs_client=sqs)
        result = client.enqueue("signup.welcome", {"email": "Ada@Example.COM", "outbox": outbox}, track=True)
        queue_url = config.endpoints("default").url
        arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]
        messages = sqs.receive_message(
            QueueUrl=queue_url,
            MaxNumberOfMessages=10,
            AttributeNames=["All"],
            MessageAttributeNames=["All"],
            MessageSystemAttributeNames=["All"],
        )["Messages"]
        event = {"Records": [lambda_record(m, queue_arn=arn["QueueArn"]) for m in messages]}
        with tempfile.TemporaryDirectory() as work:
            event_file, response_file = Path(work, "event.json"), Path(work, "response.json")
            event_file.write_text(json.dumps(event))
            env = {
                "PATH": os.environ["PATH"],
                **{k: v for k, v in os.environ.items() if k.startswith("AWS_")},
                **literal_env,
                **config.to_env(),
                "POWERTOOLS_METRICS_DISABLED": "true",
            }
            run = subprocess.run(
                [
                    runtime_python,
                    "-I",
                    "-c",
                    RUN_HANDLER,
                    asset,
                    worker["Handler"],
                    str(event_file),
                    str(response_file),
                    str(worker["Timeout"]),
                ],
                cwd=work,
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )
            ran = json.loads(response_file.read_text()) if response_file.is_file() else None
        status = client.status(result.id)
        print(
            json.dumps(
                {
                    "returncode": run.returncode,
                    "stderr": run.stderr[-3000:],
                    "ran": ran,
                    "records": len(messages),
                    "status": status.status if status else None,
                }
            )
        )


if __name__ == "__main__":
    main()
