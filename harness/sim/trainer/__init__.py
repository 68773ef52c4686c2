"""The trainer's step priced from measured kernels and its parallel layout (issue #35 §1).

`sim.train_model = "kernels"` builds `step.KernelTrainModel` (`build.from_config`) in place
of `perf.TrainModel`'s FLOPs-over-MFU line; `"mfu"` (the default) keeps the line.
"""
