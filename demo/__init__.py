"""``make demo``: the outbox end to end on a local emulator, with faults, and a report.

It deploys ``examples/local`` with Terraform to a moto server running in this
process, writes orders with :class:`dynamodb_outbox.writer.OutboxWriter`, runs
the deployed handlers through the local Lambda runtime
(:mod:`dynamodb_outbox.local`) on a virtual clock while faults are injected,
then checks that no event was lost, none was processed twice, and prints what it
cost. Entry point: ``python -m demo.run_demo`` (see ``--help``).

One concern per module:

* :mod:`demo.console` — phase lines with timings;
* :mod:`demo.capture` — what the functions print (logs, EMF metrics) goes to a log file;
* :mod:`demo.emulator` — the in-process moto server and the moto behaviours switched off;
* :mod:`demo.stack` — Terraform: a throwaway copy of the example, init/apply/destroy;
* :mod:`demo.deployment` — what was deployed, read back from the emulator, wired to the runtime;
* :mod:`demo.functions` — a deployed function's handler run in-process with its environment;
* :mod:`demo.metering` — AWS API calls counted per function and operation; PutEvents outcomes;
* :mod:`demo.faults` — the injected faults;
* :mod:`demo.workload` — the orders;
* :mod:`demo.report` — figures, invariants, the printed report.
"""
