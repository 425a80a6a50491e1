"""Fitting physical parameters and initial states to observed trajectories.

`_main` (`fit`, `FitResult`), `_loss` (`Observations`, the residuals and
`fit_loss`), `_problem` (the unknowns and their checks), `_solvers` (the optax
and optimistix loops, the covariance) and `_quality` (the diagnosis of a fit).
"""
