"""The moments of a serving workload's request mix, and the M/G/1 queue they feed.

A request has ``I`` prompt and ``O`` output tokens, drawn from the mix (means, coefficients of variation
``cv`` and correlation ``r`` in ``Workload``). The steady-state model needs only these moments:

  decode context   (E[I O] + E[O^2]/2) / E[O]   a running request is seen in proportion to its decode
                                                 time, O (length-biased sampling, Feller 1971, vol. II,
                                                 sec. I.4): the time-averaged context of the running
                                                 requests, and so the KV cache they hold
  prompt prefix    E[I^2] / (2 E[I])            keys a prompt token attends to, averaged over tokens
  work per request L = I' + O - 1                tokens through the step budget; its cv sets the spread of
                                                 the service time of the M/G/1 queue below

with E[X^2] = E[X]^2 (1 + cv^2) and E[I O] = E[I] E[O] + r sd(I) sd(O). Fixed lengths give I + O/2, I/2 and
cv 0, the first part's values.
"""

from __future__ import annotations

import numpy as np

from llmsim.engine.types import Workload


def mix_moments(w: Workload, input_len, output_len, prefix_hit_rate: float = 0.0) -> dict:
    """Moments (arrays) of a request mix of mean ``input_len`` and ``output_len`` tokens with the spread
    of ``w``: ``ctx`` the decode context, ``keys`` the prompt prefix, ``work_cv`` the cv of I' + O - 1."""
    i, o = np.asarray(input_len, dtype=float), np.asarray(output_len, dtype=float)
    sd_i, sd_o = w.input_len_cv * i, w.output_len_cv * o
    i2, o2, io = i * i + sd_i * sd_i, o * o + sd_o * sd_o, i * o + w.length_corr * sd_i * sd_o
    keep = 1.0 - prefix_hit_rate
    # Var(I' + O - 1) = keep^2 Var(I) + Var(O) + 2 keep Cov(I, O)
    var_work = (keep * sd_i) ** 2 + sd_o ** 2 + 2 * keep * w.length_corr * sd_i * sd_o
    work = np.maximum(keep * i + o - 1, 1.0)
    return {"ctx": (io + o2 / 2) / o, "keys": i2 / (2 * i), "work_cv": np.sqrt(var_work) / work}


def mg1_wait(rate, capacity, service_cv):
    """Mean waiting time of an M/G/1 queue at arrival ``rate`` and service ``capacity`` (requests/s)
    whose service time has coefficient of variation ``service_cv``: the Pollaczek-Khinchine formula
    W = lambda E[S^2] / (2 (1 - rho)) = rho (1 + cv^2) / (2 mu (1 - rho)) (Kleinrock 1975, Queueing
    Systems I, ch. 5). Infinite at or above capacity."""
    rho = np.asarray(rate, dtype=float) / capacity
    with np.errstate(divide="ignore", invalid="ignore"):
        w = rho * (1 + np.square(service_cv)) / (2 * capacity * (1 - rho))
    return np.where(rho < 1, w, np.inf)


def mg1_wait_quantile(rate, capacity, service_cv, q: float):
    """q-quantile of that waiting time, the queue's tail taken as exponential: P(W > t) = rho e^(-rho t / W)
    with W the Pollaczek-Khinchine mean (Kingman 1962, "On queues in heavy traffic", JRSS B 24: the
    heavy-traffic wait is exponential; the probability of waiting at all is rho for Poisson arrivals).
    With cv 1 (exponential service) this is the M/M/1 quantile, P(W > t) = rho e^(-(mu - lambda) t)
    (Kleinrock 1975, sec. 3.2), exactly."""
    rho = np.asarray(rate, dtype=float) / capacity
    mean = mg1_wait(rate, capacity, service_cv)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = mean / rho * np.log(rho / (1 - q))
    return np.where(rho < 1, np.maximum(np.nan_to_num(t, nan=0.0), 0.0), np.inf)
