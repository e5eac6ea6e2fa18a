"""A deployed Lambda function, run in this process the way Lambda would run it.

What runs is what was deployed: the handler named by the function's
``Handler`` setting (``dynamodb_outbox.publisher.handler``...), imported from
the package the zip is built from, with the function's ``Environment``
variables — both read back from the emulator after ``terraform apply`` — plus
the variables Lambda itself sets (``AWS_LAMBDA_FUNCTION_NAME``...). The
variables are set for the duration of each invocation only, since the
publisher and the consumer share this process.

While a handler runs, :data:`current_function` names it: the API call meter
and the fault injectors read it to know whose call they see.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from demo.capture import FunctionOutput

Handler = Callable[[dict[str, Any], Any], Any]

current_function: ContextVar[str | None] = ContextVar("demo_current_function", default=None)
"""The name of the deployed function whose handler is running, if any."""


@dataclass(frozen=True)
class DeployedFunction:
    """A function's configuration as ``GetFunctionConfiguration`` returns it."""

    name: str
    arn: str
    handler: str
    environment: Mapping[str, str]
    timeout_seconds: int
    memory_mb: int
    #: changes with every update of the function's code or configuration
    last_modified: str = ""

    @classmethod
    def read(cls, lambda_client: Any, name: str) -> DeployedFunction:
        config = lambda_client.get_function_configuration(FunctionName=name)
        return cls(
            name=config["FunctionName"],
            arn=config["FunctionArn"],
            handler=config["Handler"],
            environment=dict((config.get("Environment") or {}).get("Variables") or {}),
            timeout_seconds=int(config.get("Timeout", 3)),
            memory_mb=int(config.get("MemorySize", 128)),
            last_modified=str(config.get("LastModified", "")),
        )

    @property
    def region(self) -> str:
        """The region the function runs in: its ARN's (``arn:aws:lambda:<region>:...``)."""
        return self.arn.split(":")[3]

    def lambda_environment(self) -> dict[str, str]:
        """The function's variables plus those the Lambda runtime sets.

        ``AWS_REGION`` (and ``AWS_DEFAULT_REGION``) are the function's own region,
        as Lambda sets them: with two regions in one process (multi-region), a
        writer stamps, and a sweeper scopes itself to, the region it runs in.
        """
        return {
            **self.environment,
            "AWS_REGION": self.region,
            "AWS_DEFAULT_REGION": self.region,
            "AWS_LAMBDA_FUNCTION_NAME": self.name,
            "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
            "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(self.memory_mb),
            "AWS_LAMBDA_LOG_GROUP_NAME": f"/aws/lambda/{self.name}",
        }

    def load_handler(self) -> Handler:
        """Import the deployed ``Handler`` (``module.attribute``)."""
        module_name, _, attribute = self.handler.rpartition(".")
        if not module_name:
            raise ValueError(f"{self.name}: Handler {self.handler!r} is not module.function")
        handler: Handler = getattr(importlib.import_module(module_name), attribute)
        return handler


@contextmanager
def _environment(values: Mapping[str, str]) -> Iterator[None]:
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def in_process(function: DeployedFunction, output: FunctionOutput) -> Handler:
    """A handler for the local runtime that invokes ``function`` as deployed.

    The handler module is imported on the first invocation, inside the
    function's environment, as Lambda's init phase does: module-level settings
    (Powertools' service name, metrics namespace...) then read the deployed
    values.
    """
    environment = function.lambda_environment()
    loaded: list[Handler] = []

    def invoke(event: dict[str, Any], context: Any) -> Any:
        token = current_function.set(function.name)
        try:
            with _environment(environment), output.invocation(function.name):
                if not loaded:
                    loaded.append(function.load_handler())
                return loaded[0](event, context)
        finally:
            current_function.reset(token)

    return invoke
