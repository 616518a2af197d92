"""2D projections of the store's embeddings for the embedding map (issue 8).

PCA in numpy (the default, deterministic: components from an SVD of the centred vectors, sign
fixed so the largest loading of each component is positive); UMAP when ``umap-learn`` is
installed and asked for. Large stores are sampled to ``max_points`` rows (evenly, by row order,
so the same store gives the same map). Pure numpy, no Qt.
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from engine.errors import ValidationError
from engine.store.view import ViewSnapshot

__all__ = ["Projection", "pca_fit", "project_snapshot", "umap_available"]

F32 = npt.NDArray[np.float32]
F64 = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True, eq=False)
class Projection:
    """Projected points of a snapshot and how to place new vectors on the same plane.

    Attributes:
        method: ``pca`` or ``umap``.
        rows: View rows projected (rows with a vector, possibly sampled).
        ids: Record ids of ``rows``.
        points: ``(len(rows), 2)`` coordinates.
        mean: Centre used by PCA (zeros for UMAP).
        components: ``(2, d)`` PCA axes (zeros for UMAP).
        explained: Fraction of variance on each axis (PCA; zeros for UMAP).
        total_with_vector: Rows with a vector before sampling.
    """

    method: str
    rows: npt.NDArray[np.intp]
    ids: tuple[str, ...]
    points: F64
    mean: F64
    components: F64
    explained: F64
    total_with_vector: int

    def place(self, vectors: F32 | F64) -> F64:
        """Coordinates of other vectors (a query) on this map.

        PCA projects them exactly; for UMAP (no linear map) each vector goes to the
        similarity-weighted centre of its 5 nearest projected neighbours — pass ``neighbours``
        through :meth:`place_near` instead when the vectors of the points are not at hand.
        """
        vectors = np.atleast_2d(np.asarray(vectors, dtype=np.float64))
        if self.method != "pca":
            raise ValidationError("method", self.method, "place() needs a PCA projection; "
                                  "use place_near() for UMAP")
        return np.asarray((vectors - self.mean) @ self.components.T, dtype=np.float64)

    def place_near(self, ids: list[str]) -> F64 | None:
        """The mean position of the projected records ``ids`` (None when none is on the map)."""
        index = {record_id: i for i, record_id in enumerate(self.ids)}
        hits = [index[i] for i in ids if i in index]
        if not hits:
            return None
        return np.asarray(self.points[hits].mean(axis=0), dtype=np.float64)


def umap_available() -> bool:
    """True when ``umap-learn`` can be imported."""
    return importlib.util.find_spec("umap") is not None


def pca_fit(vectors: F32 | F64) -> tuple[F64, F64, F64, F64]:
    """PCA to two dimensions.

    Returns:
        (points ``(n, 2)``, mean ``(d,)``, components ``(2, d)``, explained variance ratio
        ``(2,)``).
        Fewer than two distinct rows give zero axes (every point at the origin).
    """
    data = np.asarray(vectors, dtype=np.float64)
    n, d = data.shape if data.ndim == 2 else (0, 0)
    mean = data.mean(axis=0) if n else np.zeros(d)
    components = np.zeros((2, d))
    explained = np.zeros(2)
    if n >= 2:
        centred = data - mean
        _u, s, vt = np.linalg.svd(centred, full_matrices=False)
        k = min(2, vt.shape[0])
        components[:k] = vt[:k]
        for i in range(k):  # deterministic orientation
            if components[i, int(np.argmax(np.abs(components[i])))] < 0:
                components[i] = -components[i]
        variance = s ** 2
        total = float(variance.sum())
        if total > 0:
            explained[:k] = variance[:k] / total
    points = (data - mean) @ components.T if n else np.zeros((0, 2))
    return np.asarray(points, np.float64), mean, components, explained


def project_snapshot(snapshot: ViewSnapshot, *, method: str = "pca",
                     max_points: int = 20_000, seed: int = 7) -> Projection:
    """Project the live rows with a vector of ``snapshot`` to 2D.

    Args:
        snapshot: A columnar view snapshot.
        method: ``pca`` or ``umap`` (``umap`` falls back to PCA when not installed).
        max_points: Rows beyond this are sampled evenly (the map stays responsive).
        seed: UMAP's random state.

    Raises:
        ValidationError: an unknown method.
    """
    if method not in ("pca", "umap"):
        raise ValidationError("method", method, "must be pca or umap")
    n = snapshot.n
    rows = np.flatnonzero(snapshot.alive[:n] & snapshot.has_vector[:n]).astype(np.intp)
    total = len(rows)
    if total > max_points:
        rows = rows[np.linspace(0, total - 1, max_points).astype(np.intp)]
    vectors = snapshot.vectors[rows]
    ids = tuple(snapshot.ids[int(r)] for r in rows)
    if method == "umap" and umap_available() and len(rows) >= 10:
        umap = importlib.import_module("umap")  # optional dependency, only when asked for
        reducer = umap.UMAP(n_components=2, metric="cosine", random_state=seed,
                            n_neighbors=min(15, len(rows) - 1))
        points = np.asarray(reducer.fit_transform(vectors), dtype=np.float64)
        d = vectors.shape[1]
        return Projection("umap", rows, ids, points, np.zeros(d), np.zeros((2, d)),
                          np.zeros(2), total)
    points, mean, components, explained = pca_fit(vectors)
    return Projection("pca", rows, ids, points, mean, components, explained, total)
