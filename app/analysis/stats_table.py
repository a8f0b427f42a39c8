"""The inspector's per-channel statistics table: a view over a model holding the rows' texts. Refilling it for a new
frame formats the values once and sends one signal (the item table it replaces set 448 cells one by one and sized
its columns over every row: 3 ms a frame for a 64-channel layer); the columns are sized when the rows change."""
from __future__ import annotations

from typing import Any

from PySide6 import QtCore, QtGui, QtWidgets

COLUMNS = ("n", "c", "min", "max", "mean", "NaN", "Inf")
#: rows shown at most (a layer of more channels shows its first ones)
MAX_ROWS = 4096
_RED = QtGui.QBrush(QtCore.Qt.GlobalColor.red)


class StatsModel(QtCore.QAbstractTableModel):
    """Rows (n, c, min, max, mean, NaN, Inf) of an ``engine.analysis.ChannelStats``; NaN and Inf counts above zero
    in red."""

    def __init__(self, parent: QtCore.QObject | None = None) -> None:
        super().__init__(parent)
        self._text: list[list[str]] = []  # per row, the texts of its columns
        self._red: list[tuple[bool, bool]] = []  # per row, whether its NaN and Inf counts are above zero

    def set_stats(self, stats: Any, origin: tuple[int, int] = (0, 0)) -> bool:
        """Show ``stats`` (item and channel numbers offset by ``origin``). True when the number of rows changed."""
        n, c = stats.min.shape
        rows = min(n * c, MAX_ROWS)
        flat = [a.reshape(-1)[:rows].tolist() for a in (stats.min, stats.max, stats.mean, stats.nan, stats.inf)]
        text, red = [], []
        for k in range(rows):
            i, j = divmod(k, c)
            lo, hi, mean, nan, inf = (col[k] for col in flat)
            text.append([str(i + origin[0]), str(j + origin[1]), f"{lo:.5g}", f"{hi:.5g}", f"{mean:.5g}", str(nan),
                         str(inf)])
            red.append((bool(nan), bool(inf)))
        if rows != len(self._text):
            self.beginResetModel()
            self._text, self._red = text, red
            self.endResetModel()
            return True
        self._text, self._red = text, red
        if rows:
            self.dataChanged.emit(self.index(0, 0), self.index(rows - 1, len(COLUMNS) - 1),
                                  [QtCore.Qt.ItemDataRole.DisplayRole, QtCore.Qt.ItemDataRole.ForegroundRole])
        return False

    def rowCount(self, parent: QtCore.QModelIndex = QtCore.QModelIndex()) -> int:  # noqa: B008 - Qt's signature
        return 0 if parent.isValid() else len(self._text)

    def columnCount(self, parent: QtCore.QModelIndex = QtCore.QModelIndex()) -> int:  # noqa: B008 - Qt's signature
        return 0 if parent.isValid() else len(COLUMNS)

    def data(self, index: QtCore.QModelIndex, role: int = QtCore.Qt.ItemDataRole.DisplayRole) -> Any:
        if role == QtCore.Qt.ItemDataRole.DisplayRole:
            return self._text[index.row()][index.column()]
        if role == QtCore.Qt.ItemDataRole.ForegroundRole and index.column() >= 5 and self._red[index.row()][index.column() - 5]:
            return _RED
        return None

    def headerData(self, section: int, orientation: QtCore.Qt.Orientation,
                   role: int = QtCore.Qt.ItemDataRole.DisplayRole) -> Any:
        if role == QtCore.Qt.ItemDataRole.DisplayRole and orientation == QtCore.Qt.Orientation.Horizontal:
            return COLUMNS[section]
        return None


class StatsTable(QtWidgets.QTableView):
    """The table of a :class:`StatsModel` (read-only, whole rows selected, columns sized to the rows shown)."""

    def __init__(self, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.stats_model = StatsModel(self)
        self.setModel(self.stats_model)
        self.verticalHeader().setVisible(False)
        self.verticalHeader().setDefaultSectionSize(20)
        self.setEditTriggers(QtWidgets.QAbstractItemView.EditTrigger.NoEditTriggers)
        self.setSelectionBehavior(QtWidgets.QAbstractItemView.SelectionBehavior.SelectRows)

    def set_stats(self, stats: Any, origin: tuple[int, int] = (0, 0)) -> None:
        if self.stats_model.set_stats(stats, origin):
            self.resizeColumnsToContents()  # when the rows change (another layer), not for every frame

    def rowCount(self) -> int:
        return self.stats_model.rowCount()

    def text(self, row: int, col: int) -> str:
        """The text of a cell (as shown)."""
        return str(self.stats_model.data(self.stats_model.index(row, col)))
