#!/usr/bin/env python3
"""Writes web-object-sizes.cdf: SURGE's model of Web object sizes as an empirical CDF file.

SURGE (Barford & Crovella, "Generating Representative Web Workloads for Network and Server
Performance Evaluation", ACM SIGMETRICS 1998) models Web file sizes with a lognormal body
(mu = 9.357, sigma = 1.318, of the size in bytes) and a heavy Pareto tail (k = 133 KB,
alpha = 1.1). Here the body, conditioned below 133 KB, holds 93 % of the objects and the tail
the other 7 %, cut at 10 MB so that a page stays finite. Run: python3 make_web_cdf.py
"""
import math
import os

MU, SIGMA, K, ALPHA, CAP, BODY = 9.357, 1.318, 133_000.0, 1.1, 10_000_000.0, 0.93


def phi(z):
    return 0.5 * (1 + math.erf(z / math.sqrt(2)))


def cdf(x):
    if x <= K:
        return BODY * phi((math.log(x) - MU) / SIGMA) / phi((math.log(K) - MU) / SIGMA)
    return BODY + (1 - BODY) * (1 - (K / x) ** ALPHA) / (1 - (K / CAP) ** ALPHA)


sizes = sorted({100, 200, 300, 500, 700, int(K), int(CAP)}
               | {round(10 ** (2.9 + i * 0.05)) for i in range(83)})
points = [(x, 1.0 if x == CAP else cdf(x)) for x in sizes if x <= CAP]
mean = points[0][0] * points[0][1] + sum(
    (b[1] - a[1]) * (a[0] + b[0]) / 2 for a, b in zip(points, points[1:]))
median = next(x for x, f in points if f >= 0.5)
header = f"""# Web object sizes: SURGE's model of Web file sizes (Barford & Crovella, "Generating
# Representative Web Workloads for Network and Server Performance Evaluation", ACM SIGMETRICS
# 1998): a lognormal body (mu = 9.357, sigma = 1.318, of the size in bytes) below 133 KB holding
# 93 % of the objects, and a Pareto tail above it (k = 133 KB, alpha = 1.1), cut at 10 MB.
# Made by make_web_cdf.py beside this file: mean {mean / 1000:.1f} KB, median about {median / 1000:.1f} KB.
#
# Format (an empirical CDF file, docs/workloads.md): one point a line, SIZE_BYTES FRACTION, the
# fraction of objects of at most that size; sizes increasing, fractions non-decreasing, the last
# 1. Between points sizes are interpolated linearly; `#` starts a comment.
"""
out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "web-object-sizes.cdf")
with open(out, "w") as f:
    f.write(header + "".join(f"{x} {p:.6f}\n" for x, p in points))
print(f"{out}: {len(points)} points, mean {mean:.0f} B, median about {median} B")
