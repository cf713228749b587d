#!/usr/bin/python3
"""Cross-check of Prescient's duration forecasts against what a user would build: scikit-learn's and XGBoost's
gradient-boosted trees, fitted on the same causal feature rows the learners see.

    prescient datasets features --trace philly:PATH --out features.csv
    scripts/crosscheck-gbt.py features.csv 2017-10-25 2017-11-10 2017-11-20 2017-12-01   # Debian's python3

For each window (an origin to the next date) it fits on the rows submitted before the origin and scores the rows
submitted in the window: mae_log and spearman of the P50 (absolute-error boosting), and the P90's coverage (a second
model with the quantile loss at 0.9; scikit-learn only, Debian's XGBoost 1.7 has no quantile loss), as `prescient
evaluate --origins` reports them. Needs Debian's python3-sklearn
and python3-xgboost (apt-get install python3-sklearn python3-xgboost); it prints what is missing otherwise.
"""
import csv
import sys
import time
from datetime import datetime, timezone

try:
    import numpy as np
    from scipy.stats import spearmanr
    from sklearn.ensemble import HistGradientBoostingRegressor
    import xgboost as xgb
except ImportError as e:  # a clear message, not a traceback
    sys.exit(f"crosscheck-gbt.py: {e}: install Debian's python3-sklearn and python3-xgboost")


def parse_time(s):
    t = datetime.fromisoformat(s.replace("Z", "+00:00"))
    return t if t.tzinfo else t.replace(tzinfo=timezone.utc)


def load(path):
    with open(path, newline="") as f:
        r = csv.reader(f)
        header = next(r)
        if header[:3] != ["id", "submit_time", "label_log"]:
            sys.exit(f"{path}: line 1: want the columns id,submit_time,label_log,... of prescient datasets features")
        times, y, X = [], [], []
        for line, rec in enumerate(r, start=2):
            try:
                times.append(parse_time(rec[1]).timestamp())
                y.append(float(rec[2]))
                X.append([float(v) for v in rec[3:]])
            except (ValueError, IndexError) as e:
                sys.exit(f"{path}: line {line}: {e}")
    return np.array(times), np.array(y), np.array(X)


def score(y, p50, p90):
    return np.mean(np.abs(p50 - y)), spearmanr(p50, y).correlation, np.mean(y <= p90)


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    times, y, X = load(sys.argv[1])
    origins = [parse_time(a).timestamp() for a in sys.argv[2:]]
    print(f"{'window':25} {'jobs':>6} {'model':8} {'mae_log':>8} {'spearman':>9} {'p90_cov':>8} {'fit_s':>6}")
    for a, b in zip(origins, origins[1:]):
        fit, test = times < a, (times >= a) & (times < b)
        span = f"{datetime.fromtimestamp(a, timezone.utc):%Y-%m-%d} → {datetime.fromtimestamp(b, timezone.utc):%Y-%m-%d}"
        models = {
            "gbr": (HistGradientBoostingRegressor(loss="absolute_error", random_state=1),
                    HistGradientBoostingRegressor(loss="quantile", quantile=0.9, random_state=1)),
            # Debian's XGBoost (1.7) has no quantile loss (2.0 added reg:quantileerror): its P90 is not scored.
            "xgboost": (xgb.XGBRegressor(objective="reg:absoluteerror", n_estimators=300, random_state=1, n_jobs=2),
                        None),
        }
        for name, (m50, m90) in models.items():
            start = time.time()
            m50.fit(X[fit], y[fit])
            if m90 is not None:
                m90.fit(X[fit], y[fit])
            fit_s = time.time() - start
            p50 = m50.predict(X[test])
            p90 = m90.predict(X[test]) if m90 is not None else np.full_like(p50, np.nan)
            mae, rho, cov = score(y[test], p50, p90)
            cov_s = f"{cov:>8.3f}" if m90 is not None else f"{'-':>8}"
            print(f"{span:25} {test.sum():>6} {name:8} {mae:>8.3f} {rho:>9.3f} {cov_s} {fit_s:>6.1f}")


if __name__ == "__main__":
    main()
