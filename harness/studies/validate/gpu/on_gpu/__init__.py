"""Timing on a real GPU with torch alone: GEMM shapes, decode steps and prefills of a model
built from its preset with random weights (`decoder`, `measure`).

Why torch alone: the lent GPU machine has torch but none of the project's other packages,
so these modules import of rolloutbench only its model presets (the standard library's
TOML reader) and run there as `python3 -m harness.studies.validate.gpu.on_gpu.measure`.
What they write is data (`measurements/<gpu preset>/<run>/`), compared on any machine by
`harness.studies.validate.gpu.timed`.
"""
