"""`Task`, the user's entry point, and what one run of it needs, top to bottom:
`task` (the `Task` class), `running` (one run through the engine), `logfile` (the
run's header, journal and final log), `state` (the setup a run reads and the state
it leaves), then `options`, `resume`, `spill` and `streaming`."""
