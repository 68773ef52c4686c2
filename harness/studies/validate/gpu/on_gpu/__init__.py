"""Timing on a real GPU with torch alone: GEMM shapes, decode steps and prefills of a model
built from its config with random weights (`decoder`, `measure`).

Why torch alone: the lent GPU machine has torch but none of the project's other packages,
so these modules import of rolloutbench only its model presets (the standard library's
TOML reader) and run there as `python3 -m harness.studies.validate.gpu.on_gpu.measure`. What they write is data
(`results/validation/gpu/torch/`), compared on any machine by `..torch_compare`.
"""
