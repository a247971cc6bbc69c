"""What every model call passes through: endpoint limits, the retry policy, the call scope,
the seats of a stage, and the clock they all read."""
