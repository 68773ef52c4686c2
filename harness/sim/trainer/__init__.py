"""The trainer's step priced from measured kernels and its parallel layout (issue #35 §1).

`sim.train_model = "kernels"` (the default) builds `step.KernelTrainModel`
(`build.from_config`) in place of `perf.TrainModel`'s FLOPs-over-MFU line, which a run
still takes where `build.mfu_line_reason` says why (`sim.train_mfu` set, a measured
trainer, a GPU without kernels); `speed` resolves a calibration's fitted scale and
per-step fixed cost.
"""
