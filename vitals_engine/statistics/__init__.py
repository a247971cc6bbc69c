"""Statistics over scores, pure: no run, no log.

`intervals`: standard errors (analytic, cluster-robust, bootstrap), the t quantile and
95% intervals, and `MetricStat`, a metric with them. `reducers`: a sample's epoch
scores reduced to one (`mean`, `mode`, `max`, `pass_at_<k>`). `paired`: comparing two
runs sample by sample.
"""

from .intervals import MetricStat

__all__ = ["MetricStat"]
