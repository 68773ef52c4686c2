"""`make bench`: how fast the simulator runs, as ratios against a base commit (#36's
targets: CPU per request, `make reproduce`'s time and disk, one run of a million
requests). `__main__` runs it; `trees` sets up the base commit's worktree and runs a
child on either tree; `probe` is what a child times; `measures` turns probes into the
table's rows; `report` prints and writes the table; `extras` what `--extras` adds.
"""
