"""The predictor's lab half: the prediction a record is shown with, the fit's
observations, re-pricing older records, published references."""
