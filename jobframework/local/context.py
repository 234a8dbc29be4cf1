"""A Lambda context for code run outside Lambda: the emulator, inline runs, tests."""

from __future__ import annotations

import time
import uuid


class LocalLambdaContext:
    """A Lambda context whose remaining time counts down from ``timeout`` seconds."""

    def __init__(
        self, timeout: float = 120.0, function_name: str = "jf-local-consumer", region: str = "us-east-1"
    ) -> None:
        self.function_name = function_name
        self.function_version = "$LATEST"
        self.invoked_function_arn = f"arn:aws:lambda:{region}:123456789012:function:{function_name}"
        self.memory_limit_in_mb = 512
        self.aws_request_id = str(uuid.uuid4())
        self.log_group_name = f"/aws/lambda/{function_name}"
        self.log_stream_name = "local"
        self._deadline = time.monotonic() + timeout

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.monotonic()) * 1000))
