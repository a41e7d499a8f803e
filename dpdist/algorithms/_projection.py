"""``transform`` and ``fit_transform`` of the PCA estimators (:class:`Projection`, mixed in
before :class:`~dpdist.algorithms._base.Estimator`)."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from dpdist.exceptions import ValidationError

__all__ = ["Projection"]


class Projection:
    """``transform`` and ``fit_transform`` of a PCA estimator (mixed in before :class:`Estimator`).

    ``transform(X)`` projects the rows of ``X``, centred at the mean the fit centred at
    (``location_``, released with the components; absent or zero when the fit took the data as
    centred), on the released ``components_``: ``(X - location_) @ components_.T``, of shape
    ``(n_samples, n_components)``, as scikit-learn's ``PCA.transform`` subtracts ``mean_``. The
    projected rows are the data seen through the released components, not a private release:
    publish the fitted estimator's attributes, not the transformed data.
    """

    def transform(self, X: Any):
        """``(X - location_) @ components_.T``: a NumPy array for in-memory ``X``, a lazy dask array for a dask
        array, a ``zarr.Array`` or a path. ``X`` is validated as ``fit`` validates it and must
        have the fitted ``n_features_in_`` columns. Rows holding NaN or inf are treated as
        ``fit`` treats them: zero rows (projected to 0) under ``on_nonfinite="zero"``, refused
        under ``on_nonfinite="raise"``."""
        import dask.array as da
        import zarr

        from dpdist.data.validation import as_dask_array

        self._check_fitted("components_")
        Xd = as_dask_array(X, min_rows=1, min_cols=1)
        expected = self.components_.shape[1]
        if Xd.shape[1] != expected:
            raise ValidationError(
                f"X has {Xd.shape[1]} features, but {type(self).__name__} is expecting {expected} features "
                "as input (the number of columns it was fitted on)"
            )
        finite = da.isfinite(Xd).all(axis=1, keepdims=True)
        if getattr(self, "on_nonfinite", "zero") == "raise":
            if not bool(finite.all().compute(scheduler="synchronous")):
                raise ValidationError("X contains NaN or infinite values; nothing was transformed "
                                      "(on_nonfinite='raise')")
        else:
            Xd = da.where(finite, Xd, Xd.dtype.type(0))
        location = getattr(self, "location_", None)
        if location is not None and np.any(location):
            Xd = Xd - np.asarray(location, dtype=Xd.dtype)  # as in fit: a zeroed row is centred like any other
        out = Xd @ np.asarray(self.components_, dtype=Xd.dtype).T
        if isinstance(X, (da.Array, zarr.Array, str, os.PathLike)):
            return out
        return out.compute(scheduler="synchronous")  # X is in memory already

    def fit_transform(self, X: Any, y: Any = None):
        """``fit(X)`` then ``transform(X)`` (``y`` is ignored)."""
        return self.fit(X, y).transform(X)
