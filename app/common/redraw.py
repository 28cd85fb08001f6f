"""``update_in_place``: change a ``Static``'s content without a screen layout when its size
cannot have changed.

Why: ``Static.update`` asks for a layout by default, and in Textual a layout is a reflow of
the *whole screen* followed by a repaint of everything that moved. While ten branches
stream, the shown panel's newest block and the overview are updated many times a second;
most of those updates add a few words to a line that is already there, so the block keeps
its height and only its own region needs repainting. A layout is still asked for when
the wrapped height changes (a new line), so the transcript grows and scrolls as before.
"""

from __future__ import annotations

from textual.visual import VisualType
from textual.widgets import Static


def update_in_place(widget: Static, content: VisualType) -> bool:
    """``widget.update(content)``, with a layout only when needed; True if one was asked.

    Only for widgets whose width does not follow their content (``width`` unset or not
    ``auto``): their height is then the only size that text can change. Widgets not laid
    out yet (unmounted, hidden, zero width) get a plain update.
    """
    styles = widget.styles
    width = widget.content_size.width
    if not widget.is_mounted or not width or (styles.width is not None and styles.width.is_auto):
        widget.update(content)
        return True
    before = widget.content_size.height
    widget.update(content, layout=False)
    if styles.height is not None and not styles.height.is_auto:
        return False  # a fixed height: the text cannot change the widget's size
    after = widget.get_content_height(widget.size, widget.app.size, width)
    if after == before:
        return False
    widget.refresh(layout=True)
    return True
