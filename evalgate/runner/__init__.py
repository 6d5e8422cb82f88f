"""The run as stages with typed values between them (used by ``evalgate.runner.evaluate.evaluate`` and
``evalgate.runner.parity``).

``plan.prepare`` -> ``RunPlan``; ``record.start`` (log the read, store the draft record); ``generate.generate_missing``
-> ``Generated``; ``score.score`` -> ``Scored``; ``record.record`` -> ``RunRecord``. ``grant`` holds the release
grant that purpose ``release-gate`` needs; ``prompts`` renders (or reuses) a run's prompts.
"""
