"""The statistics of the evaluation and of the holdout, pure and stdlib only.

Paired tasks (``gep eval``): an exact McNemar test over the tasks whose outcome differs between two arms and a
bootstrap interval of the ratio of their fix rates. Unpaired groups (the holdout, ``gep report``): an
anytime-valid confidence sequence for each group's rate (a normal mixture over Hoeffding's sub-Gaussian
bound, Howard et al. 2021), joined into one for the difference of the rates. Valid at every cycle count at
once: a person may look after every cycle and stop when they like without the interval lying.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

ALPHA = 0.05
# the normal mixture's width parameter, tuned to be tightest near this many observations per group
TUNED_FOR = 30


def binom_two_sided(k: int, n: int) -> float:
    """Exact two-sided p of ``k`` or fewer (or as extreme the other way) heads in ``n`` fair coin flips."""
    if n == 0:
        return 1.0
    k = min(k, n - k)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n
    return min(1.0, 2 * tail)


def mcnemar(a: Sequence[bool], b: Sequence[bool]) -> tuple[int, int, float]:
    """Over paired tasks: (a fixed and b not, b fixed and a not, exact two-sided p)."""
    ab = sum(1 for x, y in zip(a, b, strict=True) if x and not y)
    ba = sum(1 for x, y in zip(a, b, strict=True) if y and not x)
    return ab, ba, binom_two_sided(min(ab, ba), ab + ba)


def ratio_ci(a: Sequence[bool], b: Sequence[bool], reps: int = 2000, seed: int = 7) -> tuple[float, float] | None:
    """Bootstrap 95% interval of fixes(a) / fixes(b) over paired tasks resampled together; None without tasks.
    A resample where ``b`` fixed nothing gives an infinite ratio (the upper end may be ``inf``)."""
    n = len(a)
    if n == 0:
        return None
    rng = random.Random(seed)
    ratios = []
    for _ in range(reps):
        idx = [rng.randrange(n) for _ in range(n)]
        sa, sb = sum(a[i] for i in idx), sum(b[i] for i in idx)
        ratios.append(sa / sb if sb else (math.inf if sa else 1.0))
    ratios.sort()
    return ratios[int(0.025 * reps)], ratios[int(0.975 * reps) - 1]


def mixture_radius(n: int, alpha: float, sigma: float = 0.5, tuned_for: int = TUNED_FOR) -> float:
    """Half-width of a two-sided confidence sequence for a mean of ``n`` observations in an interval of width
    ``2 * sigma`` (Bernoulli: sigma 1/2), valid uniformly over n: with V = n sigma^2 and rho = tuned_for
    sigma^2, |sum - n mu| < sqrt((V + rho) log((V + rho) / (rho alpha^2))) for all n with probability >= 1 - alpha
    (Ville's inequality on the normal mixture of exp(l S_n - l^2 V / 2), l ~ N(0, 1 / rho))."""
    if n <= 0:
        return math.inf
    v, rho = n * sigma ** 2, tuned_for * sigma ** 2
    return math.sqrt((v + rho) * math.log((v + rho) / (rho * alpha ** 2))) / n


def rate_sequence(successes: int, n: int, alpha: float) -> tuple[float, float]:
    """An anytime-valid interval of a rate after ``n`` observations, clipped to [0, 1]."""
    if n <= 0:
        return 0.0, 1.0
    mean, r = successes / n, mixture_radius(n, alpha)
    return max(0.0, mean - r), min(1.0, mean + r)


def difference_sequence(s1: int, n1: int, s2: int, n2: int, alpha: float = ALPHA) -> tuple[float, float]:
    """An anytime-valid interval of rate1 - rate2 from two groups (each group's sequence at alpha / 2: the union
    bound makes the pair hold together with probability >= 1 - alpha, at every pair of counts)."""
    lo1, hi1 = rate_sequence(s1, n1, alpha / 2)
    lo2, hi2 = rate_sequence(s2, n2, alpha / 2)
    return lo1 - hi2, hi1 - lo2
