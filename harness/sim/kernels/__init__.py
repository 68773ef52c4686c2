"""Engine step times from measured GPU kernels (NVIDIA's aiconfigurator-core).

`gpus` says which database GPU stands for each hardware preset, `estimator` asks the
database for one step (offline, quietly), `table` tabulates it once per engine into a form
the simulator can jump over many steps with, and `source` picks kernels or the roofline
for a run and says which.
"""
