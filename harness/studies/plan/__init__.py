"""`rolloutbench plan`: search systems, GPU splits and knobs for a fixed model,
cluster and recipe on the simulator (issue 11).

Modules, each small: `recipe` (the fixed inputs and their checks), `space`
(systems, layouts, knobs; points and their run configs), `evaluate` (one point
simulated, its trace kept in memory), `search` (the Optuna study, workers or
Ray tasks), `output` and `figure` (the files), `cli` (the command).
"""
