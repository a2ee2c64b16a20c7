"""Client-side tools around a step (whitepaper §9.2): `timeline` turns a traced Run's StepStats
into a Chrome trace. Importable as `tensorflow.python.client.timeline` under `flowgraph run`."""
