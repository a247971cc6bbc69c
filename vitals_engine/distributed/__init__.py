"""Running one task's samples on a Ray cluster (`eval(backend=ve.Ray())`).

`backend` is the configuration (`Ray`), `worker` the Ray actor that runs
parcels of samples through our engine, `driver` the loop in the user's process
that hands parcels to workers as they ask and takes finished samples back.
Ray itself is imported only when a Ray backend runs.
"""
