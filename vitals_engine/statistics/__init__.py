"""Statistics over scores, pure: no run, no log.

`intervals`: standard errors (analytic, cluster-robust, bootstrap), the t quantile and
95% intervals, and `MetricStat`, a metric with them. `reducers`: a sample's epoch
scores reduced to one (`mean`, `mode`, `max`, `pass_at_<k>`). `paired`: comparing two
runs sample by sample. `agreement`: raters (judges) agreeing, Krippendorff's alpha and
Cohen's kappa. `corrected`: a judge's mean corrected by human grades
(prediction-powered inference).
"""

from .agreement import (
    Alpha,
    PairAgreement,
    describe_agreement,
    krippendorff_alpha,
    pairwise_agreement,
)
from .corrected import CorrectedMean, corrected_mean, describe_corrected
from .intervals import MetricStat

__all__ = [
    "Alpha",
    "CorrectedMean",
    "MetricStat",
    "PairAgreement",
    "corrected_mean",
    "describe_agreement",
    "describe_corrected",
    "krippendorff_alpha",
    "pairwise_agreement",
]
