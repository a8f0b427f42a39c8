"""A small code editor for custom layer code: monospace, tab inserts four spaces, line numbers in a gutter,
and syntax highlighting (Python, CUDA C) through Qt's QSyntaxHighlighter with our own rules."""
from __future__ import annotations

import keyword
import re

from PySide6 import QtCore, QtGui, QtWidgets

_CUDA_KEYWORDS = (
    "auto break case char const constexpr continue default do double else enum extern float for goto if inline "
    "int long register return short signed sizeof static struct switch typedef union unsigned void volatile while "
    "bool true false template typename namespace using class __global__ __device__ __host__ __shared__ "
    "__restrict__ __forceinline__ __half __half2 size_t uint8_t int8_t int32_t uint32_t int64_t"
).split()
_CUDA_BUILTINS = ("threadIdx blockIdx blockDim gridDim __syncthreads __half2float __float2half __hadd __hmul "
                  "fabsf expf logf sqrtf fmaxf fminf tanhf min max atomicAdd").split()
_PY_BUILTINS = ("xp np inputs params abs min max len range sum float int tuple list dict None True False self").split()


def _fmt(color: str, bold: bool = False, italic: bool = False) -> QtGui.QTextCharFormat:
    f = QtGui.QTextCharFormat()
    f.setForeground(QtGui.QColor(color))
    if bold:
        f.setFontWeight(QtGui.QFont.Weight.Bold)
    f.setFontItalic(italic)
    return f


class CodeHighlighter(QtGui.QSyntaxHighlighter):
    """Keywords, built-ins, numbers, strings and comments of ``language`` ('python' or 'cuda'); block
    comments (``/* */``) and triple-quoted strings may span lines."""

    def __init__(self, document: QtGui.QTextDocument, language: str) -> None:
        super().__init__(document)
        self.language = language
        words = _CUDA_KEYWORDS if language == "cuda" else keyword.kwlist
        builtins = _CUDA_BUILTINS if language == "cuda" else _PY_BUILTINS
        self.formats = {"keyword": _fmt("#1f4ea3", bold=True), "builtin": _fmt("#7a3e9d"), "number": _fmt("#b35c00"),
                        "string": _fmt("#2a7a2a"), "comment": _fmt("#7f8c8d", italic=True),
                        "directive": _fmt("#a0522d")}
        self.rules: list[tuple[re.Pattern[str], str]] = [
            (re.compile(r"\b(" + "|".join(map(re.escape, words)) + r")\b"), "keyword"),
            (re.compile(r"\b(" + "|".join(map(re.escape, builtins)) + r")\b"), "builtin"),
            (re.compile(r"\b\d+(\.\d*)?([eE][-+]?\d+)?[fFuUlL]?\b|\.\d+[fF]?\b"), "number"),
            (re.compile(r"\"(\\.|[^\"\\])*\"|'(\\.|[^'\\])*'"), "string"),
        ]
        if language == "cuda":
            self.rules += [(re.compile(r"^\s*#\s*\w+"), "directive"), (re.compile(r"//.*$"), "comment")]
            self.multi = (re.compile(r"/\*"), re.compile(r"\*/"))
        else:
            self.rules += [(re.compile(r"#.*$"), "comment")]
            self.multi = (re.compile(r"'''|\"\"\""), None)

    def token_format(self, name: str) -> QtGui.QTextCharFormat:
        return self.formats[name]

    def highlightBlock(self, text: str) -> None:  # noqa: N802 (Qt API)
        for pattern, name in self.rules:
            for m in pattern.finditer(text):
                self.setFormat(m.start(), m.end() - m.start(), self.formats[name])
        self._multiline(text)

    def _multiline(self, text: str) -> None:
        start_re, end_re = self.multi
        start = 0 if self.previousBlockState() == 1 else -1
        self.setCurrentBlockState(0)
        delim = None
        if start < 0:
            m = start_re.search(text)
            if m is None:
                return
            start, delim = m.start(), m.group(0)
            search_from = m.end()
        else:
            search_from = 0
        while start >= 0:
            closing = end_re if end_re is not None else re.compile(re.escape(delim or '"""') + "|'''")
            m = closing.search(text, search_from)
            if m is None:
                self.setCurrentBlockState(1)
                self.setFormat(start, len(text) - start, self.formats["string" if end_re is None else "comment"])
                return
            self.setFormat(start, m.end() - start, self.formats["string" if end_re is None else "comment"])
            nxt = start_re.search(text, m.end())
            if nxt is None:
                return
            start, delim, search_from = nxt.start(), nxt.group(0), nxt.end()


class _Gutter(QtWidgets.QWidget):
    def __init__(self, editor: CodeEditor) -> None:
        super().__init__(editor)
        self.editor = editor

    def sizeHint(self) -> QtCore.QSize:  # noqa: N802 (Qt API)
        return QtCore.QSize(self.editor.gutter_width(), 0)

    def paintEvent(self, event: QtGui.QPaintEvent) -> None:  # noqa: N802 (Qt API)
        self.editor.paint_gutter(event)


class CodeEditor(QtWidgets.QPlainTextEdit):
    """A plain-text code editor with highlighting (``language``: 'python' or 'cuda') and line numbers."""

    def __init__(self, language: str, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        font = QtGui.QFontDatabase.systemFont(QtGui.QFontDatabase.SystemFont.FixedFont)
        self.setFont(font)
        self.setLineWrapMode(QtWidgets.QPlainTextEdit.LineWrapMode.NoWrap)
        self.setTabStopDistance(QtGui.QFontMetricsF(font).horizontalAdvance(" ") * 4)
        self.highlighter = CodeHighlighter(self.document(), language)
        self.gutter = _Gutter(self)
        self.blockCountChanged.connect(lambda _n: self.setViewportMargins(self.gutter_width(), 0, 0, 0))
        self.updateRequest.connect(self._update_gutter)
        self.setViewportMargins(self.gutter_width(), 0, 0, 0)

    def keyPressEvent(self, event: QtGui.QKeyEvent) -> None:  # noqa: N802 (Qt API)
        if event.key() == QtCore.Qt.Key.Key_Tab and not event.modifiers():
            self.insertPlainText("    ")
            return
        if event.key() in (QtCore.Qt.Key.Key_Return, QtCore.Qt.Key.Key_Enter):
            line = self.textCursor().block().text()
            indent = line[: len(line) - len(line.lstrip(" "))]
            if line.rstrip().endswith((":", "{")):
                indent += "    "
            super().keyPressEvent(event)
            self.insertPlainText(indent)
            return
        super().keyPressEvent(event)

    def gutter_width(self) -> int:
        digits = len(str(max(1, self.blockCount())))
        return 10 + self.fontMetrics().horizontalAdvance("9") * digits

    def resizeEvent(self, event: QtGui.QResizeEvent) -> None:  # noqa: N802 (Qt API)
        super().resizeEvent(event)
        r = self.contentsRect()
        self.gutter.setGeometry(QtCore.QRect(r.left(), r.top(), self.gutter_width(), r.height()))

    def _update_gutter(self, rect: QtCore.QRect, dy: int) -> None:
        if dy:
            self.gutter.scroll(0, dy)
        else:
            self.gutter.update(0, rect.y(), self.gutter.width(), rect.height())

    def paint_gutter(self, event: QtGui.QPaintEvent) -> None:
        painter = QtGui.QPainter(self.gutter)
        painter.fillRect(event.rect(), self.palette().color(QtGui.QPalette.ColorRole.AlternateBase))
        painter.setPen(self.palette().color(QtGui.QPalette.ColorRole.PlaceholderText))
        block = self.firstVisibleBlock()
        top = round(self.blockBoundingGeometry(block).translated(self.contentOffset()).top())
        height = self.fontMetrics().height()
        while block.isValid() and top <= event.rect().bottom():
            if block.isVisible():
                painter.drawText(0, top, self.gutter.width() - 4, height, QtCore.Qt.AlignmentFlag.AlignRight,
                                 str(block.blockNumber() + 1))
            top += round(self.blockBoundingRect(block).height())
            block = block.next()
        painter.end()
